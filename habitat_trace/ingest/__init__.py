"""Ingest: Kineto Chrome-trace JSON -> linked columnar tables (see ``trace.load``)."""
from habitat_trace.ingest.trace import Trace, load

__all__ = ["Trace", "load"]

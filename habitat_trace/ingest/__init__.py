"""Ingest: Kineto Chrome-trace JSON -> linked columnar tables (see ``trace.load``)."""
from habitat_trace.ingest.trace import Tables, load

__all__ = ["Tables", "load"]

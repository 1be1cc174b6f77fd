"""habitat-trace: predict a PyTorch training step on another GPU from a torch.profiler trace.

Import cost matters (the CLI must start fast): this module imports nothing heavy. The Python API (``open``, the
front door, and ``Trace``, ``compare``, ``tensorboard_trace_handler``, ``schedule``; ``load`` is ``open``'s former
name) is imported on first use (PEP 562 module ``__getattr__``).
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {  # public name -> module that defines it
    "open": "habitat_trace.api",
    "load": "habitat_trace.api",
    "Trace": "habitat_trace.api",
    "compare": "habitat_trace.api",
    "tensorboard_trace_handler": "habitat_trace.hook",
    "schedule": "habitat_trace.hook",
}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value
    raise AttributeError(f"module 'habitat_trace' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

"""Tests of the benchmark scripts (accuracy guards, collectors, the learned models' training code, the generated
README figures), not of the package: ``python -m pytest --all`` runs them (CI does, .ci/run). The scripts import
their siblings as they do when run (``python benchmarks/accuracy.py`` puts benchmarks/ first on sys.path), so their
folders are put on sys.path here, once, and the tests import them by name."""
from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent
for folder in ("learned", "collect", "crossarch", "."):  # the package 'training' lives in learned/
    path = str((BENCHMARKS / folder).resolve())
    if path not in sys.path:
        sys.path.insert(0, path)

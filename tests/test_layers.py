"""The folders show the flow, and no import runs back up it (issue 15): every ``habitat_trace`` import of every
module, module-level or inside a function, read with ``ast``, must name a layer at or below the importer's."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "habitat_trace"
# lowest first; a module may import its own layer and the ones before it
LAYERS = (
    ("habitat_trace", "habitat_trace.errors"),  # the package root (lazy API names only) and the exceptions
    ("habitat_trace.ingest",),  # Kineto JSON -> typed tables
    ("habitat_trace.scale",),  # pure: tables + GPU specs -> predicted durations
    ("habitat_trace.timeline",),  # replay of the predicted durations, step figures
    ("habitat_trace.pipeline",),  # origin -> predict -> replay, the one orchestration
    ("habitat_trace.emit",),  # the target trace as Kineto JSON, the rule checker
    ("habitat_trace.analysis",),  # summary, compare, explain, validate, memory
    ("habitat_trace.api", "habitat_trace.hook", "habitat_trace.commands", "habitat_trace.cli",
     "habitat_trace.__main__"),  # what users call
)


def layer_of(module: str) -> int:
    best = -1, -1  # (prefix length, layer)
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best[0]:
                best = len(p), i
    if best[1] < 0:
        raise AssertionError(f"{module}: not in any layer of tests/test_layers.py; place it")
    return best[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every habitat_trace import in the file, ``from habitat_trace import x`` as module x when
    x is a submodule."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("habitat_trace")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("habitat_trace"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                is_module = (PACKAGE.parent / (sub.replace(".", "/") + ".py")).exists() or \
                    (PACKAGE.parent / sub.replace(".", "/")).is_dir()
                out.append((node.lineno, sub if is_module else node.module))
    return out


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_no_import_runs_up_the_layers(path: Path) -> None:
    me = module_name(path)
    upward = [f"{path.relative_to(ROOT)}:{line} imports {mod}" for line, mod in imports(path)
              if layer_of(mod) > layer_of(me)]
    assert not upward, "\n".join(upward)


def test_the_check_can_fail(tmp_path: Path) -> None:
    """An upward import (the CLI's resolve_origin from the scale layer, as api.py and compare.py once did) is caught."""
    bad = PACKAGE / "scale" / "_probe_upward.py"
    try:
        bad.write_text("def f():\n    from habitat_trace.commands.scale import run\n    return run\n")
        with pytest.raises(AssertionError, match="imports habitat_trace.commands.scale"):
            test_no_import_runs_up_the_layers(bad)
    finally:
        bad.unlink()

"""The README's and docs' generated tables and the figure match what benchmarks/readme_figures.py writes today, and
the staleness check can fail."""
from __future__ import annotations

from pathlib import Path

import pytest

import readme_figures as FIG
from tests.conftest import ROOT, TRACES

README = ROOT / "README.md"

GENERATED = [(page, name) for page in FIG.DOCS for name in FIG.sections(page.read_text())]


def test_every_generated_section_has_a_generator() -> None:
    assert {name for _, name in GENERATED} == set(FIG.SECTIONS)


@pytest.mark.parametrize(("page", "name"), GENERATED, ids=lambda x: x if isinstance(x, str) else x.name)
def test_generated_section_is_current(page: Path, name: str) -> None:
    if FIG.SECTIONS[name].needs_shared and not TRACES.is_dir():
        pytest.skip("../shared data is absent")
    assert FIG.sections(page.read_text())[name] == FIG.SECTIONS[name].render(), (
        f"{page.name}: section {name} is stale; run python benchmarks/readme_figures.py")


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared data is absent")
def test_figure_was_drawn_from_the_current_table() -> None:
    table = FIG.compare_table_text(FIG.sections(README.read_text())["compare-table"])
    assert FIG.figure_hash(FIG.FIGURE) == FIG.table_hash(table), "docs/compare.png is stale: run readme_figures.py"


def test_a_stale_section_is_found_and_refreshed() -> None:
    """The staleness check can fail: an edited number is reported, and refresh() puts the generated text back."""
    text = README.read_text()
    body = FIG.sections(text)["accuracy-summary"]
    stale = text.replace(body, body.replace("%", "0%", 1))
    assert FIG.sections(stale)["accuracy-summary"] != FIG.SECTIONS["accuracy-summary"].render()
    assert FIG.refresh(stale, {"accuracy-summary": FIG.SECTIONS["accuracy-summary"].render()}) == text


def test_figure_hash_round_trips(tmp_path: Path) -> None:
    """The tEXt chunk readme_figures.py adds is found again, and a PNG without it has none."""
    png = tmp_path / "plain.png"
    png.write_bytes(FIG.FIGURE.read_bytes().replace(FIG.PNG_KEY.encode(), b"x" * len(FIG.PNG_KEY)))
    assert FIG.figure_hash(png) is None
    FIG._write_figure(png, tmp_path / "tagged.png", "a table\n")
    assert FIG.figure_hash(tmp_path / "tagged.png") == FIG.table_hash("a table\n")

"""The book builds with warnings as errors, and the rendered pages hold what they should.

Both editions are built once per test session (from the notebooks' stored outputs, which
nbval checks separately): the full book and the student edition without solutions.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from speclib.book.course import toc_chapters

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import build_book  # noqa: E402


def toc_files() -> list[str]:
    return toc_chapters(ROOT)


def notebook_sources() -> dict[str, str]:
    """Markdown text of each notebook in the table of contents, keyed by toc name."""
    out = {}
    for name in toc_files():
        path = ROOT / f"{name}.ipynb"
        if path.exists():
            nb = json.loads(path.read_text(encoding="utf-8"))
            out[name] = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    return out


def page(html_root: Path, name: str) -> BeautifulSoup:
    return BeautifulSoup((html_root / f"{name}.html").read_text(encoding="utf-8"), "html.parser")


@pytest.fixture(scope="session")
def full_book(built_book) -> Path:
    return built_book  # tests/conftest.py: one build for every test that reads the pages


@pytest.fixture(scope="session")
def student_book(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("student")
    assert build_book.build(build_book.student_sources(out), out) == 0, "the student edition does not build"
    return out / "_build" / "html"


def test_every_toc_entry_is_rendered(full_book):
    for name in toc_files():
        assert (full_book / f"{name}.html").exists(), f"{name} is in _toc.yml but missing from the built book"


def test_no_error_output_outside_raises_exception_cells(full_book):
    for name in toc_files():
        for cell in page(full_book, name).select("div.cell"):
            if cell.select("div.output.traceback, div.highlight-ipythontb") and "tag_raises-exception" not in cell["class"]:
                pytest.fail(f"{name}: a cell shows an error but is not tagged raises-exception:\n{cell.get_text()[:300]}")


def test_every_figure_exists(full_book):
    for name in toc_files():
        for img in page(full_book, name).find_all("img"):
            src = img.get("src", "")
            if src.startswith(("http", "data:")):
                continue
            assert (full_book / Path(name).parent / src).resolve().exists(), f"{name}: missing image {src}"


def test_every_glue_is_filled(full_book):
    for name in toc_files():
        html = (full_book / f"{name}.html").read_text(encoding="utf-8")
        assert "{glue" not in html, f"{name}: an unfilled glue reference"


def test_exercises_and_solutions_render(full_book):
    for name, source in notebook_sources().items():
        n_exercises = len(re.findall(r"\{exercise\}|\{exercise-start\}", source))
        n_solutions = len(re.findall(r"\{solution\}|\{solution-start\}", source))
        soup = page(full_book, name)
        assert len(soup.select("div.exercise")) == n_exercises, f"{name}: not every exercise rendered"
        assert len(soup.select("details.solution, div.solution")) == n_solutions, f"{name}: not every solution rendered"


def test_student_edition_has_exercises_but_no_solutions(full_book, student_book):
    for name in notebook_sources():
        full, student = page(full_book, name), page(student_book, name)
        assert len(student.select("div.exercise")) == len(full.select("div.exercise")), name
        assert not student.select("details.solution, div.solution"), f"{name}: a solution shows in the student edition"
        student_text = student.get_text()
        for solution in full.select("details.solution, div.solution"):
            for block in solution.select("div.cell_input pre"):
                code = block.get_text().strip()
                assert code not in student_text, f"{name}: solution code leaks into the student edition"

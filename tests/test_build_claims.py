"""What the pages say about how they were made agrees with how the book is built.

``_config.yml`` sets ``execute_notebooks: "off"``: the build renders the outputs stored in the
committed notebooks (executed by ``tools/execute_notebooks.py``; nbval re-executes them in the
test suite and compares).  A page that tells its reader that a number, a timing or a listing
is computed "when the book is built" is then wrong, and this test names the page and the
sentence.  If the build ever executes the notebooks again, the claims become true and the
test lets them stand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from speclib.book.course import toc_chapters

ROOT = Path(__file__).resolve().parents[1]

# Sentences that say the build (or the building of a page) runs code, takes measurements or
# reads the package.  Each is matched case-insensitively, across line breaks.
BUILD_CLAIMS = [
    r"when (?:the|this) (?:book|page|chapter) (?:is|was) (?:built|rendered|generated)",
    r"(?:taken|computed|measured|executed|run|produced|drawn|read) (?:\w+ ){0,3}(?:during|at) "
    r"(?:the |each )?build",
    r"(?:the|each|every) build (?:re-?)?(?:executes|runs|computes|measures)",
    r"(?:book|page)'?s? build (?:re-?)?(?:executes|runs|computes|measures)",
    r"machine that built",
    r"built (?:this|the) (?:page|book)",
]
_CLAIM = re.compile("|".join(f"(?:{p})" for p in BUILD_CLAIMS), re.IGNORECASE)


def executes_notebooks(root: Path = ROOT) -> bool:
    """Whether the build executes the notebooks (``execute.execute_notebooks`` is not "off")."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    mode = (config.get("execute") or {}).get("execute_notebooks", "auto")
    return str(mode).lower() not in ("off", "false")


def page_texts(root: Path = ROOT) -> dict[str, str]:
    """What a reader reads on each page of the table of contents: Markdown files, and the
    Markdown cells and code-cell outputs shown as Markdown of each notebook."""
    texts = {}
    for name in toc_chapters(root):
        md, nb = root / f"{name}.md", root / f"{name}.ipynb"
        if md.exists():
            texts[name] = md.read_text(encoding="utf-8")
        elif nb.exists():
            cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
            parts = []
            for cell in cells:
                if cell["cell_type"] == "markdown":
                    parts.append("".join(cell["source"]))
                for out in cell.get("outputs", []):
                    data = out.get("data", {})
                    if "text/markdown" in data:
                        parts.append("".join(data["text/markdown"]))
            texts[name] = "\n\n".join(parts)
    return texts


def build_claims(text: str) -> list[str]:
    """The sentences of ``text`` that claim the build runs code (whitespace normalised)."""
    flat = re.sub(r"\s+", " ", text)
    found = []
    for match in _CLAIM.finditer(flat):
        start = max(flat.rfind(". ", 0, match.start()) + 2, 0)
        end = flat.find(". ", match.end())
        found.append(flat[start:end + 1 if end >= 0 else len(flat)].strip())
    return found


@pytest.mark.parametrize("claim", [
    "Every number in its prose is computed by a notebook cell when the book is built.",
    "Every timing below was taken when this page was built.",
    "The listing is read from the package when the book is built, so it is the code the tests check.",
    "On the machine that built this page a pass took 3 ms.",
    "The build executes every notebook, so the figures are fresh.",
    "These timings were measured during the build.",
])
def test_the_detector_finds_a_false_claim(claim):
    assert build_claims(f"Some text. {claim} More text.") != []


@pytest.mark.parametrize("statement", [
    "The pages show the outputs stored when the notebooks were last executed.",
    "The test suite re-executes every notebook and compares its outputs with the stored ones.",
    "The listing is included from the package's source file, the code the tests check.",
    "A verification pass is built from k + 1 positions.",
])
def test_the_detector_lets_a_true_statement_stand(statement):
    assert build_claims(statement) == []


def test_the_pages_are_read():
    texts = page_texts()
    assert "book/intro" in texts and "book/00_overview" in texts
    assert all(text.strip() for text in texts.values())


@pytest.mark.skipif(executes_notebooks(), reason="the build executes the notebooks: the claims are true")
def test_no_page_claims_that_the_build_executes_notebooks():
    wrong = {name: claims for name, text in page_texts().items() if (claims := build_claims(text))}
    assert not wrong, (
        '_config.yml has execute_notebooks: "off", so the pages show the outputs stored when the '
        "notebooks were last executed; these pages say otherwise:\n"
        + "\n".join(f"{name}: {claim}" for name, claims in wrong.items() for claim in claims))


def test_config_is_read_as_off():
    assert executes_notebooks() is False, "this test module assumes the committed setting: off"

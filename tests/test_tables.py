"""Every table fits the book's column without scrolling sideways, and no cell is a paragraph.

A browser wraps a table cell at its spaces, so the narrowest a table can be drawn is the sum,
over its columns, of the column's longest unbreakable piece (a word, a number, ``code``) plus
the cell padding.  When that exceeds the page's column (:data:`COLUMN_PX` at a 1280-pixel
window, as in tests/test_figures.py) the table is clipped or scrolls.  The widths are
estimated from the characters at the theme's table font (:data:`CHAR_PX`, measured on the
rendered pages with a margin), for the tables in the chapters' Markdown and the Markdown tables
their cells print.  A cell longer than :data:`MAX_CELL_CHARS` characters reads as a paragraph
squeezed into a column: it belongs in the prose.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "book").glob("*.ipynb")) + sorted((ROOT / "book").glob("*.md"))

COLUMN_PX = 675  #: the text column at a 1280-pixel window
CHAR_PX = 8.0  #: an average character of the table font, with a margin
PAD_PX = 20  #: left and right padding of a cell
MAX_CELL_CHARS = 90


def tables(text: str):
    """Each Markdown table in ``text`` as a list of rows of cell strings (the rule row left out)."""
    block = []
    for line in text.splitlines() + [""]:
        if line.strip().startswith("|") and line.strip().endswith("|"):
            block.append([c.strip() for c in line.strip()[1:-1].split("|")])
        else:
            if len(block) >= 2 and all(re.fullmatch(r":?-{3,}:?", c) for c in block[1]):
                yield [block[0]] + block[2:]
            block = []


def visible(cell: str) -> str:
    """A cell's text as the page shows it: roles and links reduced to what they display."""
    cell = re.sub(r"\{glue(?::\w+)?\}`[^`]*`", "0.000", cell)  # a glued number
    cell = re.sub(r"\{(?:doc|ref|numref|term|cite:\w+)\}`([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", cell)
    cell = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", cell)
    return re.sub(r"[*`$\\]", "", cell)


def min_width(table) -> float:
    columns = max(len(row) for row in table)
    longest = [0] * columns
    for row in table:
        for j, cell in enumerate(row):
            pieces = visible(cell).split() or [""]
            longest[j] = max(longest[j], max(len(p) for p in pieces))
    return sum(CHAR_PX * n + PAD_PX for n in longest)


def page_texts(path: Path):
    if path.suffix == ".md":
        yield "markdown", path.read_text(encoding="utf-8")
        return
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            yield f"cell {i}", "".join(cell["source"])
        for out in cell.get("outputs", []):
            md = out.get("data", {}).get("text/markdown")
            if md:
                yield f"cell {i} output", "".join(md) if isinstance(md, list) else md


def problems(text: str) -> list[str]:
    found = []
    for table in tables(text):
        width = min_width(table)
        if width > COLUMN_PX:
            found.append(f"table '{' | '.join(table[0])[:60]}' needs {width:.0f} px")
        long = [visible(c) for row in table for c in row if len(visible(c)) > MAX_CELL_CHARS]
        if long:
            found.append(f"table '{' | '.join(table[0])[:60]}' has a cell of {len(long[0])} characters")
    return found


def test_the_rule_catches_a_wide_table_and_passes_a_narrow_one():
    wide = "| " + " | ".join(f"column_number_{j}_with_a_long_name" for j in range(8)) + " |\n" + \
           "|" + "---|" * 8 + "\n" + "| " + " | ".join("1" for _ in range(8)) + " |\n"
    narrow = "| k | speed-up |\n| --- | --- |\n| 1 | 1.20 |\n"
    assert problems(wide) and not problems(narrow)
    paragraph = "| chapter | what |\n| --- | --- |\n| 1 | " + "word " * 30 + "|\n"
    assert problems(paragraph)


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_every_table_fits_the_column(path):
    bad = [f"{where}: {p}" for where, text in page_texts(path) for p in problems(text)]
    assert not bad, f"{path.name}: {bad}"

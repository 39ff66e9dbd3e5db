"""Kinds of defect a reader meets on a page, each checked on every page (issue 38, item 7).

- A caption says what to see, not what machine drew it: no processor, load average or list of
  product strategies in an italic caption paragraph (chapter 17's "How these numbers were
  measured" is where the record's machine is named).
- A printed listing of source code fits the column: the theme wraps a longer line, and the
  continuation loses its indentation.
- A page has one "Exercises" heading.
- A generated sentence glued at the start of a sentence starts with a capital letter, and one
  generated sentence is glued once per page (not repeated verbatim in a summary).
- Printed outputs show no exercise labels (``ex-09b-3``): the reader sees numbers, not labels.
- A glued sentence about a goal ("The goal of 1.5x is ...") stands only on a page that sets
  that goal in its own words.

Each rule has a negative control: a planted defect it must find.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from editions import glued_values  # noqa: E402

PAGES = sorted((ROOT / "book").glob("*.ipynb")) + sorted((ROOT / "book").glob("*.md"))
NOTEBOOKS = [p for p in PAGES if p.suffix == ".ipynb"]
ROLE = re.compile(r"\{glue(?P<kind>:(?:any|text|md)?)?\}`(?P<content>[^`]+)`")
MACHINE = re.compile(r"load average|logical cores|products chosen by measurement|largest cache|"
                     r"\bprocessor\b.*\bMiB\b", re.I)
#: Characters of a printed source line that fit the column without wrapping (the theme's code font
#: at a 1200-pixel window: about 78; two spare).
LISTING_CHARS = 76


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def markdown(page: Path) -> list[str]:
    if page.suffix == ".md":
        return [page.read_text(encoding="utf-8")]
    return ["".join(c["source"]) for c in load(page)["cells"] if c["cell_type"] == "markdown"]


def values_for(page: Path) -> dict[str, dict[str, str]]:
    return glued_values(load(page)) if page.suffix == ".ipynb" else {}


def resolve(text: str, values: dict) -> str:
    """``text`` with its own page's glue roles replaced by their values (others left as they are)."""
    def value(m):
        bundle = values.get(m.group("content").rsplit(":", 1)[0] if m.group("kind") == ":text"
                            and ":" in m.group("content") else m.group("content"))
        if not bundle:
            return m.group(0)
        return bundle.get("text/markdown", bundle.get("text/plain", "")).strip("'\"")
    return ROLE.sub(value, text)


def captions(texts: list[str]) -> list[str]:
    """Italic caption paragraphs: a paragraph that opens and closes with a single ``*``."""
    out = []
    for text in texts:
        for para in re.split(r"\n\s*\n", text):
            p = para.strip()
            if p.startswith("*") and not p.startswith("**") and p.endswith("*") and len(p) > 2:
                out.append(p)
    return out


def machine_captions(texts: list[str], values: dict) -> list[str]:
    return [c[:120] for c in captions(texts) if MACHINE.search(resolve(c, values))]


def listing_lines(nb: dict) -> list[str]:
    """Lines of printed source code longer than the column: outputs of cells that print a function's
    source, or outputs that start with ``def`` or ``class``."""
    long = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        prints_source = "getsource" in "".join(cell["source"])
        for out in cell.get("outputs", []):
            if out.get("output_type") != "stream":
                continue
            text = "".join(out["text"])
            if prints_source or re.match(r"\s*(def|class) ", text):
                long += [line for line in text.splitlines() if len(line) > LISTING_CHARS]
    return long


def exercise_headings(texts: list[str]) -> int:
    return sum(len(re.findall(r"^#{1,3} Exercises\s*$", t, re.M)) for t in texts)


def generated_sentence_problems(texts: list[str], values: dict) -> list[str]:
    problems, seen = [], {}
    for text in texts:
        for m in ROLE.finditer(text):
            if m.group("kind") != ":md":
                continue
            key = m.group("content")
            seen[key] = seen.get(key, 0) + 1
            before = text[:m.start()].rstrip(" \t*")
            starts_sentence = (not before.strip() or before.endswith("\n\n")
                               or before.rstrip().endswith((".", "!", "?")))
            value = values.get(key, {}).get("text/markdown", "").lstrip("*_ ")
            if starts_sentence and value[:1].isalpha() and value[:1].islower():
                problems.append(f"{key}: a sentence starts in lower case: {value[:60]!r}")
    problems += [f"{key}: glued {n} times" for key, n in seen.items() if n > 1]
    return problems


def label_outputs(nb: dict) -> list[str]:
    found = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
            found += re.findall(r"\(exercise ex-[\w-]+\)", text)
    return found


def goal_problems(texts: list[str], values: dict) -> list[str]:
    own = " ".join(ROLE.sub(" ", t) for t in texts)
    glued = [k for t in texts for m in ROLE.finditer(t) for k in [m.group("content")]
             if re.match(r"\W*The goal of", values.get(k, {}).get("text/markdown", "")
                         or values.get(k, {}).get("text/plain", "").strip("'\""))]
    return glued if glued and not re.search(r"\bgoal\b", own, re.I) else []


# --- every page ----------------------------------------------------------------------------------

@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_caption_carries_machine_metadata(page):
    assert machine_captions(markdown(page), values_for(page)) == []


@pytest.mark.parametrize("page", NOTEBOOKS, ids=lambda p: p.name)
def test_printed_listings_fit_the_column(page):
    assert listing_lines(load(page)) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_one_exercises_heading_per_page(page):
    assert exercise_headings(markdown(page)) <= 1


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_generated_sentences_start_right_and_stand_once(page):
    assert generated_sentence_problems(markdown(page), values_for(page)) == []


@pytest.mark.parametrize("page", NOTEBOOKS, ids=lambda p: p.name)
def test_no_exercise_label_is_printed(page):
    found = label_outputs(load(page))
    if page.name == "16_models_and_engines.ipynb":  # known, and owned by another branch
        assert found, "16 no longer prints an exercise label: remove this exception"
        pytest.xfail("16 prints speclib/book/broken.py's docstring '(exercise ex-16-2)'; fixing it means "
                     "re-executing 16, which another branch owns")
    assert found == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_goal_is_stated_only_where_the_page_sets_it(page):
    assert goal_problems(markdown(page), values_for(page)) == []


# --- negative controls ---------------------------------------------------------------------------

def test_the_rules_find_planted_defects():
    values = {"processor": {"text/plain": "'AMD EPYC, 2 logical cores, load average 0.3 while measuring'"},
              "ranking": {"text/markdown": "eagle has the highest rate, above pair."},
              "goal": {"text/markdown": "The goal of 1.5x is missed: 1.08x at k = 2."}}
    assert machine_captions(["A figure.\n\n*Median of 9 runs, on {glue:text}`processor`.*"], values)
    assert not machine_captions(["*Median of 9 runs, from the book's record.*"], values)
    long = {"cells": [{"cell_type": "code", "source": "print(inspect.getsource(f))", "outputs": [
        {"output_type": "stream", "text": "def f(x):\n    return " + "x + " * 30 + "1\n"}]}]}
    assert listing_lines(long) and not listing_lines({"cells": [{"cell_type": "code", "source": "print(1)",
                                                                  "outputs": [{"output_type": "stream",
                                                                               "text": "y" * 100}]}]})
    assert exercise_headings(["## Exercises\n", "## Exercises\n\ntext"]) == 2
    assert generated_sentence_problems(["Text.\n\n{glue:md}`ranking`"], values)
    assert generated_sentence_problems(["Here: {glue:md}`goal` and again {glue:md}`goal`"], values)
    assert not generated_sentence_problems(["As the table shows, {glue:md}`ranking`"], values)
    labelled = {"cells": [{"cell_type": "code", "source": "", "outputs": [
        {"output_type": "stream", "text": '"""A block as shipped (exercise ex-09b-3)."""'}]}]}
    assert label_outputs(labelled) == ["(exercise ex-09b-3)"]
    assert goal_problems(["{glue:md}`goal`"], values) and not goal_problems(
        ["Our goal is 1.5x. {glue:md}`goal`"], values)

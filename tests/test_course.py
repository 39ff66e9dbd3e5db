"""The classroom contract: every exercise has a goal, a time and a kind; a main-line chapter has at
least three, a code stub and a find-the-bug task among them, a going-further chapter at least two
with a code stub; labels are unique."""

import json
from collections import Counter
from pathlib import Path

import pytest

from speclib.book.course import book_exercises, instructor_table, notebook_exercises, toc_chapters

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = book_exercises(ROOT)
CHAPTERS = sorted({e.chapter for e in EXERCISES})


def test_labels_are_unique():
    counts = Counter(e.label for e in EXERCISES)
    assert [label for label, n in counts.items() if n > 1] == []


def test_every_exercise_has_goal_time_and_kind():
    missing = [f"{e.chapter}: {e.label}" for e in EXERCISES if None in (e.goal, e.minutes, e.kind)]
    assert missing == [], "exercises without a '*Goal:* ... *Time:* ~N min. *Kind:* ...' line"


#: Notebook pages of the table of contents that hold no exercises: the instructors' page (which
#: lists them).
WITHOUT_EXERCISES = {"book/instructors", "book/guide"}  # the guide is a reference page, not a lesson


def test_every_notebook_chapter_has_exercises():
    """The tests below run per chapter *with* exercises; a chapter without any would slip past them."""
    notebooks = [name for name in toc_chapters(ROOT) if (ROOT / f"{name}.ipynb").exists()]
    assert [n for n in notebooks if n not in CHAPTERS and n not in WITHOUT_EXERCISES] == []
    assert "book/15_serving" in CHAPTERS  # negative control: the scan does read the chapters


def _main_line() -> set[str]:
    """The chapters of the part captioned "The main line" in _toc.yml."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return {ch["file"] for part in toc.get("parts", []) if part["caption"] == "The main line"
            for ch in part["chapters"]}


MAIN_LINE = _main_line()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_chapter_mixes_its_exercises(chapter):
    """A main-line chapter has at least three exercises, a code stub and a find-the-bug among them;
    a going-further chapter (one idea or two, for readers who chose it) at least two, one a code stub."""
    mine = [e for e in EXERCISES if e.chapter == chapter]
    kinds = {e.kind for e in mine}
    assert "code" in kinds, f"{chapter}: no code exercise (a stub the student completes)"
    if chapter in MAIN_LINE:
        assert len(mine) >= 3, f"{chapter}: {len(mine)} exercises (a main-line chapter has at least 3)"
        assert "find-the-bug" in kinds, f"{chapter}: no find-the-bug exercise"
    else:
        assert len(mine) >= 2, f"{chapter}: {len(mine)} exercises (a going-further chapter has at least 2)"


def test_the_main_line_is_read_from_the_table_of_contents():
    assert "book/03_verification" in MAIN_LINE and "book/15_serving" not in MAIN_LINE


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_code_exercises_have_a_stub_that_raises(chapter):
    nb = json.loads((ROOT / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    stubs = [c for c in nb["cells"] if c["cell_type"] == "code" and "NotImplementedError" in "".join(c["source"])
             and "raises-exception" in c.get("metadata", {}).get("tags", [])]
    n_code = sum(e.kind == "code" for e in EXERCISES if e.chapter == chapter)
    assert len(stubs) >= n_code, f"{chapter}: {n_code} code exercises but {len(stubs)} tagged stubs"


def test_parser_reads_metadata(tmp_path):
    cell = {"cell_type": "markdown", "metadata": {}, "source": (
        "# Chapter X\n\n```{exercise} Count\n:label: ex-x-1\nDo it.\n\n"
        "*Goal:* count passes. *Time:* ~5 min. *Kind:* code.\n```\n")}
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    (ex,) = notebook_exercises(path)
    assert (ex.chapter_title, ex.label, ex.title, ex.goal, ex.minutes, ex.kind) == (
        "Chapter X", "ex-x-1", "Count", "count passes", 5, "code")
    assert "- Count (`ex-x-1`). *code, ~5 min.* Goal: count passes." in instructor_table([ex])
    asked = ex._replace(title="Why?", label="ex-x-2")
    assert "- Why? (`ex-x-2`). *code" in instructor_table([asked])  # the label closes the name
    linked = instructor_table([asked], links=True)
    assert "<ex-x-2>`: Why? *code" in linked and "?." not in linked


def test_parser_rejects_unknown_kind(tmp_path):
    cell = {"cell_type": "markdown", "metadata": {}, "source": (
        "```{exercise} Q\n:label: ex-q\n*Goal:* g. *Time:* ~5 min. *Kind:* essay.\n```\n")}
    path = tmp_path / "q.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    with pytest.raises(ValueError, match="kind 'essay'"):
        notebook_exercises(path)


def _stubs_and_checks():
    """Per notebook: the functions its exercise stubs define and the self-checks it calls."""
    import re

    stubs, checks = {}, {}
    for chapter in CHAPTERS:
        nb = json.loads((ROOT / f"{chapter}.ipynb").read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] != "code":
                continue
            if "raises-exception" in cell.get("metadata", {}).get("tags", []) and "NotImplementedError" in source:
                for name in re.findall(r"^def (\w+)\(", source, re.M):
                    stubs.setdefault(name, set()).add(chapter)
            for name in re.findall(r"\bcheck_\w+(?=\()", source):
                checks.setdefault(name, set()).add(chapter)
    return stubs, checks


def test_no_exercise_repeats_another_s_function_or_check():
    """Two chapters asking for the same function, or checked by the same self-check, ask the same
    exercise twice (ex-07-3 and ex-14-1 once both asked for acceptance_from_steps)."""
    stubs, checks = _stubs_and_checks()
    assert {n: sorted(c) for n, c in stubs.items() if len(c) > 1} == {}
    assert {n: sorted(c) for n, c in checks.items() if len(c) > 1} == {}
    # Negative control: the scan does find the stubs and checks (so an empty result means something).
    assert "acceptance_by_position" in stubs and "check_acceptance_by_position" in checks

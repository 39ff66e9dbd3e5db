"""The instructors' page's data: chapter facts, reading paths, launch links and grading, read
from the chapters (speclib.book.course)."""

import itertools
import json
from pathlib import Path

import nbformat
import pytest

from speclib.book import course, grading

ROOT = Path(__file__).resolve().parents[1]
FACTS = course.chapter_facts(ROOT)
BY_NAME = {f.chapter: f for f in FACTS}


# --- reading and run times ----------------------------------------------------------------

def test_reading_words_leave_out_solutions_and_options():
    text = ("Intro words here.\n```{exercise} Q\n:label: ex-1\nAsk this.\n```\n"
            "```{solution-start} ex-1\n:class: dropdown\n```\nsecret answer words\n```{solution-end}\n```\n"
            "```{solution} ex-2\nmore secret\n```\nTail.")
    assert course.reading_words(text) == len("Intro words here. ```{exercise} Q Ask this. ``` Tail.".split())
    with pytest.raises(TypeError, match="markdown"):
        course.reading_words(None)


@pytest.mark.parametrize("words, minutes", [(0, 5), (1, 5), (600, 5), (601, 10), (1200, 10), (2500, 25)])
def test_reading_minutes_round_up_to_five(words, minutes):
    assert course.WORDS_PER_MINUTE == 120
    assert course.reading_minutes(words) == minutes


def test_run_seconds_come_from_the_stored_timestamps():
    cell = lambda a, b: {"cell_type": "code", "metadata": {"execution": {  # noqa: E731
        "iopub.execute_input": a, "shell.execute_reply": b}}}
    nb = {"cells": [cell("2026-01-01T10:00:00.5Z", "2026-01-01T10:00:01Z"), {"cell_type": "markdown"},
                    cell("2026-01-01T10:00:02Z", "2026-01-01T10:00:12.5Z")]}
    assert course.run_seconds(nb) == 12.0
    assert course.run_seconds({"cells": [{"cell_type": "code", "metadata": {}}]}) is None


def test_chapter_facts_of_the_book():
    chapters = [name for name in course.toc_chapters(ROOT) if (ROOT / f"{name}.ipynb").is_file()]
    assert [f.chapter for f in FACTS] == chapters
    for f in FACTS:
        assert f.words > 100 and f.read_minutes >= 5, f.chapter
        assert f.run_seconds is not None and f.run_seconds > 0, f"{f.chapter}: stored without its run's timestamps"
        assert all(chapters.index(b) < chapters.index(f.chapter) for b in f.refers_back), f.chapter
    # What each chapter declares is read from it: chapter 5 cites chapter 4's theorems, and only
    # the two Hugging Face chapters import PyTorch (a negative control for the other sixteen).
    assert "book/04_correction" in BY_NAME["book/05_bonus"].refers_back
    assert {f.chapter for f in FACTS if f.needs_hf} == {"book/16_models_and_engines"}
    exercises = course.book_exercises(ROOT)
    assert sum(f.exercises for f in FACTS) == len(exercises)
    assert sum(f.exercise_minutes for f in FACTS) == sum(e.minutes for e in exercises)


# --- reading paths -----------------------------------------------------------------------------

def test_the_lecture_fits_and_names_chapters_of_the_book():
    assert sum(m for _, m, _ in course.LECTURE) <= course.LECTURE_MINUTES
    table = course.lecture_table(FACTS)
    assert all(f"{{doc}}`{Path(c).name}`" in table for c, _, _ in course.LECTURE)
    with pytest.raises(ValueError, match="book/99_gone.*LECTURE"):
        course.lecture_table(FACTS, lecture=(("book/99_gone", 10, "x"),))
    with pytest.raises(ValueError, match="more than its 90"):
        course.lecture_table(FACTS, lecture=(("book/00_overview", 91, "x"),))


def brute_force(loads, weeks):
    best = None
    for cuts in itertools.combinations(range(1, len(loads)), weeks - 1):
        bounds = (0, *cuts, len(loads))
        worst = max(sum(loads[a:b]) for a, b in zip(bounds, bounds[1:]))
        best = worst if best is None else min(best, worst)
    return best


@pytest.mark.parametrize("loads", [(30, 10, 10, 10, 40, 5), (5, 5, 5, 5, 5, 5, 5), (90, 1, 1, 1), (1, 2, 3, 50, 2, 1)])
def test_module_weeks_are_consecutive_and_as_even_as_the_order_allows(loads):
    facts = [course.ChapterFacts(f"book/{i:02d}_x", "t", 0, 5, 1.0, 1, m - 5, (), False)
             for i, m in enumerate(loads)]
    weeks = course.module_weeks(facts, 3)
    assert [f for week in weeks for f in week] == facts and all(weeks)
    worst = max(sum(f.read_minutes + f.exercise_minutes for f in week) for week in weeks)
    assert worst == brute_force(loads, 3)


def test_the_module_of_the_book_covers_every_chapter_with_exercises_once():
    weeks = course.module_weeks(FACTS)
    assert len(weeks) == course.MODULE_WEEKS
    assert [f for week in weeks for f in week] == [f for f in FACTS if f.exercises]
    assert "(PyTorch)" in course.module_table(FACTS)
    with pytest.raises(ValueError, match="weeks"):
        course.module_weeks(FACTS[:2], 3)


# --- launching ------------------------------------------------------------------------------------

def test_launch_links_come_from_the_repository_address():
    links = course.launch_links("https://github.com/owner/book.git", "main", "student/03_verification.ipynb")
    assert links == {
        "binder": "https://mybinder.org/v2/gh/owner/book/main?urlpath=lab/tree/student/03_verification.ipynb",
        "colab": "https://colab.research.google.com/github/owner/book/blob/main/student/03_verification.ipynb"}
    assert course.launch_links("", "main") == {}
    with pytest.raises(ValueError, match="GitHub"):
        course.launch_links("https://gitlab.com/owner/book")


def book_root(tmp_path, url):
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\n")
    (tmp_path / "_config.yml").write_text(f'repository:\n  url: "{url}"\n  branch: main\n')
    return tmp_path


def test_launch_instructions_follow_the_setting(tmp_path):
    unset = course.launch_markdown(book_root(tmp_path, ""))
    assert "jupyter lab student/" in unset and "set_repository.py" in unset and "mybinder" not in unset
    assert course.repository_url(ROOT)[0] == "" or "mybinder" in course.launch_markdown(ROOT)
    set_ = course.launch_markdown(book_root(tmp_path, "https://github.com/o/r"))
    assert "(https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/student/00_overview.ipynb)" in set_
    assert "colab.research.google.com/github/o/r/blob/main/student/00_overview.ipynb" in set_


# --- grading ------------------------------------------------------------------------------------

def md(text):
    return nbformat.v4.new_markdown_cell(text)


def code(text):
    return nbformat.v4.new_code_cell(text)


def exercise(label):
    return md(f"```{{exercise}} Speed-up {label}\n:label: {label}\nWrite it.\n\n"
              "*Goal:* g. *Time:* ~5 min. *Kind:* code.\n```")


def homework():
    """A student's notebook: one exercise not attempted, one right, one wrong, one that crashes, and
    one whose stub's check fails before the student's own attempt below it passes."""
    checks = "from speclib.book.checks import check_speedup\n"
    right = ("from speclib.core.theory import expected_tokens_per_pass\n"
             "def speedup(alpha, k, c):\n    return expected_tokens_per_pass(alpha, k) / (1 + k * c)\n")
    nb = nbformat.v4.new_notebook()
    nb.cells = [md("# Homework"), code(checks),
                exercise("ex-a"), code("def speedup(alpha, k, c):\n    raise NotImplementedError"),
                code("check_speedup(speedup)"),
                exercise("ex-b"), code(right), code("check_speedup(speedup)"),
                exercise("ex-c"), code("def speedup(alpha, k, c):\n    return 1.0"), code("check_speedup(speedup)"),
                exercise("ex-d"), code("check_speedup(undefined_name)"),
                exercise("ex-e"), code("def speedup(alpha, k, c):\n    raise NotImplementedError"),
                code("check_speedup(speedup)"), code(right), code("check_speedup(speedup)"),
                md("## Summary"), code("check_speedup(speedup)  # after a heading: no exercise's")]
    return nb


def test_exercise_cells_belong_to_the_exercise_above_until_a_heading():
    assert grading.exercise_cells(homework()) == {"ex-a": [4], "ex-b": [7], "ex-c": [10], "ex-d": [12],
                                                 "ex-e": [15, 17]}


def test_grading_a_notebook_runs_it_and_reads_each_self_check(tmp_path):
    path = tmp_path / "homework.ipynb"
    nbformat.write(homework(), path)
    before = path.read_bytes()
    grades = {g.label: g for g in grading.grade_notebook(path, timeout=120)}
    assert {label: g.status for label, g in grades.items()} == {
        "ex-a": "not attempted", "ex-b": "passed", "ex-c": "failed", "ex-d": "error", "ex-e": "passed"}
    assert "ExerciseError" in grades["ex-c"].message and "NameError" in grades["ex-d"].message
    assert path.read_bytes() == before  # the submission is left as it was


def test_grading_a_notebook_that_was_not_run():
    nb = homework()
    assert {g.status for g in grading.grade_outputs(nb)} == {"error"}
    assert all("no verdict" in g.message for g in grading.grade_outputs(nb))
    with pytest.raises(FileNotFoundError):
        grading.grade_notebook(Path("/nonexistent/notebook.ipynb"))


def test_the_instructors_page_is_generated_from_this_data():
    page = json.loads((ROOT / "book" / "instructors.ipynb").read_text(encoding="utf-8"))
    sources = "\n".join("".join(c["source"]) for c in page["cells"] if c["cell_type"] == "code")
    for call in ("launch_markdown", "lecture_table", "module_table", "chapters_table", "run_times",
                 "instructor_table"):
        assert f"course.{call}(" in sources, call
    shown = "\n".join("".join(o.get("data", {}).get("text/markdown", "")) for c in page["cells"]
                      for o in c.get("outputs", []))
    chapters = [f for f in FACTS if f.exercises]  # as the page selects them
    for table in (course.lecture_table(chapters), course.chapters_table(chapters), course.module_table(chapters)):
        assert table in shown, "the stored page is stale: execute book/instructors.ipynb"


def test_the_readme_names_the_chapters_that_need_pytorch():
    """The README's sentences about requirements-hf.txt name exactly the chapters that import
    PyTorch or transformers (it once named chapter 14, which runs without them)."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sentences = [s for s in re.split(r"(?<=[.;])\s+", readme.replace("\n", " ")) if "requirements-hf" in s]
    named = {int(n) for s in sentences for n in re.findall(r"\b[Cc]hapters? (\d+)", s)}
    named |= {int(n) for s in sentences for n in re.findall(r"\b[Cc]hapters? \d+ and (\d+)", s)}
    needs = {int(f.chapter.split("/")[-1][:2]) for f in FACTS if f.needs_hf}
    assert needs and named == needs, (named, needs)

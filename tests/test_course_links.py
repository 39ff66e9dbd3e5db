"""The instructors' table can link every exercise by the number the reader sees."""

from pathlib import Path

import pytest

from speclib.book.course import book_exercises, instructor_table

ROOT = Path(__file__).resolve().parents[1]


def test_linked_table_names_every_exercise_by_reference():
    exercises = book_exercises(ROOT)
    linked = instructor_table(exercises, links=True)
    for ex in exercises:
        assert f"- {{numref}}`Exercise {{number}} <{ex.label}>`: {ex.title}" in linked
    assert "(`ex-" not in linked
    plain = instructor_table(exercises)
    assert "{numref}" not in plain and all(f"(`{ex.label}`)" in plain for ex in exercises)


def test_the_notebook_style_links_every_chapter_and_exercise_to_its_notebook():
    """What the editions' instructors' page shows in JupyterLab: no role that only the book's build
    resolves, every link a notebook that exists beside it, every exercise by the number its
    notebook shows (counted as the grader counts them, from the notebook itself)."""
    import re

    import nbformat

    from speclib.book import course, grading

    facts = [f for f in course.chapter_facts(ROOT) if f.exercises]
    exercises = book_exercises(ROOT)
    shown = "\n".join([course.chapters_table(facts, "notebook"), course.lecture_table(facts, style="notebook"),
                       course.module_table(facts, style="notebook"), course.run_times(facts, "notebook"),
                       course.torch_sentence(facts, "notebook"),
                       instructor_table(exercises, links=True, style="notebook")])
    assert "{doc}" not in shown and "{numref}" not in shown and "{number}" not in shown
    targets = re.findall(r"\]\(([^)]+)\)", shown)
    assert targets and all(t.endswith(".ipynb") and (ROOT / "student" / t).is_file() for t in targets)
    table = instructor_table(exercises, links=True, style="notebook")
    for ex in exercises:
        name = ex.chapter.split("/")[-1]
        number = grading.exercise_numbers(nbformat.read(ROOT / "student" / f"{name}.ipynb", as_version=4))[ex.label]
        assert f"- [Exercise {number}]({name}.ipynb): {ex.title}" in table


def test_the_sentence_on_pytorch_agrees_with_its_count():
    from speclib.book import course

    facts = course.chapter_facts(ROOT)
    one = [f for f in facts if f.needs_hf][:1]
    assert one and course.torch_sentence(one).startswith("Chapter {doc}`") and \
        course.torch_sentence(one).endswith("` imports")
    two = one + [f._replace(chapter="book/14_variants", needs_hf=True) for f in facts[:1]]
    assert course.torch_sentence(two, "notebook") == \
        f"Chapters [{one[0].chapter[5:7]}]({one[0].chapter[5:]}.ipynb) and [14](14_variants.ipynb) import"
    assert course.torch_sentence([f._replace(needs_hf=False) for f in facts]) == "No chapter imports"
    with pytest.raises(ValueError, match="style"):
        course.torch_sentence(facts, "html")

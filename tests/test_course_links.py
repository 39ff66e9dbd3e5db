"""The instructors' table can link every exercise by the number the reader sees."""

from pathlib import Path

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

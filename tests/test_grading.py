"""speclib.book.grading's verdicts read from executed notebooks, without a kernel: which cells belong
to which exercise, the numbers students see, and each rule that turns a check cell's outputs into a
verdict (tests/test_grade.py runs the whole grader on a batch of submissions)."""

import json

import nbformat
import pytest

from speclib.book import grading


def md(text):
    return nbformat.v4.new_markdown_cell(text)


def code(text, outputs=()):
    cell = nbformat.v4.new_code_cell(text)
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    return cell


def exercise(label, nonumber=False):
    return md(f"```{{exercise}} Title {label}\n:label: {label}\n{':nonumber:' + chr(10) if nonumber else ''}"
              "Do it.\n```")


def printed(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def raised(name, value):
    return {"output_type": "error", "ename": name, "evalue": value, "traceback": []}


MARK = "\u2714 Right: every case agrees.\n"


def notebook(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def test_numbers_are_those_the_student_sees():
    nb = notebook(md("# T"), exercise("a"), exercise("b", nonumber=True), md("text"), exercise("c"))
    assert grading.exercise_numbers(nb) == {"a": 1, "b": None, "c": 2}


def test_regions_end_at_a_heading_and_start_at_the_next_exercise():
    nb = notebook(md("# T"), code("x"), exercise("a"), code("1"), md("prose"), code("2"), md("## Next"),
                  code("3"), exercise("b"), code("4"))
    assert grading.exercise_regions(nb) == {3: "a", 5: "a", 9: "b"}


def test_a_check_mark_then_an_error_is_not_a_pass():
    """A check cell that prints one check's mark and then raises has failed: the error outranks the mark."""
    nb = notebook(exercise("a"), code("check_x(f)\ncheck_x(g)",
                                      [printed(MARK), raised("ExerciseError", "g is off")]))
    (grade,) = grading.grade_outputs(nb)
    assert (grade.status, grade.message) == ("failed", "ExerciseError: g is off")
    nb = notebook(exercise("a"), code("check_x(f)\n1 / 0", [printed(MARK), raised("ZeroDivisionError", "x")]))
    assert grading.grade_outputs(nb)[0].status == "error"


def test_a_pass_keeps_its_whole_message_on_one_line():
    nb = notebook(exercise("a"), code("check_x(f)", [printed("\u2714 speedup agrees with every\ncase.\n")]))
    assert grading.grade_outputs(nb)[0].message == "\u2714 speedup agrees with every case."


def test_a_stub_left_as_handed_out_is_not_attempted_whatever_its_check_says():
    given = notebook(exercise("a"), code("answer = None"), code("check_x(answer)"))
    handed = grading.handout(given)
    untouched = notebook(exercise("a"), code("answer = None  "), code("check_x(answer)",
                                                                      [raised("ExerciseError", "answer is None")]))
    tried = notebook(exercise("a"), code("answer = 3"), code("check_x(answer)",
                                                             [raised("ExerciseError", "3 is off")]))
    assert grading.grade_outputs(untouched, handed)[0].status == "not attempted"
    assert grading.grade_outputs(tried, handed)[0].status == "failed"
    assert grading.grade_outputs(untouched)[0].status == "failed"  # without the handout it cannot tell


def test_a_removed_check_and_a_removed_exercise():
    given = grading.handout(notebook(exercise("a"), code("f = None"), code("check_x(f)"), exercise("b"),
                                     code("check_y(1)")))
    nb = notebook(exercise("a"), code("f = 1"), exercise("b"), code("check_y(1)", [printed(MARK)]))
    assert [(g.label, g.status) for g in grading.grade_outputs(nb, given)] == [("a", "check removed"),
                                                                             ("b", "passed")]
    nb = notebook(exercise("b"), code("check_y(1)", [printed(MARK)]))
    assert grading.grade_outputs(nb, given)[0].status == "check removed"
    assert "deleted" in grading.grade_outputs(nb, given)[0].message


def test_an_exercise_without_a_self_check_is_left_to_the_instructor():
    given = grading.handout(notebook(exercise("a"), code("print(1)")))
    assert given["a"].checks == () and grading.grade_outputs(notebook(exercise("a")), given) == []


def test_events_of_the_run_name_the_verdict():
    nb = notebook(exercise("a"), code("f()"), code("check_x(f)", [raised("NameError", "f")]))
    events = {1: grading.RunEvent("timed out", "the cell `f()` ran past the limit")}
    (grade,) = grading.grade_outputs(nb, events=events)
    assert grade.status == "timed out" and "ran past" in grade.message and "NameError" in grade.message
    events = {2: grading.RunEvent("kernel died", "the kernel stopped")}
    assert grading.grade_outputs(nb, events=events)[0].status == "kernel died"


def test_what_is_not_a_notebook_is_named(tmp_path):
    bad = tmp_path / "bad.ipynb"
    bad.write_text('{"cells": [')
    with pytest.raises(ValueError, match="damaged JSON"):
        grading.read_notebook(bad)
    bad.write_text(json.dumps({"cells": "no"}))
    with pytest.raises(ValueError, match="no list of cells"):
        grading.read_notebook(bad)
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match="not UTF-8"):
        grading.read_notebook(bad)
    with pytest.raises(FileNotFoundError):
        grading.read_notebook(tmp_path / "missing.ipynb")
    (grade,) = grading.grade_notebook(bad)
    assert grade.status == "unreadable"

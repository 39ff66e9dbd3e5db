"""tools/grade.py as an instructor runs it: one batch of ten submissions, each bad in its own way.

The handout is a small chapter with two exercises graded by real self-checks (a function,
``speedup``, checked by check_speedup, and a value, ``exact_calls``, whose stub is
``exact_calls = None``) and one without a self-check.  The ten submissions: right, wrong,
untouched, an infinite loop, damaged JSON, a deleted check cell, a kernel that exits
(``os._exit(1)``), a check cell that prints a check mark and then raises, a deleted exercise,
and a loop that ignores the interrupt.  The script runs once as a subprocess, with a small
time limit per exercise, and every test below reads that one run: its exit status, what it
printed, and its CSV.
"""

from __future__ import annotations

import copy
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 10  #: seconds per exercise given to the grader
CHAPTER = "07_homework"

RIGHT_SPEEDUP = ("from speclib.core.theory import expected_tokens_per_pass\n"
                 "def speedup(alpha, k, c):\n    return expected_tokens_per_pass(alpha, k) / (1 + k * c)\n")
WRONG_SPEEDUP = "def speedup(alpha, k, c):\n    return 1.0\n"
LOOP_SPEEDUP = "def speedup(alpha, k, c):\n    while True:\n        pass\n"
STUB_SPEEDUP = "def speedup(alpha, k, c):\n    raise NotImplementedError(\"your code here\")\n"


def md(text):
    return nbformat.v4.new_markdown_cell(text)


def code(text, tags=()):
    cell = nbformat.v4.new_code_cell(text)
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def exercise(label, title, body="Do it."):
    return md(f"```{{exercise}} {title}\n:label: {label}\n\n{body}\n```")


def handout_notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        md("# Homework"),
        code("from speclib.book.checks import check_exact_calls, check_speedup"),
        md("## Exercises"),
        exercise("ex-h-1", "The speed-up"),
        code(STUB_SPEEDUP, ["raises-exception"]),
        code("check_speedup(speedup)", ["raises-exception"]),
        exercise("ex-h-2", "A derivation", "Derive it on paper."),
        exercise("ex-h-3", "Which calls are exact?"),
        code('exact_calls = None  # your answer: a set of letters, e.g. {"a"}', ["raises-exception"]),
        code("check_exact_calls(exact_calls)", ["raises-exception"]),
        md("## Summary"),
    ]
    return nb


def exact_answer() -> str:
    """The right set of letters, found by trying every set on the check itself (not typed here)."""
    from itertools import combinations

    from speclib.book import checks

    letters = sorted(checks._exact_calls()[1])
    for n in range(1, len(letters) + 1):
        for chosen in combinations(letters, n):
            try:
                checks.check_exact_calls(set(chosen))
            except checks.ExerciseError:
                continue
            return repr(set(chosen))
    raise AssertionError("no answer found for check_exact_calls")


def submissions(folder: Path) -> dict[str, Path]:
    """The ten submissions, each in its student's folder (nbgrader's layout)."""
    base = handout_notebook()
    right = f"exact_calls = {exact_answer()}"

    def make(student, edit=None, raw=None):
        nb = copy.deepcopy(base)
        if edit is not None:
            edit(nb.cells)
        path = folder / student / f"{CHAPTER}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(raw if raw is not None else nbformat.writes(nb), encoding="utf-8")
        return path

    def answer(speedup, exact=right, extra=None):
        def edit(cells):
            cells[4].source = speedup
            cells[8].source = exact
            if extra:
                extra(cells)
        return edit

    def delete(*indices):
        def edit(cells):
            for i in sorted(indices, reverse=True):
                del cells[i]
        return edit

    return {
        "alice": make("alice", answer(RIGHT_SPEEDUP)),
        "bob": make("bob", answer(WRONG_SPEEDUP, 'exact_calls = {"z"}')),
        "carol": make("carol"),  # handed in untouched
        "dave": make("dave", answer(LOOP_SPEEDUP)),
        "erin": make("erin", raw=nbformat.writes(base)[:-200]),  # damaged JSON: the file cut short
        "frank": make("frank", lambda cells: (answer(RIGHT_SPEEDUP)(cells), delete(5)(cells))),
        "grace": make("grace", answer("import os\nos._exit(1)")),
        "heidi": make("heidi", answer(RIGHT_SPEEDUP, extra=lambda cells: setattr(
            cells[5], "source", "check_speedup(speedup)\ncheck_speedup(lambda alpha, k, c: 2.0)"))),
        "ivan": make("ivan", lambda cells: (answer(RIGHT_SPEEDUP)(cells), delete(3, 4, 5)(cells))),
        "judy": make("judy", answer("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                    "while True:\n    time.sleep(0.1)\n" + RIGHT_SPEEDUP)),
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Run tools/grade.py once on the batch; return (process, seconds, CSV rows, submissions)."""
    folder = tmp_path_factory.mktemp("grading")
    handouts = folder / "handouts"
    handouts.mkdir()
    nbformat.write(handout_notebook(), handouts / f"{CHAPTER}.ipynb")
    subs = submissions(folder / "submitted")
    before = {p: p.read_bytes() for p in subs.values()}
    out = folder / "grades.csv"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "grade.py"), *map(str, subs.values()),
                           "--handouts", str(handouts), "--timeout", str(LIMIT), "--csv", str(out)],
                          capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - start
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert all(p.read_bytes() == b for p, b in before.items()), "a submission was changed"
    return proc, seconds, rows, subs


def verdicts(rows, student):
    return {r["label"]: r["status"] for r in rows if r["student"] == student}


def test_the_batch_is_graded_in_one_run_and_exits_0(graded):
    proc, seconds, rows, subs = graded
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert {r["student"] for r in rows} == set(subs)
    assert len(rows) == 2 * len(subs), "one row per student and self-checked exercise"


def test_the_run_ends_within_the_limits(graded):
    """Three exercises reach the limit (dave's loop, judy's loop that ignores the interrupt and is
    then run again without it); everything else runs in seconds.  The bound leaves each of the
    ten notebooks 20 s of ordinary running on a busy machine."""
    proc, seconds, rows, subs = graded
    from speclib.book.grading import GRACE_SECONDS

    assert seconds < 2 * LIMIT + GRACE_SECONDS + 20 * len(subs), seconds


def test_each_kind_of_submission_gets_its_verdict(graded):
    proc, seconds, rows, subs = graded
    assert verdicts(rows, "alice") == {"ex-h-1": "passed", "ex-h-3": "passed"}
    assert verdicts(rows, "bob") == {"ex-h-1": "failed", "ex-h-3": "failed"}
    assert verdicts(rows, "carol") == {"ex-h-1": "not attempted", "ex-h-3": "not attempted"}
    assert verdicts(rows, "dave") == {"ex-h-1": "timed out", "ex-h-3": "passed"}
    assert verdicts(rows, "erin") == {"ex-h-1": "unreadable", "ex-h-3": "unreadable"}
    assert verdicts(rows, "frank") == {"ex-h-1": "check removed", "ex-h-3": "passed"}
    assert verdicts(rows, "grace") == {"ex-h-1": "kernel died", "ex-h-3": "passed"}
    assert verdicts(rows, "heidi") == {"ex-h-1": "failed", "ex-h-3": "passed"}  # the error outranks the mark
    assert verdicts(rows, "ivan") == {"ex-h-1": "check removed", "ex-h-3": "passed"}
    assert verdicts(rows, "judy") == {"ex-h-1": "timed out", "ex-h-3": "passed"}


def test_messages_are_whole_and_say_what_happened(graded):
    proc, seconds, rows, subs = graded
    by = {(r["student"], r["label"]): r["message"] for r in rows}
    passed = by[("alice", "ex-h-1")]
    assert passed.startswith("\u2714") and passed.endswith(".") and "\n" not in passed and len(passed) > 40
    assert "ExerciseError" in by[("bob", "ex-h-1")]
    assert "still raises NotImplementedError" in by[("carol", "ex-h-1")]
    assert "still None" in by[("carol", "ex-h-3")]
    assert f"limit of {LIMIT} s" in by[("dave", "ex-h-1")]
    assert "damaged JSON" in by[("erin", "ex-h-1")]
    assert "check_speedup" in by[("frank", "ex-h-1")]
    assert "exit code 1" in by[("grace", "ex-h-1")] and "`import os`" in by[("grace", "ex-h-1")]
    assert "did not stop when interrupted" in by[("judy", "ex-h-1")]


def test_labels_are_as_the_student_sees_them(graded):
    """Chapter and exercise number as rendered: the exercise without a self-check is number 2."""
    proc, seconds, rows, subs = graded
    shown = {(r["label"], r["chapter"], r["exercise"], r["title"]) for r in rows if r["student"] == "alice"}
    assert shown == {("ex-h-1", "07", "Exercise 1", "The speed-up"),
                     ("ex-h-3", "07", "Exercise 3", "Which calls are exact?")}


def test_a_summary_per_exercise_ends_the_run(graded):
    proc, seconds, rows, subs = graded
    summary = proc.stdout.split("Per exercise")[1]
    assert "07 Exercise 1 (ex-h-1): 1 passed, 2 failed, 1 not attempted, 2 timed out, 1 kernel died, " \
           "2 check removed, 1 unreadable" in summary
    assert "07 Exercise 3 (ex-h-3): 7 passed, 1 failed, 1 not attempted, 1 unreadable" in summary


def test_no_kernel_noise(graded):
    proc, seconds, rows, subs = graded
    assert "without encryption" not in proc.stdout + proc.stderr
    assert "WARNING" not in proc.stdout + proc.stderr


def test_the_csv_is_written_as_grading_goes(tmp_path):
    """Stopped after its first notebook, the grader has already written that notebook's rows."""
    handouts = tmp_path / "handouts"
    handouts.mkdir()
    nbformat.write(handout_notebook(), handouts / f"{CHAPTER}.ipynb")
    subs = submissions(tmp_path / "submitted")
    out = tmp_path / "grades.csv"
    proc = subprocess.Popen([sys.executable, str(ROOT / "tools" / "grade.py"), str(subs["alice"]),
                             str(subs["dave"]), "--handouts", str(handouts), "--timeout", "60", "--csv", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if out.exists() and out.read_text(encoding="utf-8").count("\n") >= 3:
                break
            time.sleep(0.5)
        rows = list(csv.DictReader(out.read_text(encoding="utf-8").splitlines()))
        assert proc.poll() is None, "the grader should still be busy with dave's 60 s loop"
    finally:
        proc.kill()
        proc.wait()
    assert [(r["student"], r["status"]) for r in rows] == [("alice", "passed"), ("alice", "passed")]


def test_a_wrong_command_line_says_what_is_wrong(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "grade.py"), str(tmp_path / "missing.ipynb")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no such file" in proc.stderr and "Traceback" not in proc.stderr
    nb = tmp_path / "x.ipynb"
    nb.write_text(json.dumps({}))
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "grade.py"), str(nb), "--timeout", "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--timeout" in proc.stderr


def test_a_real_chapter_as_handed_out_and_as_solved(tmp_path):
    """Chapter 08 from the student edition, handed in untouched, and from the instructor edition
    (every solution in place): each exercise is named as the student sees it (the chapter's
    labels say ex-10-*, its blocks "Exercise 1" to "Exercise 3")."""
    out = tmp_path / "grades.csv"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "grade.py"),
                           str(ROOT / "student" / "08_sampling_controls.ipynb"),
                           str(ROOT / "instructor" / "08_sampling_controls.ipynb"), "--csv", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(out, newline="", encoding="utf-8") as f:
        rows = [(r["student"], r["chapter"], r["exercise"], r["status"]) for r in csv.DictReader(f)]
    numbers = [f"Exercise {n}" for n in (1, 2, 3)]
    assert rows == [("student", "08", e, "not attempted") for e in numbers] + \
        [("instructor", "08", e, "passed") for e in numbers]

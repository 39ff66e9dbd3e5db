#!/usr/bin/env python3
"""Grade students' notebooks by their exercises' self-checks, whatever each submission holds.

    .venv/bin/python tools/grade.py submissions/*/03_verification.ipynb --csv grades.csv
    .venv/bin/python tools/grade.py --chapter 08_sampling_controls alice.ipynb bob.ipynb

Each notebook is compared with its handout, the chapter of the student edition it was made
from (student/NAME.ipynb for a file named NAME.ipynb; --chapter names it for files named
otherwise, --handouts names another folder), and runs top to bottom in a fresh kernel in its
own folder, errors allowed.  Every exercise with a self-check gets one verdict: passed (the
check mark), failed (the check's hint), not attempted (its cells as handed out, or the stub
still raising NotImplementedError), error (any other exception), timed out (a cell of the
exercise ran past --timeout seconds, which all of an exercise's cells share), kernel died
(an exit or a crash; the notebook is run again without that cell, so later exercises are
still graded), check removed (the exercise or its self-check cell deleted), unreadable (not
a notebook: damaged JSON) or not run.  Exercises without a self-check are graded by hand
from the instructor edition.

Like nbgrader's and otter-grader's reports, the CSV has one row per student and exercise:
student (the submission's folder, or its file name when it is not named after the chapter),
notebook, chapter, exercise (as the student sees it: "Exercise 2"), label, title, status
and the whole message.  It is written as the grading goes, so it holds every notebook
graded so far.  A summary per exercise ends the run.  The exit status is 0 when every
notebook was graded, 1 when some could not be run at all (a kernel that did not start), 2
for a wrong command line.  The submitted files are not changed.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from speclib.book import grading  # noqa: E402

COLUMNS = ["student", "notebook", "chapter", "exercise", "label", "title", "status", "message"]


def find_handout(path: Path, folder: Path, chapter: str | None) -> Path | None:
    """The handed-out notebook ``path`` was made from, or None."""
    if chapter:
        return folder / f"{chapter.removesuffix('.ipynb')}.ipynb"
    candidate = folder / path.name
    return candidate if candidate.is_file() else None


def student_of(path: Path, handout: Path | None) -> str:
    """Who submitted ``path``: its folder when the file is named after its chapter
    (``alice/03_verification.ipynb``), otherwise its file name (``alice.ipynb``)."""
    if handout is not None and path.name == handout.name:
        return path.resolve().parent.name
    return path.stem


def chapter_of(handout: Path | None, path: Path) -> str:
    """The chapter's number as the student sees it in its file name ("08"), or the file's name."""
    name = (handout or path).stem
    head = name.split("_")[0]
    return head if head.isdigit() else name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--csv", type=Path, help="write one row per student and exercise here, as grading goes")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds all the cells of one exercise may run together, and any other cell on its "
                        "own (default 120)")
    parser.add_argument("--handouts", type=Path, default=ROOT / "student",
                        help="the folder of handed-out notebooks (default: the student edition)")
    parser.add_argument("--chapter", help="the handout every notebook was made from (e.g. 08_sampling_controls), "
                        "for files not named after their chapter")
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error(f"--timeout: expected a positive number of seconds, got {args.timeout:g}")
    missing = [str(p) for p in args.notebooks if not p.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    if args.chapter and not find_handout(Path("x"), args.handouts, args.chapter).is_file():
        parser.error(f"--chapter: {args.handouts / args.chapter} is not a handed-out notebook")
    if not args.handouts.is_dir():
        parser.error(f"--handouts: no folder at {args.handouts}")

    out = open(args.csv, "w", newline="", encoding="utf-8") if args.csv else None
    writer = csv.writer(out) if out else None
    if writer:
        writer.writerow(COLUMNS)
        out.flush()
    results: list[tuple[str, grading.Grade]] = []
    not_run = 0
    try:
        for path in args.notebooks:
            handout = find_handout(path, args.handouts, args.chapter)
            given = grading.handout(grading.read_notebook(handout)) if handout else None
            student, chapter = student_of(path, handout), chapter_of(handout, path)
            start = time.monotonic()
            grades = grading.grade_notebook(path, args.timeout, given)
            results += [(chapter, g) for g in grades]
            not_run += any(g.status == "not run" and "did not start" in g.message for g in grades)
            passed = sum(g.status == "passed" for g in grades)
            note = "" if handout else " (no handout found: its own exercises graded)"
            print(f"{path} ({student}, chapter {chapter}): {passed} of {len(grades)} exercises pass their "
                  f"self-check, {time.monotonic() - start:.0f} s{note}", flush=True)
            for g in grades:
                detail = "" if g.status == "passed" else f": {g.message[:110]}{'...' if len(g.message) > 110 else ''}"
                print(f"    {g.exercise} ({g.label}): {g.status}{detail}", flush=True)
                if writer:
                    writer.writerow([student, str(path), chapter, g.exercise, g.label, g.title, g.status, g.message])
            if out:
                out.flush()
    finally:
        if out:
            out.close()
    print(f"\nPer exercise, over {len(args.notebooks)} notebooks:")
    for name, counts in grading.summary(results):
        print(f"    {name}: " + ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n))
    if args.csv:
        print(f"one row per student and exercise in {args.csv}")
    return 1 if not_run else 0


if __name__ == "__main__":
    sys.exit(main())

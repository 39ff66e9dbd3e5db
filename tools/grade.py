#!/usr/bin/env python3
"""Grade students' notebooks by their self-checks.

    .venv/bin/python tools/grade.py alice/03_verification.ipynb bob/03_verification.ipynb
    .venv/bin/python tools/grade.py --csv grades.csv submissions/*/03_verification.ipynb

Each notebook runs top to bottom in a fresh kernel, in its own folder, with errors allowed
(so one unfinished exercise does not stop the others), and each exercise is graded by what
the last of its self-checks (from speclib.book.checks) said: passed (the check mark), not attempted (the
stub still raises NotImplementedError), failed (the check's hint) or error (any other
exception).  The submitted files are not changed.  Run it in the book's environment
(`.venv`), where the checks are installed; a notebook must sit where its chapter sits in
the repository (one folder below the root, like student/) if it reads files relative to it.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from speclib.book.course import grade_notebook  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--csv", type=Path, help="also write notebook,exercise,status,message rows here")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may run (default 600)")
    args = parser.parse_args(argv)
    rows = []
    for path in args.notebooks:
        grades = grade_notebook(path, args.timeout)
        done = sum(g.status == "passed" for g in grades)
        print(f"{path}: {done} of {len(grades)} exercises pass their self-check")
        for g in grades:
            print(f"    {g.label}: {g.status}" + (f" ({g.message.splitlines()[0][:100]})" if g.status != "passed" else ""))
            rows.append([str(path), g.label, g.status, g.message])
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([["notebook", "exercise", "status", "message"], *rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())

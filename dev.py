#!/usr/bin/env python3
"""The project's two commands, set-up included (needs only Python 3.10+).

    python3 dev.py book     build the book into _build/html (warnings are errors)
    python3 dev.py test     run every test: speclib's unit tests and doctests, every
                            notebook under book/ through nbval, and the book builds
    python3 dev.py student  build the student edition (no solutions) into
                            _build_student/_build/html

Each creates a virtual environment in .venv on first use (or when requirements.txt
changes) and installs requirements.txt into it; nothing else is downloaded afterwards.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
STAMP = VENV / ".requirements-sha256"


def run(*cmd: object) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], cwd=ROOT, check=True)


def setup() -> None:
    """Create .venv and install requirements.txt unless it is already up to date."""
    if sys.version_info < (3, 10):
        sys.exit(f"Python 3.10 or newer is needed; this is {sys.version.split()[0]}")
    wanted = hashlib.sha256((ROOT / "requirements.txt").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text().strip() == wanted and PYTHON.exists():
        return
    if not PYTHON.exists():
        print(f"Creating a virtual environment in {VENV} ...", flush=True)
        venv.create(VENV, with_pip=True)
    run(PYTHON, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", "requirements.txt")
    STAMP.write_text(wanted)


def main(argv: list[str]) -> int:
    commands = {"book": [], "student": ["--student"], "test": None}
    if len(argv) != 1 or argv[0] not in commands:
        print(__doc__)
        return 2
    setup()
    env_bin = str(BIN)
    os.environ["PATH"] = env_bin + os.pathsep + os.environ.get("PATH", "")
    if argv[0] == "test":
        run(PYTHON, "-m", "pytest")
    else:
        run(PYTHON, "tools/build_book.py", *commands[argv[0]])
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except subprocess.CalledProcessError as err:
        sys.exit(err.returncode)

#!/usr/bin/env python3
"""Execute notebooks top to bottom in a fresh kernel and save them with their outputs.

    .venv/bin/python tools/execute_notebooks.py book/03_verification.ipynb [...]

This is how every notebook under book/ is committed: nbval (in the test suite) re-runs
each one and compares its outputs with the stored ones, so they must come from a clean run.
Cells tagged ``raises-exception`` may fail (student stubs); any other error stops.
"""

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def execute(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    elapsed = time.perf_counter() - start
    nbformat.write(nb, path)
    return elapsed


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for name in sys.argv[1:]:
        print(f"{name}: executed in {execute(Path(name)):.1f} s", flush=True)

#!/usr/bin/env python3
"""Execute notebooks top to bottom in a fresh kernel and save them with their outputs.

    .venv/bin/python tools/execute_notebooks.py book/03_verification.ipynb [...]

This is how every notebook under book/ is committed: nbval (in the test suite) re-runs
each one and compares its outputs with the stored ones, so they must come from a clean run.
Cells tagged ``raises-exception`` may fail (student stubs); any other error stops.

The timing chapters measure the machine as a reader's would run: with the BLAS kernel the
library chooses for the processor.  Where the environment forces another one
(``OPENBLAS_CORETYPE``, as some machines set for old builds), this tool removes it for the
notebooks it executes, says so, and leaves a mark (``SPECLIB_UNFORCED_KERNEL``) from which
the chapters' processor line says so too.  The test suite and CI never do this: they run
under whatever the environment sets.
"""

import os
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


def unforce_kernel() -> str | None:
    """Remove OPENBLAS_CORETYPE from this process's environment (the kernels it starts inherit it);
    return the value it had, or None."""
    forced = os.environ.pop("OPENBLAS_CORETYPE", None)
    if forced:
        os.environ["SPECLIB_UNFORCED_KERNEL"] = forced
        print(f"OPENBLAS_CORETYPE={forced} removed for these executions: the timing chapters measure the "
              "kernel the library chooses for this processor (their processor line says so)", flush=True)
    return forced


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    unforce_kernel()
    # One thread per library, as the test suite runs the notebooks (dev.py): a decoding stream
    # is timed on one core, and a second BLAS thread waiting for a busy core makes passes erratic.
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ.setdefault(variable, "1")
    for name in sys.argv[1:]:
        print(f"{name}: executed in {execute(Path(name)):.1f} s", flush=True)

"""The numerically sensitive chapters again, under other kernels, so that a regression shows here.

A reader's processor makes numpy's BLAS, the verification kernel and torch pick other SIMD
kernels than the machine that stored a notebook's outputs, and floating-point rounding follows
the kernel.  The rule of tests/test_portable_outputs.py keeps rounding residues out of the
outputs nbval compares; this test checks that the rule is enough, by re-running the chapters
that compare floating-point results under another BLAS kernel (``OPENBLAS_CORETYPE``: one
the library would not choose here), numpy's products instead of the compiled kernel
(``SPECLIB_PRODUCTS=full``) and torch's portable kernels (``ATEN_CPU_CAPABILITY=default``).
"""

import importlib.util
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from speclib.lm.products import blas_kernel

ROOT = Path(__file__).resolve().parents[1]
#: Chapters whose outputs come from float32 or float64 arithmetic that the kernels change.
SENSITIVE = ["book/06_theory.ipynb", "book/07_real_pair.ipynb"]
if all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers")):
    SENSITIVE.append("book/16_models_and_engines.ipynb")


def other_kernel() -> str | None:
    """An OpenBLAS kernel this processor runs but the library does not choose here, or None."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    chosen = (blas_kernel()["kernel"] or "").lower()
    flags = ""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        pass
    if chosen != "haswell" and " avx2" in flags and " fma" in flags:
        return "Haswell"
    return "SandyBridge" if chosen != "sandybridge" and " avx" in flags else "Prescott"


def test_sensitive_chapters_hold_under_other_kernels(tmp_path):
    env = dict(os.environ, SPECLIB_PRODUCTS="full", ATEN_CPU_CAPABILITY="default", SPECLIB_QUICK="1")
    kernel = other_kernel()
    if kernel:
        env["OPENBLAS_CORETYPE"] = kernel
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                           "--nbval", "--nbval-current-env", *SENSITIVE],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (f"under OPENBLAS_CORETYPE={kernel}, SPECLIB_PRODUCTS=full, "
                                  f"ATEN_CPU_CAPABILITY=default:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")

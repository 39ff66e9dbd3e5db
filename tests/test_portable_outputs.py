"""Stored outputs that nbval compares must hold on any processor.

Floating-point rounding depends on the SIMD kernels the BLAS, numba and torch pick for a
processor, so a residue such as ``2.1e-17`` or ``1.6e-05`` printed by a cell (or glued into
the prose) differs on another machine and fails the README's test command there.  Such
figures are printed as bounds that hold everywhere (``below 1e-12``) or kept in cells whose
output nbval does not compare (``nbval-ignore-output``), with the bound asserted in a test.

This test reads every notebook's stored outputs and fails on a compared output that shows a
number in scientific notation with an exponent of -4 or below, unless it is a bound of the form
"below 1e-N" (also "under", "<", "<=", "less than", "within"), which the cell asserts.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))

#: A number in scientific notation with an exponent of -4 or below: 2e-14, 1.6e-05, 7.4E-6,
#: 3x10^-5 (the scale of float64 and float32 rounding; 7.4e-02 is an ordinary figure).
SMALL = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:[eE]|x\s*10\^)\s*-\s*0*([4-9]|[1-9]\d+)(?![\w.])")
#: The one allowed form: a bound with mantissa 1 after a word that makes it a bound.
BOUND = re.compile(r"(?:below|under|<|<=|≤|less than|smaller than|within|at most)\s*\(?\s*$", re.I)
#: The output kinds nbval compares (it skips images, metadata and tracebacks), the values that
#: myst-nb's glue stores included: nbval compares those records like any other output.
TEXT_KEYS = ("text/plain", "text/markdown", "text/html", "text/latex",
             "application/papermill.record/text/plain", "application/papermill.record/text/markdown")


def compared_texts(nb: dict):
    """(cell index, text) of every output nbval compares."""
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code" or "nbval-ignore-output" in cell["metadata"].get("tags", []):
            continue
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream":
                yield i, "".join(out["text"])
            elif out["output_type"] == "error":
                yield i, f"{out.get('ename', '')}: {out.get('evalue', '')}"
            for key in TEXT_KEYS:
                if key in out.get("data", {}):
                    value = out["data"][key]
                    yield i, "".join(value) if isinstance(value, list) else str(value)


def residues(text: str) -> list[str]:
    """The rounding residues in ``text``: numbers of 1e-4 or less in scientific notation that are not bounds."""
    found = []
    for m in SMALL.finditer(text):
        mantissa = float(m.group(1))
        if mantissa == 1.0 and BOUND.search(text[max(0, m.start() - 20):m.start()]):
            continue
        if mantissa == 1.0 and text.strip().strip("'\"") == m.group(0):
            continue  # a glued bound on its own (the prose reads "below {glue}"): a constant, not a residue
        found.append(m.group(0))
    return found


def test_the_rule_finds_residues_and_lets_bounds_pass():
    # what failed on another processor, and the forms that replace them
    for bad in ("'2e-14'", "by at most 1.6e-05", "largest gap 2.1e-17)", "7.4E-06", "gap 1e-13", "3.8e-17",
                "'1e-47 and 2e-12'"):
        assert residues(bad), bad
    for good in ("below 1e-12", "differ by less than 1e-4", "(< 1e-12)", "0.70", "1e5 tokens", "k = 4",
                 "7.4e-02", "1.67e-03", "1e-12", "'1e-12'"):  # the last two: a glued bound alone
        assert not residues(good), good


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_compared_outputs_hold_on_any_processor(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    bad = [(i, r) for i, text in compared_texts(nb) for r in residues(text)]
    assert not bad, (f"{path.name}: outputs that nbval compares show rounding residues {bad[:5]}: print a bound "
                     "(e.g. 'below 1e-12') or tag the cell nbval-ignore-output and assert the bound in a test")

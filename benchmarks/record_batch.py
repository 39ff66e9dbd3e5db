"""The batch part of the book's record: what a target pass over a batch costs.

    .venv/bin/python benchmarks/record_batch.py                  # about 2 minutes on a quiet machine
    .venv/bin/python benchmarks/record_batch.py --quick --out /tmp/b.json   # a test run

Writes ``speclib/data/record_batch.json`` (``--out`` elsewhere), read with the book's other
records by :func:`speclib.book.record.load_records`.  The practitioner's guide chooses the draft
length for batch sizes 1, 8 and 32 from it (and from the acceptance rate of the book's record).
On one BLAS thread, numpy passes with the measured product choice:

- ``t1_ms/target/B<b>/isolated/numpy/cpu``: one cached pass of the target over one new token
  for each of ``b`` requests (:func:`speclib.book.serving.batched_pass_times`);
- ``r<n>/target/B<b>/isolated/numpy/cpu``: the same pass over ``n`` new tokens per request, in
  units of the first, ``r_B(n) = t_T(B, n) / t_T(B, 1)``;
- ``c/pair/B1/isolated/numpy/cpu``: the book's draft's one-token pass over the target's,
  ``t_D / t_T(1, 1)``; a draft run request by request costs ``c_B = B t_D / t_T(B, 1)`` per
  drafted token in plain batched passes (:func:`speclib.book.guide.choose_k_per_batch`).

The names are those of part 5 of ``benchmarks/record.py`` (the batch experiment of chapter 15):
once the book's record holds them, this file is superseded and ``record_batch.json`` goes
(:func:`speclib.book.record.load_records` refuses two records that hold the same name).

Every timing is a median over repeats; each repeat visits every setting once in a fresh random
order (and times the draft's pass beside them), so a slow spell of the machine hits all settings
alike.  Timings depend on everything else the machine runs: measure on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from speclib.book.record import DATA, check_record, name  # noqa: E402
from speclib.book.serving import batched_pass_times  # noqa: E402
from speclib.book.wallclock import processor_summary  # noqa: E402
from speclib.lm.products import blas_kernel  # noqa: E402
from speclib.lm.transformer import blas_threads, load_pair  # noqa: E402

OUT = DATA / "record_batch.json"
BATCHES = (1, 2, 4, 8, 16, 32)
KS = (1, 3, 6)


def rnd(x: float, digits: int = 4) -> float:
    return round(float(x), digits)


def measure(target, draft, batches, ns, repeats: int) -> dict:
    """Median times over ``repeats`` interleaved repeats: ``(target seconds of shape (B, n), draft seconds)``."""
    grids, drafts = [], []
    for rep in range(repeats):
        grids.append(batched_pass_times(target, batches, ns, repeats=1, seed=rep).seconds)
        drafts.append(batched_pass_times(draft, [1], [1], repeats=1, seed=rep).seconds[0, 0])
    return np.median(np.array(grids), axis=0), float(np.median(drafts)), len(grids)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(OUT), help="where to write the record (default: the book's)")
    parser.add_argument("--quick", action="store_true", help="a few repeats: a test of the script")
    parser.add_argument("--note", default="", help="what the provenance should say about the machine's state")
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else 60
    ns = sorted({1} | {k + 1 for k in KS})
    settings = {"threads": 1, "batch_sizes": list(BATCHES), "n_tokens": ns, "prefix": 40, "repeats": repeats,
                "timing": "median over repeats, each visiting every setting once in a fresh random order"}
    load_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    t0 = time.perf_counter()
    target, draft = load_pair()
    with blas_threads(1):
        seconds, t_draft, n = measure(target, draft, BATCHES, ns, repeats)
    quantities = {}
    for i, b in enumerate(BATCHES):
        where = dict(B=b, where="isolated", passes="numpy", device="cpu")
        t1 = seconds[i, 0]
        quantities[name("t1_ms", "target", **where)] = {"value": rnd(1e3 * t1), "n": n}
        if b == 1:
            quantities[name("c", "pair", **where)] = {"value": rnd(t_draft / t1), "n": n}
        for j, tokens in enumerate(ns[1:], start=1):
            quantities[name(f"r{tokens}", "target", **where)] = {"value": rnd(seconds[i, j] / t1), "n": n}
    record = {
        "format": 1,
        "provenance": {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": os.popen(f"git -C {ROOT} rev-parse HEAD 2>/dev/null").read().strip() or "unknown",
            "command": "benchmarks/record_batch.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "processor": processor_summary(), "blas": blas_kernel(),
            "python": platform.python_version(), "numpy": np.__version__,
            "load_average": {"start": rnd(load_start, 2), "end": rnd(os.getloadavg()[0], 2)},
            "cores": os.cpu_count(), "quick": args.quick, "seconds": rnd(time.perf_counter() - t0, 1),
            "note": args.note,
        },
        "settings": settings,
        "quantities": quantities,
    }
    check_record(record, "the new record", allow_quick=args.quick)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"{len(quantities)} quantities in {record['provenance']['seconds']:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The book's record: every quantity that more than one page states, measured in one run.

    .venv/bin/python benchmarks/record.py                      # about 10 minutes on a quiet machine
    .venv/bin/python benchmarks/record.py --quick --out /tmp/q.json   # a test run (refused by the book)

Writes ``speclib/data/record_cpu.json`` (``--out`` elsewhere), read by
:mod:`speclib.book.record`; every name there says its conditions.  On one BLAS thread, held-out
code prompts, temperature 1:

1. **acceptance inside the loop** (``alpha/<drafter>/k4/T1/loop``, ``tokens_per_pass/...``):
   :func:`speclib.lm.drafters.loop_acceptance` for every drafter, with its 95% bootstrap
   interval over prompts (numpy passes; the rate is not a timing, the same seeds give it
   again);
2. **isolated passes of the target** (``r<n>/target/isolated/<passes>/cpu``,
   ``t1_ms/target/...``): :func:`speclib.lm.transformer.strategy_pass_times` for the measured
   product choice (``numpy``), each strategy forced and the compiled pass, interleaved;
3. **wall-clock runs** (``speedup``, ``c``, ``r<k+1>`` in the loop, ``outside``,
   ``outside_plain``, ``t1_ms``, per drafter, for numpy and compiled passes):
   :func:`speclib.book.wallclock.wallclock_experiment`, plain and speculative decoding at
   every ``k`` on the same prompts, seeds and repetitions, interleaved; a speed-up is the
   median of the paired ratios with its middle half and a 95% bootstrap interval of the median;
4. **the layer stack of chapter 1** (``r<n>/stack/isolated/blocks/cpu``, the fitted line) and
   the small stack of chapter 17 (``small-stack``);
5. **serving a batch** (chapter 15): batched target passes over ``B`` requests
   (``t1_ms/target/B<b>/...``, ``r<n>/target/B<b>/...``), the draft's pass (``c/pair/B1/...``)
   and :func:`speclib.book.serving.serving_grid` (``speedup/pair/k<k>/B<b>/...`` with the range
   of the paired runs, ``tokens_per_s``, ``ms_per_token``, ``tokens_per_pass``, ``waste``).

Timings depend on everything else the machine runs: measure on a quiet machine, and the
provenance says what the load average was.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from speclib.book.record import BOOK_RECORD, median_interval, name, provenance, write_record  # noqa: E402
from speclib.book.wallclock import processor_summary, wallclock_experiment  # noqa: E402
from speclib.core.cost import fit_pass_cost, largest_cache_bytes, layer_stack, measure_pass_times  # noqa: E402
from speclib.lm import kernel  # noqa: E402
from speclib.lm.drafters import DRAFTER_NAMES, heldout_prompts, load_drafter, loop_acceptance  # noqa: E402
from speclib.lm.transformer import blas_threads, load_pair, strategy_pass_times  # noqa: E402

T = 1.0
STACK_TOKENS = (1, 2, 4, 5, 8, 16, 32, 64)
STACK_LAYERS: dict = {}  #: [width, layers] of each stack, filled in by stacks()


def rnd(x: float, digits: int = 4) -> float:
    return round(float(x), digits)


def acceptance(names, n_prompts: int, n_new: int, k: int = 4) -> dict:
    out = {}
    for drafter in names:
        m = loop_acceptance(drafter, "code", T, k=k, n_prompts=n_prompts, n_new=n_new)
        out[name("alpha", drafter, k=k, T=T, where="loop")] = {
            "value": rnd(m.rate), "low": rnd(m.low), "high": rnd(m.high), "n": len(m.per_prompt_verified),
            "interval": "95% bootstrap over prompts"}
        out[name("tokens_per_pass", drafter, k=k, T=T, where="loop")] = {
            "value": rnd(m.tokens_per_pass), "n": len(m.per_prompt_verified)}
        print(f"  alpha {drafter}: {m.rate:.3f} ({m.low:.3f} to {m.high:.3f})", flush=True)
    return out


def isolated(target, ns, repeats: int) -> dict:
    ways = [None, "full", "blocks", "rows", "transposed"]
    if kernel.available():
        ways += ["kernel", "compiled"]
    iso = strategy_pass_times(target, ways, ns, repeats=repeats, seed=0)
    out = {}
    for way, times in iso.items():
        passes = way or "numpy"
        t1 = times.median[0]
        out[name("t1_ms", "target", where="isolated", passes=passes, device="cpu")] = {
            "value": rnd(1e3 * t1), "n": int(times.seconds.shape[0])}
        q25, q75 = np.percentile(times.seconds / t1, [25, 75], axis=0)
        for j, n in enumerate(times.n_tokens):
            if n > 1:
                r = times.median[j] / t1
                out[name(f"r{n}", "target", where="isolated", passes=passes, device="cpu")] = {
                    "value": rnd(r), "q25": rnd(min(q25[j], r)), "q75": rnd(max(q75[j], r)),
                    "n": int(times.seconds.shape[0])}
    return out


def runs(names, compiled: bool, prompts, ks, reps: int, n_new: int, seed: int = 0) -> dict:
    passes = "compiled" if compiled else "numpy"
    target, _ = load_pair()
    out = {}
    for drafter_name in names:
        drafter = load_drafter(drafter_name, T, "code", target=target, compiled=compiled)
        t0 = time.perf_counter()
        run = wallclock_experiment(drafter.target, drafter, prompts, n_new=n_new, ks=ks, reps=reps, seed=seed)
        s = run.speedups()
        where = dict(where="loop", passes=passes, device="cpu")
        out[name("t1_ms", drafter_name, **where)] = {"value": rnd(1e3 * run.t1), "n": int(s.shape[1])}
        draft = run.draft_pass[1:]
        out[name("c", drafter_name, **where)] = {"value": rnd(np.nanmedian(draft) / run.t1),
                                                 "n": int(np.isfinite(draft).sum())}
        out[name("outside_plain", drafter_name, T=T, passes=passes, device="cpu")] = {
            "value": rnd(max(run.outside_per_step[0], 0.0)), "n": int(s.shape[1])}
        for i, k in enumerate(run.ks):
            if k == 0:
                continue
            med, low, high = median_interval(s[i], seed=int(k))
            q25, q75 = np.percentile(s[i], [25, 75])
            out[name("speedup", drafter_name, k=k, T=T, passes=passes, device="cpu")] = {
                "value": rnd(med), "low": rnd(min(low, med)), "high": rnd(max(high, med)),
                "q25": rnd(min(q25, med)), "q75": rnd(max(q75, med)), "n": int(s.shape[1]),
                "interval": "95% bootstrap of the median over runs"}
            out[name("outside", drafter_name, k=k, T=T, passes=passes, device="cpu")] = {
                "value": rnd(max(run.outside_per_step[i], 0.0)), "n": int(s.shape[1])}
            r = run.verify_ratio[i]
            if np.isfinite(r):  # Medusa past its heads verifies fewer tokens: no pass of k + 1
                out[name(f"r{k + 1}", drafter_name, **where)] = {"value": rnd(r), "n": int(s.shape[1])}
        best = int(run.ks[1 + np.argmax(np.median(s[1:], axis=1))])
        print(f"  {drafter_name} ({passes}): {time.perf_counter() - t0:.0f} s, highest median at k = {best}: "
              f"{np.median(s[run.ks.tolist().index(best)]):.2f}x", flush=True)
    return out


def stacks(max_seconds: float, quick: bool = False) -> dict:
    cache = largest_cache_bytes()
    d = 2048
    # more bytes than the largest cache holds (chapter 1's stack); a test run keeps four layers
    layers = 4 if quick else int(np.clip(np.ceil(1.25 * (cache or 2**28) / (8 * d * d)), 4, 32))
    out = {}
    STACK_LAYERS.update(stack=[d, layers], small_stack=[256, 2])
    for subject, weights, repeats, limit in (
            ("stack", layer_stack(d, layers, rng=0), 9, max_seconds),
            ("small-stack", layer_stack(256, 2, rng=0), 41, max_seconds / 6)):
        times = measure_pass_times(weights, STACK_TOKENS, repeats=repeats, rng=1, max_seconds=limit, blocked=True)
        where = dict(where="isolated", passes="blocks", device="cpu")
        t1 = times.median[0]
        n_rep = int(times.seconds.shape[0])
        out[name("weights_mib", subject)] = {"value": rnd(times.n_bytes / 2**20, 2)}
        out[name("t1_ms", subject, **where)] = {"value": rnd(1e3 * t1), "n": n_rep}
        q25, q75 = np.percentile(times.seconds / t1, [25, 75], axis=0)
        for j, n in enumerate(times.n_tokens):
            if n > 1:
                r = times.median[j] / t1
                out[name(f"r{n}", subject, **where)] = {"value": rnd(r), "q25": rnd(min(q25[j], r)),
                                                        "q75": rnd(max(q75[j], r)), "n": n_rep}
        fit = fit_pass_cost(times.n_tokens[1:], times.median[1:])
        out[name("fit_fixed_ms", subject, **where)] = {"value": rnd(1e3 * fit.fixed)}
        out[name("fit_per_token_ms", subject, **where)] = {"value": rnd(1e3 * fit.per_token)}
        print(f"  {subject}: {times.n_bytes / 2**20:.0f} MiB, t1 {1e3 * t1:.2f} ms, "
              f"r(5) {times.relative[list(times.n_tokens).index(5)]:.2f}", flush=True)
    return out


def numba_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("numba")
    except PackageNotFoundError:
        return None


def serving(batches, ks, n_new: int, repeats: int, pass_repeats: int) -> dict:
    from speclib.book import serving as sv

    target, draft = load_pair()
    where = dict(where="isolated", passes="numpy", device="cpu")
    ns = sorted({1} | {k + 1 for k in ks if k})
    times = sv.batched_pass_times(target, batches, ns, repeats=pass_repeats)
    draft_times = sv.batched_pass_times(draft, [1], [1], repeats=pass_repeats)
    out = {name("c", "pair", B=1, **where): {"value": rnd(draft_times.at(1, 1) / times.at(1, 1))}}
    for b in batches:
        out[name("t1_ms", "target", B=b, **where)] = {"value": rnd(1e3 * times.at(b, 1)), "n": pass_repeats}
        for n in ns[1:]:
            out[name(f"r{n}", "target", B=b, **where)] = {"value": rnd(times.ratio(b, n)), "n": pass_repeats}
    runs = sv.serving_grid(target, draft, batches, [0] + [k for k in ks if k], n_new=n_new, repeats=repeats)
    cond = dict(T=T, passes="numpy", device="cpu")
    for (b, k), (m, lo, hi) in sv.speedup_intervals(runs).items():
        out[name("speedup", "pair", k=k, B=b, **cond)] = {
            "value": rnd(m), "low": rnd(lo), "high": rnd(hi), "n": repeats,
            "interval": "range of the paired runs"}
    for r in sv.typical_runs(runs):
        out[name("tokens_per_s", "pair", k=r.k, B=r.batch_size, **cond)] = {"value": rnd(r.throughput, 1),
                                                                              "n": repeats}
        out[name("ms_per_token", "pair", k=r.k, B=r.batch_size, **cond)] = {"value": rnd(1e3 * r.time_per_token),
                                                                              "n": repeats}
        if r.k:
            loop = dict(k=r.k, B=r.batch_size, T=T, where="loop")
            out[name("tokens_per_pass", "pair", **loop)] = {"value": rnd(r.tokens_per_pass)}
            out[name("waste", "pair", **loop)] = {"value": rnd(r.waste)}
    print(f"  {len(runs)} batch runs", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(BOOK_RECORD), help="where to write the record (default: the book's)")
    parser.add_argument("--quick", action="store_true", help="a few seconds per part: a test of the script")
    parser.add_argument("--drafters", nargs="+", choices=DRAFTER_NAMES, default=list(DRAFTER_NAMES))
    parser.add_argument("--note", default="", help="what the provenance should say about the machine's state")
    args = parser.parse_args(argv)
    q = args.quick
    settings = {
        "domain": "code", "temperature": T, "threads": 1,
        "acceptance": {"k": 4, "n_prompts": 6 if q else 200, "n_new": 30 if q else 100, "prompt_chars": 40},
        "isolated": {"n_tokens": [1, 2, 3, 4, 5, 6, 7, 8, 9, 17], "repeats": 3 if q else 25, "prefix": 64},
        "runs": {"ks": [1, 2, 3, 4] if q else [1, 2, 3, 4, 5, 6, 7, 8], "n_prompts": 2 if q else 4,
                 "reps": 1 if q else 5, "n_new": 20 if q else 100, "prompt_chars": 40},
        "stack": {"n_tokens": list(STACK_TOKENS), "max_seconds": 1.0 if q else 12.0},
        "serving": {"batch_sizes": [1, 4] if q else [1, 2, 4, 8, 16, 32], "ks": [0, 1, 3] if q else [0, 1, 3, 6],
                    "n_new": 6 if q else 16, "repeats": 2 if q else 5, "pass_repeats": 3 if q else 15,
                    "prompt_chars": 32},
    }
    load_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    t0 = time.perf_counter()
    print(processor_summary(), flush=True)
    target, _ = load_pair()
    quantities: dict = {}
    with blas_threads(1):
        print("isolated passes of the target", flush=True)
        iso = settings["isolated"]
        quantities.update(isolated(target, tuple(iso["n_tokens"]), iso["repeats"]))
        print("acceptance inside the loop", flush=True)
        acc = settings["acceptance"]
        quantities.update(acceptance(args.drafters, acc["n_prompts"], acc["n_new"], acc["k"]))
        run = settings["runs"]
        prompts = heldout_prompts("code", run["n_prompts"], run["prompt_chars"])
        for compiled in ([False, True] if kernel.available() else [False]):
            print(f"wall-clock runs, {'compiled' if compiled else 'numpy'} passes", flush=True)
            quantities.update(runs(args.drafters, compiled, prompts, run["ks"], run["reps"], run["n_new"]))
        print("layer stacks", flush=True)
        quantities.update(stacks(settings["stack"]["max_seconds"], quick=q))
        settings["stack"].update(STACK_LAYERS)
        if "pair" in args.drafters:
            print("serving a batch", flush=True)
            sv = settings["serving"]
            quantities.update(serving(sv["batch_sizes"], sv["ks"], sv["n_new"], sv["repeats"], sv["pass_repeats"]))
    record = {
        "format": 1,
        "provenance": provenance(
            "benchmarks/record.py " + " ".join(argv if argv is not None else sys.argv[1:]), q,
            time.perf_counter() - t0, numba=numba_version(),
            load_average={"start": rnd(load_start, 2), "end": rnd(os.getloadavg()[0], 2)},
            largest_cache_mib=round((largest_cache_bytes() or 0) / 2**20), note=args.note),
        "settings": settings,
        "quantities": quantities,
    }
    write_record(args.out, record)
    print(f"{len(quantities)} quantities in {record['provenance']['seconds']:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

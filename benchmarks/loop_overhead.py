#!/usr/bin/env python3
"""The speculative loop's own cost per step, with speclib's own models.

    .venv/bin/python benchmarks/loop_overhead.py            # about half a minute
    .venv/bin/python benchmarks/loop_overhead.py --quick    # fewer repeats, noisier

For each pair, ``speculative_generate`` runs with a ``timings`` dict, which adds up the
seconds spent inside the target's and the draft's forward passes and the whole call's.
What is left, ``total - target - draft``, is the loop's bookkeeping: drafting and
verification logic, cache roll-backs, counters and the boundary checks of what the
plug-ins return.  Printed per step, and as a fraction of one target pass (the target's
seconds divided by its passes), the figure issue 20 bounds at 10%.

The best of several repeats (wall-clock, ``time.perf_counter``), since the machine is
shared.  Nothing is asserted: the tests check correctness, this script only measures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from speclib.core.decoding import speculative_generate  # noqa: E402
from speclib.core.proposers import PromptLookup  # noqa: E402
from speclib.lm.models import markov_pair  # noqa: E402
from speclib.lm.ngram import ngram_pair  # noqa: E402
from speclib.lm.transformer import blas_threads, load_pair  # noqa: E402

K = 4


def pairs() -> dict[str, tuple]:
    """(target, draft or proposer, prompt, tokens) for each measured set-up."""
    markov_q, markov_p = markov_pair(vocab_size=64, draft_noise=0.3, seed=0)
    ngram_q, ngram_p = ngram_pair("code")
    neural_q, neural_p = load_pair()
    prompt = np.arange(8) % 90
    return {
        "Markov V=64 (recomputing cache)": (markov_q, markov_p, [0], 2000),
        "n-gram 7/3 (recomputing cache)": (ngram_q, ngram_p, prompt, 1000),
        "transformer pair (key/value cache)": (neural_q, neural_p, prompt, 300),
        "transformer + prompt lookup": (neural_q, PromptLookup(), prompt, 300),
    }


def measure(target, draft, prompt, n_tokens: int, repeat: int) -> dict[str, float]:
    """Best-of-``repeat`` timings of one generation, per step."""
    best = None
    for seed in range(repeat):
        timings: dict = {}
        _, stats = speculative_generate(target, draft, prompt, n_tokens, K, seed, timings=timings)
        steps = stats.target_passes
        row = {
            "step_ms": 1e3 * timings["total"] / steps,
            "bookkeeping_ms": 1e3 * (timings["total"] - timings.get("target", 0.0) - timings.get("draft", 0.0))
            / steps,
            "target_pass_ms": 1e3 * timings["target"] / steps,
        }
        if best is None or row["bookkeeping_ms"] < best["bookkeeping_ms"]:
            best = row
    best["fraction"] = best["bookkeeping_ms"] / best["target_pass_ms"]
    return best


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args(argv)
    repeat = 2 if args.quick else 5
    print(f"speculative_generate, k = {K}, best of {repeat} runs (ms per step = per target pass)")
    print(f"{'pair':38s} {'step':>9s} {'target pass':>12s} {'bookkeeping':>12s} {'/ target pass':>14s}")
    with blas_threads(1):
        for name, (target, draft, prompt, n_tokens) in pairs().items():
            r = measure(target, draft, prompt, n_tokens, repeat)
            print(f"{name:38s} {r['step_ms']:8.3f}  {r['target_pass_ms']:11.3f}  {r['bookkeeping_ms']:11.3f}  "
                  f"{r['fraction']:13.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

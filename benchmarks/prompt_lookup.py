#!/usr/bin/env python3
"""Prompt lookup's cost per generated token, from 100 to 25,600 tokens.

    .venv/bin/python benchmarks/prompt_lookup.py            # about a minute
    .venv/bin/python benchmarks/prompt_lookup.py --quick    # up to 6,400 tokens

``speculative_generate`` with :class:`speclib.core.proposers.PromptLookup` as the proposer
and a cheap target (a Markov model over 16 tokens, whose text repeats itself often enough
for lookups to hit), for texts of 100, 400, ..., 25,600 tokens.  Printed: milliseconds per
generated token and the ratio to the 100-token figure.  ``PromptLookup`` indexes the
n-grams as the text grows, so the ratio should stay near 1 (linear in the text length).
For comparison, the same loop with a proposer that searches the whole text at every step
(``speclib.core.proposers.lookup_draft``, what ``PromptLookup`` did before) grows with the
text (quadratic overall).  Both proposers return the same drafts, so both runs emit the
same tokens.

Wall-clock (``time.perf_counter``), best of a few repeats on the shorter texts; nothing is
asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from speclib.core.decoding import speculative_generate  # noqa: E402
from speclib.core.proposers import Proposal, PromptLookup, lookup_draft  # noqa: E402
from speclib.lm.models import markov_pair  # noqa: E402

K = 4
LENGTHS = (100, 400, 1_600, 6_400, 25_600)


class SearchAfresh(PromptLookup):
    """The comparison: search the whole text at every step (``lookup_draft``)."""

    def propose(self, text, k, policy, choose, timings):
        tokens = lookup_draft(text, k, self.n_max, self.n_min) if k else np.zeros(0, dtype=np.int64)
        rows = np.zeros((tokens.size, self.vocab_size))
        rows[np.arange(tokens.size), tokens] = 1.0
        return Proposal(tokens, rows, 0)


def per_token_ms(target, proposer, n_tokens: int, repeat: int) -> tuple[float, np.ndarray]:
    best, tokens = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        tokens, _ = speculative_generate(target, proposer, [0], n_tokens, K, 0)
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best / n_tokens, tokens


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="stop at 6,400 tokens")
    args = parser.parse_args(argv)
    lengths = LENGTHS[:-1] if args.quick else LENGTHS
    target, _ = markov_pair(vocab_size=16, seed=0, concentration=0.1)
    print(f"speculative_generate with prompt lookup (n = 3..1), k = {K}, Markov target V = 16")
    print(f"{'tokens':>8s} {'indexed ms/token':>17s} {'x at 100':>9s} {'search-afresh ms/token':>23s} {'x at 100':>9s}")
    for proposer in (PromptLookup(), SearchAfresh()):  # warm up (imports, caches) before timing
        per_token_ms(target, proposer, 400, 1)
    base = {}
    for n in lengths:
        repeat = 5 if n <= 1_600 else 1
        indexed, a = per_token_ms(target, PromptLookup(), n, repeat)
        afresh, b = per_token_ms(target, SearchAfresh(), n, repeat)
        if not np.array_equal(a, b):
            raise SystemExit(f"the two proposers emitted different tokens at {n} tokens")
        base.setdefault("indexed", indexed)
        base.setdefault("afresh", afresh)
        print(f"{n:8,d} {indexed:17.4f} {indexed / base['indexed']:8.2f}x {afresh:23.4f} "
              f"{afresh / base['afresh']:8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

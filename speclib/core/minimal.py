"""Speculative sampling on one page: the paper's four steps and nothing else.

:func:`speculative_sample` is the algorithm as chapter 0 shows it, in the shape of the short
reference implementations: no caches, no policies, no statistics.  It draws its random
numbers in the order :func:`speclib.core.decoding.speculative_generate` draws them (one
``rng.random()`` per drafted token, per acceptance test, per correction and per bonus token,
tokens drawn by inverting the cumulative distribution), so for the same seed the two return
the same tokens; ``tests/test_minimal.py`` checks it.  The library's loop is this algorithm
with the parts that production needs plugged in (caches and their rollback, draft-length
policies, other proposers and verifiers, timings, counters).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .._validate import as_generator, as_int, as_tokens
from .proposers import check_model

__all__ = ["speculative_sample"]


def _draw(row: np.ndarray, rng: np.random.Generator) -> int:
    # Invert the cumulative distribution at one uniform number.
    cdf = np.cumsum(row)
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), len(row) - 1))


def speculative_sample(target: Callable, draft: Callable, prompt, n: int, k: int,
                       rng: np.random.Generator | int) -> np.ndarray:
    """Sample ``n`` tokens from ``target`` by speculative sampling with draft length ``k``.

    ``target`` and ``draft`` follow the model protocol (token ids of shape ``(m,)`` in,
    next-token distributions of shape ``(m, V)`` out).  Returns the ``n`` new tokens.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=8, draft_noise=0.3, seed=0)
    >>> speculative_sample(target, draft, [0], n=6, k=3, rng=1).shape
    (6,)
    """
    check_model(target, "target")
    check_model(draft, "draft")
    prompt = as_tokens(prompt, "prompt", target.vocab_size, allow_empty=False)
    n, k, rng = as_int(n, "n", minimum=0), as_int(k, "k", minimum=1), as_generator(rng)
    return _speculative_sample(target, draft, prompt.tolist(), n, k, rng)


def _speculative_sample(target, draft, text, n, k, rng):
    end = len(text) + n
    while len(text) < end:
        k_step = min(k, end - len(text))  # no more than still needed
        # 1. Draft: k tokens from p, one at a time, keeping each row.
        xs, p_rows = [], []
        for _ in range(k_step):
            p = draft(np.array(text + xs))[-1]
            xs.append(_draw(p, rng))
            p_rows.append(p)
        # 2. Verify: one target pass scores every draft and one more.
        q_rows = target(np.array(text + xs))[-(k_step + 1):]
        # 3. Keep x with probability min(1, q(x)/p(x)); at the first
        #    rejection draw from the residual max(0, q - p) / Z, stop.
        for i, x in enumerate(xs):
            if rng.random() < min(1.0, q_rows[i][x] / p_rows[i][x]):
                text.append(x)
                continue
            residual = np.maximum(q_rows[i] - p_rows[i], 0.0)
            text.append(_draw(residual / residual.sum(), rng))
            break
        else:
            # 4. Bonus: all drafts kept; the pass scored one more row.
            text.append(_draw(q_rows[k_step], rng))
    return np.array(text[end - n:end], dtype=np.int64)

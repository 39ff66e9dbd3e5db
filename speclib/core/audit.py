"""Auditing a decoder from the outside: sample it, count, and test against exact probabilities.

A speculative decoder is exact if its output follows the target distribution (after the
sampling controls the user asked for).  For a model pair small enough to enumerate, that
distribution is known exactly (:func:`speclib.core.exact.target_sequence_distribution`), so any
decoder, even one whose code we cannot read, can be audited as a black box:

1. :func:`sequence_counts` runs it many times from one prompt and counts each short output;
2. :func:`pooled_chi_square` tests the counts against the exact probabilities;
3. :func:`audit` does both and says whether the decoder passes at a stated level.

The test's power depends on the pair: a bug that only shows after a rejection needs a pair
whose drafts are often rejected, one that corrupts the context needs a model that reads more
than one token, and one in the sampling controls needs those controls switched on.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from .._validate import MAX_ENTRIES, as_distribution, as_generator, as_int, as_real, as_real_array
from .exact import MAX_SEQUENCES
from .stats import ChiSquareResult, _max_sequence_length, chi_square_test

#: The book's significance level for audits: a correct decoder fails once in a thousand runs.
AUDIT_LEVEL = 1e-3


def sequence_counts(
    decode: Callable[[int, np.random.Generator], np.ndarray],
    vocab_size: int,
    length: int,
    n_samples: int,
    rng: np.random.Generator | int,
) -> np.ndarray:
    """Run ``decode(length, rng)`` ``n_samples`` times and count each output sequence.

    Parameters
    ----------
    decode : callable
        ``decode(max_new_tokens, rng)`` returns the generated tokens, or a ``(tokens, stats)``
        pair as every decoding loop in speclib does.  The prompt is fixed inside it.
    vocab_size : int
    length : int
        Tokens per sample.
    n_samples : int
    rng : numpy.random.Generator or int
        One generator shared by all the samples, so they are independent.

    Returns
    -------
    ndarray of int, shape ``(vocab_size,) * length``, summing to ``n_samples``.

    Examples
    --------
    >>> from speclib import autoregressive_generate, markov_pair
    >>> target, _ = markov_pair(vocab_size=3, seed=0)
    >>> counts = sequence_counts(lambda n, rng: autoregressive_generate(target, [0], n, rng),
    ...                          3, 2, n_samples=50, rng=0)
    >>> counts.shape, int(counts.sum())
    ((3, 3), 50)
    """
    if not callable(decode):
        raise TypeError(f"decode: expected a callable decode(max_new_tokens, rng), got {type(decode).__name__}")
    vocab_size = as_int(vocab_size, "vocab_size", minimum=1, maximum=MAX_SEQUENCES,
                        why="one count per sequence")
    longest = _max_sequence_length(vocab_size)
    length = as_int(length, "length", minimum=1, maximum=longest,
                    why=f"more than {MAX_SEQUENCES} sequences of {vocab_size} tokens are too many to count")
    n_samples = as_int(n_samples, "n_samples", minimum=1, maximum=MAX_ENTRIES // length,
                       why=f"n_samples * length may not exceed {MAX_ENTRIES} generated tokens")
    rng = as_generator(rng)
    shape = (vocab_size,) * length
    counts = np.zeros(vocab_size**length, dtype=np.int64)
    for _ in range(n_samples):
        out = decode(length, rng)
        tokens = np.asarray(out[0] if isinstance(out, tuple) else out)
        if tokens.shape != (length,):
            raise ValueError(f"decode: returned {tokens.shape} tokens for max_new_tokens={length}")
        if tokens.dtype.kind not in "iu" or (tokens < 0).any() or (tokens >= vocab_size).any():
            raise ValueError(f"decode: returned {tokens.tolist()}, not token ids in [0, {vocab_size})")
        counts[np.ravel_multi_index(tuple(tokens), shape)] += 1
    return counts.reshape(shape)


def pooled_chi_square(counts: np.ndarray, probs: np.ndarray, min_expected: float = 5.0) -> ChiSquareResult:
    """Pearson's test of ``counts`` against ``probs``, with rare outcomes pooled.

    The chi-square approximation needs expected counts of about 5 or more; one draw of an
    outcome expected 0.01 times would alone add about 100 to the statistic and reject a
    correct decoder.  So the rarest outcomes of positive probability are merged into one
    bin until it reaches ``min_expected``.  Outcomes of probability 0 stay apart: a single
    draw of one still gives p-value 0 (see :func:`speclib.core.stats.chi_square_test`).

    Parameters
    ----------
    counts : array_like of int
        Observed counts (any shape).
    probs : array_like, same shape
        Exact probabilities (summing to 1).
    min_expected : float > 0, default 5

    Returns
    -------
    speclib.core.stats.ChiSquareResult, on the pooled outcomes.

    Examples
    --------
    >>> pooled_chi_square([50, 49, 1], [0.5, 0.499, 0.001]).dof   # the two rare cells become one
    1
    """
    counts_arr = as_real_array(counts, "counts", "an array of counts").ravel()
    if not np.all(np.isfinite(counts_arr)) or (counts_arr < 0).any() or np.any(counts_arr != np.round(counts_arr)):
        raise ValueError("counts: must be non-negative whole numbers")
    probs_arr = as_distribution(np.reshape(as_real_array(probs, "probs", "an array of probabilities"), -1),
                                "probs", ndim=1)
    if counts_arr.shape != probs_arr.shape:
        raise ValueError(f"probs: {probs_arr.size} outcomes, but counts has {counts_arr.size}")
    if np.shape(counts) != np.shape(probs):
        raise ValueError(f"probs: shape {np.shape(probs)} differs from the shape of counts {np.shape(counts)}")
    min_expected = as_real(min_expected, "min_expected", low=0.0)
    total = counts_arr.sum()

    positive = np.flatnonzero(probs_arr > 0)
    by_size = positive[np.argsort(probs_arr[positive], kind="stable")]
    expected = probs_arr[by_size] * total
    # Pool the rarest outcomes until the pool itself is expected min_expected times (or
    # until every remaining outcome is: whichever takes more).
    n_pool = int(np.searchsorted(np.cumsum(expected), min_expected)) + 1
    n_pool = max(n_pool, int(np.sum(expected < min_expected)))
    n_pool = min(n_pool, by_size.size)
    if n_pool < 2:
        return chi_square_test(counts_arr.astype(np.int64), probs_arr)
    pooled, kept = by_size[:n_pool], by_size[n_pool:]
    zero = np.flatnonzero(probs_arr == 0)
    new_counts = np.concatenate([[counts_arr[pooled].sum()], counts_arr[kept], counts_arr[zero]])
    new_probs = np.concatenate([[probs_arr[pooled].sum()], probs_arr[kept], probs_arr[zero]])
    if (new_probs > 0).sum() < 2:  # everything was rare: nothing left to compare
        raise ValueError(f"counts: {int(total)} draws are too few for a test at min_expected={min_expected:g}")
    return chi_square_test(new_counts.astype(np.int64), new_probs / new_probs.sum())


class AuditResult(NamedTuple):
    """The verdict of :func:`audit`."""

    passed: bool  #: True when the p-value is at least the level
    pvalue: float
    level: float
    impossible: int  #: draws the reference gives probability 0 (any one fails the audit)
    counts: np.ndarray  #: the observed counts, shape (V,) * length


def audit(
    decode: Callable[[int, np.random.Generator], np.ndarray],
    reference: np.ndarray,
    n_samples: int,
    rng: np.random.Generator | int,
    level: float = AUDIT_LEVEL,
) -> AuditResult:
    """Sample ``decode`` and test its outputs against the exact ``reference`` distribution.

    Parameters
    ----------
    decode : callable
        As in :func:`sequence_counts`.
    reference : array_like, shape ``(V,) * length``
        The distribution a correct decoder follows, for example
        ``speclib.core.exact.target_sequence_distribution(warp(target, ...), prompt, length)``.
    n_samples : int
    rng : numpy.random.Generator or int
    level : float in (0, 1), default :data:`AUDIT_LEVEL`
        The decoder fails when the pooled chi-square p-value falls below it.

    Returns
    -------
    AuditResult

    Examples
    --------
    >>> from speclib import markov_pair, speculative_generate
    >>> from speclib.core.exact import target_sequence_distribution
    >>> target, draft = markov_pair(vocab_size=3, draft_noise=0.5, seed=0)
    >>> reference = target_sequence_distribution(target, [0], 2)
    >>> audit(lambda n, rng: speculative_generate(target, draft, [0], n, 2, rng),
    ...       reference, n_samples=500, rng=0).passed
    True
    """
    reference = as_real_array(reference, "reference", "an array of sequence probabilities")
    as_distribution(reference.reshape(-1), "reference", ndim=1)
    if not callable(decode):
        raise TypeError(f"decode: expected a callable decode(max_new_tokens, rng), got {type(decode).__name__}")
    if reference.ndim < 1 or len(set(reference.shape)) != 1:
        raise ValueError(f"reference: expected shape (V,) * length, got {reference.shape}")
    level = as_real(level, "level", low=0.0, high=1.0)
    counts = sequence_counts(decode, reference.shape[0], reference.ndim, n_samples, rng)
    result = pooled_chi_square(counts, reference)
    return AuditResult(bool(result.pvalue >= level), result.pvalue, level, result.impossible, counts)

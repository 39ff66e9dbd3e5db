"""Statistics for checking the book's claims by sampling: distances, chi-square, intervals.

The exact enumerator (:mod:`speclib.core.exact`) proves that speculative decoding follows the
target on small problems; this module lets a chapter check the same claim the way one
checks a real decoder, from samples:

* :func:`sequence_counts` draws many short continuations with
  :func:`speclib.core.decoding.speculative_generate` and counts each sequence;
* :func:`chi_square_test` compares such counts with the exact probabilities;
* :func:`mean_confidence_interval` puts a t-interval around a simulated mean, such as the
  tokens emitted per target pass; :func:`batch_means_ratio` one around a ratio of counts
  gathered step by step, such as accepted over verified drafts;
* :func:`total_variation_distance` measures how far apart two distributions are.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
from scipy import stats as _scipy_stats

from .._validate import (MAX_DRAFT_LENGTH, MAX_ENTRIES, as_bool, as_distribution, as_generator, as_int, as_real,
                         as_real_array, as_tokens)
from .decoding import _check_model, speculative_generate
from .exact import MAX_SEQUENCES
from .sampling import Verification, verify


def total_variation_distance(a: np.ndarray, b: np.ndarray) -> float | np.ndarray:
    """``TV(a, b) = (1/2) sum_x |a(x) - b(x)|``, on the last axis.

    The largest difference between the probabilities that ``a`` and ``b`` give to any one
    event; 0 for equal distributions, 1 for distributions with disjoint supports.

    Parameters
    ----------
    a, b : array_like, shape (..., V)
        Probability distributions (rows summing to 1) of the same shape.

    Returns
    -------
    float or ndarray of shape (...)

    Examples
    --------
    >>> total_variation_distance([0.5, 0.5, 0.0], [0.25, 0.25, 0.5])
    0.5
    """
    a = as_distribution(a, "a")
    b = as_distribution(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    tv = 0.5 * np.abs(a - b).sum(axis=-1)
    return float(tv) if tv.ndim == 0 else tv


class ChiSquareResult(NamedTuple):
    """Pearson's goodness-of-fit test of observed counts against exact probabilities."""

    statistic: float  #: Pearson's X^2 (inf when a probability-0 outcome was observed)
    dof: int  #: degrees of freedom: outcomes with positive probability, minus one
    pvalue: float  #: P(X^2 >= statistic) under the null hypothesis (0.0 for an impossible count)
    impossible: int  #: how many draws fell on outcomes of probability 0
    min_expected: float  #: the smallest expected count among outcomes of positive probability


def chi_square_test(counts: np.ndarray, probs: np.ndarray, pool_below: float = 5.0) -> ChiSquareResult:
    """Test whether ``counts`` could have been drawn from ``probs``.

    Outcomes of probability 0 take no part in Pearson's statistic; if any draw landed on
    one, the sample cannot come from ``probs`` and the p-value is 0.  The chi-square
    approximation is fair when every expected count is at least about 5, so outcomes whose
    expected count is below ``pool_below`` are merged into one cell first
    (``min_expected`` reports the smallest expected count that remains).

    Parameters
    ----------
    counts : array_like of non-negative int, any shape
        How often each outcome was observed (at least one draw in all).
    probs : array_like, same shape as ``counts``
        The exact probability of each outcome (summing to 1).
    pool_below : float, default 5.0
        Outcomes expected fewer times than this are pooled into a single cell (0: no pooling).

    Returns
    -------
    ChiSquareResult

    Raises
    ------
    ValueError
        If the shapes differ, ``counts`` holds negative or fractional values or no draw at
        all, ``probs`` is not a distribution, or fewer than two outcomes have positive
        probability (nothing to test).

    Examples
    --------
    >>> result = chi_square_test([52, 48], [0.5, 0.5])
    >>> result.dof, round(result.pvalue, 3)
    (1, 0.689)
    >>> chi_square_test([50, 49, 1], [0.5, 0.5, 0.0]).pvalue
    0.0
    """
    counts_arr = np.asarray(counts)
    if counts_arr.dtype.kind not in "iuf":
        raise TypeError(f"counts: expected an array of non-negative integers, got dtype {counts_arr.dtype}")
    counts_arr = counts_arr.astype(float).ravel()
    if not np.all(np.isfinite(counts_arr)) or (counts_arr < 0).any() or np.any(counts_arr != np.round(counts_arr)):
        raise ValueError("counts: must be non-negative whole numbers")
    total = counts_arr.sum()
    if total == 0:
        raise ValueError("counts: no draw at all (the counts sum to 0)")
    if np.shape(probs) != np.shape(counts):
        raise ValueError(f"probs: shape {np.shape(probs)} differs from the shape of counts {np.shape(counts)}")
    probs_arr = as_distribution(np.reshape(probs, -1), "probs", ndim=1)

    pool_below = as_real(pool_below, "pool_below", low=0.0)

    possible = probs_arr > 0
    expected = probs_arr[possible] * total
    observed = counts_arr[possible]
    rare = expected < pool_below
    if rare.sum() > 1:  # merge the rare outcomes into one cell
        expected = np.append(expected[~rare], expected[rare].sum())
        observed = np.append(observed[~rare], observed[rare].sum())
    if expected.size < 2:
        raise ValueError("probs: fewer than two cells with positive probability (after pooling the rare "
                         "outcomes); there is nothing to test")
    impossible = int(counts_arr[~possible].sum())
    dof = int(expected.size) - 1
    if impossible:
        return ChiSquareResult(float("inf"), dof, 0.0, impossible, float(expected.min()))
    statistic = float(((observed - expected) ** 2 / expected).sum())
    pvalue = float(_scipy_stats.chi2.sf(statistic, dof))
    return ChiSquareResult(statistic, dof, pvalue, 0, float(expected.min()))


def sequence_counts(
    target: Callable,
    draft: Callable,
    prefix: np.ndarray,
    length: int,
    k: int,
    n_samples: int,
    rng: np.random.Generator | int,
    *,
    bonus: bool = True,
    verifier: Callable[..., Verification] = verify,
) -> np.ndarray:
    """Count the continuations that speculative decoding samples after ``prefix``.

    Runs :func:`speclib.core.decoding.speculative_generate` ``n_samples`` times, each time for
    ``length`` new tokens, and counts how often each sequence came out.  The result has the
    shape of :func:`speclib.core.exact.target_sequence_distribution`, so the two can go straight
    into :func:`chi_square_test`.

    Parameters
    ----------
    target, draft : model
        Models following the protocol of :mod:`speclib.lm.models`.
    prefix : array_like of int
        The prompt (at least one token).
    length : int
        Tokens per sample (``V ** length`` may not exceed ``speclib.core.exact.MAX_SEQUENCES``).
    k : int
        Draft length.
    n_samples : int
        Number of independent samples.
    rng : numpy.random.Generator or int
    bonus, verifier :
        Passed to :func:`speclib.core.decoding.speculative_generate`; ``verifier`` can be a
        faulty one from :mod:`speclib.book.broken`.

    Returns
    -------
    ndarray of int, shape ``(V,) * length``, summing to ``n_samples``.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=3, draft_noise=0.5, seed=0)
    >>> counts = sequence_counts(target, draft, [0], 2, k=2, n_samples=100, rng=0)
    >>> counts.shape, int(counts.sum())
    ((3, 3), 100)
    """
    vocab = _check_model(target, "target")
    prefix = as_tokens(prefix, "prefix", vocab, allow_empty=False)
    longest = _max_sequence_length(vocab)
    length = as_int(length, "length", minimum=1, maximum=longest,
                    why=f"more than {MAX_SEQUENCES} sequences of {vocab} tokens are too many to count")
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    n_samples = as_int(n_samples, "n_samples", minimum=1, maximum=MAX_ENTRIES // length,
                       why=f"n_samples * length may not exceed {MAX_ENTRIES} generated tokens")
    bonus = as_bool(bonus, "bonus")
    if not callable(verifier):
        raise TypeError(f"verifier: expected a function with the signature of verify, got {verifier!r}")
    rng = as_generator(rng)
    counts = np.zeros(vocab**length, dtype=np.int64)
    shape = (vocab,) * length
    for _ in range(n_samples):
        tokens, _ = speculative_generate(target, draft, prefix, length, k, rng, bonus=bonus, verifier=verifier)
        counts[np.ravel_multi_index(tuple(tokens), shape)] += 1
    return counts.reshape(shape)


def _max_sequence_length(vocab_size: int) -> int:
    """The longest sequence length whose ``vocab_size ** length`` outcomes stay within MAX_SEQUENCES
    (computed without building ``vocab_size ** length`` for a huge length)."""
    if vocab_size < 2:
        return MAX_ENTRIES
    length = 0
    while vocab_size ** (length + 1) <= MAX_SEQUENCES:
        length += 1
    return length


#: The highest confidence level an interval is computed at: beyond it ``0.5 + level / 2`` is too
#: close to 1 for the t quantile to stay finite in floating point.
MAX_LEVEL = 1 - 1e-9


class ConfidenceInterval(NamedTuple):
    """A sample mean and a two-sided confidence interval around it."""

    mean: float
    low: float
    high: float
    level: float


def mean_confidence_interval(samples: np.ndarray, level: float = 0.95) -> ConfidenceInterval:
    """Student-t confidence interval for the mean of independent samples.

    Parameters
    ----------
    samples : array_like of real, shape (n,), n >= 2
        Independent draws (for example the tokens emitted by each speculative step).
    level : float in (0, 1), default 0.95
        Coverage of the interval.

    Returns
    -------
    ConfidenceInterval
        ``(mean, low, high, level)``.  When every sample is equal the interval has width 0.

    Examples
    --------
    >>> ci = mean_confidence_interval([1, 2, 3, 4, 5])
    >>> ci.mean, round(ci.low, 3), round(ci.high, 3)
    (3.0, 1.037, 4.963)
    """
    arr = as_real_array(samples, "samples")
    if arr.ndim != 1:
        raise ValueError(f"samples: expected a 1-D array, got shape {arr.shape}")
    if arr.size < 2:
        raise ValueError(f"samples: need at least 2 samples for an interval, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("samples: contains NaN or an infinite value")
    level = as_real(level, "level", low=0.0, high=1.0)
    if level in (0.0, 1.0):
        raise ValueError(f"level: must lie strictly between 0 and 1, got {level}")
    if level > MAX_LEVEL:
        raise ValueError(f"level: must be at most {MAX_LEVEL} (closer to 1, the interval's bounds are infinite "
                         f"in floating point), got {level}")
    mean = float(arr.mean())
    sem = float(arr.std(ddof=1) / np.sqrt(arr.size))
    half = float(_scipy_stats.t.ppf(0.5 + level / 2, arr.size - 1)) * sem
    return ConfidenceInterval(mean, mean - half, mean + half, level)


def batch_means_ratio(numerators: np.ndarray, denominators: np.ndarray, batches: int = 10,
                      level: float = 0.95) -> ConfidenceInterval:
    """A ratio of totals, ``sum(numerators) / sum(denominators)``, with a batch-means interval.

    For counts gathered step by step (accepted and verified drafts per step of a decoding
    loop), successive steps are not independent, but stretches of many steps nearly are.
    The steps, in order, are cut into ``batches`` contiguous batches holding about equal
    shares of the denominator; each batch's ratio is one sample, and the interval is
    Student's t over those samples (:func:`mean_confidence_interval`, ``batches - 1`` degrees
    of freedom) around the pooled ratio.

    Parameters
    ----------
    numerators, denominators : array_like of non-negative real, shape (n,)
        Per step: for instance accepted drafts, and verified drafts.
    batches : int, default 10
        At least 2; every batch must hold some denominator.
    level : float in (0, 1), default 0.95

    Returns
    -------
    ConfidenceInterval
        ``mean`` is the pooled ratio, ``low``/``high`` the interval (half-width from the batches).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> verified = rng.integers(1, 5, 2000)
    >>> accepted = rng.binomial(verified, 0.6)
    >>> ci = batch_means_ratio(accepted, verified)
    >>> ci.low < 0.6 < ci.high, round(ci.high - ci.low, 2) < 0.05
    (True, True)
    """
    num = as_real_array(numerators, "numerators")
    den = as_real_array(denominators, "denominators")
    if num.ndim != 1 or den.shape != num.shape:
        raise ValueError(f"denominators: expected the shape of numerators, 1-D {num.shape}, got {den.shape}")
    if not (np.isfinite(num).all() and np.isfinite(den).all()) or (num < 0).any() or (den < 0).any():
        raise ValueError("numerators: counts must be finite and non-negative (both arrays)")
    batches = as_int(batches, "batches", minimum=2)
    total = den.sum()
    if total <= 0:
        raise ValueError("denominators: sum to 0; there is no ratio")
    # batch b holds the steps whose cumulative denominator (at the step's middle) falls in its share
    middle = np.cumsum(den) - den / 2
    which = np.minimum((middle / total * batches).astype(np.int64), batches - 1)
    per_num = np.bincount(which, weights=num, minlength=batches)
    per_den = np.bincount(which, weights=den, minlength=batches)
    if (per_den <= 0).any():
        raise ValueError(f"batches: {batches} batches leave one without any denominator; use fewer")
    ratio = float(num.sum() / total)
    ci = mean_confidence_interval(per_num / per_den, level)
    half = (ci.high - ci.low) / 2
    return ConfidenceInterval(ratio, ratio - half, ratio + half, ci.level)

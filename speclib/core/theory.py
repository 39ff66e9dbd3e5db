"""Closed-form theory of speculative decoding under independent acceptances.

If every drafted token is accepted independently with the same probability ``alpha``
(true when the draft and target distributions do not depend on the context, as in the
reference article's simulation), the number of tokens one step emits is a truncated
geometric variable, and everything below follows from it (Leviathan et al., 2023).

``alpha`` may be a float or an array; ``k`` is the draft length and ``c`` the cost of one
draft pass relative to one target pass.  The formulas are exact at ``alpha = 0`` and
``alpha = 1`` (no division by ``1 - alpha``).
"""

from __future__ import annotations

import warnings

import numpy as np

from .._validate import MAX_DRAFT_LENGTH, as_int, as_probability_array, as_real


def _scalar_or_array(x: np.ndarray) -> float | np.ndarray:
    return float(x) if np.ndim(x) == 0 else x


def expected_tokens_per_pass(alpha: float | np.ndarray, k: int) -> float | np.ndarray:
    """Expected tokens per target pass: ``(1 - alpha**(k+1)) / (1 - alpha)``.

    Written as the sum ``1 + alpha + ... + alpha**k``, which equals ``k + 1`` at
    ``alpha = 1`` and 1 at ``alpha = 0``.

    Examples
    --------
    >>> expected_tokens_per_pass(0.5, 2)
    1.75
    >>> expected_tokens_per_pass(1.0, 4)
    5.0
    """
    alpha = as_probability_array(alpha, "alpha")
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    powers = alpha[..., None] ** np.arange(k + 1)
    return _scalar_or_array(powers.sum(axis=-1))


def tokens_per_step_pmf(alpha: float, k: int) -> np.ndarray:
    """Probability of emitting ``n = 1, ..., k+1`` tokens in one step.

    ``P(n) = alpha**(n-1) * (1 - alpha)`` for ``n <= k`` (``n - 1`` acceptances, then a
    rejection and its correction) and ``P(k+1) = alpha**k`` (all accepted, plus the bonus).

    Returns
    -------
    ndarray of shape (k + 1,); entry ``n - 1`` is ``P(n)``.

    Examples
    --------
    >>> tokens_per_step_pmf(0.5, 2)
    array([0.5 , 0.25, 0.25])
    """
    alpha = float(as_probability_array(alpha, "alpha"))
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    pmf = alpha ** np.arange(k + 1) * (1.0 - alpha)
    pmf[k] = alpha**k
    return pmf


def tokens_per_step_variance(alpha: float, k: int) -> float:
    """Variance of the number of tokens one step emits (from :func:`tokens_per_step_pmf`)."""
    pmf = tokens_per_step_pmf(alpha, k)
    n = np.arange(1, k + 2)
    mean = pmf @ n
    return float(pmf @ (n - mean) ** 2)


def speedup_in_passes(alpha: float | np.ndarray, k: int, c: float) -> float | np.ndarray:
    """The idealised speed-up, counted in target passes (Leviathan et al., eq. for T).

    ``(1 - alpha**(k+1)) / ((1 - alpha) (k c + 1))``: tokens per step divided by the cost
    of a step in target passes (``k`` draft passes at relative cost ``c`` and one target
    pass), taking a target pass over ``k + 1`` tokens to cost the same as one over a single
    token and nothing else to cost time.  It is a wall-clock speed-up only where both hold;
    with a measured pass ratio ``r(k+1)`` the denominator becomes ``k c + r(k+1)``
    (:func:`speclib.lm.transformer.speedup_with_costs`).  ``k = 0`` means plain decoding
    and gives exactly 1.

    Examples
    --------
    >>> round(speedup_in_passes(0.8, 5, 0.0), 2)
    3.69
    """
    c = as_real(c, "c", low=0.0)
    k = as_int(k, "k", minimum=0, maximum=MAX_DRAFT_LENGTH)
    if k == 0:
        return _scalar_or_array(np.ones_like(as_probability_array(alpha, "alpha")))
    return expected_tokens_per_pass(alpha, k) / (k * c + 1.0)


def walltime_speedup(alpha: float | np.ndarray, k: int, c: float) -> float | np.ndarray:
    """The former name of :func:`speedup_in_passes`, kept so that existing code runs.

    The name said "wall time" for a speed-up counted in target passes; it warns and
    returns exactly what :func:`speedup_in_passes` returns.
    """
    warnings.warn("walltime_speedup is now speedup_in_passes (the speed-up it computes is counted in "
                  "target passes, not wall-clock time)", DeprecationWarning, stacklevel=2)
    return speedup_in_passes(alpha, k, c)


def optimal_k(alpha: float, c: float, k_max: int = 64) -> int:
    """The draft length in ``1 .. k_max`` with the largest :func:`speedup_in_passes`.

    Returns 0 when no draft length beats plain decoding.  That happens exactly when
    ``alpha <= c``: each extra draft pass costs ``c`` and adds at most ``alpha`` expected
    tokens, so the break-even depends on the cost ratio, not on a fixed acceptance level.
    Ties go to the shorter draft.

    Examples
    --------
    >>> optimal_k(0.8, 0.05)
    8
    >>> optimal_k(0.3, 0.4)
    0
    """
    alpha = float(as_probability_array(alpha, "alpha"))
    c = as_real(c, "c", low=0.0)
    k_max = as_int(k_max, "k_max", minimum=1, maximum=MAX_DRAFT_LENGTH)
    ks = np.arange(1, k_max + 1)
    speedups = np.array([speedup_in_passes(alpha, int(k), c) for k in ks])
    best = int(np.argmax(speedups))
    return int(ks[best]) if speedups[best] > 1.0 + 1e-12 else 0


def operations_factor(alpha: float, k: int, c_hat: float) -> float:
    """Factor by which total arithmetic grows (Leviathan et al., Table 1's "operations").

    ``(1 - alpha) (k c_hat + k + 1) / (1 - alpha**(k+1))``, with ``c_hat`` the draft's
    arithmetic per token relative to the target's: the target scores ``k + 1`` positions
    per step whether or not they are kept.
    """
    c_hat = as_real(c_hat, "c_hat", low=0.0)
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    return float((k * c_hat + k + 1) / expected_tokens_per_pass(alpha, k))

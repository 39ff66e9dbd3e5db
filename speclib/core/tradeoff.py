"""When speculation pays: speed-up against draft length, and the break-even lines.

Under the cost model of :func:`speclib.core.theory.speedup_in_passes` (a draft pass costs ``c``
target passes, a target pass over ``k + 1`` positions costs one), a step with ``k`` drafts
costs ``1 + k c`` and emits ``1 + alpha + ... + alpha**k`` tokens on average.  So

* ``k`` drafts beat plain decoding exactly when ``alpha + ... + alpha**k > k c``
  (:func:`break_even_alpha`, :func:`break_even_c`);
* *some* ``k`` beats it exactly when ``alpha > c``: the first draft adds ``alpha`` tokens
  for a cost ``c``, and every later one adds less.

There is no acceptance rate below which speculation fails whatever the hardware: the
threshold moves with ``c`` and with ``k``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from .._validate import MAX_DRAFT_LENGTH, as_int, as_probability_array, as_real, as_real_array
from .theory import expected_tokens_per_pass, speedup_in_passes


def optimal_k_grid(alphas: np.ndarray, costs: np.ndarray, k_max: int = 64) -> np.ndarray:
    """:func:`speclib.core.theory.optimal_k` for every pair of a grid of ``alphas`` and ``costs``.

    Same rule (the draft length in ``1 .. k_max`` with the largest speed-up, ties to the
    shorter one, 0 when none beats plain decoding), computed for whole rows at once so that a
    map over the ``(alpha, c)`` plane takes milliseconds.

    Parameters
    ----------
    alphas : array_like, shape (A,)
        Acceptance rates in [0, 1].
    costs : array_like, shape (C,)
        Cost ratios, at least 0.
    k_max : int, default 64

    Returns
    -------
    ndarray of int, shape (C, A); entry ``[i, j]`` is ``optimal_k(alphas[j], costs[i], k_max)``.

    Examples
    --------
    >>> optimal_k_grid([0.3, 0.8], [0.05, 0.4])
    array([[2, 8],
           [0, 2]])
    """
    alphas = as_probability_array(alphas, "alphas")
    costs = as_real_array(costs, "costs", "an array of cost ratios")
    if alphas.ndim != 1 or costs.ndim != 1:
        raise ValueError(f"alphas and costs: expected 1-D arrays, got shapes {alphas.shape} and {costs.shape}")
    if not np.all(np.isfinite(costs)) or (costs < 0).any():
        raise ValueError("costs: must be finite and >= 0")
    k_max = as_int(k_max, "k_max", minimum=1, maximum=MAX_DRAFT_LENGTH)
    ks = np.arange(1, k_max + 1)
    tokens = np.array([expected_tokens_per_pass(alphas, int(k)) for k in ks]).reshape(k_max, -1)  # (K, A)
    speedups = tokens[None, :, :] / (ks[None, :, None] * costs[:, None, None] + 1.0)  # (C, K, A)
    best = np.argmax(speedups, axis=1)  # first maximum: ties go to the shorter draft
    top = np.take_along_axis(speedups, best[:, None, :], axis=1)[:, 0, :]
    return np.where(top > 1.0 + 1e-12, ks[best], 0)


def speedup_curve(alpha: float, c: float, k_max: int) -> np.ndarray:
    """Wall-clock speed-up for every draft length ``k = 0, 1, ..., k_max``.

    Entry ``k`` is :func:`speclib.core.theory.speedup_in_passes` ``(alpha, k, c)``; entry 0 is
    plain decoding (1.0).

    Examples
    --------
    >>> speedup_curve(0.8, 0.1, 3).round(3)
    array([1.   , 1.636, 2.033, 2.271])
    """
    alpha = float(as_probability_array(alpha, "alpha"))
    c = as_real(c, "c", low=0.0)
    k_max = as_int(k_max, "k_max", minimum=1, maximum=MAX_DRAFT_LENGTH)
    return np.array([speedup_in_passes(alpha, k, c) for k in range(k_max + 1)])


def break_even_c(alpha: float | np.ndarray, k: int) -> float | np.ndarray:
    """The largest cost ratio at which ``k`` drafts still do no worse than plain decoding.

    Solves ``speedup_in_passes(alpha, k, c) = 1``: ``(alpha + alpha**2 + ... + alpha**k) / k``,
    the average number of extra tokens per draft pass.  For ``k = 1`` it is ``alpha`` itself.
    Speculation with ``k`` drafts pays for every smaller ``c``.

    Examples
    --------
    >>> break_even_c(0.5, 1)
    0.5
    >>> round(break_even_c(0.3, 4), 4)
    0.1063
    >>> break_even_c(np.array([0.0, 1.0]), 4)
    array([0., 1.])
    """
    alpha = as_probability_array(alpha, "alpha")
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    out = (np.asarray(expected_tokens_per_pass(alpha, k)) - 1.0) / k
    return float(out) if np.ndim(out) == 0 else out


def break_even_alpha(k: int, c: float) -> float:
    """The smallest acceptance rate at which ``k`` drafts do no worse than plain decoding.

    Solves ``alpha + alpha**2 + ... + alpha**k = k c`` for ``alpha`` in ``[0, 1]`` (the left
    side increases with ``alpha``).  It is 0 when ``c = 0``, equals ``c`` for ``k = 1`` and
    grows with ``k``: a longer draft needs a better draft.

    Returns
    -------
    float in [0, 1], or ``math.inf`` when ``c > 1`` (then even a perfect draft loses).

    Examples
    --------
    >>> break_even_alpha(1, 0.2)
    0.2
    >>> round(break_even_alpha(4, 0.1063), 3)
    0.3
    """
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    c = as_real(c, "c", low=0.0)
    if c > 1.0:
        return math.inf
    if c == 0.0:
        return 0.0

    def gain(alpha: float) -> float:
        return float(expected_tokens_per_pass(alpha, k)) - 1.0 - k * c

    return 1.0 if gain(1.0) <= 0.0 else float(brentq(gain, 0.0, 1.0, xtol=1e-14))

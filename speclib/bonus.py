"""What the bonus token is worth: tokens per step with and without it.

When all ``k`` drafts survive, the target pass has already produced the distribution of
position ``k + 1``, and sampling one token from it is free.  Turning that off (``bonus=False``
in :func:`speclib.sampling.verify`) leaves the output distribution exactly the target's; it
only removes one token from the steps in which every draft was accepted, which happen with
probability ``alpha**k`` under independent acceptances.  The formulas with the bonus are in
:mod:`speclib.theory`; these are their counterparts without it.
"""

from __future__ import annotations

import numpy as np

from ._validate import as_int, as_probability_array
from .theory import expected_tokens_per_pass


def tokens_per_step_pmf_without_bonus(alpha: float, k: int) -> np.ndarray:
    """Probability of emitting ``n = 1, ..., k`` tokens in one step when the bonus is off.

    ``P(n) = alpha**(n-1) * (1 - alpha)`` for ``n < k`` (``n - 1`` acceptances, then a
    rejection and its correction) and ``P(k) = alpha**(k-1)``: either the last draft is
    rejected and corrected, or it is kept and nothing is added.

    Returns
    -------
    ndarray of shape (k,); entry ``n - 1`` is ``P(n)``.

    Examples
    --------
    >>> tokens_per_step_pmf_without_bonus(0.5, 3)
    array([0.5 , 0.25, 0.25])
    >>> tokens_per_step_pmf_without_bonus(0.9, 1)   # k = 1 without bonus: always one token
    array([1.])
    """
    alpha = float(as_probability_array(alpha, "alpha"))
    k = as_int(k, "k", minimum=1)
    pmf = alpha ** np.arange(k) * (1.0 - alpha)
    pmf[k - 1] = alpha ** (k - 1)
    return pmf


def expected_tokens_per_pass_without_bonus(alpha: float | np.ndarray, k: int) -> float | np.ndarray:
    """Expected tokens per target pass without the bonus: ``1 + alpha + ... + alpha**(k-1)``.

    Exactly ``alpha**k`` less than :func:`speclib.theory.expected_tokens_per_pass`: the
    bonus token is emitted in the steps where all ``k`` drafts survive.

    Examples
    --------
    >>> expected_tokens_per_pass_without_bonus(0.5, 2)
    1.5
    >>> expected_tokens_per_pass_without_bonus(1.0, 4)
    4.0
    """
    k = as_int(k, "k", minimum=1)
    alpha = as_probability_array(alpha, "alpha")
    out = expected_tokens_per_pass(alpha, k - 1) if k > 1 else np.ones_like(alpha)
    return float(out) if np.ndim(out) == 0 else out


def bonus_share(alpha: float | np.ndarray, k: int) -> float | np.ndarray:
    """Fraction of all emitted tokens that are bonus tokens: ``alpha**k / E[tokens per pass]``.

    Examples
    --------
    >>> round(bonus_share(0.8, 4), 3)
    0.122
    """
    k = as_int(k, "k", minimum=1)
    alpha = as_probability_array(alpha, "alpha")
    out = alpha**k / expected_tokens_per_pass(alpha, k)
    return float(out) if np.ndim(out) == 0 else out

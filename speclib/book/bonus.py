"""What the bonus token is worth: tokens per step with and without it.

When all ``k`` drafts survive, the target pass has already produced the distribution of
position ``k + 1``, and sampling one token from it is free.  Turning that off (``bonus=False``
in :func:`speclib.core.sampling.verify`) leaves the output distribution exactly the target's; it
only removes one token from the steps in which every draft was accepted, which happen with
probability ``alpha**k`` under independent acceptances.  The formulas with the bonus are in
:mod:`speclib.core.theory`; these are their counterparts without it.
"""

from __future__ import annotations

import numpy as np

from .._validate import MAX_DRAFT_LENGTH, as_int, as_probability_array
from ..core.engine import EngineResult
from ..core.theory import expected_tokens_per_pass


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
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    pmf = alpha ** np.arange(k) * (1.0 - alpha)
    pmf[k - 1] = alpha ** (k - 1)
    return pmf


def expected_tokens_per_pass_without_bonus(alpha: float | np.ndarray, k: int) -> float | np.ndarray:
    """Expected tokens per target pass without the bonus: ``1 + alpha + ... + alpha**(k-1)``.

    Exactly ``alpha**k`` less than :func:`speclib.core.theory.expected_tokens_per_pass`: the
    bonus token is emitted in the steps where all ``k`` drafts survive.

    Examples
    --------
    >>> expected_tokens_per_pass_without_bonus(0.5, 2)
    1.5
    >>> expected_tokens_per_pass_without_bonus(1.0, 4)
    4.0
    """
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
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
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    alpha = as_probability_array(alpha, "alpha")
    out = alpha**k / expected_tokens_per_pass(alpha, k)
    return float(out) if np.ndim(out) == 0 else out


def tokens_per_full_step(result: EngineResult) -> np.ndarray:
    """Tokens emitted by each step of an engine run that the token budget did not cut short.

    A step that starts with ``k`` or fewer tokens still to go either drafts fewer than ``k``
    tokens or loses part of what it emits, so its count does not follow
    :func:`speclib.core.theory.tokens_per_step_pmf`.  Every other step drafts the full ``k`` and
    keeps all it emits.  Whether a step is one of those depends only on the steps before it,
    so with independent acceptances (a fixed context) their counts are independent draws from
    ``tokens_per_step_pmf(alpha, k)`` (:func:`tokens_per_step_pmf_without_bonus` when the
    bonus is off): the sample for a histogram or a confidence interval.

    Parameters
    ----------
    result : speclib.core.engine.EngineResult
        What :func:`speclib.core.engine.run_streams` returned.

    Returns
    -------
    ndarray of int, shape (n_full_steps,)
        The tokens each such step emitted, stream by stream.

    Raises
    ------
    TypeError
        If ``result`` is not an :class:`speclib.core.engine.EngineResult`.

    Examples
    --------
    >>> from speclib.core.engine import run_streams
    >>> from speclib.lm.models import fixed_pair
    >>> target, draft = fixed_pair(draft_noise=0.3)
    >>> run = run_streams(target, draft, k=4, n_streams=100, n_tokens=50, rng=0)
    >>> steps = tokens_per_full_step(run)
    >>> int(steps.min()), int(steps.max()), steps.size < run.emitted.size
    (1, 5, True)
    """
    if not isinstance(result, EngineResult):
        raise TypeError(f"result: expected the EngineResult of speclib.core.engine.run_streams, "
                        f"got {type(result).__name__}")
    return result.emitted[result.start < result.n_tokens - result.k]

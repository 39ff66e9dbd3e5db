"""The sampling rule of speculative decoding: accept, reject, correct, bonus.

Notation (the book's, and the reference article's): ``p`` is the *draft* distribution,
``q`` the *target* distribution, ``k`` the number of drafted tokens.  Leviathan et al.
use the letters the other way round.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Protocol

import numpy as np

from .._validate import as_bool, as_distribution, as_generator, as_real, as_tokens


def acceptance_rate(p: np.ndarray, q: np.ndarray) -> np.ndarray | float:
    """Probability that a token drafted from ``p`` is accepted by a target ``q``.

    ``alpha = sum_x min(p(x), q(x)) = 1 - TV(p, q)``, computed on the last axis, so a
    batch of rows gives a batch of rates.

    Parameters
    ----------
    p, q : array_like, shape (..., V)
        Draft and target distributions (rows summing to 1).

    Returns
    -------
    float or ndarray of shape (...)

    Raises
    ------
    ValueError
        If the shapes differ or a row is not a probability distribution.

    Examples
    --------
    >>> acceptance_rate([0.5, 0.5, 0.0], [0.25, 0.25, 0.5])
    0.5
    """
    p = as_distribution(p, "p")
    q = as_distribution(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    # Rows within the sum tolerance can overlap by a hair more than 1 (1.0000005):
    # clip, so that what follows (the theory's formulas) gets a rate in [0, 1].
    alpha = np.clip(np.minimum(p, q).sum(axis=-1), 0.0, 1.0)
    return float(alpha) if alpha.ndim == 0 else alpha


def residual_distribution(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The correction distribution ``max(q - p, 0) / Z`` used after a rejection.

    It holds exactly the target mass that the draft under-proposes.  When ``p == q``
    (more generally, when ``q <= p`` everywhere, which for two distributions means
    ``p == q``) there is no such mass, ``Z = 0`` and a rejection has probability zero;
    the function then returns ``q`` itself so that the sampler stays defined even if
    rounding produces such a rejection.

    Parameters
    ----------
    p, q : array_like, shape (V,)
        Draft and target distributions.

    Returns
    -------
    ndarray of shape (V,), summing to 1.

    Examples
    --------
    >>> residual_distribution([0.5, 0.5, 0.0], [0.25, 0.25, 0.5])
    array([0., 0., 1.])
    """
    p = as_distribution(p, "p", ndim=1)
    q = as_distribution(q, "q", ndim=1)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    return _residual(p, q)


def _residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    excess = np.maximum(q - p, 0.0)
    z = excess.sum()
    return excess / z if z > 0 else q.copy()


def acceptance_probability(p_x: float, q_x: float) -> float:
    """``min(1, q(x) / p(x))``: the chance that drafted token ``x`` is kept."""
    return min(1.0, q_x / p_x)


def sample_token(probs: np.ndarray, rng: np.random.Generator | int) -> int:
    """Draw one token id from ``probs`` by inverting its cumulative distribution.

    ``probs`` must be a probability row (checked); ``rng`` a generator or an integer seed.
    The loops draw through :class:`Sampler`, which skips the check on rows already checked.

    Examples
    --------
    >>> sample_token([0.0, 1.0, 0.0], np.random.default_rng(0))
    1
    """
    return _sample_token(as_distribution(probs, "probs", ndim=1), as_generator(rng))


def _sample_token(probs: np.ndarray, rng: np.random.Generator) -> int:
    cdf = np.cumsum(probs)
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), len(probs) - 1))


class Chooser(Protocol):
    """Every random choice a decoding loop makes, and nothing else.

    ``token(row)`` draws a token from a probability row; ``coin(a)`` is True with
    probability ``a``.  Driven by a generator (:class:`Sampler`) the loop samples; driven by
    :class:`speclib.core.exact.Replay`, which walks every branch, the same code yields its
    exact output distribution.
    """

    def token(self, probs: np.ndarray) -> int: ...

    def coin(self, a: float) -> bool: ...


class Sampler:
    """The chooser that samples: ``token`` and ``coin`` from one ``numpy.random.Generator``.

    ``coin(a)`` draws one uniform ``u`` and returns ``u < a``; ``token`` is
    :func:`sample_token`.  Both consume one ``rng.random()`` each, so the stream of random
    numbers is the one the book's loops have always used.
    """

    def __init__(self, rng: np.random.Generator) -> None:
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng: expected a numpy.random.Generator, got {type(rng).__name__} "
                            "(as_chooser also takes an integer seed)")
        self.rng = rng

    def token(self, probs: np.ndarray) -> int:
        cdf = np.cumsum(probs)
        total = cdf[-1]
        if not 0.0 < total < np.inf:  # NaN fails both comparisons
            raise ValueError(f"token: asked to draw from a row that is not a distribution (its entries sum to "
                             f"{float(total):.6g}; a NaN, infinite or all-zero row)")
        return int(min(np.searchsorted(cdf, self.rng.random() * total, side="right"), len(cdf) - 1))

    def coin(self, a: float) -> bool:
        try:
            if 0.0 <= a <= 1.0:  # NaN fails both comparisons
                return self.rng.random() < a
        except TypeError:
            raise TypeError(f"coin: expected a probability, got {a!r} ({type(a).__name__}); an accept rule "
                            "returns a number in [0, 1]") from None
        raise ValueError(f"coin: asked for a coin that falls heads with probability {float(a):.6g}; a probability "
                         "must lie in [0, 1] (an accept rule's answer is one)")


def as_chooser(rng: object, name: str = "rng") -> Chooser:
    """A chooser from a generator or seed (a :class:`Sampler`), or the chooser itself."""
    if not isinstance(name, str):
        raise TypeError(f"name: expected the argument's name (a string), got {type(name).__name__}")
    if hasattr(rng, "token") and hasattr(rng, "coin"):
        return rng
    return Sampler(as_generator(rng, name))


class Verification(NamedTuple):
    """What one verification step emits."""

    tokens: np.ndarray  #: the emitted tokens, 1 to k+1 of them
    n_accepted: int  #: how many of the k drafted tokens were kept


def verify(
    draft_tokens: np.ndarray,
    p_draft: np.ndarray,
    q_target: np.ndarray,
    rng: np.random.Generator | int,
    *,
    bonus: bool = True,
    accept: Callable[[float, float], float] = acceptance_probability,
    correct: Callable[[np.ndarray, np.ndarray], np.ndarray] = _residual,
) -> Verification:
    """Accept, reject and correct one drafted block; add the bonus token if all survive.

    Parameters
    ----------
    draft_tokens : array_like of int, shape (k,)
        The drafted tokens ``x_1 .. x_k``.
    p_draft : array_like, shape (k, V)
        Row ``i`` is the draft distribution that ``x_{i+1}`` was sampled from.
    q_target : array_like, shape (k+1, V)
        Row ``i`` is the target's distribution at the same position; the last row is the
        target's distribution after all ``k`` drafts, used for the bonus token.
    rng : numpy.random.Generator, int or Chooser
        Source of randomness (an int is used as a seed; a :class:`Chooser` such as
        :class:`speclib.core.exact.Replay` makes every random choice itself).
    bonus : bool, default True
        Draw the free extra token when all ``k`` drafts are accepted.  Turning it off
        keeps the output exact; it only lowers the tokens per target pass.
    accept, correct : callable, optional
        The acceptance probability ``(p_x, q_x) -> float`` and the correction
        distribution ``(p, q) -> row``.  Only :mod:`speclib.book.broken` changes them, to
        build the faulty verifiers that the exactness tests must catch.

    Returns
    -------
    Verification
        ``(tokens, n_accepted)``: the emitted tokens (``n_accepted`` drafts followed by one
        correction or bonus token, or just the drafts if ``bonus=False`` and all were kept).

    Raises
    ------
    ValueError
        On shapes that do not fit together, rows that are not distributions, tokens out of
        range, or a drafted token that has probability 0 under its own draft row.

    Examples
    --------
    >>> p = [[0.5, 0.5], [0.5, 0.5]]
    >>> q = [[0.5, 0.5], [0.5, 0.5], [1.0, 0.0]]
    >>> verify([1, 0], p, q, rng=0)        # p == q: everything is accepted, bonus is token 0
    Verification(tokens=array([1, 0, 0]), n_accepted=2)
    """
    draft_tokens, p_draft, q_target = check_block(draft_tokens, p_draft, q_target)
    bonus = as_bool(bonus, "bonus")
    for label, fn in (("accept", accept), ("correct", correct)):
        if not callable(fn):
            raise TypeError(f"{label}: expected a callable, got {type(fn).__name__}")
    return _ratio_step(draft_tokens, p_draft, q_target, as_chooser(rng), bonus=bonus, accept=accept, correct=correct)


def check_block(draft_tokens: object, p_draft: object, q_target: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Check one drafted block as every verifier takes it: ``k`` tokens, ``(k, V)`` and ``(k+1, V)`` rows."""
    p_draft = as_distribution(p_draft, "p_draft", ndim=2)
    q_target = as_distribution(q_target, "q_target", ndim=2)
    k, vocab = p_draft.shape
    draft_tokens = as_tokens(draft_tokens, "draft_tokens", vocab_size=vocab)
    if draft_tokens.shape != (k,):
        raise ValueError(f"draft_tokens: expected {k} tokens (one per row of p_draft), got {draft_tokens.size}")
    if q_target.shape != (k + 1, vocab):
        raise ValueError(f"q_target: expected shape ({k + 1}, {vocab}) = (k+1, V), got {q_target.shape}")
    return draft_tokens, p_draft, q_target


def _ratio_step(
    draft_tokens: np.ndarray,
    p_draft: np.ndarray,
    q_target: np.ndarray,
    choose: Chooser,
    *,
    bonus: bool = True,
    accept: Callable[[float, float], float] = acceptance_probability,
    correct: Callable[[np.ndarray, np.ndarray],
                      np.ndarray] = _residual,
) -> Verification:
    """The rule, on checked inputs; ``choose`` draws every choice."""
    for i in range(len(draft_tokens)):
        x = draft_tokens[i]
        if p_draft[i, x] <= 0:
            raise ValueError(
                f"draft_tokens: token {x} at position {i} has "
                "probability 0 under p_draft; p_draft must be the "
                "distribution the token was sampled from"
            )
        # Keep x with probability min(1, q(x)/p(x)) ...
        if choose.coin(accept(p_draft[i, x], q_target[i, x])):
            continue
        # ... and at the first rejection replace it by a draw from
        # the residual, then stop: later drafts were conditioned on a
        # token that is no longer there.
        row = correct(p_draft[i], q_target[i])
        if correct is not _residual:
            row = _checked_correction(row, q_target.shape[1])
        fix = choose.token(row)
        return Verification(np.append(draft_tokens[:i], fix), i)

    k = len(draft_tokens)
    if not bonus:
        return Verification(draft_tokens.copy(), k)
    # All k survived: the target pass already scored position k+1,
    # so one more token is free.
    bonus_token = choose.token(q_target[k])
    return Verification(np.append(draft_tokens, bonus_token), k)


def _checked_correction(row: object, vocab: int) -> np.ndarray:
    """What a ``correct`` rule returned, if it is a row of ``vocab`` non-negative weights with a positive sum.

    Only rules that are not speclib's residual are checked (a rejection is rare enough that
    this costs nothing that shows); the sampler normalises by the row's sum.
    """
    arr = np.asarray(row)
    if arr.dtype.kind not in "fiu" or arr.shape != (vocab,):
        raise ValueError(f"correct: returned {type(row).__name__} of shape {np.shape(row)}; a correction rule "
                         f"returns one row of {vocab} probabilities")
    total = arr.sum()
    if not (arr.min() >= 0.0 and 0.0 < total < np.inf):
        raise ValueError("correct: returned a row with NaN, infinite or negative entries, or no mass at all; "
                         "a correction rule returns a probability row")
    return arr


#: The trusted core that the decoding loop calls (its inputs are its own, checked once).
#: ``trusted``: what it returns is a well-formed Verification by construction, so the loop
#: does not check it (a user's verifier is checked at every step).
verify.step = _ratio_step
_ratio_step.trusted = True

# The ratio rule's default ``accept`` (bound above, where the rule is defined) is the
# unchecked formula: the rule calls it once per draft on rows checked once per call.  The
# public name gets the checked version, for direct calls.
_acceptance_probability = acceptance_probability


def acceptance_probability(p_x: float, q_x: float) -> float:
    """``min(1, q(x) / p(x))``: the chance that drafted token ``x`` is kept.

    ``p_x`` is the draft's probability of ``x`` (in (0, 1]: the draft drew ``x``), ``q_x``
    the target's (in [0, 1]).

    Examples
    --------
    >>> acceptance_probability(0.5, 0.25), acceptance_probability(0.25, 0.5)
    (0.5, 1.0)
    """
    p_x = as_real(p_x, "p_x", low=0.0, high=1.0)
    q_x = as_real(q_x, "q_x", low=0.0, high=1.0)
    if p_x == 0.0:
        raise ValueError("p_x: must be > 0 (a drafted token has positive probability under its draft)")
    return _acceptance_probability(p_x, q_x)

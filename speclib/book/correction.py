"""The correction step, one position at a time: how q splits, and what a step emits.

At one position the draft proposes ``x ~ p``; the verifier keeps it with probability
``min(1, q(x)/p(x))`` and otherwise draws a replacement from a *correction* distribution.
The token that comes out therefore has the exact distribution

    ``min(p, q) + (1 - alpha) * correction``,  with ``alpha = sum_x min(p(x), q(x))``,

because a kept draft contributes ``p(x) min(1, q(x)/p(x)) = min(p(x), q(x))`` and a
rejection happens with probability ``1 - alpha``.  With the residual
``max(0, q - p) / (1 - alpha)`` as correction this is ``q``: the target splits into the
part the draft covers, ``min(p, q)``, and the part it misses, ``max(0, q - p)``.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from .._validate import as_distribution
from ..core.sampling import _residual


class TargetSplit(NamedTuple):
    """``q = overlap + (1 - alpha) * residual``: the target, split by what the draft covers."""

    overlap: np.ndarray  #: ``min(p, q)``: mass delivered by accepted drafts
    missing: np.ndarray  #: ``max(0, q - p)``: mass that only a correction can deliver
    residual: np.ndarray  #: ``missing`` normalised to sum to 1 (the correction distribution)
    alpha: float  #: ``overlap.sum()``, the acceptance rate; ``missing.sum() == 1 - alpha``


def _pair(p: object, q: object) -> tuple[np.ndarray, np.ndarray]:
    p = as_distribution(p, "p", ndim=1)
    q = as_distribution(q, "q", ndim=1)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    return p, q


def split_target(p: np.ndarray, q: np.ndarray) -> TargetSplit:
    """Split the target ``q`` into the part the draft ``p`` covers and the part it misses.

    Parameters
    ----------
    p, q : array_like, shape (V,)
        Draft and target distributions.

    Returns
    -------
    TargetSplit
        ``overlap + missing == q`` token by token, and ``missing.sum() == 1 - alpha``.

    Examples
    --------
    >>> s = split_target([0.5, 0.5, 0.0], [0.25, 0.25, 0.5])
    >>> s.overlap, s.missing, s.alpha
    (array([0.25, 0.25, 0.  ]), array([0. , 0. , 0.5]), 0.5)
    """
    p, q = _pair(p, q)
    overlap = np.minimum(p, q)
    missing = np.maximum(q - p, 0.0)
    return TargetSplit(overlap, missing, _residual(p, q), float(overlap.sum()))


def emitted_distribution(
    p: np.ndarray,
    q: np.ndarray,
    correct: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """Exact distribution of the token one verification emits at a position.

    The draft proposes ``x ~ p`` and keeps it with probability ``min(1, q(x)/p(x))``; after a
    rejection the token is drawn from ``correct(p, q)``.

    Parameters
    ----------
    p, q : array_like, shape (V,)
        Draft and target distributions at this position.
    correct : callable ``(p, q) -> row``, optional
        The correction distribution.  Default: the residual ``max(0, q - p)/Z``, which makes
        the result equal to ``q``.  ``speclib.book.broken.RESAMPLE_FROM_TARGET.correct`` gives
        the common mistake of drawing from ``q`` again.

    Returns
    -------
    ndarray of shape (V,), summing to 1.

    Examples
    --------
    >>> emitted_distribution([0.5, 0.5, 0.0], [0.25, 0.25, 0.5])
    array([0.25, 0.25, 0.5 ])
    >>> emitted_distribution([0.5, 0.5, 0.0], [0.25, 0.25, 0.5], correct=lambda p, q: q)
    array([0.375, 0.375, 0.25 ])
    """
    p, q = _pair(p, q)
    split = split_target(p, q)
    fix = split.residual if correct is None else as_distribution(correct(p, q), "correct(p, q)", ndim=1)
    if fix.shape != q.shape:
        raise ValueError(f"correct(p, q): expected shape {q.shape}, got {fix.shape}")
    return split.overlap + (1.0 - split.alpha) * fix


class ExactnessRow(NamedTuple):
    """One (vocabulary size, draft length) cell of :func:`exactness_grid`."""

    vocab_size: int
    k: int
    #: correct rule: largest ``|P_speculative - P_target|`` of any ``k + 1``-token sequence,
    #: over the prompts tried (the worst prompt)
    max_error: float
    #: the faulty rule: total-variation distance from the target over ``k + 1`` tokens,
    #: over the prompts tried (the best prompt, so the faulty rule is *never* closer)
    faulty_tv: float


def exactness_grid(
    faulty: object,
    *,
    bonus: bool = True,
    vocab_sizes: tuple[int, ...] = (2, 3, 4),
    ks: tuple[int, ...] = (1, 2, 3),
    draft_noise: float = 0.6,
) -> list[ExactnessRow]:
    """Check the correct verifier and a faulty one exactly, on a grid of small Markov pairs.

    For each vocabulary size ``V`` and draft length ``k`` the pair is
    :func:`speclib.lm.models.markov_pair` ``(V, draft_noise, seed=10 V + k)`` and the prompts
    are ``[0]``, ``[V - 1]`` and ``[1, 0]``.  :mod:`speclib.core.exact` lists every branch of one
    speculative step for each prompt and compares the distribution of the next ``k + 1``
    tokens with the target's; the faulty rule, plugged in through its hooks, is the negative
    control.

    Parameters
    ----------
    faulty : speclib.book.broken.Variant
        A verifier variant (``variant.in_verifier``), e.g. ``broken.RESAMPLE_FROM_TARGET``.
    bonus : bool, default True
        Whether a step whose drafts all survive adds the bonus token.
    vocab_sizes, ks : tuples of int
        The grid (``V >= 2``, ``k >= 1``); ``V ** (k + 1)`` sequences are enumerated.
    draft_noise : float in [0, 1], default 0.6

    Returns
    -------
    list of ExactnessRow, one per ``(V, k)`` in row-major order.

    Examples
    --------
    >>> from speclib.book import broken
    >>> (row,) = exactness_grid(broken.RESAMPLE_FROM_TARGET, vocab_sizes=(2,), ks=(1,))
    >>> row.max_error < 1e-12, row.faulty_tv > 1e-3
    (True, True)
    """
    from .._validate import as_bool, as_int_list, as_real
    from .broken import Variant
    from ..core.exact import max_abs_error, total_variation
    from ..lm.models import markov_pair

    if not isinstance(faulty, Variant):
        raise TypeError(f"faulty: expected a speclib.book.broken.Variant, got {type(faulty).__name__}")
    if not faulty.in_verifier:
        raise ValueError(f"faulty: variant {faulty.name!r} changes the decoding loop, not only the verifier; "
                         "exactness_grid compares verifiers")
    verifier = faulty.verifier
    vocab_sizes = tuple(as_int_list(vocab_sizes, "vocab_sizes", minimum=2))
    ks = tuple(as_int_list(ks, "ks", minimum=1))
    bonus = as_bool(bonus, "bonus")
    draft_noise = as_real(draft_noise, "draft_noise", low=0.0, high=1.0)
    rows = []
    for vocab in vocab_sizes:
        for k in ks:
            target, draft = markov_pair(vocab_size=vocab, draft_noise=draft_noise, seed=10 * vocab + k)
            prompts = ([0], [vocab - 1], [1, 0])
            error = max(max_abs_error(target, draft, s, k, bonus=bonus) for s in prompts)
            damage = min(total_variation(target, draft, s, k, bonus=bonus, verifier=verifier) for s in prompts)
            rows.append(ExactnessRow(vocab, k, float(error), float(damage)))
    return rows

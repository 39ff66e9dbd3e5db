"""Exact probabilities of one speculative step, by enumerating every branch.

For a small vocabulary and draft length, every draft sample and every accept / reject
branch can be listed with its probability.  That turns "the output follows the target"
from a statistical claim into an identity that can be checked to 1e-12:

1. :func:`speculative_block_distribution` gives the probability of each block a step can
   emit (1 to k+1 tokens).
2. A block shorter than ``k + 1`` is extended with the target's own sampling, which is
   what the next steps of generation do.  :func:`speculative_sequence_distribution`
   returns the resulting distribution over the first ``k + 1`` generated tokens.
3. :func:`target_sequence_distribution` is the target's autoregressive distribution over
   the same sequences.  The theorem says the two arrays are equal.

The ``accept``, ``correct`` and ``report`` hooks let :mod:`speclib.book.broken` describe a
faulty verifier, so that the same check can be shown to fail.
"""

from __future__ import annotations

import itertools
from typing import Callable

import numpy as np

from .._validate import as_int, as_tokens
from .decoding import _check_model
from .sampling import _residual, acceptance_probability

#: Largest number of sequences the enumerator will list (V ** (k + 1)).
MAX_SEQUENCES = 200_000


def _check_sizes(vocab: int, length: int) -> None:
    if vocab ** length > MAX_SEQUENCES:
        raise ValueError(
            f"k: enumerating {vocab}**{length} = {vocab ** length} sequences is too many "
            f"(limit {MAX_SEQUENCES}); use a smaller vocabulary or draft length"
        )


def _identity(p: np.ndarray) -> np.ndarray:
    return p


def speculative_block_distribution(
    target: Callable,
    draft: Callable,
    prefix: np.ndarray,
    k: int,
    *,
    bonus: bool = True,
    accept: Callable[[float, float], float] = acceptance_probability,
    correct: Callable[[np.ndarray, np.ndarray], np.ndarray] = _residual,
    report: Callable[[np.ndarray], np.ndarray] = _identity,
) -> dict[tuple[int, ...], float]:
    """Exact probability of every block one speculative step can emit after ``prefix``.

    Parameters
    ----------
    target, draft : model
        Models following the protocol of :mod:`speclib.lm.models`.
    prefix : array_like of int
        The tokens so far (at least one).
    k : int
        Draft length.
    bonus, accept, correct :
        As in :func:`speclib.core.sampling.verify`.
    report : callable, optional
        Maps the draft row a token was sampled from to the row the verifier is *told*
        about.  The identity for a correct implementation.

    Returns
    -------
    dict mapping each emitted block (a tuple of token ids) to its probability.
    Probabilities of a correct verifier sum to 1.
    """
    vocab = _check_model(target, "target")
    if _check_model(draft, "draft") != vocab:
        raise ValueError("draft: vocabulary differs from the target's")
    prefix = as_tokens(prefix, "prefix", vocab, allow_empty=False)
    k = as_int(k, "k", minimum=1)
    _check_sizes(vocab, k + 1)

    blocks: dict[tuple[int, ...], float] = {}

    def add(block: tuple[int, ...], prob: float) -> None:
        if prob != 0.0:
            blocks[block] = blocks.get(block, 0.0) + prob

    for drafts in itertools.product(range(vocab), repeat=k):
        seq = np.concatenate([prefix, drafts])
        n = prefix.size
        p_rows = np.asarray(draft(seq))[n - 1 : n - 1 + k]
        q_rows = np.asarray(target(seq))[n - 1 : n + k]
        # Probability that the draft proposes exactly these k tokens.
        mass = float(np.prod(p_rows[np.arange(k), drafts]))
        if mass == 0.0:
            continue
        for i, x in enumerate(drafts):
            told = report(p_rows[i])
            a = accept(told[x], q_rows[i, x])
            if not 0.0 <= a <= 1.0:
                raise ValueError(f"accept: returned {a:.6g} for p(x) = {told[x]:.6g}, q(x) = "
                                 f"{q_rows[i, x]:.6g}; an acceptance probability must lie in [0, 1]")
            fix = correct(told, q_rows[i])
            for y in range(vocab):
                add(tuple(drafts[:i]) + (y,), mass * (1.0 - a) * fix[y])
            mass *= a
        if bonus:
            for y in range(vocab):
                add(tuple(drafts) + (y,), mass * q_rows[k, y])
        else:
            add(tuple(drafts), mass)
    return blocks


def target_sequence_distribution(target: Callable, prefix: np.ndarray, length: int) -> np.ndarray:
    """The target's own probability of every continuation of ``prefix`` of ``length`` tokens.

    Returns
    -------
    ndarray of shape ``(V,) * length``; entry ``[x1, ..., xL]`` is
    ``q(x1 | prefix) q(x2 | prefix, x1) ...``.
    """
    vocab = _check_model(target, "target")
    prefix = as_tokens(prefix, "prefix", vocab, allow_empty=False)
    length = as_int(length, "length", minimum=1)
    _check_sizes(vocab, length)
    out = np.zeros((vocab,) * length)
    for seq in itertools.product(range(vocab), repeat=length):
        full = np.concatenate([prefix, seq])
        rows = np.asarray(target(full))[prefix.size - 1 : prefix.size - 1 + length]
        out[seq] = np.prod(rows[np.arange(length), seq])
    return out


def speculative_sequence_distribution(
    target: Callable, draft: Callable, prefix: np.ndarray, k: int, **hooks
) -> np.ndarray:
    """Distribution of the first ``k + 1`` generated tokens when the first step is speculative.

    Every block from :func:`speculative_block_distribution` is completed to ``k + 1``
    tokens with the target's autoregressive probabilities (any exact continuation gives the
    same answer, and this one isolates the first step).  ``hooks`` are passed on.

    Returns
    -------
    ndarray of shape ``(V,) * (k + 1)``, to compare with
    :func:`target_sequence_distribution` (``length = k + 1``).
    """
    vocab = _check_model(target, "target")
    blocks = speculative_block_distribution(target, draft, prefix, k, **hooks)
    prefix = as_tokens(prefix, "prefix", vocab)
    out = np.zeros((vocab,) * (k + 1))
    for block, prob in blocks.items():
        rest = k + 1 - len(block)
        if rest == 0:
            out[block] += prob
        else:
            tail = target_sequence_distribution(target, np.concatenate([prefix, block]), rest)
            out[block] += prob * tail
    return out


def max_abs_error(target: Callable, draft: Callable, prefix: np.ndarray, k: int, **hooks) -> float:
    """Largest gap between the speculative and the target distribution of ``k + 1`` tokens."""
    spec = speculative_sequence_distribution(target, draft, prefix, k, **hooks)
    return float(np.abs(spec - target_sequence_distribution(target, prefix, k + 1)).max())


def total_variation(target: Callable, draft: Callable, prefix: np.ndarray, k: int, **hooks) -> float:
    """Total-variation distance between speculative and target output over ``k + 1`` tokens.

    Zero for a correct verifier; the size of the damage for a faulty one.  A faulty rule
    whose probabilities do not sum to 1 shows up here too, as the missing or extra mass.
    """
    spec = speculative_sequence_distribution(target, draft, prefix, k, **hooks)
    return float(0.5 * np.abs(spec - target_sequence_distribution(target, prefix, k + 1)).sum())

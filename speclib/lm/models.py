"""Language models, as speculative decoding sees them.

The model protocol
------------------
Every model in this project, the article's simulated pair, the Markov pair, the n-gram
models and the numpy transformer, is a callable with one job, the job of a causal
language model's forward pass:

``model(tokens) -> probs``
    ``tokens`` is an int array of shape ``(n,)``; ``probs`` has shape ``(n, V)`` and row
    ``i`` is the distribution of the *next* token given ``tokens[: i + 1]``.  Rows sum to 1.

and has an attribute ``vocab_size`` (``V``).  A model may also set ``context_length``, the
number of most recent tokens it reads (``None`` or absent: it may read them all); decoding
loops then pass only a recent window of the sequence, which changes no probability and saves
work on long generations.

That is the whole interface: the decoding loops in :mod:`speclib.core.decoding` need nothing
else.  One target call on ``prefix + k drafts`` scores all ``k + 1`` positions at once, which
is the pass that speculative decoding gets for free.
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

import numpy as np

from .._validate import MAX_ENTRIES, as_distribution, as_generator, as_int, as_real, as_tokens


@runtime_checkable
class Model(Protocol):
    """The model protocol (see the module docstring)."""

    vocab_size: int

    def __call__(self, tokens: np.ndarray) -> np.ndarray: ...


class FixedContextModel:
    """A model whose next-token distribution never depends on the tokens.

    This is the reference article's setting: its context id never advances, so every
    position sees the same distribution and acceptances are independent.
    """

    #: Rows right by construction: the loops do not check them again (speclib.core.cache.rows_trusted).
    trusted_rows = True

    context_length = 0

    def __init__(self, dist: np.ndarray) -> None:
        self.dist = as_distribution(dist, "dist", ndim=1)
        self.vocab_size = self.dist.shape[0]

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        tokens = as_tokens(tokens, "tokens", self.vocab_size)
        return np.broadcast_to(self.dist, (tokens.size, self.vocab_size)).copy()

    def __repr__(self) -> str:
        return f"FixedContextModel(vocab_size={self.vocab_size})"


class MarkovModel:
    """A first-order Markov model: the next token depends on the last token only.

    ``transition[a]`` is the distribution of the token that follows token ``a``.  Unlike
    :class:`FixedContextModel`, its context advances with the generated text, so how
    likely a draft is to be accepted changes from position to position.
    """

    #: Rows right by construction: the loops do not check them again (speclib.core.cache.rows_trusted).
    trusted_rows = True

    context_length = 1

    def __init__(self, transition: np.ndarray) -> None:
        transition = as_distribution(transition, "transition", ndim=2)
        if transition.shape[0] != transition.shape[1]:
            raise ValueError(f"transition: expected a square (V, V) table, got shape {transition.shape}")
        self.transition = transition
        self.vocab_size = transition.shape[1]

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        tokens = as_tokens(tokens, "tokens", self.vocab_size)
        return self.transition[tokens]

    def __repr__(self) -> str:
        return f"MarkovModel(vocab_size={self.vocab_size})"


def dirichlet_targets(vocab_size: int, n_contexts: int, rng: np.random.Generator | int,
                      concentration: float = 0.5) -> np.ndarray:
    """Target rows as in the reference article: Dirichlet(``concentration``) draws.

    A concentration below 1 makes peaked rows, like a confident large model.
    """
    vocab_size = as_int(vocab_size, "vocab_size", minimum=2, maximum=MAX_ENTRIES)
    n_contexts = as_int(n_contexts, "n_contexts", minimum=1, maximum=MAX_ENTRIES // vocab_size,
                        why=f"vocab_size * n_contexts may not exceed {MAX_ENTRIES} probabilities")
    concentration = as_real(concentration, "concentration", low=1e-3)
    rng = as_generator(rng)
    raw = rng.dirichlet(np.full(vocab_size, concentration), size=n_contexts)
    return raw / raw.sum(axis=1, keepdims=True)


def noisy_draft(q: np.ndarray, draft_noise: float) -> np.ndarray:
    """The article's draft: ``(1 - draft_noise) * q + draft_noise * uniform``, row by row.

    ``draft_noise = 0`` copies the target; ``draft_noise = 1`` is the uniform distribution.
    """
    q = as_distribution(q, "q")
    draft_noise = as_real(draft_noise, "draft_noise", low=0.0, high=1.0)
    p = (1.0 - draft_noise) * q + draft_noise / q.shape[-1]
    return p / p.sum(axis=-1, keepdims=True)


def markov_pair(vocab_size: int = 64, draft_noise: float = 0.3, seed: int = 0,
                concentration: float = 0.5) -> tuple[MarkovModel, MarkovModel]:
    """A (target, draft) pair of Markov models built like the article's simulated pair.

    The target's transition rows are Dirichlet draws; the draft mixes each row with the
    uniform distribution.  Because the context advances, the per-position acceptance
    probability ``beta`` varies along the text, which the fixed-context pair cannot show.
    """
    vocab_size = as_int(vocab_size, "vocab_size", minimum=2, maximum=math.isqrt(MAX_ENTRIES),
                        why=f"a Markov model holds vocab_size**2 probabilities, at most {MAX_ENTRIES}")
    q = dirichlet_targets(vocab_size, vocab_size, as_generator(seed, "seed"), concentration)
    return MarkovModel(q), MarkovModel(noisy_draft(q, draft_noise))


def fixed_pair(vocab_size: int = 64, draft_noise: float = 0.3, seed: int = 0, context_id: int = 42,
               n_contexts: int = 256) -> tuple[FixedContextModel, FixedContextModel]:
    """The article's simulated pair with its context held fixed at ``context_id``.

    The ``n_contexts`` Dirichlet rows are drawn exactly as the article draws them, so with
    its seeds this is the distribution pair behind its tables.
    """
    context_id = as_int(context_id, "context_id", minimum=0)
    n_contexts = as_int(n_contexts, "n_contexts", minimum=1)
    q = dirichlet_targets(vocab_size, n_contexts, as_generator(seed, "seed"))[context_id % n_contexts]
    return FixedContextModel(q), FixedContextModel(noisy_draft(q, draft_noise))

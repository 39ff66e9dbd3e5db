"""Decoding loops: plain autoregressive sampling and speculative sampling.

Both take models that follow the protocol of :mod:`speclib.lm.models` and an explicit random
generator, and both return ``(tokens, stats)`` where ``tokens`` are the new tokens only (the
prompt is not repeated) and ``stats`` is a :class:`GenerationStats`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._validate import as_generator, as_int, as_tokens
from .sampling import Verification, sample_token, verify


@dataclass
class GenerationStats:
    """Counters kept by a decoding loop.

    ``draft_verified`` counts the draft tokens the target actually judged: the accepted
    ones plus the first rejected one of each block.  Drafts after a rejection are thrown
    away unjudged; they are *proposed* but neither accepted nor rejected, and counting them
    as rejections (as the reference article does) biases the acceptance rate downwards
    more and more as ``k`` grows.
    """

    tokens_generated: int = 0
    target_passes: int = 0
    draft_passes: int = 0
    draft_proposed: int = 0
    draft_verified: int = 0
    accepted: int = 0
    tokens_per_step: list[int] = field(default_factory=list)

    @property
    def acceptance_rate(self) -> float:
        """Accepted / verified drafts: an estimate of alpha (nan when nothing was verified)."""
        return self.accepted / self.draft_verified if self.draft_verified else math.nan

    @property
    def accepted_per_proposed(self) -> float:
        """Accepted / proposed drafts: the reference article's (biased) "acceptance"."""
        return self.accepted / self.draft_proposed if self.draft_proposed else math.nan

    @property
    def tokens_per_target_pass(self) -> float:
        """Generated tokens per target forward pass (1.0 for plain decoding)."""
        return self.tokens_generated / self.target_passes if self.target_passes else math.nan

    def record_step(self, proposed: int, accepted: int, emitted: int, draft_passes: int | None = None) -> None:
        """Count one step: one target pass, ``proposed`` drafts of which ``accepted`` were kept,
        and ``emitted`` tokens output.

        A step that kept fewer drafts than it proposed judged exactly one more, the first
        rejected one; the drafts after it were never verified.  ``draft_passes`` defaults to
        one pass per proposed draft (prompt lookup, for instance, proposes without any).
        """
        self.target_passes += 1
        self.draft_passes += proposed if draft_passes is None else draft_passes
        self.draft_proposed += proposed
        self.draft_verified += accepted + int(accepted < proposed)
        self.accepted += accepted
        self.tokens_generated += int(emitted)
        self.tokens_per_step.append(int(emitted))

    def summary(self) -> str:
        """One line with the figures a reader usually wants."""
        acc = "n/a" if math.isnan(self.acceptance_rate) else f"{self.acceptance_rate:.3f}"
        return (
            f"tokens={self.tokens_generated}, target_passes={self.target_passes}, "
            f"draft_passes={self.draft_passes}, tokens/pass={self.tokens_per_target_pass:.2f}, "
            f"acceptance={acc}"
        )


def _window(model: object, tokens: np.ndarray, rows_needed: int) -> np.ndarray:
    """The shortest tail of ``tokens`` that still gives the model's last ``rows_needed`` rows."""
    context_length = getattr(model, "context_length", None)
    if context_length is None:
        return tokens
    return tokens[-(context_length + rows_needed):]


def _last_rows(model: Callable, tokens: np.ndarray, n_rows: int, name: str) -> np.ndarray:
    probs = np.asarray(model(_window(model, tokens, n_rows)), dtype=float)
    vocab = model.vocab_size
    if probs.ndim != 2 or probs.shape[1] != vocab or probs.shape[0] < n_rows:
        raise ValueError(
            f"{name}: a model must map tokens of shape (n,) to probabilities of shape (n, {vocab}); "
            f"got {probs.shape}"
        )
    return probs[-n_rows:]


def _check_model(model: object, name: str) -> int:
    if not callable(model) or not hasattr(model, "vocab_size"):
        raise TypeError(f"{name}: expected a model (a callable with a vocab_size attribute), got {type(model).__name__}")
    return as_int(model.vocab_size, f"{name}.vocab_size", minimum=1)


def autoregressive_generate(
    model: Callable,
    prompt: np.ndarray,
    max_new_tokens: int,
    rng: np.random.Generator | int,
) -> tuple[np.ndarray, GenerationStats]:
    """Sample ``max_new_tokens`` tokens from ``model``, one forward pass per token.

    Parameters
    ----------
    model : model
        Any model following the protocol in :mod:`speclib.lm.models`.
    prompt : array_like of int, shape (n,)
        At least one token to condition on.
    max_new_tokens : int
        How many tokens to generate (0 or more).
    rng : numpy.random.Generator or int

    Returns
    -------
    tokens : ndarray of int, shape (max_new_tokens,)
    stats : GenerationStats

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, _ = markov_pair(vocab_size=8, seed=0)
    >>> tokens, stats = autoregressive_generate(target, [0], 5, rng=1)
    >>> len(tokens), stats.target_passes
    (5, 5)
    """
    vocab = _check_model(model, "model")
    prompt = as_tokens(prompt, "prompt", vocab, allow_empty=False)
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", minimum=0)
    rng = as_generator(rng)

    tokens = prompt.copy()
    stats = GenerationStats()
    for _ in range(max_new_tokens):
        q = _last_rows(model, tokens, 1, "model")[0]
        tokens = np.append(tokens, sample_token(q, rng))
        stats.record_step(proposed=0, accepted=0, emitted=1)
    return tokens[prompt.size:], stats


def speculative_generate(
    target: Callable,
    draft: Callable,
    prompt: np.ndarray,
    max_new_tokens: int,
    k: int,
    rng: np.random.Generator | int,
    *,
    bonus: bool = True,
    verifier: Callable[..., Verification] = verify,
) -> tuple[np.ndarray, GenerationStats]:
    """Sample ``max_new_tokens`` tokens from ``target`` with speculative decoding.

    Each step: the draft proposes ``k`` tokens one at a time, recording the distribution
    each came from; one target pass scores all ``k + 1`` positions; :func:`verify` keeps a
    prefix of the drafts and adds a correction or bonus token.  The output follows the
    target's distribution exactly, whatever the draft.

    Parameters
    ----------
    target, draft : model
        Models following the protocol in :mod:`speclib.lm.models`, with the same vocabulary.
    prompt : array_like of int, shape (n,)
        At least one token.
    max_new_tokens : int
        How many tokens to generate (0 or more).  The last step drafts no more tokens than
        are still needed, and anything it emits beyond the total is dropped.
    k : int
        Draft length, at least 1.
    rng : numpy.random.Generator or int
    bonus : bool, default True
        Passed to :func:`verify`.
    verifier : callable, default :func:`verify`
        The verification step; :mod:`speclib.book.broken` supplies faulty ones for the tests.

    Returns
    -------
    tokens : ndarray of int, shape (max_new_tokens,)
    stats : GenerationStats

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=8, draft_noise=0.2, seed=0)
    >>> tokens, stats = speculative_generate(target, draft, [0], 20, k=4, rng=1)
    >>> len(tokens), stats.target_passes < 20
    (20, True)
    """
    vocab = _check_model(target, "target")
    draft_vocab = _check_model(draft, "draft")
    if draft_vocab != vocab:
        raise ValueError(f"draft: vocabulary of {draft_vocab} tokens differs from the target's {vocab}")
    prompt = as_tokens(prompt, "prompt", vocab, allow_empty=False)
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", minimum=0)
    k = as_int(k, "k", minimum=1)
    rng = as_generator(rng)

    tokens = prompt.copy()
    stats = GenerationStats()
    while tokens.size - prompt.size < max_new_tokens:
        remaining = max_new_tokens - (tokens.size - prompt.size)
        k_step = min(k, remaining)

        # 1. Draft: k tokens, one draft pass each, remembering the row each was drawn from.
        drafted, p_rows = tokens, []
        for _ in range(k_step):
            p = _last_rows(draft, drafted, 1, "draft")[0]
            p_rows.append(p)
            drafted = np.append(drafted, sample_token(p, rng))
        # 2. Verify: one target pass scores every drafted position and the one after.
        q_rows = _last_rows(target, drafted, k_step + 1, "target")
        # 3. Accept / reject / correct, 4. bonus.
        out = verifier(drafted[tokens.size:], np.array(p_rows), q_rows, rng, bonus=bonus)

        emitted = out.tokens[:remaining]
        tokens = np.concatenate([tokens, emitted])
        stats.record_step(k_step, out.n_accepted, len(emitted))
    return tokens[prompt.size:], stats

"""Proposers: what drafts the tokens that the target verifies.

The one loop, :func:`speclib.core.decoding.speculative_generate`, asks its proposer for at most
``k`` tokens per step and the rows they were drawn from (the verifier divides by them).
A proposer follows three calls:

``start(prompt, vocab_size)``
    a new generation begins (a proposer with a model opens that model's cache here);
``propose(text, k, policy, choose, timings) -> Proposal``
    up to ``k`` drafts after ``text``; ``policy.keep_drafting(p, x)`` may end the draft
    early, and every random choice goes through ``choose`` (see
    :class:`speclib.core.sampling.Chooser`);
``accept(length)``
    after verification the first ``length`` tokens of the text stand (roll caches back).

:class:`DraftModel`
    a draft language model, sampling one token per draft pass (what a model passed as the
    loop's ``draft`` becomes);
:class:`PromptLookup`
    no model: the tokens that followed an earlier occurrence of the text's last ``n``
    tokens, proposed as point masses (:func:`lookup_draft`);
:class:`MultiDraft`
    ``m`` independent draft sequences per step, verified together by
    :func:`speclib.core.variants.multi_draft_verify` (its default verifier).
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Protocol, runtime_checkable

import numpy as np

from .._validate import as_int, as_tokens
from .cache import extend_checked, model_cache


class Proposal(NamedTuple):
    """What a proposer offers for one step."""

    tokens: np.ndarray  #: the drafts, shape (n,), or (m, n) for several sequences
    rows: np.ndarray  #: the rows they were drawn from, shape (n, V) or (m, n, V)
    passes: int  #: draft passes spent (a pass whose row stopped the draft included)


@runtime_checkable
class Proposer(Protocol):
    """What the loop asks of a proposer (see the module docstring)."""

    def start(self, prompt: np.ndarray, vocab_size: int) -> None: ...

    def propose(self, text: np.ndarray, k: int, policy, choose, timings: dict | None) -> Proposal: ...

    def accept(self, length: int) -> None: ...


def check_model(model: object, name: str) -> int:
    """The vocabulary size of ``model``, or a TypeError naming the argument."""
    if not callable(model) or not hasattr(model, "vocab_size"):
        raise TypeError(f"{name}: expected a model (a callable with a vocab_size attribute), got {type(model).__name__}")
    return as_int(model.vocab_size, f"{name}.vocab_size", minimum=1)


class DraftModel:
    """Draft with a language model: one cached draft pass and one sampled token per draft.

    ``name`` labels the model in error messages and in the loop's ``timings``.
    """

    def __init__(self, model: Callable, name: str = "draft") -> None:
        if not isinstance(name, str):
            raise TypeError(f"name: expected the model's name (a string), got {type(name).__name__}")
        self.vocab_size = check_model(model, name)
        self.model, self.name = model, name
        self.cache = None

    def start(self, prompt: np.ndarray, vocab_size: int) -> None:
        if self.vocab_size != vocab_size:
            raise ValueError(f"{self.name}: vocabulary of {self.vocab_size} tokens differs from the target's {vocab_size}")
        self.cache = model_cache(self.model, self.name)

    def propose(self, text: np.ndarray, k: int, policy, choose, timings: dict | None) -> Proposal:
        cache, name = self.cache, self.name
        tokens = np.empty(k, dtype=np.int64)
        rows = np.empty((k, self.vocab_size))
        feed, n = text[len(cache):], 0  # the first pass also feeds what the draft has not seen
        for _ in range(k):
            p = self.row(extend_checked(cache, feed, name, timings)[-1])
            x = choose.token(self.pick(p))
            if not policy.keep_drafting(p, x):
                return Proposal(tokens[:n], rows[:n], n + 1)
            tokens[n], rows[n] = x, self.report(p)
            n += 1
            feed = tokens[n - 1:n]
        return Proposal(tokens, rows, k)

    def accept(self, length: int) -> None:
        self.cache.rollback(min(len(self.cache), length))

    # The three rows of a draft, all the model's row here.  The bug zoo
    # (speclib.book.broken) overrides them to build its faulty proposers.
    @staticmethod
    def row(p: np.ndarray) -> np.ndarray:
        """The draft's row for the next token, from the model's row."""
        return p

    @staticmethod
    def pick(p: np.ndarray) -> np.ndarray:
        """The row the token is actually drawn from."""
        return p

    @staticmethod
    def report(p: np.ndarray) -> np.ndarray:
        """The row the verifier is told the token came from."""
        return p

    def __repr__(self) -> str:
        return f"DraftModel({self.model!r})"


def lookup_draft(tokens: np.ndarray, k: int, n_max: int = 3, n_min: int = 1) -> np.ndarray:
    """Propose up to ``k`` tokens by finding the last ``n`` tokens earlier in the text.

    For ``n = n_max, ..., n_min``: find the most recent earlier position where the final
    ``n`` tokens occurred, and propose the (at most ``k``) tokens that followed it.  The
    first ``n`` with a match wins.  No match: an empty proposal.

    Examples
    --------
    >>> lookup_draft([5, 6, 7, 8, 1, 5, 6], k=3)
    array([7, 8, 1])
    >>> lookup_draft([1, 2, 3], k=3)
    array([], dtype=int64)
    """
    tokens = as_tokens(tokens, "tokens")
    if tokens.size and tokens.min() < 0:
        raise ValueError(f"tokens: token ids are >= 0, got {int(tokens.min())} at position {int(np.argmin(tokens))}")
    k = as_int(k, "k", minimum=1)
    n_max = as_int(n_max, "n_max", minimum=1)
    n_min = as_int(n_min, "n_min", minimum=1)
    if n_min > n_max:
        raise ValueError(f"n_min: must be <= n_max ({n_max}), got {n_min}")
    return _lookup(tokens, k, n_max, n_min)


def _lookup(tokens: np.ndarray, k: int, n_max: int, n_min: int) -> np.ndarray:
    size = tokens.size
    for n in range(min(n_max, size - 1), n_min - 1, -1):
        tail = tokens[size - n:]
        # Windows starting at 0 .. size - n - 1: every occurrence that ends before the tail does.
        windows = np.lib.stride_tricks.sliding_window_view(tokens[:size - 1], n)
        hits = np.flatnonzero((windows == tail).all(axis=1))
        if hits.size:
            start = hits[-1] + n
            return tokens[start:start + k].copy()
    return np.zeros(0, dtype=np.int64)


class PromptLookup:
    """Prompt lookup: propose what followed the last earlier occurrence of the text's tail.

    No draft model and no draft pass.  The proposal is deterministic, a draft whose rows are
    point masses, so the ratio rule verifies it: keep ``x`` with probability ``q(x)``, else
    draw from ``q`` without ``x``.  Without a match the step is a plain one.
    """

    def __init__(self, n_max: int = 3, n_min: int = 1) -> None:
        self.n_max = as_int(n_max, "n_max", minimum=1)
        self.n_min = as_int(n_min, "n_min", minimum=1)
        if self.n_min > self.n_max:
            raise ValueError(f"n_min: must be <= n_max ({self.n_max}), got {self.n_min}")
        self.vocab_size = None

    def start(self, prompt: np.ndarray, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def propose(self, text: np.ndarray, k: int, policy, choose, timings: dict | None) -> Proposal:
        tokens = _lookup(text, k, self.n_max, self.n_min)
        rows = np.zeros((tokens.size, self.vocab_size))
        rows[np.arange(tokens.size), tokens] = 1.0
        return Proposal(tokens, rows, 0)

    def accept(self, length: int) -> None:
        pass

    def __repr__(self) -> str:
        return f"PromptLookup(n_max={self.n_max}, n_min={self.n_min})"


class MultiDraft:
    """``m`` independent draft sequences of up to ``k`` tokens per step, from one draft model.

    Each sequence is drawn afresh from the same context (``m * k`` draft passes per step);
    the target scores all of them in one tree-shaped pass, and the loop verifies them with
    :func:`speclib.core.variants.multi_draft_verify` unless told otherwise.  The policy's
    ``keep_drafting`` is not consulted: every sequence has the step's full length.
    """

    def __init__(self, model: Callable, m: int, name: str = "draft") -> None:
        self.draft = DraftModel(model, name)
        self.m = as_int(m, "m", minimum=1)
        self.vocab_size = self.draft.vocab_size

    @property
    def verifier(self):
        from .variants import multi_draft_verify  # the rule that goes with this proposer

        return multi_draft_verify

    def start(self, prompt: np.ndarray, vocab_size: int) -> None:
        self.draft.start(prompt, vocab_size)

    def propose(self, text: np.ndarray, k: int, policy, choose, timings: dict | None) -> Proposal:
        cache, name, m = self.draft.cache, self.draft.name, self.m
        tokens = np.empty((m, k), dtype=np.int64)
        rows = np.empty((m, k, self.vocab_size))
        if k == 0:
            return Proposal(tokens, rows, 0)
        first = extend_checked(cache, text[len(cache):], name, timings)[-1]
        for j in range(m):
            cache.rollback(text.size)
            p = first
            for i in range(k):
                if i:
                    p = extend_checked(cache, tokens[j, i - 1:i], name, timings)[0]
                tokens[j, i], rows[j, i] = choose.token(p), p
        cache.rollback(text.size)  # the cache holds one branch of the tree: keep only the text
        return Proposal(tokens, rows, m * k)

    def accept(self, length: int) -> None:
        self.draft.accept(length)

    def __repr__(self) -> str:
        return f"MultiDraft({self.draft.model!r}, m={self.m})"

"""The cache protocol: how a decoding loop feeds a model incrementally and rolls it back.

A speculative step feeds the draft one token at a time, feeds the target a whole block, and
after a rejection must forget the rejected tokens.  Every model the loops of
:mod:`speclib.core.decoding` run is read through one interface, :class:`ModelCache`:

``len(cache)``
    how many tokens have been fed;
``cache.tokens``
    those tokens (a copy);
``cache.extend(tokens)``
    feed more tokens, return their next-token rows, shape ``(len(tokens), V)``;
``cache.rollback(length)``
    keep only the first ``length`` tokens.

A model that keeps real incremental state (the numpy transformer's key/value cache, the
recurrent model of the variants chapter, the Hugging Face adapter) offers ``model.cache()``.
Any other protocol model is read through :class:`RecomputeCache`, which stores the tokens
and recomputes the rows it is asked for from them (through the model's ``context_length``
window when it has one).  :func:`model_cache` picks the right one.

:func:`checked_rows` is the one cheap check of what a model returns, applied once per model
call by the loops: a NaN, a negative entry or a row that does not sum to 1 stops the run
with an error that names the model.
"""

from __future__ import annotations

import time
from typing import Callable, Protocol, runtime_checkable

import numpy as np

from .._validate import SUM_TOLERANCE, as_int, as_tokens


@runtime_checkable
class ModelCache(Protocol):
    """What a decoding loop needs from a model's incremental state."""

    def __len__(self) -> int: ...

    @property
    def tokens(self) -> np.ndarray: ...

    def extend(self, tokens: np.ndarray) -> np.ndarray: ...

    def rollback(self, length: int) -> None: ...


def fed_tokens(tokens: object, vocab_size: int, name: str = "tokens") -> np.ndarray:
    """``tokens`` as int64 ids in range: a two-comparison fast path for arrays a loop built itself."""
    if type(vocab_size) is not int or vocab_size < 1:
        vocab_size = as_int(vocab_size, "vocab_size", minimum=1)
    if type(name) is not str:
        raise TypeError(f"name: expected the argument's name (a string), got {type(name).__name__}")
    if type(tokens) is np.ndarray and tokens.dtype == np.int64 and tokens.ndim == 1:
        if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
            return as_tokens(tokens, name, vocab_size)  # raises, naming the bad token
        return tokens
    return as_tokens(tokens, name, vocab_size)


class RecomputeCache:
    """The generic cache: remember the tokens, recompute rows from them on every ``extend``.

    For a model without incremental state of its own.  ``extend(new)`` calls the model on
    the shortest tail of the text that still determines the new rows (the last
    ``context_length + len(new)`` tokens when the model declares a ``context_length``, the
    whole text otherwise) and returns the last ``len(new)`` rows.  ``name`` is the model's
    name in errors, as the loop calls it ("target", "draft", "model").

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, _ = markov_pair(vocab_size=4, seed=0)
    >>> cache = RecomputeCache(target)
    >>> rows = cache.extend([0, 1, 2])
    >>> cache.rollback(1); len(cache), bool(np.allclose(cache.extend([1]), rows[1:2]))
    (1, True)
    """

    def __init__(self, model: Callable, name: str = "model") -> None:
        if not isinstance(name, str):
            raise TypeError(f"name: expected the model's name (a string), got {type(name).__name__}")
        if not callable(model) or not hasattr(model, "vocab_size"):
            raise TypeError(f"{name}: expected a model (a callable with a vocab_size attribute), "
                            f"got {type(model).__name__}")
        self.model, self.name = model, name
        self.vocab_size = as_int(model.vocab_size, f"{name}.vocab_size", minimum=1)
        self._context = getattr(model, "context_length", None)
        self._buf = np.zeros(64, dtype=np.int64)
        self._length = 0

    def __len__(self) -> int:
        return self._length

    @property
    def tokens(self) -> np.ndarray:
        """The tokens fed so far (a copy)."""
        return self._buf[: self._length].copy()

    def extend(self, tokens: np.ndarray) -> np.ndarray:
        """Feed ``tokens``; return their next-token rows, shape ``(len(tokens), V)``."""
        tokens = fed_tokens(tokens, self.vocab_size)
        n = tokens.size
        need = self._length + n
        if need > self._buf.size:
            grown = np.zeros(max(need, 2 * self._buf.size), dtype=np.int64)
            grown[: self._length] = self._buf[: self._length]
            self._buf = grown
        self._buf[self._length:need] = tokens
        self._length = need
        if n == 0:
            return np.zeros((0, self.vocab_size))
        start = 0 if self._context is None else max(0, need - (self._context + n))
        rows = np.asarray(self.model(self._buf[start:need]), dtype=float)
        if rows.ndim != 2 or rows.shape[0] < n or rows.shape[1] != self.vocab_size:
            raise ValueError(f"{self.name}: a model must map tokens of shape (n,) to probabilities of shape "
                             f"(n, {self.vocab_size}); got {rows.shape} for {need - start} tokens")
        return rows[-n:]

    def rollback(self, length: int) -> None:
        """Keep only the first ``length`` tokens (``0 <= length <= len(self)``)."""
        length = as_int(length, "length", minimum=0)
        if length > self._length:
            raise ValueError(f"length: cannot roll forward, the cache holds {self._length} tokens, got {length}")
        self._length = length

    def __repr__(self) -> str:
        return f"RecomputeCache({self.model!r}, length={self._length})"


class Uncached:
    """``model`` without its own cache: the loops read it through a :class:`RecomputeCache`.

    For comparisons: the same model, the same rows, recomputed from the text at every pass.
    """

    def __init__(self, model: Callable) -> None:
        if not callable(model) or not hasattr(model, "vocab_size"):
            raise TypeError(f"model: expected a model (a callable with a vocab_size attribute), "
                            f"got {type(model).__name__}")
        self.model, self.vocab_size = model, model.vocab_size
        self.context_length = getattr(model, "context_length", None)

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        return self.model(tokens)

    def __repr__(self) -> str:
        return f"Uncached({self.model!r})"


def model_cache(model: Callable, name: str = "model") -> ModelCache:
    """``model.cache()`` when the model has incremental state of its own, else a :class:`RecomputeCache`.

    ``name`` is the model's name in errors ("target", "draft", "model").
    """
    make = getattr(model, "cache", None)
    if make is None:
        return RecomputeCache(model, name)
    cache = make()
    if not isinstance(cache, ModelCache):
        raise TypeError(f"{name}.cache(): expected an object with __len__, tokens, extend and rollback, "
                        f"got {type(cache).__name__}")
    return cache


def checked_rows(rows: np.ndarray, name: str) -> np.ndarray:
    """``rows`` if every row is a probability distribution, else a ValueError naming the model.

    One vectorised pass (minimum and row sums); a NaN fails both comparisons.
    """
    rows = np.asarray(rows)
    if rows.size:
        sums = rows.sum(axis=-1)
        if not (rows.min() >= 0.0 and np.abs(sums - 1.0).max() <= SUM_TOLERANCE):
            bad = ~np.isfinite(rows).all(axis=-1)
            if bad.any():
                what = f"row {int(np.argmax(bad))} contains NaN or an infinite value"
            elif rows.min() < 0.0:
                what = f"row {int(np.argwhere(rows < 0)[0, 0])} has a negative probability"
            else:
                i = int(np.argmax(np.abs(sums - 1.0)))
                what = f"row {i} sums to {float(sums[i]):.6g}, not 1 (tolerance {SUM_TOLERANCE:g})"
            raise ValueError(f"{name}: the model returned rows that are not probability distributions: {what}")
    return rows


def extend_checked(cache: ModelCache, tokens: np.ndarray, name: str, timings: dict | None = None) -> np.ndarray:
    """``cache.extend(tokens)`` with its rows checked, and its time added to ``timings[name]`` if asked.

    If ``timings`` holds a list under ``"passes"``, each pass is also appended to it as
    ``(name, number of tokens fed, seconds)``, so that passes of different sizes (a prompt,
    a verification block, a re-read window) can be told apart.
    """
    if timings is None:
        return checked_rows(cache.extend(tokens), name)
    t0 = time.perf_counter()
    rows = cache.extend(tokens)
    seconds = time.perf_counter() - t0
    timings[name] = timings.get(name, 0.0) + seconds
    passes = timings.get("passes")
    if passes is not None:
        passes.append((name, len(tokens), seconds))
    return checked_rows(rows, name)

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

A cache may also offer ``cache.extend_last(tokens, m)``: feed the tokens and return the rows
of the last ``m`` only (a loop reading a long prompt needs the last row, and a real model's
output head over every prompt position is much of the prompt's cost).
:func:`extend_checked` uses it when asked for the last rows; any other cache is read
through ``extend``.

A model that keeps real incremental state (the numpy transformer's key/value cache, the
recurrent model of the variants chapter, the Hugging Face adapter) offers ``model.cache()``.
Any other protocol model is read through :class:`RecomputeCache`, which stores the tokens
and recomputes the rows it is asked for from them (through the model's ``context_length``
window when it has one).  :func:`model_cache` picks the right one.

:func:`checked_rows` is the one check of what a model returns, at the loop's boundary: one
row per fed token (a model that returns one row too many or too few would shift every row
by a position, and the output would silently follow the wrong law), the model's vocabulary,
and rows that are probability distributions (no NaN, no negative entry, sums of 1).  A
wrong answer stops the run with an error that names the model.  Rows that speclib's own
models compute are right by construction and are not checked again: their class declares
``trusted_rows = True`` (:func:`rows_trusted`); a user's model or cache, or a subclass of
speclib's that may change what it returns, is checked at every call.
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


def rows_trusted(obj: object) -> bool:
    """Whether ``obj`` (a model or a cache) returns rows that need no check: speclib's own.

    Declared by ``trusted_rows = True`` on the object's own class (a subclass, which may
    override what it returns, does not inherit it) or on the object itself (a wrapper of a
    trusted model, such as :class:`Uncached`).

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, _ = markov_pair(vocab_size=4, seed=0)
    >>> rows_trusted(target), rows_trusted(RecomputeCache(target)), rows_trusted(lambda t: t)
    (True, True, False)
    """
    if vars(type(obj)).get("trusted_rows", False) is True:
        return True
    return getattr(obj, "__dict__", {}).get("trusted_rows", False) is True


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
    whole text otherwise) and returns the last ``len(new)`` rows.  The model must return
    exactly one row per token it is given; the rows of a model that is not speclib's own
    are checked (:func:`checked_rows`).  ``name`` is the model's name in errors, as the loop
    calls it ("target", "draft", "model").

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
        self._check = not rows_trusted(model)
        self._buf = np.zeros(64, dtype=np.int64)
        self._length = 0

    #: What :meth:`extend` returns is checked here (a user model's rows) or right by construction.
    trusted_rows = True

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
        return self._rows(self._buf[start:need], n)

    def _rows(self, window: np.ndarray, n: int) -> np.ndarray:
        """The rows of the last ``n`` tokens of ``window``, the shortest text that determines them."""
        rows = self.model(window)
        if self._check:
            rows = checked_rows(rows, self.name, window.size, self.vocab_size)
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
        self.trusted_rows = rows_trusted(model)

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        return self.model(tokens)

    def __repr__(self) -> str:
        return f"Uncached({self.model!r})"


class _CheckedCache:
    """A model's own cache that is not speclib's, with what its ``extend`` returns checked.

    Everything else is the wrapped cache's (attributes are looked up on it).
    """

    trusted_rows = True  # checked here

    def __init__(self, cache: ModelCache, name: str, vocab_size: int) -> None:
        self.cache, self.name, self.vocab_size = cache, name, vocab_size

    def __len__(self) -> int:
        return len(self.cache)

    @property
    def tokens(self) -> np.ndarray:
        return self.cache.tokens

    def extend(self, tokens: np.ndarray) -> np.ndarray:
        return checked_rows(self.cache.extend(tokens), self.name, len(tokens), self.vocab_size)

    def rollback(self, length: int) -> None:
        self.cache.rollback(length)

    def __getattr__(self, attr: str):
        if attr == "cache":  # not set yet (copy and pickle build the object without __init__)
            raise AttributeError(attr)
        return getattr(self.cache, attr)

    def __repr__(self) -> str:
        return repr(self.cache)


def model_cache(model: Callable, name: str = "model") -> ModelCache:
    """``model.cache()`` when the model has incremental state of its own, else a :class:`RecomputeCache`.

    ``name`` is the model's name in errors ("target", "draft", "model").  A cache that is
    not speclib's own has the rows it returns checked (:func:`checked_rows`).
    """
    make = getattr(model, "cache", None)
    if make is None:
        return RecomputeCache(model, name)
    cache = make()
    if not isinstance(cache, ModelCache):
        raise TypeError(f"{name}.cache(): expected an object with __len__, tokens, extend and rollback, "
                        f"got {type(cache).__name__}")
    if rows_trusted(cache):
        return cache
    return _CheckedCache(cache, name, as_int(model.vocab_size, f"{name}.vocab_size", minimum=1))


def checked_rows(rows: object, name: str, n: int | None = None, vocab_size: int | None = None) -> np.ndarray:
    """``rows`` if it holds one probability row per fed token, else an error naming the model.

    Checks: a 2-D array of real numbers (a scalar, 1-D or 3-D answer is refused); ``n`` rows
    when ``n`` is given (one per token the model was given: one too many or too few would
    shift every row by a position); ``vocab_size`` columns when given (and at least one);
    every row a probability distribution (no NaN, no negative entry, a sum of 1 within
    :data:`speclib._validate.SUM_TOLERANCE`).  One vectorised pass over the values.

    Parameters
    ----------
    rows : array_like, shape (n, V)
        What a model returned.
    name : str
        The model's name in errors ("target", "draft", "model").
    n, vocab_size : int, optional
        The number of rows and of columns expected.

    Raises
    ------
    TypeError
        If ``rows`` is not an array of real numbers.
    ValueError
        If its shape or its values are wrong.

    Examples
    --------
    >>> checked_rows([[0.5, 0.5]], "target", n=1, vocab_size=2)
    array([[0.5, 0.5]])
    >>> checked_rows([[0.5, 0.5], [1.0, 0.0]], "target", n=1)
    Traceback (most recent call last):
    ValueError: target: a model must map tokens of shape (n,) to probabilities of shape (n, V), exactly one row per token; it returned 2 rows for 1 token
    """
    if type(name) is not str:
        raise TypeError(f"name: expected the model's name (a string), got {type(name).__name__}")
    if type(rows) is not np.ndarray:
        try:
            rows = np.asarray(rows)
        except (TypeError, ValueError) as error:
            raise TypeError(f"{name}: the model returned {type(rows).__name__}, not an array of rows ({error})") from None
    if rows.dtype.kind not in "fiu":
        raise TypeError(f"{name}: the model returned an array of dtype {rows.dtype}, not probabilities")
    must = f"{name}: a model must map tokens of shape (n,) to probabilities of shape (n, {vocab_size or 'V'})"
    if rows.ndim != 2:
        raise ValueError(f"{must}; it returned an array of shape {rows.shape}")
    if n is not None and rows.shape[0] != n:
        raise ValueError(f"{must}, exactly one row per token; it returned {rows.shape[0]} "
                         f"row{'' if rows.shape[0] == 1 else 's'} for {n} token{'' if n == 1 else 's'}")
    if vocab_size is not None and rows.shape[1] != vocab_size:
        raise ValueError(f"{must}; it returned rows of {rows.shape[1]} probabilities")
    if rows.shape[1] == 0:
        raise ValueError(f"{name}: the model returned rows over an empty vocabulary (shape {rows.shape})")
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


def _extend(cache: ModelCache, tokens: np.ndarray, last: int | None) -> np.ndarray:
    if last is None:
        return cache.extend(tokens)
    if getattr(cache, "extend_last", None) is not None:
        return cache.extend_last(tokens, last)
    return cache.extend(tokens)[len(tokens) - last:]


def extend_checked(cache: ModelCache, tokens: np.ndarray, name: str, timings: dict | None = None,
                   last: int | None = None) -> np.ndarray:
    """``cache.extend(tokens)`` with its rows checked, and its time added to ``timings[name]`` if asked.

    With ``last``, only the rows of the last ``last`` tokens are returned (and checked), through
    the cache's ``extend_last`` where it has one.

    The rows of a cache that :func:`rows_trusted` vouches for (speclib's own, and the
    wrappers of :func:`model_cache`, which check inside) are not checked again.

    If ``timings`` holds a list under ``"passes"``, each pass is also appended to it as
    ``(name, number of tokens fed, seconds)``, so that passes of different sizes (a prompt,
    a verification block, a re-read window) can be told apart.
    """
    count = len(tokens) if last is None else last
    if timings is None:
        rows = _extend(cache, tokens, last)
        return rows if rows_trusted(cache) else checked_rows(rows, name, count, getattr(cache, "vocab_size", None))
    t0 = time.perf_counter()
    rows = _extend(cache, tokens, last)
    seconds = time.perf_counter() - t0
    timings[name] = timings.get(name, 0.0) + seconds
    passes = timings.get("passes")
    if passes is not None:
        passes.append((name, len(tokens), seconds))
    return rows if rows_trusted(cache) else checked_rows(rows, name, count, getattr(cache, "vocab_size", None))

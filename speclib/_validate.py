"""Input validation shared by every public entry point.

Each helper takes the argument's *name* so that its error says which argument is wrong and
how, e.g. ``ValueError: p_draft: row 2 sums to 0.93, not 1 (tolerance 0.000345267)``.  Nothing in
speclib should fail with a traceback from deep inside numpy or return a silent NaN.
"""

from __future__ import annotations

import numbers
import os

import numpy as np

#: How far a probability row may be from summing to 1 before it is rejected: the square root of
#: float32's machine epsilon (about 3.5e-4), the bound numpy's ``Generator.choice`` applies to
#: float32 probabilities.  Rows computed in float32 (a PyTorch softmax, say) over real vocabularies
#: inherit the rounding error of their float32 normaliser: up to about 1e-5 at 50,257 ids and
#: 2e-5 at 262,144, far above a float64 bound such as 1e-6 but more than ten times below this
#: one.  A row further off is not rounding but a mistake (a lost token, a missing normalisation)
#: and is refused.  Accepting a row off by ``d`` moves the sampled law by at most about ``d`` in
#: total variation, since the samplers normalise by the row's own sum.
SUM_TOLERANCE = float(np.sqrt(np.finfo(np.float32).eps))

#: When this environment variable is set (``python3 dev.py test`` sets it), timing loops run at
#: most :data:`QUICK_REPEATS` repetitions: the chapters' timing cells, whose outputs nbval does not
#: compare, then stay short in the test suite, while executed pages keep their full runs.
QUICK_VARIABLE = "SPECLIB_QUICK"
QUICK_REPEATS = 2


def timing_repeats(repeats: int) -> int:
    """``repeats``, or at most :data:`QUICK_REPEATS` when ``SPECLIB_QUICK`` is set.

    Examples
    --------
    >>> timing_repeats(1)
    1
    """
    return min(repeats, QUICK_REPEATS) if os.environ.get(QUICK_VARIABLE) else repeats


def as_generator(rng: object, name: str = "rng") -> np.random.Generator:
    """Return a ``numpy.random.Generator`` from a Generator or an integer seed."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if rng < 0:
            raise ValueError(f"{name}: a seed must be a non-negative integer, got {rng}")
        return np.random.default_rng(int(rng))
    raise TypeError(
        f"{name}: expected a numpy.random.Generator or an integer seed, got {type(rng).__name__}"
        " (randomness in speclib is always explicit: pass np.random.default_rng(seed))"
    )


#: The largest draft length (k, k_max) speclib computes with.  Beyond it the probability of a
#: whole block being accepted underflows for every alpha < 1 - 1e-3, and the arrays the theory
#: builds (one entry per possible step length) would only waste memory.
MAX_DRAFT_LENGTH = 10_000

#: The largest number of entries an array that speclib builds from a size argument may hold
#: (a vocabulary squared, a table of counts...): 2**27 floats, 1 GiB.  A bigger request is refused
#: at once with this limit instead of exhausting memory.
MAX_ENTRIES = 2**27


def as_int(value: object, name: str, minimum: int | None = None, maximum: int | None = None,
           why: str = "") -> int:
    """Return ``value`` as an int, rejecting floats, bools, strings and values outside
    ``[minimum, maximum]``; ``why`` (a few words) explains the maximum in the error."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}: must be <= {maximum}{f' ({why})' if why else ''}, got {value}")
    return value


def as_bool(value: object, name: str) -> bool:
    """Return ``value`` if it is True or False; refuse anything else (the string "False" is truthy)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def as_real_array(values: object, name: str, what: str = "an array of real numbers") -> np.ndarray:
    """Return ``values`` as a float array, refusing strings, truth values, complex numbers and objects
    (which ``np.asarray(..., dtype=float)`` would convert or truncate silently)."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name}: expected {what}, got the string {values!r}")
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name}: expected {what}, got {type(values).__name__} ({error})") from None
    if arr.dtype.kind not in "iuf":
        kinds = {"b": "truth values", "c": "complex numbers", "U": "strings", "S": "strings"}
        got = kinds.get(arr.dtype.kind, f"{type(values).__name__} of dtype {arr.dtype}")
        raise TypeError(f"{name}: expected {what}, got {got}")
    return arr.astype(float)


def as_real(value: object, name: str, low: float | None = None, high: float | None = None) -> float:
    """Return ``value`` as a finite float inside ``[low, high]`` (either bound may be None)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a real number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name}: must be finite, got {value}")
    if low is not None and value < low:
        raise ValueError(f"{name}: must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name}: must be <= {high}, got {value}")
    return value


def as_probability_array(values: object, name: str) -> np.ndarray:
    """Return ``values`` (a scalar or array) as floats in [0, 1], e.g. acceptance rates."""
    arr = as_real_array(values, name, "numbers in [0, 1]")
    if np.isnan(arr).any():
        raise ValueError(f"{name}: contains NaN")
    if (arr < 0).any() or (arr > 1).any():
        raise ValueError(f"{name}: must lie in [0, 1], got values from {arr.min()} to {arr.max()}")
    return arr


def as_distribution(values: object, name: str, ndim: int | None = None) -> np.ndarray:
    """Return ``values`` as a float array whose last axis holds probability distributions.

    Checks: numeric, at least one axis, finite, non-negative, and every row summing to 1
    within :data:`SUM_TOLERANCE`.  ``ndim`` pins the number of axes (1 for one
    distribution, 2 for a batch of rows).
    """
    arr = as_real_array(values, name, "an array of probabilities")
    if arr.ndim == 0:
        raise ValueError(f"{name}: expected an array of probabilities, got a scalar")
    if ndim is not None and arr.ndim != ndim:
        kind = "a 1-D distribution of shape (V,)" if ndim == 1 else f"a {ndim}-D array of rows"
        raise ValueError(f"{name}: expected {kind}, got shape {arr.shape}")
    if arr.shape[-1] == 0:
        raise ValueError(f"{name}: the vocabulary axis is empty (shape {arr.shape})")
    rows = arr.reshape(-1, arr.shape[-1])
    bad = ~np.isfinite(rows)
    if bad.any():
        row = int(np.argwhere(bad)[0, 0])
        what = "NaN" if np.isnan(rows[row]).any() else "an infinite value"
        raise ValueError(f"{name}: row {row} contains {what}")
    if (rows < 0).any():
        row, col = (int(i) for i in np.argwhere(rows < 0)[0])
        raise ValueError(f"{name}: negative probability {rows[row, col]:.3g} at row {row}, token {col}")
    sums = rows.sum(axis=1)
    off = np.abs(sums - 1.0) > SUM_TOLERANCE
    if off.any():
        row = int(np.argmax(off))
        raise ValueError(
            f"{name}: row {row} sums to {sums[row]:.6g}, not 1 (tolerance {SUM_TOLERANCE:g})"
        )
    return arr


def as_tokens(tokens: object, name: str, vocab_size: int | None = None, allow_empty: bool = True) -> np.ndarray:
    """Return ``tokens`` as a 1-D int64 array of token ids in ``[0, vocab_size)``."""
    arr = np.asarray(tokens)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D sequence of token ids, got shape {arr.shape}")
    if arr.size == 0:
        if not allow_empty:
            raise ValueError(f"{name}: must contain at least one token")
        return arr.astype(np.int64)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"{name}: token ids must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if vocab_size is not None:
        out = (arr < 0) | (arr >= vocab_size)
        if out.any():
            i = int(np.argmax(out))
            raise ValueError(
                f"{name}: token {arr[i]} at position {i} is out of range for a vocabulary of {vocab_size}"
            )
    return arr


#: The most tokens one call generates: far beyond what the book's models produce in minutes,
#: and refused at once instead of running for hours.
MAX_NEW_TOKENS = 10_000_000

#: The most speculative steps (blocks) one traced run records.
MAX_BLOCKS = 1_000_000


def as_int_list(values: object, name: str, minimum: int | None = None, maximum: int | None = None) -> list[int]:
    """Return ``values`` (a sequence of integers, e.g. draft lengths ``ks``) as a list of ints."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name}: expected a sequence of integers, got {values!r} ({type(values).__name__})"
                        + (f"; for one value write [{values!r}]" if isinstance(values, numbers.Integral) else ""))
    out = [as_int(v, name, minimum, maximum) for v in values]
    if not out:
        raise ValueError(f"{name}: must contain at least one value")
    return out


#: The most repetitions a timing helper (``reps``, ``repeats``) runs: even a 1 ms pass repeated
#: 10**5 times takes minutes, and a median settles after a few dozen.  A bigger request is
#: refused at once instead of allocating its table of timings and running for days.
MAX_REPEATS = 100_000


def as_path(value: object, name: str = "path") -> "Path":
    """Return ``value`` (a string or ``os.PathLike``) as a ``pathlib.Path``, refusing other kinds
    and the empty string (which would name the current directory)."""
    import os
    from pathlib import Path

    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name}: expected a file path (a string or pathlib.Path), got {value!r} "
                        f"({type(value).__name__})")
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"{name}: expected a file path, got an empty string")
    return Path(value)


def as_real_list(values: object, name: str, low: float | None = None, high: float | None = None) -> list[float]:
    """Return ``values`` (a sequence of real numbers, e.g. ``temperatures``) as a list of finite floats."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name}: expected a sequence of real numbers, got {values!r} ({type(values).__name__})"
                        + (f"; for one value write [{values!r}]" if isinstance(values, numbers.Real) else ""))
    out = [as_real(v, name, low, high) for v in values]
    if not out:
        raise ValueError(f"{name}: must contain at least one value")
    return out


def model_rows(model: object, tokens: np.ndarray, name: str) -> np.ndarray:
    """Call ``model`` on ``tokens`` and check what it returns, naming the model in any error.

    A model (see :mod:`speclib.lm.models`) maps ``n`` tokens to ``(n, vocab_size)`` rows that are
    probability distributions; rows with NaN, negative entries or a wrong shape are refused here,
    before anything is sampled from them.
    """
    if not callable(model):
        raise TypeError(f"{name}: expected a model (a callable with a vocab_size), got {type(model).__name__}")
    vocab = getattr(model, "vocab_size", None)
    rows = np.asarray(model(tokens))
    n = len(tokens)
    if rows.ndim != 2 or rows.shape[0] != n or (vocab is not None and rows.shape[1] != vocab):
        want = f"({n}, {vocab})" if vocab is not None else f"({n}, V)"
        raise ValueError(f"{name}: returned rows of shape {rows.shape} for {n} tokens, expected {want}")
    return as_distribution(rows, f"{name} (the rows it returned)")

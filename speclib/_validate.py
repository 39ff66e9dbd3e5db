"""Input validation shared by every public entry point.

Each helper takes the argument's *name* so that its error says which argument is wrong and
how, e.g. ``ValueError: p_draft: row 2 sums to 0.93, not 1 (tolerance 0.000345267)``.  Nothing in
speclib should fail with a traceback from deep inside numpy or return a silent NaN.
"""

from __future__ import annotations

import numbers

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


def as_int(value: object, name: str, minimum: int | None = None) -> int:
    """Return ``value`` as an int, rejecting floats, bools and values below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {value}")
    return value


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
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected numbers in [0, 1], got {values!r}") from None
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
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected an array of probabilities, got {type(values).__name__}") from None
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

"""A matrix product for a few rows that reads each weight once: the verification kernel.

A verification pass multiplies ``k + 1`` rows of activations by every weight matrix of the
target.  A general matrix library (numpy's BLAS) is tuned for one row (a matrix-vector
product, limited by how fast the weights stream from memory) and for many rows (a blocked
product that repacks the matrix first); a handful of rows can cost several single rows.
The kernel here computes ``out = x @ w`` for a few rows the way accelerators verify a draft:
it walks through the weights once, and while a stretch of weights is at hand it updates the
running sums of *every* row, so four rows cost little more than one as long as the
arithmetic keeps up with memory.

It needs numba (``requirements.txt`` installs it); :func:`available` says whether it can be
used, and :mod:`speclib.lm.products` falls back on numpy's products without it.  The weights
are passed transposed, ``wt = w.T`` made contiguous, so that the sums run along memory.
Compiled code is cached next to this file (numba's ``cache=True``) after the first use.
"""

from __future__ import annotations

import numpy as np

_NUMBA = None  # the numba module once imported, False when it cannot be


def available() -> bool:
    """Whether numba is installed, so that :func:`rows_matmul` can run."""
    global _NUMBA
    if _NUMBA is None:
        try:
            import numba
        except Exception:  # not installed, or broken beside this numpy
            _NUMBA = False
        else:
            _NUMBA = numba
    return _NUMBA is not False


def _tile4(x, wt, out, i, j, n):
    # Rows i .. i+3 of x against columns j .. j+2 of w: twelve running sums that stay in
    # registers while the three weight columns stream past once.  Columns past the last one
    # (n is not a multiple of 3) repeat the last column and are not written.
    j1, j2 = min(j + 1, n - 1), min(j + 2, n - 1)
    s00 = s01 = s02 = s10 = s11 = s12 = np.float32(0.0)
    s20 = s21 = s22 = s30 = s31 = s32 = np.float32(0.0)
    for t in range(x.shape[1]):
        w0, w1, w2 = wt[j, t], wt[j1, t], wt[j2, t]
        x0, x1, x2, x3 = x[i, t], x[i + 1, t], x[i + 2, t], x[i + 3, t]
        s00 += x0 * w0; s01 += x0 * w1; s02 += x0 * w2  # noqa: E702
        s10 += x1 * w0; s11 += x1 * w1; s12 += x1 * w2  # noqa: E702
        s20 += x2 * w0; s21 += x2 * w1; s22 += x2 * w2  # noqa: E702
        s30 += x3 * w0; s31 += x3 * w1; s32 += x3 * w2  # noqa: E702
    for c, (a, b, d, e) in ((j, (s00, s10, s20, s30)), (j + 1, (s01, s11, s21, s31)),
                            (j + 2, (s02, s12, s22, s32))):
        if c < n:
            out[i, c], out[i + 1, c], out[i + 2, c], out[i + 3, c] = a, b, d, e


def _tile2(x, wt, out, i, j, n):
    # The same for two rows (what is left of the rows after the groups of four).
    j1, j2 = min(j + 1, n - 1), min(j + 2, n - 1)
    s00 = s01 = s02 = s10 = s11 = s12 = np.float32(0.0)
    for t in range(x.shape[1]):
        w0, w1, w2 = wt[j, t], wt[j1, t], wt[j2, t]
        x0, x1 = x[i, t], x[i + 1, t]
        s00 += x0 * w0; s01 += x0 * w1; s02 += x0 * w2  # noqa: E702
        s10 += x1 * w0; s11 += x1 * w1; s12 += x1 * w2  # noqa: E702
    for c, (a, b) in ((j, (s00, s10)), (j + 1, (s01, s11)), (j + 2, (s02, s12))):
        if c < n:
            out[i, c], out[i + 1, c] = a, b


def _tile1(x, wt, out, i, j, n):
    # And for the last single row.
    j1, j2 = min(j + 1, n - 1), min(j + 2, n - 1)
    s0 = s1 = s2 = np.float32(0.0)
    for t in range(x.shape[1]):
        x0 = x[i, t]
        s0 += x0 * wt[j, t]; s1 += x0 * wt[j1, t]; s2 += x0 * wt[j2, t]  # noqa: E702
    for c, s in ((j, s0), (j + 1, s1), (j + 2, s2)):
        if c < n:
            out[i, c] = s


def _rows_matmul(x, wt, out):
    # For every three columns of w, all the rows of x: the three columns are read from memory
    # once, and stay in the nearest cache while each group of rows passes over them.
    m, n = x.shape[0], wt.shape[0]
    for j in range(0, n, 3):
        i = 0
        while i + 4 <= m:
            tile4(x, wt, out, i, j, n)
            i += 4
        if i + 2 <= m:
            tile2(x, wt, out, i, j, n)
            i += 2
        if i < m:
            tile1(x, wt, out, i, j, n)


_compiled = None


def _compile():
    global _compiled, tile4, tile2, tile1
    if _compiled is None:
        if not available():
            raise RuntimeError("the verification kernel needs numba: pip install -r requirements.txt")
        # fastmath lets the compiler reorder each sum into vector registers (8 float32 lanes).
        jit = _NUMBA.njit(fastmath=True, cache=True, nogil=True)
        tile4, tile2, tile1 = jit(_tile4), jit(_tile2), jit(_tile1)
        _compiled = jit(_rows_matmul)
    return _compiled


def rows_matmul(x: np.ndarray, wt: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[:] = x @ wt.T`` for float32 C-contiguous ``x`` (m, K), ``wt`` (n, K), ``out`` (m, n).

    No argument checks (it runs inside every pass): :class:`speclib.lm.products.Product`
    prepares the arrays.  Returns ``out``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((5, 16)).astype(np.float32)
    >>> w = rng.standard_normal((16, 7)).astype(np.float32)
    >>> out = np.empty((5, 7), np.float32)
    >>> if available():
    ...     _ = rows_matmul(x, np.ascontiguousarray(w.T), out)
    ... else:
    ...     out[:] = x @ w
    >>> bool(np.allclose(out, x @ w, atol=1e-5))
    True
    """
    _compile()(x, wt, out)
    return out


def _attend(q, keys, values, filled, mask, out):
    # Causal attention of n new tokens (queries q, (heads, n, dh), already scaled) over the
    # window slots 0 .. filled + n - 1 of one layer's keys and values, (heads, slots, dh).
    # Without a mask (mask.shape[0] == 0) token i sees slots 0 .. filled + i; with one,
    # mask[i, j] (0 or -inf) is added to the score of slot j.  out: (n, heads * dh).
    h, n, dh = q.shape
    end = filled + n
    scores = np.empty(end, dtype=np.float32)
    acc = np.empty(dh, dtype=np.float32)
    for a in range(h):
        for i in range(n):
            last = end if mask.shape[0] else filled + i + 1
            top = np.float32(-np.inf)
            for j in range(last):
                s = np.float32(0.0)
                for d in range(dh):
                    s += q[a, i, d] * keys[a, j, d]
                if mask.shape[0]:
                    s += mask[i, j]
                scores[j] = s
                top = max(top, s)
            total = np.float32(0.0)
            for j in range(last):
                e = np.float32(np.exp(scores[j] - top))
                scores[j] = e
                total += e
            acc[:] = 0.0
            for j in range(last):
                p = scores[j] / total
                for d in range(dh):
                    acc[d] += p * values[a, j, d]
            out[i, a * dh:(a + 1) * dh] = acc


_attend_compiled = None


def attend(q: np.ndarray, keys: np.ndarray, values: np.ndarray, filled: int, mask: np.ndarray | None) -> np.ndarray:
    """Attention of ``n`` new tokens in one layer, compiled (see :meth:`Transformer._run`).

    ``q`` ``(heads, n, dh)`` scaled queries; ``keys``/``values`` ``(heads, slots, dh)``, the new
    tokens' own keys already written at slots ``filled .. filled + n - 1``; ``mask`` None
    (a chain: causal) or ``(n, filled + n)`` of 0 and -inf (a token tree).  Returns the
    heads' mixed values side by side, ``(n, heads * dh)`` float32.
    """
    global _attend_compiled
    if _attend_compiled is None:
        _compile()
        # Reordering the sums is allowed; infinities are not assumed away (the mask holds -inf).
        _attend_compiled = _NUMBA.njit(fastmath={"reassoc", "contract", "nsz", "arcp"}, cache=True,
                                       nogil=True)(_attend)
    h, n, dh = q.shape
    out = np.empty((n, h * dh), dtype=np.float32)
    none = _NO_MASK if mask is None else mask
    _attend_compiled(np.ascontiguousarray(q), keys, values, filled, none, out)
    return out


_NO_MASK = np.zeros((0, 0), dtype=np.float32)

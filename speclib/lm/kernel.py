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


def _tile4(x, wt, out, i, j, n, o):
    # Rows i .. i+3 of x against columns j .. j+2 of w (rows of wt): twelve
    # running sums that stay in registers while the three weight columns
    # stream past once; column j goes to column o of out.  Columns past the
    # last one (n is not a multiple of 3) repeat the last column and are not
    # written.
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
    for c, (a, b, d, e) in ((0, (s00, s10, s20, s30)),
                            (1, (s01, s11, s21, s31)),
                            (2, (s02, s12, s22, s32))):
        if j + c < n:
            out[i, o + c], out[i + 1, o + c], out[i + 2, o + c], out[i + 3, o + c] = a, b, d, e


def _tile3(x, wt, out, i, j, n, o):
    # Three rows against three columns: nine running sums.
    j1, j2 = min(j + 1, n - 1), min(j + 2, n - 1)
    s00 = s01 = s02 = s10 = s11 = s12 = s20 = s21 = s22 = np.float32(0.0)
    for t in range(x.shape[1]):
        w0, w1, w2 = wt[j, t], wt[j1, t], wt[j2, t]
        x0, x1, x2 = x[i, t], x[i + 1, t], x[i + 2, t]
        s00 += x0 * w0; s01 += x0 * w1; s02 += x0 * w2  # noqa: E702
        s10 += x1 * w0; s11 += x1 * w1; s12 += x1 * w2  # noqa: E702
        s20 += x2 * w0; s21 += x2 * w1; s22 += x2 * w2  # noqa: E702
    for c, (a, b, d) in ((0, (s00, s10, s20)), (1, (s01, s11, s21)), (2, (s02, s12, s22))):
        if j + c < n:
            out[i, o + c], out[i + 1, o + c], out[i + 2, o + c] = a, b, d


def _tile2(x, wt, out, i, j, n, o):
    # The same for two rows.
    j1, j2 = min(j + 1, n - 1), min(j + 2, n - 1)
    s00 = s01 = s02 = s10 = s11 = s12 = np.float32(0.0)
    for t in range(x.shape[1]):
        w0, w1, w2 = wt[j, t], wt[j1, t], wt[j2, t]
        x0, x1 = x[i, t], x[i + 1, t]
        s00 += x0 * w0; s01 += x0 * w1; s02 += x0 * w2  # noqa: E702
        s10 += x1 * w0; s11 += x1 * w1; s12 += x1 * w2  # noqa: E702
    for c, (a, b) in ((0, (s00, s10)), (1, (s01, s11)), (2, (s02, s12))):
        if j + c < n:
            out[i, o + c], out[i + 1, o + c] = a, b


def _tile1(x, wt, out, i, j, n, o):
    # And for one row (a matrix-vector product).
    j1, j2 = min(j + 1, n - 1), min(j + 2, n - 1)
    s0 = s1 = s2 = np.float32(0.0)
    for t in range(x.shape[1]):
        x0 = x[i, t]
        s0 += x0 * wt[j, t]; s1 += x0 * wt[j1, t]; s2 += x0 * wt[j2, t]  # noqa: E702
    for c, s in ((0, s0), (1, s1), (2, s2)):
        if j + c < n:
            out[i, o + c] = s


def _groups(m):
    # Rows in groups of four, then one group of the three, two or one left.
    sizes = [4] * (m // 4)
    if m % 4:
        sizes.append(m % 4)
    return sizes


def _rows_matmul(x, wt, out):
    # For every three columns of w, all the groups of rows: the three
    # columns are read from memory once, and stay in the nearest cache
    # while each group passes over them.  (Twelve running sums, four rows
    # by three columns, fill most of an AVX2 core's sixteen vector
    # registers; wider tiles measured slower: the compiler's unrolled
    # sums spill.)
    #
    # With two rows or more, the next three columns are prefetched first: the
    # tiles multiply for longer than one row's tile, and without asking, the
    # next columns would start loading only when the tiles reach them.
    m, n, inner = x.shape[0], wt.shape[0], wt.shape[1]
    sizes = groups(m)
    for j in range(0, n, 3):
        if m > 1:
            for c in range(j + 3, min(j + 6, n)):
                row = wt[c]
                for t in range(0, inner, 16):  # one cache line of float32
                    prefetch(row, t)
        i = 0
        for size in sizes:
            if size == 4:
                tile4(x, wt, out, i, j, n, j)
            elif size == 3:
                tile3(x, wt, out, i, j, n, j)
            elif size == 2:
                tile2(x, wt, out, i, j, n, j)
            else:
                tile1(x, wt, out, i, j, n, j)
            i += size


_compiled = None


def _compile():
    global _compiled, tile4, tile3, tile2, tile1, groups, prefetch
    if _compiled is None:
        if not available():
            raise RuntimeError("the verification kernel needs numba: pip install -r requirements.txt")
        from ._prefetch import prefetch
        # fastmath lets the compiler reorder each sum into vector registers (8 float32 lanes).
        jit = _NUMBA.njit(fastmath=True, cache=True, nogil=True)
        tile4, tile3, tile2, tile1 = jit(_tile4), jit(_tile3), jit(_tile2), jit(_tile1)
        groups = jit(_groups)
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


def _attend(q, keys, values, lo, filled, mask, out):
    # Causal attention of n new tokens (queries q, (heads, n, dh), already scaled) over the
    # slots lo .. filled + n - 1 of one layer's keys and values, (heads, slots, dh), the new
    # tokens' own at filled .. filled + n - 1.  Without a mask (mask.shape[0] == 0) token i
    # sees slots lo .. filled + i; with one, mask[i, j - lo] (0 or -inf) is added to the
    # score of slot j.  out: (n, heads * dh).  (lo > 0: a window that starts later, EAGLE's.)
    h, n, dh = q.shape
    end = filled + n
    scores = np.empty(end - lo, dtype=np.float32)
    acc = np.empty(dh, dtype=np.float32)
    for a in range(h):
        for i in range(n):
            last = end if mask.shape[0] else filled + i + 1
            top = np.float32(-np.inf)
            for j in range(lo, last):
                s = np.float32(0.0)
                for d in range(dh):
                    s += q[a, i, d] * keys[a, j, d]
                if mask.shape[0]:
                    s += mask[i, j - lo]
                scores[j - lo] = s
                top = max(top, s)
            total = np.float32(0.0)
            for j in range(last - lo):
                e = np.float32(np.exp(scores[j] - top))
                scores[j] = e
                total += e
            acc[:] = 0.0
            for j in range(lo, last):
                p = scores[j - lo] / total
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
    _compile_attend()
    h, n, dh = q.shape
    out = np.empty((n, h * dh), dtype=np.float32)
    none = _NO_MASK if mask is None else mask
    _attend_compiled(np.ascontiguousarray(q), keys, values, 0, filled, none, out)
    return out


_NO_MASK = np.zeros((0, 0), dtype=np.float32)


def _compile_attend() -> None:
    global _attend_compiled
    if _attend_compiled is None:
        _compile()
        # Reordering the sums is allowed; infinities are not assumed away (the mask holds -inf).
        _attend_compiled = _NUMBA.njit(fastmath={"reassoc", "contract", "nsz", "arcp"}, cache=True,
                                       nogil=True)(_attend)


# --------------------------------------------------------------------------- the whole pass, compiled


def _layer_norm_rows(x, g, b, eps, out):
    # out[i] = (x[i] - mean) / sqrt(var + eps) * g + b, row by row (as transformer._layer_norm).
    n, d = x.shape
    inv_d = np.float32(1.0 / d)
    for i in range(n):
        mean = np.float32(0.0)
        for t in range(d):
            mean += x[i, t]
        mean *= inv_d
        var = np.float32(0.0)
        for t in range(d):
            c = x[i, t] - mean
            var += c * c
        var *= inv_d
        scale = np.float32(1.0) / np.sqrt(var + eps)
        for t in range(d):
            out[i, t] = (x[i, t] - mean) * scale * g[t] + b[t]


def _block(x, ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b, w_up, b_up, w_down, b_down,
           keys, values, lo, filled, mask, eps, gelu_c, scale):
    # One transformer block on the residual stream x (n, d), in place: the new tokens' keys and
    # values are written to slots filled .. filled + n - 1 of keys/values (heads, slots, dh).
    n, d = x.shape
    h, _, dh = keys.shape
    a = np.empty((n, d), dtype=np.float32)
    qkv = np.empty((n, 3 * d), dtype=np.float32)
    q = np.empty((h, n, dh), dtype=np.float32)
    y = np.empty((n, d), dtype=np.float32)
    up = np.empty((n, w_up.shape[0]), dtype=np.float32)
    layer_norm_rows(x, ln1_g, ln1_b, eps, a)
    rows_mm(a, w_qkv, qkv)
    for i in range(n):
        for c in range(h):
            for e in range(dh):
                q[c, i, e] = (qkv[i, c * dh + e] + b_qkv[c * dh + e]) * scale
                keys[c, filled + i, e] = qkv[i, d + c * dh + e] + b_qkv[d + c * dh + e]
                values[c, filled + i, e] = qkv[i, 2 * d + c * dh + e] + b_qkv[2 * d + c * dh + e]
    attend_rows(q, keys, values, lo, filled, mask, y)
    rows_mm(y, w_o, a)
    for i in range(n):
        for t in range(d):
            x[i, t] += a[i, t] + b_o[t]
    layer_norm_rows(x, ln2_g, ln2_b, eps, a)
    rows_mm(a, w_up, up)
    for i in range(n):
        for t in range(up.shape[1]):
            u = up[i, t] + b_up[t]
            z = min(np.float32(-2.0) * gelu_c * (u + np.float32(0.044715) * u * u * u), np.float32(80.0))
            up[i, t] = u / (np.float32(1.0) + np.exp(z))
    rows_mm(up, w_down, a)
    for i in range(n):
        for t in range(d):
            x[i, t] += a[i, t] + b_down[t]


def _forward(tokens, positions, filled, eps, gelu_c, scale, wte, wpe, ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o,
             ln2_g, ln2_b, w_up, b_up, w_down, b_down, lnf_g, lnf_b, w_out, keys, values, mask, features, logits):
    # One pass of the network over n tokens (Transformer._run, fused): every matrix is given
    # transposed, (out, in), and stacked over layers; keys/values (layers, heads, slots, dh).
    n = tokens.shape[0]
    d = wte.shape[1]
    x = np.empty((n, d), dtype=np.float32)
    for i in range(n):
        for t in range(d):
            x[i, t] = wte[tokens[i], t] + wpe[positions[i], t]
    for layer in range(keys.shape[0]):
        block(x, ln1_g[layer], ln1_b[layer], w_qkv[layer], b_qkv[layer], w_o[layer], b_o[layer], ln2_g[layer],
              ln2_b[layer], w_up[layer], b_up[layer], w_down[layer], b_down[layer], keys[layer], values[layer],
              0, filled, mask, eps, gelu_c, scale)
    a = np.empty((n, d), dtype=np.float32)
    layer_norm_rows(x, lnf_g, lnf_b, eps, a)
    if features.shape[0]:
        features[:, :] = a
    rows_mm(a, w_out, logits)


def _eagle_pass(features, embeddings, fc_w, fc_b, ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b, w_up, b_up,
                w_down, b_down, lnf_g, lnf_b, out_w, out_b, keys, values, lo, filled, mask, eps, gelu_c, scale,
                result):
    # EAGLE's drafter on n entries (speclib.lm.drafters.EagleDrafter._pass, fused): fc of each
    # state and embedding, one block (keys/values: all its slots, the entries written from slot
    # filled on, attending from slot lo; mask as for _attend), final layer norm, projection back
    # to the target's width, into result (n, d_t).
    n, d_t = features.shape
    z = np.empty((n, 2 * d_t), dtype=np.float32)
    z[:, :d_t] = features
    z[:, d_t:] = embeddings
    x = np.empty((n, fc_w.shape[0]), dtype=np.float32)
    rows_mm(z, fc_w, x)
    for i in range(n):
        for t in range(x.shape[1]):
            x[i, t] += fc_b[t]
    block(x, ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b, w_up, b_up, w_down, b_down, keys, values,
          lo, filled, mask, eps, gelu_c, scale)
    a = np.empty_like(x)
    layer_norm_rows(x, lnf_g, lnf_b, eps, a)
    rows_mm(a, out_w, result)
    for i in range(n):
        for t in range(result.shape[1]):
            result[i, t] += out_b[t]


_forward_compiled = None


_eagle_compiled = None


def forward_compiled():
    """The compiled whole pass (numba), compiled on first use; see :class:`CompiledPass`."""
    global _forward_compiled, _eagle_compiled, layer_norm_rows, rows_mm, attend_rows, block
    if _forward_compiled is None:
        _compile()
        # Reordering sums is allowed; infinities are not assumed away (a tree's mask holds -inf).
        jit = _NUMBA.njit(fastmath={"reassoc", "contract", "nsz", "arcp"}, cache=True, nogil=True)
        layer_norm_rows = jit(_layer_norm_rows)
        rows_mm = _compiled
        _compile_attend()
        attend_rows = _attend_compiled
        block = jit(_block)
        _eagle_compiled = jit(_eagle_pass)
        _forward_compiled = jit(_forward)
    return _forward_compiled


def eagle_compiled():
    """The compiled EAGLE pass (numba), compiled on first use; see ``EagleDrafter``."""
    forward_compiled()
    return _eagle_compiled


class CompiledPass:
    """A :class:`~speclib.lm.transformer.Transformer`'s pass as one compiled function.

    Holds the model's matrices transposed and stacked over layers (made once), and runs
    :meth:`Transformer._run <speclib.lm.transformer.Transformer._run>`'s arithmetic in one
    numba call: no numpy operation per layer, so a pass over one token pays no Python
    overhead beyond the call, and a pass over ``k + 1`` tokens walks through each weight
    once for all of them (the product of :func:`rows_matmul`).
    """

    def __init__(self, params: dict[str, np.ndarray], n_layers: int, n_heads: int, w_out: np.ndarray,
                 eps: float, gelu_c: float) -> None:
        def stack(name: str, transpose: bool = False) -> np.ndarray:
            arrays = [params[f"h{i}.{name}"] for i in range(n_layers)]
            return np.ascontiguousarray(np.stack([a.T if transpose else a for a in arrays]), dtype=np.float32)

        self.wte, self.wpe = params["wte"], params["wpe"]
        self.layers = (stack("ln1.g"), stack("ln1.b"), stack("attn.w_qkv", True), stack("attn.b_qkv"),
                       stack("attn.w_o", True), stack("attn.b_o"), stack("ln2.g"), stack("ln2.b"),
                       stack("mlp.w_up", True), stack("mlp.b_up"), stack("mlp.w_down", True), stack("mlp.b_down"))
        self.final = (params["ln_f.g"], params["ln_f.b"], np.ascontiguousarray(w_out.T, dtype=np.float32))
        self.d, self.heads = self.wte.shape[1], n_heads
        self.eps, self.gelu_c = np.float32(eps), np.float32(gelu_c)
        self.scale = np.float32(1.0 / np.sqrt(self.d // n_heads))
        self._no_features = np.zeros((0, self.d), dtype=np.float32)

    def __call__(self, tokens: np.ndarray, filled: int, keys: np.ndarray, values: np.ndarray,
                 features: np.ndarray | None, positions: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        n = tokens.size
        logits = np.empty((n, self.final[2].shape[0]), dtype=np.float32)
        out = self._no_features if features is None else np.empty((n, self.d), dtype=np.float32)
        forward_compiled()(np.ascontiguousarray(tokens, dtype=np.int64), np.ascontiguousarray(positions, dtype=np.int64),
                           filled, self.eps, self.gelu_c, self.scale, self.wte, self.wpe, *self.layers, *self.final,
                           keys, values, _NO_MASK if mask is None else np.ascontiguousarray(mask, dtype=np.float32),
                           out, logits)
        if features is not None:
            features[...] = out
        return logits

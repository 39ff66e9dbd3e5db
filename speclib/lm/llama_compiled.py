"""The Llama pass of :mod:`speclib.lm.llama` as one compiled call.

A pass over one token of a 135-million-parameter model reads every weight once; numpy
would add, to that, some twenty library calls per block, each of a few microseconds, and
the arrays they allocate.  Here the whole pass (every block, the final norm and the head)
is one call compiled by numba: the products are those of :mod:`speclib.lm.quant` (each
weight read, or decoded, once for all the rows of the pass), and the rest (norms, the
rotary embedding, grouped-query attention over the cache, SwiGLU) are loops over the few
rows of the pass.

It computes what :meth:`speclib.lm.llama.Llama._run` computes, up to float32 rounding
(the tests compare them), writes the new keys and values into the same cache arrays, and
takes the same arguments: :class:`CompiledPass` is built once per model and called in its
place.
"""

from __future__ import annotations

import numpy as np

from . import kernel as _kernel
from . import quant as _quant


def _mm(x, codes, scale, offset, out, block):
    # The product of quant.Linear: float32 weights (scale is empty) or the file's codes.
    if scale.shape[0] == 0:
        rows_mm(x, codes, out)
    else:
        q8_rows(x, codes, scale, offset, out, block)


def _rms_rows(x, gain, eps, out):
    for i in range(x.shape[0]):
        total = np.float32(0.0)
        for t in range(x.shape[1]):
            total += x[i, t] * x[i, t]
        r = np.float32(1.0) / np.sqrt(total / np.float32(x.shape[1]) + eps)
        for t in range(x.shape[1]):
            out[i, t] = x[i, t] * r * gain[t]


def _rotate(x, first, heads, dh, cos, sin, positions, adjacent):
    # The rotary embedding of heads first .. first + heads - 1 of every row of x, in place:
    # pair (2m, 2m + 1) (adjacent) or (m, m + dh/2) of a head turns by positions[i] * freq_m.
    half = dh // 2
    for i in range(x.shape[0]):
        p = positions[i]
        for h in range(first, first + heads):
            b = h * dh
            for m in range(half):
                a0, a1 = (b + 2 * m, b + 2 * m + 1) if adjacent else (b + m, b + m + half)
                c, s = cos[p, m], sin[p, m]
                u, v = x[i, a0], x[i, a1]
                x[i, a0] = u * c - v * s
                x[i, a1] = u * s + v * c


def _attend(qkv, keys, values, filled, mask, n_heads, n_kv, dh, scale, out, scores):
    # Grouped-query attention of the n new rows (queries in qkv's first n_heads * dh columns)
    # over slots 0 .. filled + n - 1 of one layer's keys and values, (n_kv, slots, dh).
    # Without a mask (mask.shape[0] == 0) row i sees slots 0 .. filled + i; with one, mask[i, j]
    # (0 or -inf) is added to the score of slot j.
    n = qkv.shape[0]
    end = filled + n
    group = n_heads // n_kv
    for a in range(n_heads):
        g = a // group
        for i in range(n):
            last = end if mask.shape[0] else filled + i + 1
            top = np.float32(-np.inf)
            for j in range(last):
                s = np.float32(0.0)
                for d in range(dh):
                    s += qkv[i, a * dh + d] * keys[g, j, d]
                s *= scale
                if mask.shape[0]:
                    s += mask[i, j]
                scores[j] = s
                top = max(top, s)
            total = np.float32(0.0)
            for j in range(last):
                e = np.float32(np.exp(scores[j] - top))
                scores[j] = e
                total += e
            inv = np.float32(1.0) / total
            for d in range(dh):
                out[i, a * dh + d] = 0.0
            for j in range(last):
                p = scores[j] * inv
                if p != 0.0:
                    for d in range(dh):
                        out[i, a * dh + d] += p * values[g, j, d]


def _forward(x, positions, filled, mask, keys, values, attn_norm, ffn_norm, out_norm,
             qkv_c, qkv_s, qkv_o, wo_c, wo_s, wo_o, gu_c, gu_s, gu_o, dn_c, dn_s, dn_o,
             cos, sin, n_heads, n_kv, dh, d_ff, eps, scale, adjacent, block, features):
    # x: (n, d) the new tokens' embeddings, updated in place into the last hidden state; on
    # return, features holds its final norm (the head's input).
    n, d = x.shape
    a = np.empty((n, d), np.float32)
    qkv = np.empty((n, (n_heads + 2 * n_kv) * dh), np.float32)
    att = np.empty((n, n_heads * dh), np.float32)
    gu = np.empty((n, 2 * d_ff), np.float32)
    act = np.empty((n, d_ff), np.float32)
    tmp = np.empty((n, d), np.float32)
    scores = np.empty(filled + n, np.float32)
    k0, v0 = n_heads * dh, (n_heads + n_kv) * dh
    for layer in range(len(qkv_c)):
        _rms_rows(x, attn_norm[layer], eps, a)
        _mm(a, qkv_c[layer], qkv_s[layer], qkv_o[layer], qkv, block)
        _rotate(qkv, 0, n_heads + n_kv, dh, cos, sin, positions, adjacent)
        kl, vl = keys[layer], values[layer]
        for i in range(n):
            for g in range(n_kv):
                for t in range(dh):
                    kl[g, filled + i, t] = qkv[i, k0 + g * dh + t]
                    vl[g, filled + i, t] = qkv[i, v0 + g * dh + t]
        _attend(qkv, kl, vl, filled, mask, n_heads, n_kv, dh, scale, att, scores)
        _mm(att, wo_c[layer], wo_s[layer], wo_o[layer], tmp, block)
        x += tmp
        _rms_rows(x, ffn_norm[layer], eps, a)
        _mm(a, gu_c[layer], gu_s[layer], gu_o[layer], gu, block)
        for i in range(n):
            for t in range(d_ff):
                g = gu[i, t]
                act[i, t] = g / (np.float32(1.0) + np.float32(np.exp(-max(g, np.float32(-80.0))))) * gu[i, d_ff + t]
        _mm(act, dn_c[layer], dn_s[layer], dn_o[layer], tmp, block)
        x += tmp
    _rms_rows(x, out_norm, eps, features)


_forward_compiled = None


def forward_compiled():
    """The compiled pass (numba), compiled on first use and cached next to this file."""
    global _forward_compiled, rows_mm, q8_rows, _mm, _rms_rows, _rotate, _attend
    if _forward_compiled is None:
        if not _kernel.available():
            raise RuntimeError("the compiled pass needs numba: pip install -r requirements.txt")
        rows_mm, q8_rows = _kernel._compile(), _quant._q8_compiled()
        jit = _kernel._NUMBA.njit(fastmath=True, cache=True, nogil=True)
        _mm, _rms_rows, _rotate, _attend = jit(_mm), jit(_rms_rows), jit(_rotate), jit(_attend)
        _forward_compiled = jit(_forward)
    return _forward_compiled


class CompiledPass:
    """A :class:`~speclib.lm.llama.Llama`'s weights gathered for :func:`forward_compiled`.

    The block matrices are not copied: numba's typed lists hold the model's own arrays.
    """

    def __init__(self, model) -> None:
        from numba.typed import List

        forward_compiled()
        cfg = model.config
        empty = np.zeros((0, 0), dtype=np.float32)

        def parts(name: str) -> tuple:
            linears = [getattr(b, name) for b in model.blocks]
            codes = List([m.codes for m in linears])
            if linears[0].layout == "f32":
                return codes, List([empty] * len(linears)), List([empty] * len(linears))
            return (codes, List([m.scale for m in linears]),
                    List([m.offset if m.offset is not None else m._zeros() for m in linears]))

        self.weights = (List([b.attn_norm for b in model.blocks]), List([b.ffn_norm for b in model.blocks]),
                        model.out_norm, *parts("qkv"), *parts("wo"), *parts("gate_up"), *parts("down"))
        half = cfg.head_dim // 2
        if cfg.rope_layout == "adjacent":
            cos, sin = model._cos[:, 0, 0::2], model._sin[:, 0, 1::2]
        else:
            cos, sin = model._cos[:, 0, :half], model._sin[:, 0, half:]
        self.tables = (np.ascontiguousarray(cos), np.ascontiguousarray(sin))
        self.shape = (cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff)
        self.eps, self.scale = np.float32(cfg.rms_eps), np.float32(1.0 / np.sqrt(cfg.head_dim))
        self.adjacent = cfg.rope_layout == "adjacent"
        self.head = model.head

    def features(self, x: np.ndarray, positions: np.ndarray, filled: int, mask: np.ndarray | None,
                 keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        """The new tokens' final hidden states (after the final norm), ``(n, d)``; writes their keys and values."""
        out = np.empty_like(x)
        mask = np.zeros((0, 0), dtype=np.float32) if mask is None else np.ascontiguousarray(mask, dtype=np.float32)
        _forward_compiled(x, positions, filled, mask, keys, values, *self.weights, *self.tables, *self.shape,
                          self.eps, self.scale, self.adjacent, _quant.BLOCK, out)
        return out

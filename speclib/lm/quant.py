"""A real model's weight matrices as the GGUF file stores them, and their products.

A GGUF file stores most of a model's matrices in blocks of 32 weights along a row (the
input dimension).  Two block formats matter for the book's real model:

``Q4_1``
    20 bytes a block: a float16 scale ``d``, a float16 offset ``m`` and 32 four-bit codes
    ``q`` (0..15); the weight is ``d * q + m``.  The first 16 weights are the low nibbles of
    the 16 code bytes, the last 16 their high nibbles.
``Q8_0``
    34 bytes a block: a float16 scale ``d`` and 32 signed bytes ``q``; the weight is ``d * q``.

:class:`Linear` holds one matrix of shape ``(out, in)`` in one of two layouts, chosen at
load time:

``"f32"``
    the weights decoded once to float32 (four bytes a weight);
``"q8"``
    the file's own numbers, kept losslessly at one byte a weight: each code in a byte
    (``uint8`` for Q4_1, ``int8`` for Q8_0) and each block's scale and offset in float32, so a
    pass reads a quarter of float32's bytes and the products are those of the file's weights.

``linear(x)`` multiplies rows of activations, shape ``(n, in)``, by the matrix's transpose
and returns ``(n, out)`` float32: what a pass over ``n`` tokens computes for this layer.

The products read each weight once for all ``n`` rows (with numba; numpy's products
without it).  The ``"f32"`` layout uses the verification kernel of
:mod:`speclib.lm.kernel`.  The ``"q8"`` layout decodes three rows of the matrix at a time
into a small float32 buffer that stays in the nearest cache, then runs the same kernel's
tiles over it, so each weight is decoded once however many rows of activations there are.
"""

from __future__ import annotations

import numpy as np

from . import kernel as _kernel

BLOCK = 32  #: weights in one GGUF block, both formats
LAYOUTS = ("f32", "q8")
_Q4_1_BYTES = 20
_Q8_0_BYTES = 34


def _f16(raw: np.ndarray, start: int) -> np.ndarray:
    """The float16 at byte ``start`` of every block, as float32."""
    return np.ascontiguousarray(raw[..., start:start + 2]).view(np.float16)[..., 0].astype(np.float32)


def _blocks(raw: np.ndarray, shape: tuple[int, int], block_bytes: int, name: str) -> np.ndarray:
    out, inner = shape
    if inner % BLOCK:
        raise ValueError(f"{name}: rows of {inner} weights are not whole blocks of {BLOCK}")
    raw = np.asarray(raw)
    if raw.dtype != np.uint8 or raw.size != out * (inner // BLOCK) * block_bytes:
        raise ValueError(f"{name}: expected {out * (inner // BLOCK) * block_bytes} bytes of blocks "
                         f"for shape {shape}, got {raw.size} of dtype {raw.dtype}")
    return raw.reshape(out, inner // BLOCK, block_bytes)


class Linear:
    """One weight matrix of shape ``(out, in)``: ``linear(x)`` is ``x @ W.T``.

    Build it with :meth:`from_q4_1`, :meth:`from_q8_0` or :meth:`from_f32`.

    Attributes
    ----------
    codes : the weights (``"f32"``) or their codes (``"q8"``), shape ``(out, in)``
    scale, offset : per block, shape ``(out, in // 32)`` (``"q8"`` only; ``offset`` is None for Q8_0)
    """

    def __init__(self, codes: np.ndarray, scale: np.ndarray | None = None, offset: np.ndarray | None = None,
                 name: str = "weight") -> None:
        self.codes, self.scale, self.offset, self.name = codes, scale, offset, name
        self.layout = "f32" if scale is None else "q8"

    @property
    def shape(self) -> tuple[int, int]:
        return self.codes.shape

    @property
    def nbytes(self) -> int:
        """The bytes a pass reads for this matrix."""
        return sum(a.nbytes for a in (self.codes, self.scale, self.offset) if a is not None)

    def __repr__(self) -> str:
        return f"Linear({self.name!r}, shape={self.shape}, layout={self.layout!r})"

    # --- building ---------------------------------------------------------------------

    @classmethod
    def from_f32(cls, weights: np.ndarray, name: str = "weight") -> "Linear":
        return cls(np.ascontiguousarray(weights, dtype=np.float32), name=name)

    @classmethod
    def from_q4_1(cls, raw: np.ndarray, shape: tuple[int, int], layout: str = "q8", name: str = "weight") -> "Linear":
        blocks = _blocks(raw, shape, _Q4_1_BYTES, name)
        d, m = _f16(blocks, 0), _f16(blocks, 2)
        packed = blocks[..., 4:]
        codes = np.empty(shape, dtype=np.uint8)
        view = codes.reshape(shape[0], -1, BLOCK)
        np.bitwise_and(packed, 0x0F, out=view[..., :16])
        np.right_shift(packed, 4, out=view[..., 16:])
        made = cls(codes, d, m, name=name)
        return made if _layout(layout) == "q8" else cls.from_f32(made.dequantize(), name=name)

    @classmethod
    def from_q8_0(cls, raw: np.ndarray, shape: tuple[int, int], layout: str = "q8", name: str = "weight") -> "Linear":
        blocks = _blocks(raw, shape, _Q8_0_BYTES, name)
        d = _f16(blocks, 0)
        codes = np.ascontiguousarray(blocks[..., 2:]).view(np.int8).reshape(shape)
        made = cls(codes, d, None, name=name)
        return made if _layout(layout) == "q8" else cls.from_f32(made.dequantize(), name=name)

    # --- reading ----------------------------------------------------------------------

    def dequantize(self, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """The float32 weights of ``rows`` (all by default), as the file defines them."""
        codes = self.codes[rows]
        if self.layout == "f32":
            return np.array(codes, dtype=np.float32, copy=True)
        blocked = codes.reshape(*codes.shape[:-1], -1, BLOCK).astype(np.float32)
        w = blocked * self.scale[rows][..., None]
        if self.offset is not None:
            w += self.offset[rows][..., None]
        return w.reshape(codes.shape)

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """Rows ``ids`` of the matrix, float32: an embedding lookup."""
        return self.dequantize(np.asarray(ids, dtype=np.int64))

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``x @ W.T`` for ``x`` of shape ``(n, in)`` float32 (C-contiguous), into ``out`` if given.

        No argument checks: it runs inside every pass.
        """
        if out is None:
            out = np.empty((x.shape[0], self.shape[0]), dtype=np.float32)
        if not _kernel.available():
            out[:] = self.reference(x)
        elif self.layout == "f32":
            _kernel.rows_matmul(x, self.codes, out)
        else:
            offset = self.offset if self.offset is not None else self._zeros()
            _q8_compiled()(x, self.codes, self.scale, offset, out, BLOCK)
        return out

    def _zeros(self) -> np.ndarray:
        if getattr(self, "_no_offset", None) is None:
            self._no_offset = np.zeros_like(self.scale)
        return self._no_offset

    def reference(self, x: np.ndarray) -> np.ndarray:
        """``x @ W.T`` with numpy alone: the products the kernels are tested against."""
        if self.layout == "f32":
            return x @ self.codes.T
        # Reference product, one block column at a time: the codes times x, scaled per block,
        # plus each block's offset times the sum of x over the block.
        n, inner = x.shape
        xb = x.reshape(n, -1, BLOCK)
        dots = np.einsum("obk,nbk->nob", self.codes.reshape(self.shape[0], -1, BLOCK).astype(np.float32), xb)
        out = np.einsum("nob,ob->no", dots, self.scale)
        if self.offset is not None:
            out += xb.sum(axis=2) @ self.offset.T
        return out.astype(np.float32, copy=False)


def _layout(layout: object) -> str:
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected one of {', '.join(map(repr, LAYOUTS))}, got {layout!r}")
    return layout


def _q8_rows(x, codes, scale, offset, out, block):
    # out = x @ W.T where row r of W is scale[r, b] * codes[r, b*block:(b+1)*block] + offset[r, b]
    # block by block.  Three rows of W at a time are decoded into buf (float32, in the nearest
    # cache), then every group of rows of x passes over them with the verification kernel's
    # tiles.  (block is an argument, not the constant 32: a loop of a constant 32 steps is
    # unrolled by the compiler and then not vectorized.)
    m, n, inner = x.shape[0], codes.shape[0], codes.shape[1]
    buf = np.empty((3, inner), dtype=np.float32)
    sizes = groups(m)
    for j in range(0, n, 3):
        w = min(3, n - j)
        for c in range(j + 3, min(j + 6, n)):  # the next three rows' codes (see kernel._rows_matmul)
            row = codes[c]
            for t in range(0, inner, 64):
                prefetch(row, t)
        for r in range(w):
            q, row = codes[j + r], buf[r]
            for b in range(inner // block):
                d, o, base = scale[j + r, b], offset[j + r, b], b * block
                for t in range(block):
                    row[base + t] = d * np.float32(q[base + t]) + o
        i = 0
        for size in sizes:
            if size == 4:
                tile4(x, buf, out, i, 0, w, j)
            elif size == 3:
                tile3(x, buf, out, i, 0, w, j)
            elif size == 2:
                tile2(x, buf, out, i, 0, w, j)
            else:
                tile1(x, buf, out, i, 0, w, j)
            i += size


_q8 = None


def _q8_compiled():
    global _q8, tile4, tile3, tile2, tile1, groups, prefetch
    if _q8 is None:
        _kernel._compile()
        tile4, tile3, tile2, tile1, groups = _kernel.tile4, _kernel.tile3, _kernel.tile2, _kernel.tile1, _kernel.groups
        prefetch = _kernel.prefetch
        _q8 = _kernel._NUMBA.njit(fastmath=True, cache=True, nogil=True)(_q8_rows)
    return _q8


"""Reading a GGUF file: its metadata, and its tensors' bytes memory-mapped.

GGUF (llama.cpp's model format, little-endian) is a header, then the tensors' data:

* ``b"GGUF"``, the version (``uint32``, 2 or 3), the number of tensors and of metadata
  entries (``uint64`` each);
* each metadata entry: a key (a string: ``uint64`` length, then UTF-8 bytes), a value type
  (``uint32``) and the value; an array is an element type, a count and the elements;
* each tensor's name, number of dimensions, dimensions (``uint64``, the fastest-varying
  first), type (``uint32``: F32, F16, Q8_0, Q4_1 ...) and offset into the data;
* the data, from the first multiple of ``general.alignment`` (32 by default) after the header.

The ``gguf`` package (maintained with llama.cpp) reads the same format, but its reader builds
a numpy view for every string of the tokenizer's 98,000 (three seconds for SmolLM2's
file); :class:`GGUFFile` reads the header in one pass with :mod:`struct` (a tenth of a
second) and takes the type numbers and block sizes from ``gguf``'s tables.  The tests check
that both read the same metadata and the same tensor bytes.

A file that is not GGUF, is cut short or has tables that do not fit in it is refused with
a one-line ValueError that names it.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .._validate import as_path

MAGIC = b"GGUF"
VERSIONS = (2, 3)  #: the versions read here (version 1 used 32-bit counts and is long gone)
DEFAULT_ALIGNMENT = 32

# GGUF value types: (struct format, numpy dtype) of the scalar ones.
_SCALARS = {0: ("<B", np.uint8), 1: ("<b", np.int8), 2: ("<H", np.uint16), 3: ("<h", np.int16),
            4: ("<I", np.uint32), 5: ("<i", np.int32), 6: ("<f", np.float32), 7: ("<?", np.bool_),
            10: ("<Q", np.uint64), 11: ("<q", np.int64), 12: ("<d", np.float64)}
_STRING, _ARRAY = 8, 9


class TensorInfo(NamedTuple):
    """One tensor of a GGUF file."""

    name: str
    kind: str  #: the type's name: "F32", "F16", "Q8_0", "Q4_1" ...
    shape: tuple[int, ...]  #: in numpy's order (rows first): a matrix is (out, in)
    offset: int  #: where its bytes start in the file
    nbytes: int


class _Truncated(Exception):
    pass


class GGUFFile:
    """A GGUF file's metadata (``metadata``, a dict) and tensors (``tensors``, name to :class:`TensorInfo`).

    :meth:`data` returns a tensor's bytes as a read-only view of the memory-mapped file:
    ``uint8`` rows of blocks for a quantized tensor (shape ``(rows, bytes per row)``, what
    :class:`speclib.lm.quant.Linear` decodes), floats for F32 and F16.  The mapping lasts as
    long as the file object or a view of it.

    Examples
    --------
    >>> from speclib.lm.smollm import model_path
    >>> f = GGUFFile(model_path())
    >>> f.metadata["general.architecture"], f.tensors["token_embd.weight"].kind, f.tensors["token_embd.weight"].shape
    ('llama', 'Q8_0', (49152, 576))
    """

    def __init__(self, path: str | Path) -> None:
        path = as_path(path)
        if not path.is_file():
            raise FileNotFoundError(f"path: no GGUF file at {path}")
        self.path = path
        with open(path, "rb") as file:
            if file.read(4) != MAGIC:
                raise ValueError(f"path: {path} is not a GGUF file (it does not start with the bytes 'GGUF')")
            size = path.stat().st_size
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                try:
                    self._parse(buf, size)
                except _Truncated as error:
                    raise ValueError(f"path: {path} is truncated or damaged ({error})") from None
                except (struct.error, UnicodeDecodeError, ValueError, OverflowError, MemoryError) as error:
                    raise ValueError(f"path: {path} is damaged or truncated ({type(error).__name__}: {error})") from None
        self._map: np.memmap | None = None

    def _parse(self, buf: mmap.mmap, size: int) -> None:
        import gguf

        pos = 4

        def take(fmt: str):
            nonlocal pos
            n = struct.calcsize(fmt)
            if pos + n > size:
                raise _Truncated(f"the header ends at byte {size}, inside an entry at byte {pos}")
            value = struct.unpack_from(fmt, buf, pos)
            pos += n
            return value if len(value) > 1 else value[0]

        def string() -> str:
            nonlocal pos
            n = take("<Q")
            if pos + n > size:
                raise _Truncated(f"a string of {n} bytes at byte {pos} runs past the end ({size} bytes)")
            text = bytes(buf[pos:pos + n]).decode("utf-8")
            pos += n
            return text

        def value(kind: int):
            nonlocal pos
            if kind in _SCALARS:
                return take(_SCALARS[kind][0])
            if kind == _STRING:
                return string()
            if kind != _ARRAY:
                raise ValueError(f"unknown value type {kind} at byte {pos}")
            inner, count = take("<I"), take("<Q")
            if inner in _SCALARS:
                dtype = np.dtype(_SCALARS[inner][1]).newbyteorder("<")
                n = count * dtype.itemsize
                if pos + n > size:
                    raise _Truncated(f"an array of {count} values at byte {pos} runs past the end ({size} bytes)")
                arr = np.frombuffer(buf, dtype=dtype, count=count, offset=pos).copy()
                pos += n
                return arr
            if count > size:
                raise _Truncated(f"an array of {count} entries cannot fit in {size} bytes")
            return [value(inner) for _ in range(count)]

        self.version = take("<I")
        if self.version not in VERSIONS:
            raise ValueError(f"GGUF version {self.version}, where this reader knows versions "
                             f"{', '.join(map(str, VERSIONS))} (a big-endian file?)")
        n_tensors, n_kv = take("<Q"), take("<Q")
        if n_tensors > size or n_kv > size:
            raise _Truncated(f"it announces {n_tensors} tensors and {n_kv} entries in {size} bytes")
        metadata: dict[str, object] = {}
        for _ in range(n_kv):
            key = string()
            metadata[key] = value(take("<I"))
        infos = []
        for _ in range(n_tensors):
            name = string()
            dims = [take("<Q") for _ in range(take("<I"))]
            infos.append((name, dims, take("<I"), take("<Q")))
        alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        if alignment <= 0 or alignment & (alignment - 1):
            raise ValueError(f"general.alignment is {alignment}, not a power of two")
        start = -(-pos // alignment) * alignment
        tensors = {}
        for name, dims, kind_id, offset in infos:
            try:
                kind = gguf.GGMLQuantizationType(kind_id)
            except ValueError:
                raise ValueError(f"the tensor {name!r} has the unknown type number {kind_id}") from None
            block, block_bytes = gguf.GGML_QUANT_SIZES[kind]
            count = int(np.prod(dims, dtype=np.int64)) if dims else 1
            if not dims or dims[0] % block:
                raise ValueError(f"the tensor {name!r} of shape {dims} is not whole {kind.name} blocks")
            nbytes = count // block * block_bytes
            if start + offset + nbytes > size:
                raise _Truncated(f"the tensor {name!r} ends at byte {start + offset + nbytes}, the file has {size}")
            tensors[name] = TensorInfo(name, kind.name, tuple(reversed(dims)), start + offset, nbytes)
        self.metadata, self.tensors, self.data_offset = metadata, tensors, start

    def __repr__(self) -> str:
        return f"GGUFFile({str(self.path)!r}, version={self.version}, tensors={len(self.tensors)})"

    def data(self, name: str) -> np.ndarray:
        """Tensor ``name``'s bytes (read-only, memory-mapped): ``(rows, bytes per row)`` uint8 when quantized,
        float32 or float16 of the tensor's shape otherwise."""
        info = self.tensors.get(name)
        if info is None:
            raise KeyError(f"{name!r}: the file {self.path} has no such tensor")
        if self._map is None:
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r")
        raw = self._map[info.offset:info.offset + info.nbytes]
        if info.kind in ("F32", "F16"):
            return raw.view("<f4" if info.kind == "F32" else "<f2").reshape(info.shape)
        rows = int(np.prod(info.shape[:-1], dtype=np.int64)) if len(info.shape) > 1 else 1
        return raw.reshape(rows, info.nbytes // rows)

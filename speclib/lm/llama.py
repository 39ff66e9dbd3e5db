"""A Llama-architecture language model in numpy, with a key/value cache that can be rolled back.

This is the forward pass of a real pretrained model (the book reads SmolLM2-135M-Instruct
with it: :func:`speclib.lm.smollm.load_smollm2`).  It follows the model protocol of
:mod:`speclib.lm.models` (``model(tokens) -> probs`` of shape ``(n, V)``) and the cache
protocol of :mod:`speclib.core.cache` (``model.cache()``: ``extend``, ``rollback``, token trees),
as :class:`speclib.lm.transformer.Transformer` does, so every decoding loop of speclib runs
on it unchanged.

Architecture (Llama): token embedding; ``n_layers`` blocks, each

* RMSNorm, then grouped-query attention: ``n_heads`` query heads share ``n_kv_heads``
  key/value heads (query head ``h`` reads key/value head ``h // (n_heads / n_kv_heads)``),
  with the rotary position embedding on queries and keys;
* RMSNorm, then the SwiGLU feed-forward layer ``down(silu(gate x) * up x)``;

each added back to the residual stream; a final RMSNorm; the output head (here the token
embedding itself, "tied").  No biases.

Rotary layout.  The rotation acts on pairs of a head's coordinates.  A GGUF file stores
the query and key matrices with their rows permuted so that the pairs are *adjacent*
coordinates ``(2i, 2i + 1)`` (llama.cpp's layout); Hugging Face checkpoints pair
coordinate ``i`` with ``i + head_dim / 2`` instead.  Both compute the same model from
their own weights; this module uses the GGUF layout, the file's rows as they are
(:data:`ROPE_LAYOUTS` names both, so a test can show that the wrong one is caught).

Every weight product goes through :class:`speclib.lm.quant.Linear` (``linear(x) = x @
W.T``), so the weights may be kept as float32 or as the file's own codes.  The query, key
and value matrices of a block are one ``Linear`` (their rows stacked), and so are the gate
and up matrices: one product each instead of three and two.  Every activation is float32.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .._validate import as_bool, as_int, as_real, as_tokens
from ..core.cache import fed_tokens
from .quant import Linear
from .transformer import _softmax

#: How the rotary embedding pairs a head's coordinates: ``"adjacent"`` (GGUF, llama.cpp:
#: ``(2i, 2i + 1)``) or ``"half"`` (Hugging Face: ``(i, i + head_dim / 2)``).
ROPE_LAYOUTS = ("adjacent", "half")

_sum, _max = np.add.reduce, np.maximum.reduce


@dataclass(frozen=True)
class LlamaConfig:
    """The shape of a :class:`Llama` model.

    Attributes
    ----------
    vocab_size : int
        ``V``, the number of token ids.
    d_model : int
        Width of the residual stream (``n_heads * head_dim``).
    n_layers : int
        Number of blocks.
    n_heads, n_kv_heads : int
        Query heads, and key/value heads (a divisor of ``n_heads``).
    d_ff : int
        Width of the feed-forward layer.
    rope_base : float
        Base of the rotary embedding's frequencies (``base ** (-2i / head_dim)``).
    rms_eps : float
        Epsilon of every RMSNorm.
    max_positions : int
        The positions the model was trained to read (its context length).
    rope_layout : str
        One of :data:`ROPE_LAYOUTS`: how the weights pair coordinates for the rotation.
    """

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    rope_base: float = 10_000.0
    rms_eps: float = 1e-5
    max_positions: int = 2048
    rope_layout: str = "adjacent"

    def __post_init__(self) -> None:
        fix = object.__setattr__
        for name, low in (("vocab_size", 2), ("d_model", 2), ("n_layers", 0), ("n_heads", 1), ("n_kv_heads", 1),
                          ("d_ff", 1), ("max_positions", 1)):
            fix(self, name, as_int(getattr(self, name), name, minimum=low))
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(f"d_model: {self.d_model} is not n_heads = {self.n_heads} heads of an even width")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads: {self.n_kv_heads} does not divide n_heads = {self.n_heads}")
        fix(self, "rope_base", as_real(self.rope_base, "rope_base", low=1.0))
        eps = as_real(self.rms_eps, "rms_eps", low=0.0)
        if eps <= 0:
            raise ValueError(f"rms_eps: expected a positive epsilon, got {eps!r}")
        fix(self, "rms_eps", eps)
        if self.rope_layout not in ROPE_LAYOUTS:
            raise ValueError(f"rope_layout: expected one of {', '.join(map(repr, ROPE_LAYOUTS))}, "
                             f"got {self.rope_layout!r}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def matrix_shapes(self) -> dict[str, tuple[int, int]]:
        """``(out, in)`` of every matrix of one block (``qkv`` and ``gate_up`` stacked) and of the embedding."""
        d, dh = self.d_model, self.head_dim
        return {"embedding": (self.vocab_size, d),
                "qkv": ((self.n_heads + 2 * self.n_kv_heads) * dh, d), "wo": (d, d),
                "gate_up": (2 * self.d_ff, d), "down": (d, self.d_ff)}

    def n_parameters(self) -> int:
        """Total number of weights (the tied embedding counted once)."""
        shapes = self.matrix_shapes()
        block = sum(math.prod(shapes[k]) for k in ("qkv", "wo", "gate_up", "down")) + 2 * self.d_model
        return math.prod(shapes["embedding"]) + self.n_layers * block + self.d_model


class LlamaBlock(NamedTuple):
    """The weights of one block: two RMSNorm gains and four products."""

    attn_norm: np.ndarray  #: (d_model,) float32
    qkv: Linear  #: queries, keys and values, rows stacked: ((n_heads + 2 n_kv_heads) head_dim, d_model)
    wo: Linear  #: the attention's output projection, (d_model, d_model)
    ffn_norm: np.ndarray  #: (d_model,) float32
    gate_up: Linear  #: gate and up, rows stacked: (2 d_ff, d_model)
    down: Linear  #: (d_model, d_ff)


def rms_norm(x: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    """``x / sqrt(mean(x**2) + eps) * gain`` along the last axis of ``(n, d)`` rows, in float32.

    Examples
    --------
    >>> rms_norm(np.array([[2.0, -2.0]], np.float32), np.array([1.0, 3.0], np.float32), 0.0)
    array([[ 1., -3.]], dtype=float32)
    """
    ms = np.vecdot(x, x)[:, None]  # one call for the sums of squares: a pass over one token is mostly calls
    ms *= np.float32(1.0 / x.shape[-1])
    ms += np.float32(eps)
    np.sqrt(ms, out=ms)
    out = x / ms
    out *= gain
    return out


def rope_tables(head_dim: int, base: float, positions: int) -> tuple[np.ndarray, np.ndarray]:
    """Cosines and sines of the rotary embedding, each ``(positions, head_dim / 2)`` float32.

    Pair ``i`` of position ``p`` turns by the angle ``p * base ** (-2i / head_dim)``
    (computed in float64, then rounded once).

    Examples
    --------
    >>> cos, sin = rope_tables(4, 10_000.0, 3)
    >>> cos.shape, cos.dtype, float(sin[1, 0]) == float(np.float32(np.sin(1.0)))
    ((3, 2), dtype('float32'), True)
    """
    head_dim = as_int(head_dim, "head_dim", minimum=2)
    if head_dim % 2:
        raise ValueError(f"head_dim: must be even (the rotation turns pairs of coordinates), got {head_dim}")
    base = as_real(base, "base", low=1.0)
    positions = as_int(positions, "positions", minimum=1)
    inv_freq = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.arange(positions, dtype=np.float64)[:, None] * inv_freq
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _rope_rows(cos: np.ndarray, sin: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """The tables of :func:`rope_tables` spread over a head's coordinates, so that the rotation of
    ``x`` is ``x * c + partner(x) * s``: ``(positions, 1, head_dim)`` each, ``s`` carrying the signs."""
    if layout == "adjacent":  # pair (2i, 2i + 1): partner swaps the two
        c = np.repeat(cos, 2, axis=1)
        s = np.stack([-sin, sin], axis=-1).reshape(sin.shape[0], -1)
    else:  # pair (i, i + half): partner swaps the halves
        c = np.concatenate([cos, cos], axis=1)
        s = np.concatenate([-sin, sin], axis=1)
    return np.ascontiguousarray(c[:, None, :]), np.ascontiguousarray(s[:, None, :])


def _rotate(x: np.ndarray, c: np.ndarray, s: np.ndarray, layout: str) -> np.ndarray:
    """Rotary embedding of ``x`` (n, heads, head_dim) with the rows ``c``, ``s`` (n, 1, head_dim) of :func:`_rope_rows`."""
    n, h, dh = x.shape
    if layout == "adjacent":
        partner = x.reshape(n, h, dh // 2, 2)[..., ::-1].reshape(n, h, dh)
    else:
        partner = np.concatenate([x[..., dh // 2:], x[..., :dh // 2]], axis=-1)
    out = x * c
    out += partner * s
    return out


def _silu_times(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """``silu(gate) * up`` = ``gate * up / (1 + exp(-gate))``, float32, without overflow warnings."""
    e = np.negative(gate)
    np.minimum(e, 80.0, out=e)  # exp(80) is finite in float32, and gate / (1 + e^80) is 0 anyway
    np.exp(e, out=e)
    e += 1.0
    out = gate * up
    out /= e
    return out


class Llama:
    """A Llama-architecture model following the model protocol of :mod:`speclib.lm.models`.

    ``model(tokens)`` returns the next-token distributions at every position (float64, rows
    summing to 1) at the model's ``temperature`` (0: the greedy one-hot row);
    :meth:`logits` returns the raw float32 scores; :meth:`cache` starts an incremental
    computation (:class:`LlamaCache`).

    Parameters
    ----------
    config : LlamaConfig
    embedding : Linear
        The token embedding, ``(vocab_size, d_model)``; also the output head when ``head``
        is None (tied).
    blocks : list of LlamaBlock
    out_norm : array, shape (d_model,)
        The final RMSNorm's gain.
    head : Linear, optional
        An output head of its own, ``(vocab_size, d_model)``.
    temperature : float, default 1.0

    Examples
    --------
    >>> cfg = LlamaConfig(vocab_size=7, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=12)
    >>> model = random_llama(cfg, seed=0)
    >>> model(np.array([1, 2, 3])).shape
    (3, 7)
    """

    #: The model reads every token (rotary positions), so loops must pass all of them.
    context_length = None
    #: Rows right by construction: the loops do not check them again (speclib.core.cache.rows_trusted).
    trusted_rows = True
    #: The model's tokenizer (a :class:`speclib.lm.tokenizer.GGUFTokenizer`) when it was read from a file.
    tokenizer = None

    def __init__(self, config: LlamaConfig, embedding: Linear, blocks: list[LlamaBlock], out_norm: np.ndarray,
                 head: Linear | None = None, temperature: float = 1.0) -> None:
        if not isinstance(config, LlamaConfig):
            raise TypeError(f"config: expected a LlamaConfig, got {type(config).__name__}")
        shapes = config.matrix_shapes()
        _check_linear(embedding, "embedding", shapes["embedding"])
        if head is not None:
            _check_linear(head, "head", shapes["embedding"])
        blocks = list(blocks)
        if len(blocks) != config.n_layers:
            raise ValueError(f"blocks: expected {config.n_layers} blocks, got {len(blocks)}")
        for i, block in enumerate(blocks):
            if not isinstance(block, LlamaBlock):
                raise TypeError(f"blocks[{i}]: expected a LlamaBlock, got {type(block).__name__}")
            for name in ("qkv", "wo", "gate_up", "down"):
                _check_linear(getattr(block, name), f"blocks[{i}].{name}", shapes[name])
            blocks[i] = block._replace(attn_norm=_gain(block.attn_norm, f"blocks[{i}].attn_norm", config.d_model),
                                       ffn_norm=_gain(block.ffn_norm, f"blocks[{i}].ffn_norm", config.d_model))
        self.config = config
        self.embedding, self.head = embedding, embedding if head is None else head
        self.tied = head is None
        self.blocks = blocks
        self.out_norm = _gain(out_norm, "out_norm", config.d_model)
        self.vocab_size = config.vocab_size
        self.temperature = as_real(temperature, "temperature", low=0.0)
        self._cos, self._sin = _rope_rows(*rope_tables(config.head_dim, config.rope_base, config.max_positions),
                                          config.rope_layout)  # (positions, 1, head_dim) each
        self._scale = np.float32(1.0 / math.sqrt(config.head_dim))  # a float32, so activations stay float32
        self._eps = np.float32(config.rms_eps)
        self._compiled = False
        self._compiled_pass: list = []  # the CompiledPass, made on first use; shared by copies (same weights)

    def __repr__(self) -> str:
        c = self.config
        return (f"Llama(n_layers={c.n_layers}, d_model={c.d_model}, n_heads={c.n_heads}, n_kv_heads={c.n_kv_heads}, "
                f"vocab_size={c.vocab_size}, parameters={c.n_parameters():,}, layout={self.layout!r}, "
                f"temperature={self.temperature:g})")

    @property
    def n_parameters(self) -> int:
        return self.config.n_parameters()

    @property
    def layout(self) -> str:
        """How the block matrices are kept: ``"f32"`` or ``"q8"`` (:mod:`speclib.lm.quant`)."""
        return self.blocks[0].qkv.layout if self.blocks else self.embedding.layout

    @property
    def nbytes(self) -> int:
        """The bytes of weights one pass reads (every matrix and gain once)."""
        total = sum(b.qkv.nbytes + b.wo.nbytes + b.gate_up.nbytes + b.down.nbytes + b.attn_norm.nbytes
                    + b.ffn_norm.nbytes for b in self.blocks)
        return total + self.head.nbytes + self.out_norm.nbytes

    def __deepcopy__(self, memo: dict) -> "Llama":
        return self  # the weights never change: copies of a run or of a cache share the model

    def with_temperature(self, temperature: float) -> "Llama":
        """The same model (weights shared, not copied) sampling at another temperature."""
        other = copy.copy(self)
        other.temperature = as_real(temperature, "temperature", low=0.0)
        return other

    @property
    def compiled(self) -> bool:
        """Whether each pass runs as one compiled call (:mod:`speclib.lm.llama_compiled`; needs numba).

        ``False`` (the default): the pass is a sequence of numpy operations around the
        products of :class:`~speclib.lm.quant.Linear`; this is the reference.  ``True``: the
        same arithmetic (norms, rotary embedding, attention, SwiGLU and the block products) in
        one numba call, without numpy's overhead per operation; the embedding lookup and the
        output head stay :class:`~speclib.lm.quant.Linear` calls.  Both give the same rows up to
        float32 rounding.  Set it on a copy with :meth:`with_compiled`.
        """
        return self._compiled

    def with_compiled(self, compiled: bool = True) -> "Llama":
        """The same model (weights shared, not copied) with :attr:`compiled` set; the original is unchanged."""
        from . import kernel

        compiled = as_bool(compiled, "compiled")
        if compiled and not kernel.available():
            raise ValueError("compiled: the compiled pass needs numba (pip install -r requirements.txt)")
        other = copy.copy(self)
        other._compiled = compiled
        return other

    def _pass(self):
        if not self._compiled_pass:
            from .llama_compiled import CompiledPass

            self._compiled_pass.append(CompiledPass(self))
        return self._compiled_pass[0]

    def cache(self, features: bool = False, capacity: int = 256) -> "LlamaCache":
        """An empty :class:`LlamaCache` (``features``: keep hidden states; ``capacity``: positions preallocated)."""
        return LlamaCache(self, features, capacity)

    def logits(self, tokens: np.ndarray) -> np.ndarray:
        """Raw next-token scores, shape ``(n, V)`` float32, for every position of ``tokens``."""
        tokens = as_tokens(tokens, "tokens", self.vocab_size)
        return LlamaCache(self, capacity=max(1, tokens.size)).extend_logits(tokens)

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        """Next-token distributions, shape ``(n, V)``: the model protocol."""
        return _softmax(self.logits(tokens), self.temperature)

    # The one place where the network is evaluated.  ``keys``/``values`` hold, per layer and
    # key/value head, ``filled`` cached slots; the new tokens are written to slots
    # ``filled .. filled + n - 1``.  By default they are a chain: positions ``filled ..
    # filled + n - 1`` and a causal mask.  A token tree passes its nodes' ``positions`` and an
    # additive ``mask`` of shape ``(n, filled + n)`` (0 where a node may look, -inf
    # elsewhere).  ``features``, when given, receives every new token's final hidden state
    # (after the final norm, before the head): what EAGLE-style drafters read.
    def _run(self, tokens: np.ndarray, filled: int, keys: np.ndarray, values: np.ndarray,
             features: np.ndarray | None = None, positions: np.ndarray | None = None,
             mask: np.ndarray | None = None, last: int | None = None) -> np.ndarray:
        final = self.states(self.embedding.rows(tokens), filled, keys, values, positions, mask)
        if features is not None:
            features[...] = final
        return self.head(final if last is None else final[final.shape[0] - last:])

    def states(self, x: np.ndarray, filled: int, keys: np.ndarray, values: np.ndarray,
               positions: np.ndarray | None = None, mask: np.ndarray | None = None) -> np.ndarray:
        """The blocks and the final norm on input vectors ``x`` ``(n, d_model)`` float32 (updated in place).

        What a pass computes between the embedding lookup and the head, with the arguments of
        the pass (see above); returns the final hidden states ``(n, d_model)``.  A drafter
        whose inputs are not token embeddings (an EAGLE head) runs its blocks through this.
        """
        cfg = self.config
        n, h, kv, dh = x.shape[0], cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        rep, end, eps, layout = h // kv, filled + n, self._eps, cfg.rope_layout
        if self._compiled:  # mask None: the compiled attention is causal by itself
            return self._pass().features(x, np.arange(filled, end) if positions is None else positions, filled,
                                         mask, keys, values)
        if positions is None:
            cos, sin = self._cos[filled:end], self._sin[filled:end]
        else:
            cos, sin = self._cos[positions], self._sin[positions]
        if mask is None and n > 1:  # token j sees slots 0 .. filled + j
            mask = np.triu(np.full((n, end), -np.inf, dtype=np.float32), k=filled + 1)
        qk_width = (h + kv) * dh
        for layer, block in enumerate(self.blocks):
            qkv = block.qkv(rms_norm(x, block.attn_norm, eps))
            qk = _rotate(qkv[:, :qk_width].reshape(n, h + kv, dh), cos, sin, layout)
            keys[layer, :, filled:end] = qk[:, h:].transpose(1, 0, 2)
            values[layer, :, filled:end] = qkv[:, qk_width:].reshape(n, kv, dh).transpose(1, 0, 2)
            # Query head g * rep + r reads key/value head g: group the queries by their key head,
            # so one batched product per key head covers its rep query heads and n tokens.
            q = qk[:, :h].reshape(n, kv, rep * dh) if n == 1 else \
                qk[:, :h].reshape(n, kv, rep, dh).transpose(1, 2, 0, 3)
            q = q.reshape(kv, rep * n, dh) * self._scale
            att = q @ keys[layer, :, :end].transpose(0, 2, 1)  # (kv, rep n, end)
            if mask is not None:
                att.reshape(kv, rep, n, end)[...] += mask
            att -= _max(att, axis=-1, keepdims=True)
            np.exp(att, out=att)
            att /= _sum(att, axis=-1, keepdims=True)
            y = att @ values[layer, :, :end]  # (kv, rep n, dh)
            y = y.reshape(1, h * dh) if n == 1 else y.reshape(kv, rep, n, dh).transpose(2, 0, 1, 3).reshape(n, h * dh)
            x += block.wo(y)
            gu = block.gate_up(rms_norm(x, block.ffn_norm, eps))
            x += block.down(_silu_times(gu[:, :cfg.d_ff], gu[:, cfg.d_ff:]))
        return rms_norm(x, self.out_norm, eps)


def _check_linear(linear: object, name: str, shape: tuple[int, int]) -> None:
    if not isinstance(linear, Linear):
        raise TypeError(f"{name}: expected a speclib.lm.quant.Linear, got {type(linear).__name__}")
    if tuple(linear.shape) != shape:
        raise ValueError(f"{name}: expected a matrix of shape {shape}, got {tuple(linear.shape)}")


def _gain(gain: object, name: str, d: int) -> np.ndarray:
    arr = np.asarray(gain)
    if arr.shape != (d,) or not np.issubdtype(arr.dtype, np.floating) or not np.isfinite(arr).all():
        raise ValueError(f"{name}: expected {d} finite floating-point gains, got shape {arr.shape} of dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.float32)


class _PendingTree(NamedTuple):
    """A tree scored by :meth:`LlamaCache.extend_tree` and not yet resolved by :meth:`LlamaCache.accept_tree`."""

    length: int  # tokens the cache held before the tree (its nodes' keys lie at slots length + i)
    tokens: np.ndarray
    parents: np.ndarray
    features: np.ndarray | None


class LlamaCache:
    """The incremental state of one :class:`Llama` reading one sequence.

    ``len(cache)`` is the number of tokens fed so far.  :meth:`extend` feeds more tokens and
    returns their next-token distributions (:meth:`extend_logits`: raw scores);
    :meth:`rollback` returns to an earlier length.  Extending after a rollback gives what a
    fresh computation on the same tokens gives.  :meth:`extend_tree` scores a token tree in
    one pass and :meth:`accept_tree` keeps one of its branches.

    The keys and values live in arrays preallocated for ``capacity`` positions (more are
    added, doubling, when a sequence outgrows them), so a pass writes into place.  Position
    ``i`` is slot ``i``: the model reads every token, up to ``config.max_positions``.

    Examples
    --------
    >>> cfg = LlamaConfig(vocab_size=7, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=12)
    >>> cache = random_llama(cfg, seed=0).cache()
    >>> q = cache.extend([1, 2, 3, 4])
    >>> cache.rollback(2)
    >>> q2 = cache.extend([3])
    >>> bool(np.allclose(q[2], q2[0], atol=1e-6)), len(cache)
    (True, 3)
    """

    trusted_rows = True

    def __init__(self, model: Llama, features: bool = False, capacity: int = 256) -> None:
        if not isinstance(model, Llama):
            raise TypeError(f"model: expected a Llama, got {type(model).__name__}")
        cfg = model.config
        self.model = model
        #: Keep each fed token's final hidden state (:attr:`features`), for drafters that read it.
        self.keep_features = as_bool(features, "features")
        capacity = min(as_int(capacity, "capacity", minimum=1), cfg.max_positions)
        shape = (cfg.n_layers, cfg.n_kv_heads, capacity, cfg.head_dim)
        self._keys = np.zeros(shape, dtype=np.float32)
        self._values = np.zeros(shape, dtype=np.float32)
        self._features = np.zeros((capacity if self.keep_features else 0, cfg.d_model), dtype=np.float32)
        self._tokens = np.zeros(capacity, dtype=np.int64)
        self._length = 0
        self._tree: _PendingTree | None = None
        #: Tokens run through the network so far (fed tokens and tree nodes).
        self.tokens_computed = 0

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        return f"LlamaCache(length={self._length}, capacity={self.capacity})"

    @property
    def capacity(self) -> int:
        """Positions the key/value arrays hold now (they grow when a pass needs more)."""
        return self._keys.shape[2]

    @property
    def tokens(self) -> np.ndarray:
        """The tokens fed so far (a copy)."""
        return self._tokens[: self._length].copy()

    @property
    def features(self) -> np.ndarray:
        """The final hidden state of every fed token, ``(len(self), d_model)`` (a view).

        Only a cache made with ``features=True`` keeps them; row ``i`` is the state from which
        the model predicted token ``i + 1``.
        """
        if not self.keep_features:
            raise ValueError("features: this cache was made without features=True")
        return self._features[: self._length]

    def _reserve(self, need: int, what: str = "tokens") -> None:
        """Room for ``need`` slots, or a ValueError naming the model's context length."""
        limit = self.model.config.max_positions
        if need > limit:
            raise ValueError(f"{what}: the model reads at most {limit} positions (its context length); "
                             f"this pass would reach {need}")
        if need <= self.capacity:
            return
        size = min(limit, max(need, 2 * self.capacity))
        for name in ("_keys", "_values"):
            old = getattr(self, name)
            grown = np.zeros(old.shape[:2] + (size,) + old.shape[3:], dtype=np.float32)
            grown[:, :, :old.shape[2]] = old
            setattr(self, name, grown)
        tokens = np.zeros(size, dtype=np.int64)
        tokens[: self._length] = self._tokens[: self._length]
        self._tokens = tokens
        if self.keep_features:
            feats = np.zeros((size, self._features.shape[1]), dtype=np.float32)
            feats[: self._length] = self._features[: self._length]
            self._features = feats

    def extend_logits(self, tokens: np.ndarray) -> np.ndarray:
        """Feed ``tokens``; return their raw next-token scores, shape ``(len(tokens), V)`` float32."""
        return self._extend(fed_tokens(tokens, self.model.vocab_size))

    def extend(self, tokens: np.ndarray) -> np.ndarray:
        """Feed ``tokens``; return their next-token distributions at the model's temperature."""
        return _softmax(self._extend(fed_tokens(tokens, self.model.vocab_size)), self.model.temperature)

    def extend_last(self, tokens: np.ndarray, last: int) -> np.ndarray:
        """Feed ``tokens``; return the distributions of the last ``last`` of them only, ``(last, V)``.

        What a loop needs after a prompt: the output head (a fifth of the model's weights)
        and the softmax run on those rows alone (:func:`speclib.core.cache.extend_checked`).
        """
        tokens = fed_tokens(tokens, self.model.vocab_size)
        last = as_int(last, "last", minimum=0, maximum=tokens.size)
        return _softmax(self._extend(tokens, last), self.model.temperature)

    def _extend(self, tokens: np.ndarray, last: int | None = None) -> np.ndarray:
        self._tree = None
        n, start = tokens.size, self._length
        if n == 0:
            return np.zeros((0, self.model.vocab_size), dtype=np.float32)
        self._reserve(start + n)
        feats = self._features[start:start + n] if self.keep_features else None
        out = self.model._run(tokens, start, self._keys, self._values, feats, last=last)
        self.tokens_computed += n
        self._tokens[start:start + n] = tokens
        self._length = start + n
        return out

    def rollback(self, length: int) -> None:
        """Forget every token after the first ``length`` (0 <= length <= len(self))."""
        if type(length) is not int or length < 0:
            length = as_int(length, "length", minimum=0)
        if length > self._length:
            raise ValueError(f"length: cannot roll forward, the cache holds {self._length} tokens, got {length}")
        self._tree = None
        self._length = length

    def extend_tree(self, tokens: np.ndarray, parents: np.ndarray) -> np.ndarray:
        """Score a token tree after the fed tokens; its next-token distributions, ``(n, V)``.

        Node ``i`` holds ``tokens[i]`` below node ``parents[i]`` (``-1``: the last fed token;
        a parent comes before its children).  Row ``i`` is what :meth:`extend` would return
        for node ``i`` after feeding the path from the root to it: every node sits at the
        position its depth gives and attends to the fed tokens and its own ancestors only,
        all in one pass.  The tree stays pending: :meth:`accept_tree` keeps one branch of it;
        any other call (:meth:`extend`, :meth:`rollback`) forgets it.  ``len(self)`` does not
        change.

        Examples
        --------
        >>> cfg = LlamaConfig(vocab_size=7, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=12)
        >>> model = random_llama(cfg, seed=0)
        >>> cache = model.cache()
        >>> rows = cache.extend_tree([1, 2, 3], [-1, 0, 0])   # "1 2" and "1 3"
        >>> plain = model.cache().extend([1, 3])
        >>> bool(np.allclose(rows[[0, 2]], plain, atol=1e-6)), len(cache)
        (True, 0)
        >>> cache.accept_tree(2); cache.tokens.tolist()
        [1, 3]
        """
        return _softmax(self.extend_tree_logits(tokens, parents), self.model.temperature)

    def extend_tree_logits(self, tokens: np.ndarray, parents: np.ndarray) -> np.ndarray:
        """:meth:`extend_tree`, returning raw scores."""
        from ..core.tree import ancestor_mask, check_parents, depths, is_chain

        tokens = fed_tokens(tokens, self.model.vocab_size)
        parents = check_parents(parents, tokens.size)
        self._tree = None
        n, length = tokens.size, self._length
        if n == 0:
            return np.zeros((0, self.model.vocab_size), dtype=np.float32)
        self._reserve(length + n, "tokens")
        feats = np.empty((n, self.model.config.d_model), dtype=np.float32) if self.keep_features else None
        if is_chain(parents):  # the ordinary pass, bit for bit
            out = self.model._run(tokens, length, self._keys, self._values, feats)
        else:
            mask = np.zeros((n, length + n), dtype=np.float32)
            mask[:, length:][~ancestor_mask(parents)] = -np.inf
            out = self.model._run(tokens, length, self._keys, self._values, feats, length + depths(parents) - 1, mask)
        self.tokens_computed += n
        self._tree = _PendingTree(length, tokens, parents, feats)
        return out

    def accept_tree(self, node: int) -> None:
        """Keep the branch of the pending tree that ends at ``node`` (``-1``: none of it).

        The kept nodes' keys and values (and features) move into place after the fed tokens,
        as if that branch had been fed with :meth:`extend`; the other nodes are forgotten.
        """
        from ..core.tree import path_to

        tree = self._tree
        if tree is None or tree.length != self._length:
            raise ValueError("accept_tree: no tree is pending (call extend_tree first; extend and "
                             "rollback forget a pending tree)")
        node = as_int(node, "node", minimum=-1, maximum=tree.tokens.size - 1)
        self._tree = None
        path = path_to(tree.parents, node)
        if not path:
            return
        start, end = tree.length, tree.length + len(path)
        slots = start + np.array(path)
        # Fancy indexing copies the kept slots before they are written back, in order.
        self._keys[:, :, start:end] = self._keys[:, :, slots]
        self._values[:, :, start:end] = self._values[:, :, slots]
        if tree.features is not None:
            self._features[start:end] = tree.features[path]
        self._tokens[start:end] = tree.tokens[path]
        self._length = end


def random_llama(config: LlamaConfig, seed: int | np.random.Generator = 0, scale: float = 0.5,
                 temperature: float = 1.0) -> Llama:
    """A :class:`Llama` with random float32 weights (for tests and examples).

    Matrices are Gaussian with standard deviation ``scale / sqrt(fan_in)`` (the embedding's
    ``scale``); the RMSNorm gains are near 1.
    """
    from .._validate import as_generator

    if not isinstance(config, LlamaConfig):
        raise TypeError(f"config: expected a LlamaConfig, got {type(config).__name__}")
    rng = as_generator(seed, "seed")
    scale = as_real(scale, "scale", low=0.0)
    shapes = config.matrix_shapes()

    def matrix(name: str, fan_in: float) -> Linear:
        return Linear.from_f32(rng.standard_normal(shapes[name]) * (scale / math.sqrt(fan_in)), name=name)

    def gain() -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(config.d_model)).astype(np.float32)

    embedding = matrix("embedding", 1.0)
    blocks = [LlamaBlock(gain(), matrix("qkv", config.d_model), matrix("wo", config.d_model), gain(),
                         matrix("gate_up", config.d_model), matrix("down", config.d_ff))
              for _ in range(config.n_layers)]
    return Llama(config, embedding, blocks, gain(), temperature=temperature)

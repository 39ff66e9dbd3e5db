"""A decoder-only transformer in numpy, with a key/value cache that can be rolled back.

This is the "real model" of the book: a GPT-style character model whose inference needs
nothing but numpy.  It follows the model protocol of :mod:`speclib.lm.models` (``model(tokens)
-> probs`` of shape ``(n, V)``), so every decoding loop in speclib can use it, and it adds
the incremental path that makes speculative decoding pay off on a real machine:

* :class:`KVCache` keeps each layer's keys and values for the tokens fed so far.
  :meth:`KVCache.extend` runs the model on new tokens only (one token while drafting,
  ``k + 1`` tokens to verify a draft), and :meth:`KVCache.rollback` forgets the tokens after
  a rejection, so that the next step continues from the accepted prefix.
* :meth:`Transformer.cache` makes the model follow the cache protocol of
  :mod:`speclib.core.cache`, so the loops of :mod:`speclib.core.decoding` read it
  incrementally (``autoregressive_generate`` and ``speculative_generate`` need nothing else).

Architecture (pre-layer-norm GPT): token and learned position embeddings; ``n_layers``
blocks of causal multi-head self-attention and a GELU MLP, each behind a layer norm and
added back to the residual stream; a final layer norm; an output projection that is either
the token embedding transposed (``tied``) or a matrix of its own.

Sequences longer than the model's ``block_size`` ``B`` are read through a window that
restarts every ``B / 2`` tokens: position ``i`` sees the tokens from
:func:`window_start` ``(i, B)`` to ``i``, numbered from 0 inside the window.  The full
forward pass and the cache follow the same rule, so both compute the same distributions
for any length; the cache re-reads the last ``B / 2`` tokens whenever the window moves, and
keeps the window before the move, so that a rollback behind it does not re-read anything.
:meth:`KVCache.extend_tree` scores a whole token tree in one pass (tree attention).

Weights are stored as float16 in ``.npz`` files (see :func:`save_transformer`); inference
computes in float32.
"""

from __future__ import annotations

import copy
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .._validate import (MAX_DRAFT_LENGTH, MAX_REPEATS, as_bool, as_generator, as_int, as_int_list, as_path, as_real,
                         as_real_array, as_tokens, timing_repeats)
from ..core.cache import fed_tokens
from . import kernel as _kernel
from .products import Product, candidates

#: Where the shipped weights live.
DATA_DIR = Path(__file__).parent.parent / "data"

#: Layer norm epsilon (PyTorch's default, so the training framework and numpy agree).
LN_EPS = 1e-5

_GELU_C = math.sqrt(2.0 / math.pi)

@dataclass(frozen=True)
class TransformerConfig:
    """The shape of a :class:`Transformer`.

    Attributes
    ----------
    vocab_size : int
        ``V``, the number of token ids.
    block_size : int
        ``B``, the number of positions the model was trained on (even, at least 2).
    d_model : int
        Width of the residual stream; a multiple of ``n_heads``.
    n_layers : int
        Number of transformer blocks (0 makes a bigram-like model).
    n_heads : int
        Attention heads per block.
    tied : bool
        Output projection = token embedding transposed (True) or a separate matrix.
    """

    vocab_size: int
    block_size: int
    d_model: int
    n_layers: int
    n_heads: int
    tied: bool = True

    def __post_init__(self) -> None:
        # numpy scalars (np.int64(8), np.True_) are accepted and stored as Python ones, so a
        # config compares, hashes and saves (JSON) the same whichever spelling built it.
        fix = object.__setattr__
        fix(self, "vocab_size", as_int(self.vocab_size, "vocab_size", minimum=2))
        block = as_int(self.block_size, "block_size", minimum=2)
        if block % 2:
            raise ValueError(f"block_size: must be even (the window moves by block_size / 2), got {block}")
        fix(self, "block_size", block)
        d = as_int(self.d_model, "d_model", minimum=1)
        fix(self, "d_model", d)
        fix(self, "n_layers", as_int(self.n_layers, "n_layers", minimum=0))
        h = as_int(self.n_heads, "n_heads", minimum=1)
        fix(self, "n_heads", h)
        if d % h:
            raise ValueError(f"d_model: {d} is not a multiple of n_heads = {h}")
        fix(self, "tied", as_bool(self.tied, "tied"))

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def parameter_shapes(self) -> dict[str, tuple[int, ...]]:
        """Name and shape of every parameter (matrices are ``(in, out)``: ``y = x @ W + b``)."""
        d, v = self.d_model, self.vocab_size
        shapes = {"wte": (v, d), "wpe": (self.block_size, d)}
        for layer in range(self.n_layers):
            p = f"h{layer}."
            shapes.update({
                p + "ln1.g": (d,), p + "ln1.b": (d,),
                p + "attn.w_qkv": (d, 3 * d), p + "attn.b_qkv": (3 * d,),
                p + "attn.w_o": (d, d), p + "attn.b_o": (d,),
                p + "ln2.g": (d,), p + "ln2.b": (d,),
                p + "mlp.w_up": (d, 4 * d), p + "mlp.b_up": (4 * d,),
                p + "mlp.w_down": (4 * d, d), p + "mlp.b_down": (d,),
            })
        shapes.update({"ln_f.g": (d,), "ln_f.b": (d,)})
        if not self.tied:
            shapes["w_out"] = (d, v)
        return shapes

    def n_parameters(self) -> int:
        """Total number of weights."""
        return sum(math.prod(s) for s in self.parameter_shapes().values())


def window_start(position: int, block_size: int) -> int:
    """First position of the window through which token ``position`` is read.

    0 while ``position < block_size``; afterwards the window restarts every
    ``block_size / 2`` tokens, so it always holds between ``block_size / 2`` and
    ``block_size`` tokens.

    Examples
    --------
    >>> [window_start(i, 8) for i in (0, 7, 8, 11, 12, 15, 16)]
    [0, 0, 4, 4, 8, 8, 12]
    """
    if type(position) is not int or type(block_size) is not int or position < 0 or block_size < 2:
        position = as_int(position, "position", minimum=0)  # the slow path: say what is wrong
        block_size = as_int(block_size, "block_size", minimum=2)
    if position < block_size:
        return 0
    stride = block_size // 2
    return ((position - block_size) // stride + 1) * stride


# The ufuncs' own reductions: ndarray.mean and friends add a Python layer that costs more
# than the arithmetic on one token's vector, and a draft pass is mostly such overhead.
_sum, _max = np.add.reduce, np.maximum.reduce


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    inv_d = 1.0 / x.shape[-1]
    xc = x - _sum(x, axis=-1, keepdims=True) * inv_d
    var = _sum(xc * xc, axis=-1, keepdims=True) * inv_d
    return xc / np.sqrt(var + LN_EPS) * g + b


def _gelu(x: np.ndarray) -> np.ndarray:
    # The tanh approximation, as in GPT-2 (PyTorch: gelu(approximate="tanh")):
    # 0.5 x (1 + tanh(u)) with u = c (x + 0.044715 x^3), written as x / (1 + exp(-2u)), the
    # same function, because numpy's float32 exp is vectorised and its tanh is not on every
    # processor.  Clipping -2u at 80 keeps exp finite; x / (1 + e^80) is 0 in float32 anyway.
    u = x * x
    u *= 0.044715
    u += 1.0
    u *= x
    u *= -2.0 * _GELU_C
    np.minimum(u, 80.0, out=u)
    np.exp(u, out=u)
    u += 1.0
    return np.divide(x, u, out=u)


def softmax_rows(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Rows of probabilities (float64) from rows of logits, at a sampling temperature.

    ``temperature = 0`` gives the greedy one-hot row (ties go to the lowest id).

    Examples
    --------
    >>> softmax_rows(np.array([[0.0, np.log(3.0)]]))
    array([[0.25, 0.75]])
    >>> softmax_rows(np.array([[0.0, 1.0]]), temperature=0)
    array([[0., 1.]])
    """
    logits = as_real_array(logits, "logits", "an array of logits (real numbers)")
    if logits.ndim == 0:
        raise ValueError("logits: expected rows of logits, got a scalar")
    if np.isnan(logits).any() or np.isposinf(logits).any():
        raise ValueError("logits: contains NaN or +inf (a logit of -inf, a masked token, is allowed)")
    return _softmax(logits, as_real(temperature, "temperature", low=0.0))


def _softmax(logits: np.ndarray, temperature: float) -> np.ndarray:
    if temperature == 0.0:  # np.zeros: fresh zero pages, only the ones written are touched
        out = np.zeros(logits.shape)
        np.put_along_axis(out, logits.argmax(axis=-1)[..., None], 1.0, axis=-1)
        return out
    z = logits.astype(np.float64)
    if temperature != 1.0:
        z /= temperature
    z -= _max(z, axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= _sum(z, axis=-1, keepdims=True)
    return z


class Transformer:
    """A decoder-only transformer following the model protocol of :mod:`speclib.lm.models`.

    ``model(tokens)`` returns the next-token distributions at every position (float64, rows
    summing to 1) at the model's ``temperature``; :meth:`logits` returns the raw float32
    scores.  :meth:`cache` starts an incremental computation.

    Parameters
    ----------
    config : TransformerConfig
    params : dict of str to array
        One array per entry of ``config.parameter_shapes()``, any float dtype (kept as
        float32).
    temperature : float, default 1.0
        Sampling temperature applied to the logits (0: greedy).

    Examples
    --------
    >>> cfg = TransformerConfig(vocab_size=5, block_size=8, d_model=8, n_layers=1, n_heads=2)
    >>> model = random_transformer(cfg, seed=0)
    >>> model(np.array([1, 2, 3])).shape
    (3, 5)
    """

    #: The model reads every token (absolute positions matter), so loops must pass all of them.
    context_length = None

    def __init__(self, config: TransformerConfig, params: dict[str, np.ndarray], temperature: float = 1.0) -> None:
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config: expected a TransformerConfig, got {type(config).__name__}")
        shapes = config.parameter_shapes()
        missing = sorted(set(shapes) - set(params))
        extra = sorted(set(params) - set(shapes))
        if missing or extra:
            raise ValueError(f"params: missing {missing[:4]}, unexpected {extra[:4]} for {config}")
        self.params: dict[str, np.ndarray] = {}
        for name, shape in shapes.items():
            arr = np.asarray(params[name])
            if arr.shape != shape:
                raise ValueError(f"params[{name!r}]: expected shape {shape}, got {arr.shape}")
            if not np.issubdtype(arr.dtype, np.floating) or not np.isfinite(arr).all():
                raise ValueError(f"params[{name!r}]: expected finite floating-point numbers")
            self.params[name] = np.ascontiguousarray(arr, dtype=np.float32)
        self.config = config
        self.vocab_size = config.vocab_size
        self.temperature = as_real(temperature, "temperature", low=0.0)
        self._layers = [
            tuple(self.params[f"h{i}.{n}"] for n in (
                "ln1.g", "ln1.b", "attn.w_qkv", "attn.b_qkv", "attn.w_o", "attn.b_o",
                "ln2.g", "ln2.b", "mlp.w_up", "mlp.b_up", "mlp.w_down", "mlp.b_down"))
            for i in range(config.n_layers)
        ]
        self._w_out = self.params["wte"].T.copy() if config.tied else self.params["w_out"]
        # Every weight matrix ready for the product strategies of speclib.lm.products.
        self._products = {id(w): Product(w) for w in
                          [layer[i] for layer in self._layers for i in (2, 4, 8, 10)] + [self._w_out]}
        self._strategy: str | None = None
        self._compiled = False
        self._compiled_pass: _kernel.CompiledPass | None = None
        self._device: str | None = None
        self._device_pass = None  # a speclib.lm.torch_pass.TorchPass, made on first use

    def __repr__(self) -> str:
        c = self.config
        return (f"Transformer(n_layers={c.n_layers}, d_model={c.d_model}, n_heads={c.n_heads}, "
                f"block_size={c.block_size}, vocab_size={c.vocab_size}, "
                f"parameters={c.n_parameters():,}, temperature={self.temperature:g})")

    @property
    def n_parameters(self) -> int:
        return self.config.n_parameters()

    def with_temperature(self, temperature: float) -> "Transformer":
        """The same model (weights shared, not copied) sampling at another temperature."""
        other = copy.copy(self)
        other.temperature = as_real(temperature, "temperature", low=0.0)
        return other

    def cache(self, features: bool = False) -> "KVCache":
        """An empty :class:`KVCache` for incremental decoding (``features``: keep hidden states)."""
        return KVCache(self, features)

    def logits(self, tokens: np.ndarray) -> np.ndarray:
        """Raw next-token scores, shape ``(n, V)`` float32, for every position of ``tokens``."""
        tokens = as_tokens(tokens, "tokens", self.vocab_size)
        return KVCache(self).extend_logits(tokens)

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        """Next-token distributions, shape ``(n, V)``: the model protocol."""
        return softmax_rows(self.logits(tokens), self.temperature)

    @property
    def products(self) -> str | None:
        """The matrix-product strategy of every pass (:mod:`speclib.lm.products`).

        ``None`` (the default) uses, for each weight shape and number of tokens, the strategy
        measured fastest on this machine; a name from ``speclib.lm.products.STRATEGIES``
        forces that one, to compare them.  Every strategy computes the same numbers up to
        float32 rounding.
        """
        return self._strategy

    @products.setter
    def products(self, strategy: str | None) -> None:
        from .products import STRATEGIES, candidates

        if strategy is not None:
            if strategy not in STRATEGIES:
                raise ValueError(f"products: expected None or one of {', '.join(STRATEGIES)}, got {strategy!r}")
            if strategy == "kernel" and "kernel" not in candidates():
                raise ValueError("products: the kernel needs numba (pip install -r requirements.txt)")
        self._strategy = strategy

    @property
    def compiled(self) -> bool:
        """Whether each pass runs as one compiled function (:class:`speclib.lm.kernel.CompiledPass`).

        ``False`` (the default): the pass is a sequence of numpy operations, each matrix
        product by the strategy of :attr:`products`; this is the reference.  ``True`` (needs
        numba): the same arithmetic in one numba call, every product by the verification
        kernel, with no Python overhead per operation.  Both give the same rows up to float32
        rounding (``tests/test_compiled_pass.py``).  Set it on a copy
        (:meth:`with_compiled`) to compare the two.
        """
        return self._compiled

    @compiled.setter
    def compiled(self, value: bool) -> None:
        value = as_bool(value, "compiled")
        if value and self._device is not None:
            raise ValueError(f"compiled: this model runs on the PyTorch device {self._device!r}; "
                             "call with_device(None) first")
        if value and not _kernel.available():
            raise ValueError("compiled: the compiled pass needs numba (pip install -r requirements.txt)")
        self._compiled = value

    def with_compiled(self, compiled: bool = True) -> "Transformer":
        """The same model (weights shared) with :attr:`compiled` set; the original is unchanged."""
        other = copy.copy(self)
        other.compiled = compiled
        return other

    @property
    def device(self) -> str | None:
        """The PyTorch device every pass runs on (``"cuda"``, ``"cpu"``), or ``None``: numpy (the default).

        Set it on a copy with :meth:`with_device`.  On a device the pass is
        :class:`speclib.lm.torch_pass.TorchPass` (needs PyTorch): the same layers in float32,
        with the key/value cache kept on the device and the logits brought back to the host,
        where the loops sample as they always do.  Rows agree with the numpy pass up to
        float32 rounding (``tests/test_torch_pass.py``).
        """
        return self._device

    def with_device(self, device: str | None) -> "Transformer":
        """The same model (weights shared on the host) with its passes on a PyTorch ``device``.

        ``None`` returns to numpy.  The original is unchanged.  Raises a ValueError naming the
        device when this PyTorch cannot use it, and an ImportError with the install command
        when PyTorch is missing.
        """
        other = copy.copy(self)
        other._device, other._device_pass = None, None
        if device is not None:
            if self._compiled:
                raise ValueError("device: a compiled model runs on the host; call with_compiled(False) first")
            from .torch_pass import TorchPass

            other._device_pass = TorchPass(self.params, self.config.n_layers, self.config.n_heads, self._w_out,
                                           LN_EPS, device)
            other._device = str(other._device_pass.device)
        return other

    def _zeros(self, shape: tuple[int, ...]):
        """Zeros for a cache's keys or values: numpy's, or on the model's device."""
        if self._device_pass is not None:
            return self._device_pass.zeros(shape)
        return np.zeros(shape, dtype=np.float32)

    def _pass(self) -> "_kernel.CompiledPass":
        if self._compiled_pass is None:
            self._compiled_pass = _kernel.CompiledPass(self.params, self.config.n_layers, self.config.n_heads,
                                                       self._w_out, LN_EPS, _GELU_C)
        return self._compiled_pass

    def _mm(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        product = self._products.get(id(w))
        if product is None or product.source is not w:  # a matrix set after construction
            product = self._products[id(w)] = Product(w)
        return product(x, self._strategy)

    def _attention_compiled(self) -> bool:
        # Passes over several tokens attend with the compiled kernel wherever the products may
        # use it (the default choice, or products = "kernel").
        return self._strategy in (None, "kernel") and "kernel" in candidates()

    # The one place where the network is evaluated.  ``keys``/``values`` hold, for each
    # layer, ``filled`` cached slots of the current window; the new tokens are written to
    # slots ``filled .. filled + n - 1`` after them.  By default they are a chain: window
    # positions ``filled .. filled + n - 1`` and a causal mask.  A token tree passes its
    # nodes' ``positions`` (window position = depth) and an additive ``mask`` of shape
    # ``(n, filled + n)`` (0 where a node may look, -inf elsewhere: the cached slots and its
    # own ancestors).  ``features``, when given, receives the final hidden state of every new
    # token (after the final layer norm, before the output projection): what Medusa and
    # EAGLE heads read.
    def _run(self, tokens: np.ndarray, filled: int, keys: np.ndarray, values: np.ndarray,
             features: np.ndarray | None = None, positions: np.ndarray | None = None,
             mask: np.ndarray | None = None) -> np.ndarray:
        cfg = self.config
        n, h, dh = tokens.size, cfg.n_heads, cfg.head_dim
        end = filled + n
        if self._device_pass is not None:
            return self._device_pass(tokens, filled, keys, values, features, positions, mask)
        if self._compiled:
            return self._pass()(tokens, filled, keys, values, features,
                                np.arange(filled, end) if positions is None else positions, mask)
        wpe = self.params["wpe"]
        x = self.params["wte"][tokens] + (wpe[filled:end] if positions is None else wpe[positions])
        compiled = n > 1 and self._attention_compiled()
        if mask is None and n > 1 and not compiled:  # new token j may look at window slots 0 .. filled + j
            mask = np.triu(np.full((n, end), -np.inf, dtype=np.float32), k=filled + 1)
        scale = np.float32(1.0 / math.sqrt(dh))
        for layer, (g1, b1, w_qkv, b_qkv, w_o, b_o, g2, b2, w_up, b_up, w_down, b_down) in enumerate(self._layers):
            qkv = self._mm(_layer_norm(x, g1, b1), w_qkv) + b_qkv
            qkv = qkv.reshape(n, 3, h, dh).transpose(1, 2, 0, 3)  # (3, heads, n, head_dim)
            keys[layer, :, filled:end] = qkv[1]
            values[layer, :, filled:end] = qkv[2]
            if compiled:  # the same attention, compiled: numpy's batched products are slow for 2-16 rows
                y = _kernel.attend(qkv[0] * scale, keys[layer], values[layer], filled, mask)
            else:
                att = (qkv[0] * scale) @ keys[layer, :, :end].transpose(0, 2, 1)  # (heads, n, end)
                if mask is not None:
                    att += mask
                att -= _max(att, axis=-1, keepdims=True)
                np.exp(att, out=att)
                att /= _sum(att, axis=-1, keepdims=True)
                y = (att @ values[layer, :, :end]).transpose(1, 0, 2).reshape(n, cfg.d_model)
            x = x + (self._mm(y, w_o) + b_o)
            x = x + (self._mm(_gelu(self._mm(_layer_norm(x, g2, b2), w_up) + b_up), w_down) + b_down)
        x = _layer_norm(x, self.params["ln_f.g"], self.params["ln_f.b"])
        if features is not None:
            features[...] = x
        return self._mm(x, self._w_out)


class _PendingTree(NamedTuple):
    """A tree scored by :meth:`KVCache.extend_tree` and not yet resolved by :meth:`KVCache.accept_tree`."""

    length: int  # tokens the cache held before the tree
    slot: int  # window slot of node 0 (the nodes' keys lie at slot + i); -1: scored path by path
    tokens: np.ndarray
    parents: np.ndarray
    features: np.ndarray | None  # the nodes' final hidden states (a cache with features only)


class KVCache:
    """The incremental state of one :class:`Transformer` reading one sequence.

    ``len(cache)`` is the number of tokens fed so far.  :meth:`extend` feeds more tokens
    and returns their next-token distributions; :meth:`rollback` returns to an earlier
    length.  Extending after a rollback gives exactly what a fresh computation on the same
    tokens gives (the tests check it).  :meth:`extend_tree` scores a whole token tree in one
    pass and :meth:`accept_tree` keeps one of its branches.

    The keys and values of the window that the next token is read through are kept, and so
    are those of the window before it: a rollback behind the point where the window moved
    returns to the earlier window's keys instead of re-reading its tokens.
    :attr:`tokens_computed` counts the tokens run through the network, re-reads included.

    Examples
    --------
    >>> cfg = TransformerConfig(vocab_size=5, block_size=8, d_model=8, n_layers=1, n_heads=2)
    >>> model = random_transformer(cfg, seed=0)
    >>> cache = model.cache()
    >>> q = cache.extend([1, 2, 3, 4])      # four positions at once
    >>> cache.rollback(2)                   # forget tokens 3 and 4
    >>> q2 = cache.extend([3])              # ... and continue from "1 2"
    >>> bool(np.allclose(q[2], q2[0], atol=1e-6)), len(cache)
    (True, 3)
    """

    #: Rows right by construction: the loops do not check them again (speclib.core.cache.rows_trusted).
    trusted_rows = True

    def __init__(self, model: Transformer, features: bool = False) -> None:
        if not isinstance(model, Transformer):
            raise TypeError(f"model: expected a Transformer, got {type(model).__name__}")
        cfg = model.config
        self.model = model
        #: Keep each fed token's final hidden state (:attr:`features`), for heads that read it.
        self.keep_features = as_bool(features, "features")
        self._features = np.zeros((64 if self.keep_features else 0, cfg.d_model), dtype=np.float32)
        # block_size slots for the window, as many again for the nodes of a token tree.
        shape = (cfg.n_layers, cfg.n_heads, 2 * cfg.block_size, cfg.head_dim)
        self._keys = model._zeros(shape)
        self._values = model._zeros(shape)
        self._start = 0  # absolute position of window slot 0
        self._filled = 0  # window slots holding valid keys/values
        # The other window: [keys, values, start, filled] (filled = 0: nothing kept).
        self._other = [model._zeros(shape), model._zeros(shape), -1, 0]
        self._tokens = np.zeros(64, dtype=np.int64)
        self._length = 0  # tokens fed
        self._tree: _PendingTree | None = None
        #: Tokens run through the network so far: fed tokens, tree nodes and window re-reads.
        self.tokens_computed = 0

    def __len__(self) -> int:
        return self._length

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

    def _grow(self, need: int) -> None:
        if need > self._tokens.size:
            size = max(need, 2 * self._tokens.size)
            grown = np.zeros(size, dtype=np.int64)
            grown[: self._length] = self._tokens[: self._length]
            self._tokens = grown
            if self.keep_features:
                more = np.zeros((size, self._features.shape[1]), dtype=np.float32)
                more[: self._length] = self._features[: self._length]
                self._features = more

    def _append(self, tokens: np.ndarray) -> None:
        need = self._length + tokens.size
        self._grow(need)
        self._tokens[self._length:need] = tokens
        self._length = need

    def _run(self, tokens: np.ndarray, features: np.ndarray | None = None, positions: np.ndarray | None = None,
             mask: np.ndarray | None = None) -> np.ndarray:
        """One pass of the network over ``tokens``, written after the window's filled slots."""
        self.tokens_computed += tokens.size
        return self.model._run(tokens, self._filled, self._keys, self._values, features, positions, mask)

    def _enter_window(self, pos: int) -> None:
        """Make the current window the one token ``pos`` is read through, holding tokens ``start .. pos - 1``.

        The window kept from before is reused when it is the right one; only the tokens it
        lacks are read again.
        """
        start = window_start(pos, self.model.config.block_size)
        if start != self._start:
            other = self._other
            self._other = [self._keys, self._values, self._start, self._filled]
            self._keys, self._values = other[0], other[1]
            self._start, self._filled = start, (other[3] if other[2] == start else 0)
        if self._start + self._filled < pos:  # the window moved, or went back: read what it lacks
            self._run(self._tokens[self._start + self._filled:pos])
            self._filled = pos - self._start

    def extend_logits(self, tokens: np.ndarray) -> np.ndarray:
        """Feed ``tokens``; return their raw next-token scores, shape ``(len(tokens), V)``."""
        return self._extend_logits(fed_tokens(tokens, self.model.vocab_size))

    def extend(self, tokens: np.ndarray) -> np.ndarray:
        """Feed ``tokens``; return their next-token distributions at the model's temperature.

        Token arrays that a decoding loop built itself (int64 numpy arrays) are range-checked
        with two comparisons only: a draft pass is short enough that more would show.
        """
        return _softmax(self._extend_logits(fed_tokens(tokens, self.model.vocab_size)), self.model.temperature)

    def _extend_logits(self, tokens: np.ndarray) -> np.ndarray:
        block = self.model.config.block_size
        self._tree = None
        out, i = [], 0
        while i < tokens.size:
            pos = self._length  # absolute position of tokens[i]
            self._enter_window(pos)
            take = min(tokens.size - i, self._start + block - pos)  # stop where the window moves
            chunk = tokens[i:i + take]
            feats = None
            if self.keep_features:
                self._grow(pos + take)
                feats = self._features[pos:pos + take]
            out.append(self._run(chunk, feats))
            self._append(chunk)
            self._filled += take
            i += take
        if not out:
            return np.zeros((0, self.model.vocab_size), dtype=np.float32)
        return out[0] if len(out) == 1 else np.concatenate(out)

    def extend_tree(self, tokens: np.ndarray, parents: np.ndarray) -> np.ndarray:
        """Score a token tree after the fed tokens; its next-token distributions, ``(n, V)``.

        Node ``i`` holds ``tokens[i]`` below node ``parents[i]`` (``-1``: the last fed token;
        a parent comes before its children).  Row ``i`` is what :meth:`extend` would return
        for node ``i`` after feeding the path from the root to it: every node sits at the
        position its depth gives and attends to the fed tokens and its own ancestors only.
        All nodes go through the network in one pass, unless the deepest would be read
        through a later window than the first (the window moves inside the tree): then each
        root-to-leaf path is fed and rolled back in turn.

        The tree stays pending: :meth:`accept_tree` keeps one branch of it; any other call
        (:meth:`extend`, :meth:`rollback`) forgets it.  ``len(self)`` does not change.

        Examples
        --------
        >>> cfg = TransformerConfig(vocab_size=5, block_size=8, d_model=8, n_layers=1, n_heads=2)
        >>> cache = random_transformer(cfg, seed=0).cache()
        >>> rows = cache.extend_tree([1, 2, 3], [-1, 0, 0])   # "1 2" and "1 3"
        >>> plain = random_transformer(cfg, seed=0).cache().extend([1, 3])
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
        n, length, block = tokens.size, self._length, self.model.config.block_size
        if n == 0:
            return np.zeros((0, self.model.vocab_size), dtype=np.float32)
        depth = depths(parents)
        deepest = length + int(depth.max()) - 1
        if window_start(deepest, block) != window_start(length, block):
            return self._tree_by_paths(tokens, parents)
        self._enter_window(length)
        filled = self._filled
        if filled + n > self._keys.shape[2]:  # more nodes than the slots beyond the window
            return self._tree_by_paths(tokens, parents)
        feats = np.empty((n, self.model.config.d_model), dtype=np.float32) if self.keep_features else None
        if is_chain(parents):  # the ordinary pass, bit for bit
            out = self._run(tokens, feats)
        else:
            mask = np.zeros((n, filled + n), dtype=np.float32)
            mask[:, filled:][~ancestor_mask(parents)] = -np.inf
            out = self._run(tokens, feats, filled + depth - 1, mask)
        self._tree = _PendingTree(length, filled, tokens, parents, feats)
        return out

    def grow_tree(self, tokens: np.ndarray, parents: np.ndarray) -> np.ndarray:
        """:meth:`grow_tree_logits` as next-token distributions at the model's temperature."""
        return _softmax(self.grow_tree_logits(tokens, parents), self.model.temperature)

    def grow_tree_logits(self, tokens: np.ndarray, parents: np.ndarray) -> np.ndarray:
        """Add nodes below the pending tree in one pass; the raw scores of the new nodes only.

        ``parents[i]`` is ``-1`` (the last fed token), a node of the pending tree
        (``0 .. n - 1``) or an earlier new node (``n + j``).  The pending tree's nodes are not
        computed again: their keys are in place, so a drafter that expands a tree level by
        level pays for each node once.  Rows and the pending tree are then those
        :meth:`extend_tree` would give for the whole grown tree.
        """
        from ..core.tree import ancestor_mask, check_parents, depths

        tree = self._tree
        if tree is None or tree.length != self._length or (tree.slot >= 0 and tree.slot != self._filled):
            raise ValueError("grow_tree: no tree is pending (call extend_tree first)")
        tokens = fed_tokens(tokens, self.model.vocab_size)
        n_old, n = tree.tokens.size, tokens.size
        all_tokens = np.concatenate([tree.tokens, tokens])
        all_parents = check_parents(np.concatenate([tree.parents, np.asarray(parents, dtype=np.int64).reshape(-1)])
                                    if not isinstance(parents, (str, bytes)) else parents, n_old + n)
        if n == 0:
            return np.zeros((0, self.model.vocab_size), dtype=np.float32)
        depth = depths(all_parents)
        block, slot = self.model.config.block_size, tree.slot
        if (slot < 0 or window_start(self._length + int(depth.max()) - 1, block) != self._start
                or slot + n_old + n > self._keys.shape[2]):
            return self.extend_tree_logits(all_tokens, all_parents)[n_old:]
        end = slot + n_old + n
        mask = np.zeros((n, end), dtype=np.float32)
        mask[:, slot:][~ancestor_mask(all_parents)[n_old:]] = -np.inf
        feats = np.empty((n, self.model.config.d_model), dtype=np.float32) if self.keep_features else None
        self.tokens_computed += n
        out = self.model._run(tokens, slot + n_old, self._keys, self._values, feats, slot + depth[n_old:] - 1, mask)
        features = None if feats is None else np.concatenate([tree.features, feats])
        self._tree = _PendingTree(tree.length, slot, all_tokens, all_parents, features)
        return out

    def _tree_by_paths(self, tokens: np.ndarray, parents: np.ndarray) -> np.ndarray:
        """The tree's rows when the window moves inside it: one plain pass per root-to-leaf path."""
        from ..core.tree import path_to

        length, out, done = self._length, np.empty((tokens.size, self.model.vocab_size), dtype=np.float32), set()
        leaves = sorted(set(range(tokens.size)) - set(parents.tolist()))
        for leaf in leaves:
            path = path_to(parents, leaf)
            rows = self._extend_logits(tokens[path])
            self.rollback(length)
            for node, row in zip(path, rows):
                if node not in done:
                    out[node] = row
                    done.add(node)
        self._tree = _PendingTree(length, -1, tokens, parents, None)
        return out

    def accept_tree(self, node: int) -> None:
        """Keep the branch of the pending tree that ends at ``node`` (``-1``: none of it).

        The kept nodes' keys and values (and features) move into place after the fed
        tokens, as if that branch had been fed with :meth:`extend`; the other nodes are
        forgotten.
        """
        from ..core.tree import path_to

        tree = self._tree
        if tree is None or tree.length != self._length or (tree.slot >= 0 and tree.slot != self._filled):
            raise ValueError("accept_tree: no tree is pending (call extend_tree first; extend and "
                             "rollback forget a pending tree)")
        node = as_int(node, "node", minimum=-1, maximum=tree.tokens.size - 1)
        self._tree = None
        path = path_to(tree.parents, node)
        if not path:
            return
        if tree.slot < 0:  # scored path by path: feed the kept branch
            self._extend_logits(tree.tokens[path])
            return
        slots = tree.slot + np.array(path)
        end = tree.slot + len(path)
        # Fancy indexing copies the kept slots before they are written back, in order.
        self._keys[:, :, tree.slot:end] = self._keys[:, :, slots]
        self._values[:, :, tree.slot:end] = self._values[:, :, slots]
        if tree.features is not None:
            self._grow(self._length + len(path))
            self._features[self._length:self._length + len(path)] = tree.features[path]
        self._append(tree.tokens[path])
        self._filled = end

    def rollback(self, length: int) -> None:
        """Forget every token after the first ``length`` (0 <= length <= len(self))."""
        length = as_int(length, "length", minimum=0)
        if length > self._length:
            raise ValueError(f"length: cannot roll forward, the cache holds {self._length} tokens, got {length}")
        self._tree = None
        self._length = length
        self._filled = max(0, min(self._filled, length - self._start))
        other = self._other
        other[3] = max(0, min(other[3], length - other[2]))


# --------------------------------------------------------------------------- building, saving


def random_transformer(config: TransformerConfig, seed: int | np.random.Generator = 0,
                       scale: float = 0.5) -> Transformer:
    """A transformer with random weights (for tests and demonstrations).

    Matrices are Gaussian with standard deviation ``scale / sqrt(fan_in)``; layer-norm
    gains are near 1 and every bias is small but non-zero, so that every parameter matters.
    """
    if not isinstance(config, TransformerConfig):
        raise TypeError(f"config: expected a TransformerConfig, got {type(config).__name__}")
    rng = as_generator(seed, "seed")
    scale = as_real(scale, "scale", low=0.0)
    params = {}
    for name, shape in config.parameter_shapes().items():
        if name.endswith(".g"):
            params[name] = 1.0 + 0.1 * rng.standard_normal(shape)
        elif len(shape) == 1:
            params[name] = 0.1 * rng.standard_normal(shape)
        else:
            params[name] = scale / math.sqrt(shape[0] if name.startswith("h") or name == "w_out" else 1.0) \
                * rng.standard_normal(shape)
    return Transformer(config, params)


def save_transformer(model: Transformer, path: str | Path, vocabulary: str = "", **metadata: object) -> None:
    """Write ``model`` to a compressed ``.npz``: float16 weights, config and vocabulary inside.

    ``metadata`` (JSON-serialisable values) is stored beside the config.
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"model: expected a Transformer, got {type(model).__name__}")
    path = as_path(path, "path")
    if path.is_dir():
        raise ValueError(f"path: {path} is a directory; expected a file name ending in .npz "
                         f"(e.g. {path / 'model.npz'})")
    if path.suffix != ".npz":
        raise ValueError(f"path: expected a file name ending in .npz (numpy adds it otherwise), got {path}")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"path: the folder {path.parent} does not exist")
    header = {"config": asdict(model.config), "vocabulary": vocabulary, "metadata": metadata}
    arrays = {name: value.astype(np.float16) for name, value in model.params.items()}
    np.savez_compressed(path, header=np.array(json.dumps(header)), **arrays)


def load_transformer(path: str | Path) -> Transformer:
    """Read a model written by :func:`save_transformer` (weights become float32)."""
    path = as_path(path, "path")
    if not path.is_file():
        raise FileNotFoundError(f"path: no model file at {path}")
    not_a_model = f"path: {path} is not a model file written by save_transformer"
    with open(path, "rb") as file:
        if file.read(4) != b"PK\x03\x04":  # every .npz is a zip archive of arrays
            raise ValueError(f"{not_a_model} (it is not an .npz archive)")
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as error:  # a damaged or truncated archive
        raise ValueError(f"{not_a_model} (a damaged .npz archive: {error})") from None
    with data:
        try:
            header = json.loads(str(data["header"]))
            config = TransformerConfig(**header["config"])
            params = {name: data[name] for name in config.parameter_shapes()}
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{not_a_model} (missing or unreadable entry: {error})") from None
    model = Transformer(config, params)
    model.vocabulary = header.get("vocabulary", "")
    model.metadata = header.get("metadata", {})
    return model


def load_pair(temperature: float = 1.0) -> tuple[Transformer, Transformer]:
    """The book's trained (target, draft) pair of character models, from ``speclib/data``.

    Both read the shared 97-symbol vocabulary of :mod:`speclib.lm.corpora` and were trained on
    both domains (prose and code) by ``training/train_transformer.py``.

    Examples
    --------
    >>> target, draft = load_pair()
    >>> target.vocab_size == draft.vocab_size == 97
    True
    """
    from .corpora import shared_vocabulary

    pair = tuple(load_transformer(DATA_DIR / f"neural_{role}.npz").with_temperature(temperature)
                 for role in ("target", "draft"))
    chars = shared_vocabulary().chars
    for role, model in zip(("target", "draft"), pair):
        if model.vocabulary != chars:
            raise ValueError(f"the shipped {role} model was trained with another vocabulary than speclib.lm.corpora's")
    return pair


def heldout_cross_entropy(model: Transformer, ids: np.ndarray) -> float:
    """Cross-entropy of ``model`` on the token ids ``ids``, in bits per token, at temperature 1.

    The ids are read in consecutive windows of ``block_size`` tokens (as in training), each
    predicting the next ``block_size`` ids, so every id but the first is scored exactly
    once.  The result is the mean of ``-log2 q(next id)``.

    Examples
    --------
    >>> cfg = TransformerConfig(vocab_size=5, block_size=8, d_model=8, n_layers=1, n_heads=2)
    >>> bits = heldout_cross_entropy(random_transformer(cfg), np.arange(20) % 5)
    >>> 0 < bits < 10
    True
    """
    model = _check_transformer(model, "model")
    ids = as_tokens(ids, "ids", model.vocab_size)
    if ids.size < 2:
        raise ValueError(f"ids: need at least 2 tokens to score one, got {ids.size}")
    block, total = model.config.block_size, 0.0
    for start in range(0, ids.size - 1, block):
        inputs = ids[start:start + block]
        targets = ids[start + 1:start + block + 1]
        z = model.logits(inputs[:targets.size]).astype(np.float64)
        z -= z.max(axis=1, keepdims=True)
        log_q = z[np.arange(targets.size), targets] - np.log(np.exp(z).sum(axis=1))
        total -= log_q.sum()
    return float(total / (ids.size - 1) / math.log(2))


# --------------------------------------------------------------------------- decoding with a cache


def _check_transformer(model: object, name: str) -> Transformer:
    if not isinstance(model, Transformer):
        raise TypeError(f"{name}: expected a speclib.lm.transformer.Transformer, got {type(model).__name__}")
    return model


# --------------------------------------------------------------------------- measuring cost and speed


class blas_threads:
    """Context manager: run numpy's OpenBLAS on ``n`` threads inside the block.

    Timings of one decoding stream are taken on one core: a matrix-vector product is too
    small to share, and on a busy machine OpenBLAS threads that wait for each other make
    single passes erratic.  Where numpy does not use OpenBLAS (or it cannot be found) the
    block runs unchanged and ``active`` is False.

    Examples
    --------
    >>> with blas_threads(1) as ctl:
    ...     isinstance(ctl.active, bool)
    True
    """

    _SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads")
    _GETTERS = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads")

    def __init__(self, n: int = 1) -> None:
        self.n = as_int(n, "n", minimum=1)
        self.active = False
        self._lib = self._previous = None

    @staticmethod
    def _find_openblas():
        import ctypes
        import glob

        root = Path(np.__file__).parent
        for pattern in ("../numpy.libs/*openblas*", ".dylibs/*openblas*", "../numpy.libs/*.dll"):
            for path in sorted(glob.glob(str(root / pattern))):
                try:
                    return ctypes.CDLL(path)
                except OSError:
                    continue
        return None

    def __enter__(self) -> "blas_threads":
        lib = self._find_openblas()
        if lib is not None:
            get = next((getattr(lib, s) for s in self._GETTERS if hasattr(lib, s)), None)
            set_ = next((getattr(lib, s) for s in self._SETTERS if hasattr(lib, s)), None)
            if get is not None and set_ is not None:
                self._previous, self._set = int(get()), set_
                set_(self.n)
                self.active = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.active:
            self._set(self._previous)


def time_pass(model: Transformer, n_tokens: int, prefix_length: int = 64, reps: int = 30,
              seed: int = 0) -> np.ndarray:
    """Wall-clock seconds of ``reps`` cached passes of ``model`` over ``n_tokens`` new tokens.

    A cache is filled with ``prefix_length`` random tokens; each repetition extends it by the
    same ``n_tokens`` random tokens (one forward pass, as a verification pass over ``k + 1``
    tokens is) and rolls it back, on one BLAS thread.  Two untimed passes warm the caches
    first.  Report a median: single timings vary with whatever else the machine does.
    """
    model = _check_transformer(model, "model")
    n_tokens = as_int(n_tokens, "n_tokens", minimum=1)
    prefix_length = as_int(prefix_length, "prefix_length", minimum=0)
    reps = timing_repeats(as_int(reps, "reps", minimum=1, maximum=MAX_REPEATS, why="timings settle long before"))
    if prefix_length + n_tokens > model.config.block_size:
        raise ValueError(f"prefix_length + n_tokens: must fit in the block of {model.config.block_size} tokens")
    rng = as_generator(seed, "seed")
    cache = model.cache()
    cache.extend(rng.integers(0, model.vocab_size, prefix_length))
    new = rng.integers(0, model.vocab_size, n_tokens)
    times = np.empty(reps)
    with blas_threads(1):
        for i in range(-2, reps):
            t0 = time.perf_counter()
            cache.extend_logits(new)
            elapsed = time.perf_counter() - t0
            cache.rollback(prefix_length)
            if i >= 0:
                times[i] = elapsed
    return times


def pass_times(model, n_tokens: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 9), repeats: int = 20,
               prefix_length: int = 64, seed: int = 0):
    """Time cached passes of ``model`` over each number of new tokens, as a :class:`speclib.core.cost.PassTimes`.

    Like :func:`time_pass`, after a prefix of ``prefix_length`` random tokens; each repeat
    times every token count once in a fresh random order (so a slow spell of the machine
    hits all counts alike), each after an untimed pass over as many tokens (see
    :func:`strategy_pass_times`), on one BLAS thread.  The result plugs into
    :func:`speclib.core.cost.fit_pass_cost` and :func:`speclib.book.plots.plot_pass_times`.

    ``model`` is the book's :class:`Transformer` or a real model
    (:class:`speclib.lm.llama.Llama`, whose pass reads ``model.nbytes`` of weights).
    """
    from ..core.cost import PassTimes
    from .llama import Llama

    if not isinstance(model, Llama):
        model = _check_transformer(model, "model")
    counts = sorted(set(as_int_list(n_tokens, "n_tokens", minimum=1)))
    repeats = timing_repeats(as_int(repeats, "repeats", minimum=1, maximum=MAX_REPEATS, why="timings settle long before"))
    prefix_length = as_int(prefix_length, "prefix_length", minimum=0)
    block = getattr(model.config, "block_size", None) or model.config.max_positions
    if prefix_length + counts[-1] > block:
        raise ValueError(f"prefix_length + n_tokens: must fit in the block of {block} tokens")
    rng = as_generator(seed, "seed")
    cache = model.cache()
    cache.extend(rng.integers(0, model.vocab_size, prefix_length))
    new = rng.integers(0, model.vocab_size, counts[-1])
    seconds = np.empty((repeats, len(counts)))
    with blas_threads(1):
        for n in counts:  # warm-up
            cache.extend_logits(new[:n])
            cache.rollback(prefix_length)
        for r in range(repeats):
            for j in rng.permutation(len(counts)):
                cache.extend_logits(new[:counts[j]])  # untimed, as in strategy_pass_times
                cache.rollback(prefix_length)
                t0 = time.perf_counter()
                cache.extend_logits(new[:counts[j]])
                seconds[r, j] = time.perf_counter() - t0
                cache.rollback(prefix_length)
    n_params = model.n_parameters
    return PassTimes(np.array(counts), seconds, getattr(model, "nbytes", 4 * n_params), n_params)


def strategy_pass_times(model: Transformer, strategies=None, n_tokens: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 9),
                        repeats: int = 20, prefix_length: int = 64, seed: int = 0) -> dict:
    """:func:`pass_times` for several product strategies at once, interleaved.

    ``strategies`` lists values of :attr:`Transformer.products` (``None``: the measured
    choice), or ``"compiled"`` for the whole pass compiled (:attr:`Transformer.compiled`); by
    default ``None`` and every product strategy that can run here.  Each repeat times every
    (strategy, token count) pair once in a fresh random order, on one BLAS thread, so that the
    strategies share the machine's slow spells, and each timed pass follows an untimed one of
    the same pair.  The untimed pass matters: strategies keep their own copies of the weights
    (transposed, in blocks, stacked), and the measured choice may use another copy for another
    number of rows, so a pass right after a different one would read its weights from memory
    instead of the cache, which no decoding loop does (plain decoding repeats one-token
    passes; speculative decoding repeats its passes over ``k + 1`` tokens).  Returns
    ``{strategy: PassTimes}``; the model's own setting is restored.  ``"compiled"`` is timed in
    a run of its own after the others (its stacked copy of the weights is the largest, and a
    loop that runs compiled never touches numpy's copies), with the same repeats and seed.

    Examples
    --------
    >>> cfg = TransformerConfig(vocab_size=5, block_size=16, d_model=8, n_layers=1, n_heads=2)
    >>> times = strategy_pass_times(random_transformer(cfg), ["full", "rows"], (1, 2), repeats=2, prefix_length=4)
    >>> sorted(times), times["rows"].seconds.shape
    (['full', 'rows'], (2, 2))
    """
    from ..core.cost import PassTimes
    from .products import candidates

    model = _check_transformer(model, "model")
    strategies = [None, *candidates()] if strategies is None else list(strategies)
    if not strategies:
        raise ValueError("strategies: expected at least one strategy")
    if "compiled" in strategies and len(strategies) > 1:
        others = [s for s in strategies if s != "compiled"]
        times = strategy_pass_times(model, others, n_tokens, repeats, prefix_length, seed)
        times.update(strategy_pass_times(model, ["compiled"], n_tokens, repeats, prefix_length, seed))
        return {s: times[s] for s in strategies}
    counts = sorted(set(as_int_list(n_tokens, "n_tokens", minimum=1)))
    repeats = timing_repeats(as_int(repeats, "repeats", minimum=1, maximum=MAX_REPEATS, why="timings settle long before"))
    prefix_length = as_int(prefix_length, "prefix_length", minimum=0)
    if prefix_length + counts[-1] > model.config.block_size:
        raise ValueError(f"prefix_length + n_tokens: must fit in the block of {model.config.block_size} tokens")
    rng = as_generator(seed, "seed")
    before = model.products, model.compiled

    def use(strategy) -> None:
        model.compiled = strategy == "compiled"  # checks that numba is there
        model.products = None if strategy == "compiled" else strategy  # checks the name

    for strategy in strategies:
        use(strategy)
    cache = model.cache()
    cache.extend(rng.integers(0, model.vocab_size, prefix_length))
    new = rng.integers(0, model.vocab_size, counts[-1])
    pairs = [(i, j) for i in range(len(strategies)) for j in range(len(counts))]
    seconds = np.empty((len(strategies), repeats, len(counts)))
    try:
        with blas_threads(1):
            for i, j in pairs:  # warm-up: plans measured, kernels compiled
                use(strategies[i])
                cache.extend_logits(new[:counts[j]])
                cache.rollback(prefix_length)
            for r in range(repeats):
                for idx in rng.permutation(len(pairs)):
                    i, j = pairs[idx]
                    use(strategies[i])
                    cache.extend_logits(new[:counts[j]])  # untimed: the weights this pair reads, cached
                    cache.rollback(prefix_length)
                    t0 = time.perf_counter()
                    cache.extend_logits(new[:counts[j]])
                    seconds[i, r, j] = time.perf_counter() - t0
                    cache.rollback(prefix_length)
    finally:
        model.products, model.compiled = before
    n_params = model.n_parameters
    return {s: PassTimes(np.array(counts), seconds[i], 4 * n_params, n_params) for i, s in enumerate(strategies)}


def speedup_with_costs(alpha: float, k: int, c: float, verify_ratio: float) -> float:
    """Predicted wall-clock speed-up when a verification pass costs more than a single pass.

    ``(1 - alpha**(k+1)) / (1 - alpha) / (k c + verify_ratio)``: the expected tokens per step
    divided by the cost of a step, in units of one single-token target pass.  ``verify_ratio``
    is the measured cost of a target pass over ``k + 1`` tokens relative to one token; with
    ``verify_ratio = 1`` this is :func:`speclib.core.theory.speedup_in_passes`.

    Examples
    --------
    >>> round(speedup_with_costs(0.8, 3, 0.05, verify_ratio=1.5), 3)
    1.789
    """
    from ..core.theory import expected_tokens_per_pass

    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    c = as_real(c, "c", low=0.0)
    verify_ratio = as_real(verify_ratio, "verify_ratio", low=0.0)
    if verify_ratio + k * c == 0:
        raise ValueError("verify_ratio: a step must cost something (verify_ratio + k c > 0)")
    return float(expected_tokens_per_pass(alpha, k)) / (k * c + verify_ratio)

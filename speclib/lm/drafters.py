"""Drafters for the book's transformer target, each a proposer of the one loop.

Chapter 9 drafts with a separate small transformer.  The drafters here draft better or more
cheaply by leaning on the target itself, and every one of them plugs into
:func:`speclib.core.decoding.speculative_generate` as a proposer (the protocol of
:mod:`speclib.core.proposers`), so the loop, and with it the exactness of its output, is
the same for all:

``pair``
    the shipped separate draft (1 layer of width 64), as in chapter 9;
``distilled``
    a draft of the same shape, fine-tuned on the target's own next-token distributions
    (DistillSpec);
``ngram``
    the order-7 n-gram of the domain, on the same vocabulary;
``medusa``
    :class:`MedusaHeads`: small heads on the target's final hidden state at the last read
    position, head ``i`` guessing the token ``i + 2`` places ahead; all drafts of a step
    come from one evaluation of the heads, without a draft model;
``eagle``
    :class:`EagleDrafter`: one small transformer block that reads the target's hidden state
    and the next token's embedding, predicts the next hidden state and reads it with the
    target's own output head, autoregressively on its own predictions for ``k`` steps;
``early-exit``
    the target's first block and a trained exit head, run as a one-layer
    :class:`~speclib.lm.transformer.Transformer` (LayerSkip's self-speculation; the full
    target verifies and recomputes its first block: nothing is shared here).

Medusa and EAGLE read the target's hidden states without a second pass: they come with a
:class:`FeatureTarget`, the target whose cache keeps them (``cache.features``); pass
``drafter.target`` as the loop's target.  Every drafter returned by :func:`load_drafter`
has a ``target`` attribute, so ``speculative_generate(d.target, d, prompt, n, k, rng)``
works for all.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .._validate import MAX_DRAFT_LENGTH, as_bool, as_int, as_real
from ..core.proposers import DraftModel, Proposal, check_model
from . import kernel as _kernel
from .transformer import (
    _GELU_C,
    DATA_DIR,
    LN_EPS,
    KVCache,
    Transformer,
    TransformerConfig,
    _gelu,
    _layer_norm,
    _softmax,
    blas_threads,
    load_transformer,
)

#: The shipped drafters' files in ``speclib/data`` (the separate draft is ``neural_draft.npz``).
DRAFTER_FILES = {
    "distilled": "neural_distilled.npz",
    "medusa": "drafter_medusa.npz",
    "eagle": "drafter_eagle.npz",
    "early-exit": "drafter_early_exit.npz",
}
#: Every name :func:`load_drafter` knows, in the book's order.
DRAFTER_NAMES = ("pair", "distilled", "ngram", "medusa", "eagle", "early-exit")
#: The order of the n-gram drafter.
NGRAM_ORDER = 7


def save_weights(path: str | Path, kind: str, arrays: dict[str, np.ndarray], **header: object) -> None:
    """Write a drafter's weights (float16; integer arrays, such as token ids, as int32) and a JSON
    header (``kind`` and its settings)."""
    if not isinstance(kind, str):
        raise TypeError(f"kind: expected the drafter's name (a string), got {type(kind).__name__}")
    head = {"kind": kind, **header}
    stored = {}
    for name, value in arrays.items():
        value = np.asarray(value)
        if value.dtype.kind in "iu":
            if value.size and (value.min() < np.iinfo(np.int32).min or value.max() > np.iinfo(np.int32).max):
                raise ValueError(f"arrays[{name!r}]: integers beyond int32")
            stored[name] = value.astype(np.int32)
        else:
            stored[name] = value.astype(np.float32).astype(np.float16)
    np.savez_compressed(Path(path), header=np.array(json.dumps(head)), **stored)


def load_weights(path: str | Path) -> tuple[dict, dict[str, np.ndarray]]:
    """Read what :func:`save_weights` wrote: ``(header, arrays)``, float arrays as float32, integer ones as int64."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: no drafter weights at {path}")
    with np.load(path, allow_pickle=False) as data:
        header = json.loads(str(data["header"]))
        arrays = {name: data[name].astype(np.int64 if data[name].dtype.kind in "iu" else np.float32)
                  for name in data.files if name != "header"}
    return header, arrays


def _check_target(target: object) -> Transformer:
    if not isinstance(target, Transformer):
        raise TypeError(f"target: expected a speclib.lm.transformer.Transformer, got {type(target).__name__}")
    return target


def _check_feature_model(target: object):
    """A target whose cache keeps features: the book's Transformer or a Llama (speclib.lm.llama)."""
    from .llama import Llama

    if not isinstance(target, (Transformer, Llama)):
        raise TypeError(f"target: expected a speclib.lm.transformer.Transformer or a speclib.lm.llama.Llama, "
                        f"got {type(target).__name__}")
    return target


# --------------------------------------------------------------------------- the target that keeps features


class FeatureTarget:
    """The target model, read through a cache that keeps its hidden states.

    A thin model: calls go to ``model`` (the book's :class:`~speclib.lm.transformer.Transformer`
    or a :class:`~speclib.lm.llama.Llama`); :meth:`cache` returns the model's cache with
    ``features=True`` and hands it to the drafter that starts next (:meth:`take_cache`), so
    that the heads read what the loop's own target passes computed.  Copies share it (the
    exact enumerator copies runs, not models).

    :meth:`reuse` makes every later :meth:`cache` return one cache that already holds a
    prompt's first tokens, rolled back to them: runs from the same prompt then read only its
    last token instead of all of it (a statistical test draws many runs from one prompt).
    """

    #: Rows come from speclib's own models (checked there).
    trusted_rows = True
    context_length = None

    def __init__(self, model) -> None:
        self.model = _check_feature_model(model)
        self.vocab_size = model.vocab_size
        self.temperature = model.temperature
        self._fresh = None
        self._prefix: tuple | None = None  # (cache, length) set by reuse

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        return self.model(tokens)

    def cache(self):
        """A features-keeping cache, remembered for the drafter that starts next."""
        if self._prefix is not None:
            cache, length = self._prefix
            cache.rollback(length)
            self._fresh = cache
        else:
            self._fresh = self.model.cache(features=True)
        return self._fresh

    def reuse(self, cache=None) -> None:
        """From now on :meth:`cache` returns ``cache`` rolled back to the length it has now (None: fresh caches again).

        ``cache`` must be this model's features-keeping cache and hold at least one token;
        every run must then start from a prompt whose first ``len(cache)`` tokens are the
        cache's and which has at least one more (the drafter checks at ``start``).
        """
        if cache is None:
            self._prefix = None
            return
        if getattr(cache, "model", None) is not self.model or not getattr(cache, "keep_features", False):
            raise ValueError("cache: expected a cache of this target's model made with features=True")
        if not len(cache):
            raise ValueError("cache: holds no token; a fresh cache needs no reuse")
        self._prefix = (cache, len(cache))

    def take_cache(self, who: str, prompt: np.ndarray | None = None):
        """The cache the loop just made (the drafter's ``start`` calls this once).

        It is empty, or (after :meth:`reuse`) holds the first tokens of ``prompt`` and not all of them.
        """
        cache, self._fresh = self._fresh, None
        expected = 0 if self._prefix is None else self._prefix[1]
        if cache is None or len(cache) != expected:
            raise ValueError(f"{who}: the loop's target must be this drafter's .target (a FeatureTarget), "
                             "whose cache keeps the hidden states the drafter reads")
        if expected and prompt is not None and (prompt.size <= expected
                                                 or not np.array_equal(cache.tokens, prompt[:expected])):
            raise ValueError(f"prompt: the target reuses a cache of {expected} tokens (FeatureTarget.reuse); the "
                             "prompt must start with them and have at least one more")
        return cache

    def __deepcopy__(self, memo: dict) -> "FeatureTarget":
        return self  # a model: shared by copies of a run

    def __repr__(self) -> str:
        return f"FeatureTarget({self.model!r})"


class _FeatureDrafter:
    """What Medusa and EAGLE share: the target's cache, and drafting only where it has a feature."""

    name = "draft"

    def __init__(self, target) -> None:
        self.target = FeatureTarget(target)
        self.vocab_size = target.vocab_size
        self.temperature = target.temperature
        self.features_cache = None

    def start(self, prompt: np.ndarray, vocab_size: int) -> None:
        if vocab_size != self.vocab_size:
            raise ValueError(f"{self.name}: vocabulary of {self.vocab_size} tokens differs from the target's {vocab_size}")
        self.features_cache = self.target.take_cache(self.name, np.asarray(prompt))

    def _ready(self, text: np.ndarray) -> bool:
        """Whether the target has read all of ``text`` but its last token (the heads' input)."""
        n = len(self.features_cache)
        return n >= 1 and n == text.size - 1

    def _rows(self, logits: np.ndarray) -> np.ndarray:
        return _softmax(logits, self.temperature)

    @staticmethod
    def _time(timings: dict | None, t0: float, n: int) -> None:
        if timings is not None:
            seconds = time.perf_counter() - t0
            timings["draft"] = timings.get("draft", 0.0) + seconds
            passes = timings.get("passes")
            if passes is not None:
                passes.append(("draft", n, seconds))


# --------------------------------------------------------------------------- Medusa


class MedusaHeads(_FeatureDrafter):
    """Medusa-1 heads on the target's final hidden state: all of a step's drafts from one evaluation.

    Head ``i`` is ``f + silu(f W_i + b_i)`` read by the target's own output head, where ``f``
    is the target's hidden state (after its final layer norm) at the last position it has
    read.  That position predicted the text's last token; head ``i`` guesses the token
    ``i + 2`` places after it, i.e. draft ``i + 1``.  The heads do not see the drafts before
    theirs, so each draft is drawn from its head's row alone, which is the row the verifier
    is told.  A step drafts ``min(k, heads)`` tokens and costs one draft pass (the heads).
    On the first step the target has read nothing yet: that step drafts nothing.

    Parameters
    ----------
    target : Transformer
        The target (its temperature is the heads' temperature).
    weights : list of (W, b)
        One ``(d_model, d_model)`` matrix and ``(d_model,)`` bias per head.
    """

    name = "medusa"

    def __init__(self, target: Transformer, weights: list[tuple[np.ndarray, np.ndarray]]) -> None:
        super().__init__(_check_target(target))
        d = target.config.d_model
        if not weights:
            raise ValueError("weights: need at least one head")
        for i, (w, b) in enumerate(weights):
            if np.shape(w) != (d, d) or np.shape(b) != (d,):
                raise ValueError(f"weights[{i}]: expected shapes ({d}, {d}) and ({d},), got {np.shape(w)}, {np.shape(b)}")
        self.heads = len(weights)
        self._w = np.concatenate([np.asarray(w, np.float32) for w, _ in weights], axis=1)  # (d, heads * d)
        self._b = np.concatenate([np.asarray(b, np.float32) for _, b in weights])
        self._w_out = target._w_out
        self._device_heads = None  # a speclib.lm.torch_pass.TorchMedusaHeads, when the target runs on a device

    def propose(self, text: np.ndarray, k: int, policy, choose, timings: dict | None) -> Proposal:
        m = min(k, self.heads)
        if m == 0 or not self._ready(text):
            return Proposal(np.zeros(0, dtype=np.int64), np.zeros((0, self.vocab_size)), 0)
        t0 = time.perf_counter()
        rows = self._rows(self.head_logits(self.features_cache.features[-1:], m)[0])
        self._time(timings, t0, 1)
        tokens = np.empty(m, dtype=np.int64)
        for i in range(m):
            x = choose.token(rows[i])
            if not policy.keep_drafting(rows[i], x):
                return Proposal(tokens[:i], rows[:i], 1)
            tokens[i] = x
        return Proposal(tokens, rows, 1)

    def head_logits(self, features: np.ndarray, m: int | None = None) -> np.ndarray:
        """Logits of the first ``m`` heads (all by default) at each row of ``features``, ``(n, m, V)``."""
        m = self.heads if m is None else m
        if self.target.model.device is not None:  # the same heads on the target's PyTorch device
            if self._device_heads is None:
                from .torch_pass import TorchMedusaHeads

                self._device_heads = TorchMedusaHeads(self._w, self._b, self._w_out, self.target.model.device)
            return self._device_heads(features, m)
        n, d = features.shape
        z = features @ self._w[:, :m * d] + self._b[:m * d]
        h = (z / (1.0 + np.exp(-z))).reshape(n, m, d) + features[:, None, :]  # silu, then the residual
        return h @ self._w_out

    def accept(self, length: int) -> None:
        pass  # no state of its own: the target's cache is rolled back by the loop

    def __repr__(self) -> str:
        return f"MedusaHeads(heads={self.heads}, target={self.target.model!r})"


# --------------------------------------------------------------------------- EAGLE


class EagleLoop(_FeatureDrafter):
    """What every EAGLE-style drafter does in the loop, whatever its network and its target.

    The drafter keeps a sequence of *entries*: entry ``j`` is built from the target's hidden
    state ``f_j`` and the token ``x_{j+1}`` after it, and its network predicts ``f_{j+1}``,
    whose row (:meth:`draft_row`) is the draft of ``x_{j+2}``.  Each step first feeds the
    entries whose hidden states the target has computed since the last step (one pass), then
    drafts on its own predicted states, one pass per draft.  After verification it keeps only
    the entries built from the target's states.  Entries start at :meth:`first_entry` of the
    prompt (0: all of it).

    A subclass gives the network: :meth:`_pass` (feed entries, return their predicted states,
    the slots from ``self._count - self._first`` on) and :meth:`draft_row` (a predicted state's
    row over the whole vocabulary at the drafter's temperature).
    """

    def start(self, prompt: np.ndarray, vocab_size: int) -> None:
        super().start(prompt, vocab_size)
        self._first = self.first_entry(np.asarray(prompt).size)
        self._count = self._real = self._first

    def first_entry(self, prompt_length: int) -> int:
        """The first entry this drafter builds for a prompt of ``prompt_length`` tokens."""
        return 0

    def _pass(self, feats: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def draft_row(self, f: np.ndarray) -> np.ndarray:
        """The draft's row ``(V,)`` from one predicted state ``f`` ``(1, d)``."""
        raise NotImplementedError

    def propose(self, text: np.ndarray, k: int, policy, choose, timings: dict | None) -> Proposal:
        if k == 0 or not self._ready(text):
            return Proposal(np.zeros(0, dtype=np.int64), np.zeros((0, self.vocab_size)), 0)
        # Entries j = real .. len(text) - 2: the target's states, and the tokens after them.
        self._count = self._real
        t0 = time.perf_counter()
        fed = text.size - 1 - self._real
        f = self._pass(self.features_cache.features[self._real:], text[self._real + 1:])[-1:]
        self._real = self._count
        tokens = np.empty(k, dtype=np.int64)
        rows = np.empty((k, self.vocab_size))
        n = 0
        while True:
            p = self.draft_row(f)
            self._time(timings, t0, fed)
            x = choose.token(p)
            if not policy.keep_drafting(p, x):
                return Proposal(tokens[:n], rows[:n], n + 1)
            tokens[n], rows[n] = x, p
            n += 1
            if n == k:
                return Proposal(tokens, rows, k)
            t0, fed = time.perf_counter(), 1
            f = self._pass(f, tokens[n - 1:n])

    def accept(self, length: int) -> None:
        self._real = max(self._first, min(self._real, length))
        self._count = self._real


class EagleDrafter(EagleLoop):
    """An EAGLE-style drafter for the book's transformer: one block that predicts the target's next hidden state.

    Entry ``j`` of its sequence reads ``fc([f_j, e(x_{j+1})])``: the target's hidden state at
    position ``j`` and the embedding of the token after it.  The block (causal attention
    over the last ``window`` entries, no position embeddings, a GELU MLP, a final layer
    norm and a projection back to the target's width) predicts ``f_{j+1}``, which the
    target's own output head turns into the row of token ``x_{j+2}``.  How it drafts in the
    loop is :class:`EagleLoop`'s.

    Parameters
    ----------
    target : Transformer
    arrays : dict of str to array
        ``fc.w`` ``(2 d_target, d)``, ``fc.b``, the block's ``h0.*`` parameters (names and
        shapes of :class:`~speclib.lm.transformer.TransformerConfig` at width ``d``),
        ``ln_f.g``, ``ln_f.b``, ``out.w`` ``(d, d_target)``, ``out.b``.
    n_heads : int
        Attention heads of the block.
    window : int
        Entries an entry attends to (itself included), as in training.
    """

    name = "eagle"

    def __init__(self, target: Transformer, arrays: dict[str, np.ndarray], n_heads: int, window: int) -> None:
        super().__init__(_check_target(target))
        self.window = as_int(window, "window", minimum=1)
        d_t = target.config.d_model
        d = np.shape(arrays.get("fc.w", np.zeros((0, 0))))[-1]
        if not d:
            raise ValueError("arrays: missing 'fc.w'")
        cfg = TransformerConfig(vocab_size=2, block_size=2, d_model=d, n_layers=1,
                                n_heads=as_int(n_heads, "n_heads", minimum=1))
        shapes = {n: s for n, s in cfg.parameter_shapes().items() if n.startswith(("h0.", "ln_f."))}
        shapes.update({"fc.w": (2 * d_t, d), "fc.b": (d,), "out.w": (d, d_t), "out.b": (d_t,)})
        for name, shape in shapes.items():
            if name not in arrays or np.shape(arrays[name]) != shape:
                raise ValueError(f"arrays[{name!r}]: expected shape {shape}, got "
                                 f"{np.shape(arrays[name]) if name in arrays else 'nothing'}")
        self.p = {n: np.ascontiguousarray(arrays[n], dtype=np.float32) for n in shapes}
        self.d, self.n_heads = d, cfg.n_heads
        self._wte = target.params["wte"]
        self._w_out = target._w_out
        self._keys = np.zeros((self.n_heads, 64, d // self.n_heads), dtype=np.float32)
        self._values = np.zeros_like(self._keys)
        self._first = 0  # entries start at the prompt's first token
        self._count = 0  # entries held
        self._real = 0  # of which built from the target's own hidden states
        self._transposed: tuple | None = None  # the matrices transposed, for the compiled entry
        self._device_pass = None  # a speclib.lm.torch_pass.TorchEaglePass, when the target runs on a device

    def _pass(self, feats: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Feed entries ``(feats[i], tokens[i])``; return their predicted next hidden states."""
        p, n, h = self.p, tokens.size, self.n_heads
        dh = self.d // h
        start, end = self._count, self._count + n
        # Slots lo .. end - 1 hold every entry that one of the new entries may see; with several
        # new entries, a mask keeps each to its own window.
        lo = max(0, end - self.window - n + 1)
        mask = self._window_mask(lo, start, end) if n > 1 else None
        if self.target.model.device is not None:  # the same pass on the target's PyTorch device
            if self._device_pass is None:
                from .torch_pass import TorchEaglePass

                self._device_pass = TorchEaglePass(self.p, self._wte, self.n_heads, LN_EPS, self.target.model.device)
            self._count = end
            return self._device_pass(feats, tokens, start, lo, mask)
        if end > self._keys.shape[1]:
            size = max(end, 2 * self._keys.shape[1])
            for attr in ("_keys", "_values"):
                grown = np.zeros((h, size, dh), dtype=np.float32)
                grown[:, :start] = getattr(self, attr)[:, :start]
                setattr(self, attr, grown)
        if self.target.model.compiled:  # the same pass as one compiled call
            self._count = end
            return self._compiled_pass(feats, self._wte[tokens], start, lo, mask)
        x = np.concatenate([feats, self._wte[tokens]], axis=1) @ p["fc.w"] + p["fc.b"]
        qkv = (_layer_norm(x, p["h0.ln1.g"], p["h0.ln1.b"]) @ p["h0.attn.w_qkv"] + p["h0.attn.b_qkv"])
        qkv = qkv.reshape(n, 3, h, dh).transpose(1, 2, 0, 3)
        self._keys[:, start:end] = qkv[1]
        self._values[:, start:end] = qkv[2]
        att = (qkv[0] * np.float32(1.0 / math.sqrt(dh))) @ self._keys[:, lo:end].transpose(0, 2, 1)
        if mask is not None:
            att += mask
        att -= att.max(axis=-1, keepdims=True)
        np.exp(att, out=att)
        att /= att.sum(axis=-1, keepdims=True)
        y = (att @ self._values[:, lo:end]).transpose(1, 0, 2).reshape(n, self.d)
        x = x + (y @ p["h0.attn.w_o"] + p["h0.attn.b_o"])
        x = x + (_gelu(_layer_norm(x, p["h0.ln2.g"], p["h0.ln2.b"]) @ p["h0.mlp.w_up"] + p["h0.mlp.b_up"])
                 @ p["h0.mlp.w_down"] + p["h0.mlp.b_down"])
        self._count = end
        return _layer_norm(x, p["ln_f.g"], p["ln_f.b"]) @ p["out.w"] + p["out.b"]

    def _window_mask(self, lo: int, start: int, end: int) -> np.ndarray:
        """Entry ``start + i`` sees the entries after ``start + i - window``, up to itself:
        0 or -inf for entries ``start .. end - 1`` against slots ``lo .. end - 1``."""
        pos, query = np.arange(lo, end), np.arange(start, end)[:, None]
        return np.where((pos > query) | (pos <= query - self.window), -np.inf, 0.0).astype(np.float32)

    def _compiled_pass(self, feats: np.ndarray, embeddings: np.ndarray, start: int, lo: int,
                       mask: np.ndarray | None) -> np.ndarray:
        """:meth:`_pass` as one compiled call (``speclib.lm.kernel``), entries from slot ``start``."""
        if self._transposed is None:
            p = self.p
            t = {n: np.ascontiguousarray(p[n].T) for n in ("fc.w", "h0.attn.w_qkv", "h0.attn.w_o", "h0.mlp.w_up",
                                                            "h0.mlp.w_down", "out.w")}
            self._transposed = (t["fc.w"], p["fc.b"], p["h0.ln1.g"], p["h0.ln1.b"], t["h0.attn.w_qkv"],
                                p["h0.attn.b_qkv"], t["h0.attn.w_o"], p["h0.attn.b_o"], p["h0.ln2.g"], p["h0.ln2.b"],
                                t["h0.mlp.w_up"], p["h0.mlp.b_up"], t["h0.mlp.w_down"], p["h0.mlp.b_down"],
                                p["ln_f.g"], p["ln_f.b"], t["out.w"], p["out.b"])
        n = feats.shape[0]
        mask = np.zeros((0, 0), dtype=np.float32) if mask is None else mask
        result = np.empty((n, self.p["out.b"].size), dtype=np.float32)
        _kernel.eagle_compiled()(np.ascontiguousarray(feats, dtype=np.float32),
                                 np.ascontiguousarray(embeddings, dtype=np.float32), *self._transposed,
                                 self._keys, self._values, lo, start, mask,
                                 np.float32(LN_EPS), np.float32(_GELU_C),
                                 np.float32(1.0 / math.sqrt(self.d // self.n_heads)), result)
        return result

    def draft_row(self, f: np.ndarray) -> np.ndarray:
        return self._rows(f @ self._w_out)[0]

    def __repr__(self) -> str:
        return f"EagleDrafter(d={self.d}, heads={self.n_heads}, window={self.window}, target={self.target.model!r})"


# --------------------------------------------------------------------------- loading


class ModelDrafter(DraftModel):
    """A draft model (a :class:`~speclib.core.proposers.DraftModel`) that knows its target."""

    def __init__(self, model, target, name: str = "draft") -> None:
        super().__init__(model, name)
        vocab = check_model(target, "target")
        if vocab != self.vocab_size:
            raise ValueError(f"target: has {vocab} tokens, the {name} has {self.vocab_size}")
        self.target = target


def early_exit_model(target: Transformer, arrays: dict[str, np.ndarray], exit_layer: int) -> Transformer:
    """The target's first ``exit_layer`` blocks and a trained exit, as a :class:`Transformer`.

    The blocks, token and position embeddings are the target's own arrays (shared, not
    copied); ``arrays`` holds the exit: ``ln_f.g``, ``ln_f.b`` and ``w_out`` ``(d, V)``.
    """
    target = _check_target(target)
    exit_layer = as_int(exit_layer, "exit_layer", minimum=1, maximum=target.config.n_layers)
    c = target.config
    config = TransformerConfig(vocab_size=c.vocab_size, block_size=c.block_size, d_model=c.d_model,
                               n_layers=exit_layer, n_heads=c.n_heads, tied=False)
    params = {}
    for name in config.parameter_shapes():
        params[name] = arrays[name] if name in ("ln_f.g", "ln_f.b", "w_out") else target.params[name]
    return Transformer(config, params, temperature=target.temperature)


def load_drafter_model(name: str, path: str | Path | None = None, target: Transformer | None = None) -> Transformer:
    """The numpy model of the ``distilled`` or ``early-exit`` drafter (temperature 1)."""
    from .transformer import load_pair

    if name not in ("distilled", "early-exit"):
        raise ValueError(f"name: only 'distilled' and 'early-exit' are transformers, got {name!r}")
    path = DATA_DIR / DRAFTER_FILES[name] if path is None else Path(path)
    if name == "distilled":
        return load_transformer(path)
    target = load_pair()[0] if target is None else _check_target(target)
    header, arrays = load_weights(path)
    return early_exit_model(target, arrays, header["exit_layer"])


def load_drafter(name: str, temperature: float = 1.0, domain: str = "code", *,
                 target: Transformer | None = None, path: str | Path | None = None, compiled: bool = False,
                 device: str | None = None):
    """A drafter for the book's target by name, as a proposer with a ``target`` attribute.

    ``name`` is one of :data:`DRAFTER_NAMES`; ``domain`` matters only for ``ngram`` (the
    n-gram of that domain's training text).  ``target`` and ``path`` replace the shipped
    target and the drafter's shipped file (the tests use them).  ``compiled``: the target's
    passes, and the drafter's if it is a network, run compiled (``Transformer.compiled``;
    EAGLE's passes too); the rows are the same up to float32 rounding.  ``device``: the same
    networks on a PyTorch device instead (``Transformer.with_device``; EAGLE's block and
    Medusa's heads too); the n-gram's lookups stay on the host.

    Examples
    --------
    >>> from speclib.core.decoding import speculative_generate
    >>> d = load_drafter("medusa")
    >>> tokens, stats = speculative_generate(d.target, d, [1, 2, 3], 20, k=3, rng=0)
    >>> len(tokens), stats.target_passes < 20
    (20, True)
    """
    from .transformer import load_pair

    if name not in DRAFTER_NAMES:
        raise ValueError(f"name: unknown drafter {name!r}; expected one of {', '.join(DRAFTER_NAMES)}")
    temperature = as_real(temperature, "temperature", low=0.0)
    compiled = as_bool(compiled, "compiled")
    if compiled and device is not None:
        raise ValueError(f"device: a compiled pass runs on the host; pass compiled=False with device={device!r}")
    if target is None:
        target, draft = load_pair(temperature)
    else:
        target, draft = _check_target(target).with_temperature(temperature), None

    def place(model: Transformer) -> Transformer:
        return model.with_device(device) if device is not None else model.with_compiled(compiled)

    target = place(target)
    if name == "pair":
        if path is not None or draft is None:
            draft = load_transformer(DATA_DIR / "neural_draft.npz" if path is None else path)
        return ModelDrafter(place(draft.with_temperature(temperature)), target, "draft")
    if name == "ngram":
        from ..core.warping import warp
        from .ngram import train_ngram

        model = train_ngram(domain, NGRAM_ORDER)
        return ModelDrafter(model if temperature == 1.0 else warp(model, temperature=temperature), target, "draft")
    if name in ("distilled", "early-exit"):
        model = place(load_drafter_model(name, path, target).with_temperature(temperature))
        return ModelDrafter(model, target, "draft")
    header, arrays = load_weights(DATA_DIR / DRAFTER_FILES[name] if path is None else path)
    if name == "medusa":
        return MedusaHeads(target, [(arrays[f"w{i}"], arrays[f"b{i}"]) for i in range(header["heads"])])
    # Training windows of block_size inputs hold block_size - 1 entries, each seeing all before it.
    return EagleDrafter(target, arrays, header["n_heads"], header.get("window", target.config.block_size - 1))


# --------------------------------------------------------------------------- teacher-forced rows


def teacher_forced_rows(name: str, target: Transformer, ids: np.ndarray, path: str | Path | None = None,
                        temperature: float = 1.0):
    """Rows of the drafter and of the target for the same tokens of ``ids``, at ``temperature``.

    The softmax of :func:`teacher_forced_logits` (see there).
    """
    t = as_real(temperature, "temperature", low=0.0)
    q, p = teacher_forced_logits(name, target, ids, path)
    return [_softmax(z, t) for z in q], [_softmax(z, t) for z in p]


def teacher_forced_logits(name: str, target: Transformer, ids: np.ndarray, path: str | Path | None = None):
    """Logits of the drafter and of the target for the same tokens of ``ids``.

    Returns ``(q_rows, p_rows)``, two lists with one array per draft position: for
    ``medusa`` one per head (head ``i`` at position ``t`` against the target's row for the
    token at ``t + i + 2``), for the others one.  Every drafter reads the true text and the
    target's hidden states of it (teacher forcing), so ``sum_x min(p, q)`` is the acceptance
    rate of the drafter's first draft (head ``i``'s draft ``i + 1`` for Medusa) on that text.
    """
    target = _check_target(target).with_temperature(1.0)
    cache = KVCache(target, features=True)
    q = cache.extend_logits(np.asarray(ids, dtype=np.int64)).astype(np.float64)
    feats = cache.features
    if name in ("distilled", "early-exit", "pair"):
        model = (load_transformer(DATA_DIR / "neural_draft.npz" if path is None else path) if name == "pair"
                 else load_drafter_model(name, path, target))
        return [q], [KVCache(model).extend_logits(np.asarray(ids, dtype=np.int64)).astype(np.float64)]
    drafter = load_drafter(name, 1.0, target=target, path=path)
    if name == "medusa":
        logits = drafter.head_logits(feats)
        n = feats.shape[0]
        return ([q[i + 1:] for i in range(drafter.heads)],
                [logits[:n - i - 1, i].astype(np.float64) for i in range(drafter.heads)])
    if name == "eagle":  # entry j = (f_j, ids[j + 1]) predicts f_{j+1}, the target's row q[j + 1]
        ids = np.asarray(ids, dtype=np.int64)
        m = ids.size - 1
        pred = np.concatenate([drafter._pass(feats[s:min(m, s + 64)], ids[s + 1:min(m, s + 64) + 1])
                               for s in range(0, m, 64)])
        return [q[1:]], [(pred @ drafter._w_out).astype(np.float64)]
    raise ValueError(f"name: no teacher-forced rows for {name!r}")


# --------------------------------------------------------------------------- acceptance inside the loop


def heldout_prompts(domain: str = "code", n_prompts: int = 100, prompt_chars: int = 40) -> list[np.ndarray]:
    """``n_prompts`` prompts of ``prompt_chars`` held-out characters of ``domain``, spread over its text.

    Prompt ``j`` starts at the first line start at or after ``(j + 0.5) / n_prompts`` of the
    held-out text (a whole line is how a user's prompt begins); none is cut short.  No
    randomness: the same arguments give the same prompts.

    Examples
    --------
    >>> prompts = heldout_prompts("code", 3, 10)
    >>> len(prompts), [p.size for p in prompts]
    (3, [10, 10, 10])
    """
    from .corpora import load_corpus, shared_vocabulary

    n_prompts = as_int(n_prompts, "n_prompts", minimum=1)
    prompt_chars = as_int(prompt_chars, "prompt_chars", minimum=1)
    text = load_corpus(domain).heldout
    starts = _prompt_starts(text, n_prompts, prompt_chars, domain)
    vocab = shared_vocabulary()
    return [vocab.encode(text[s:s + prompt_chars]) for s in starts]


def _prompt_starts(text: str, n_prompts: int, prompt_chars: int, domain: str) -> list[int]:
    """Where :func:`heldout_prompts` cuts its prompts from ``text``."""
    last = len(text) - prompt_chars  # the latest start that leaves a whole prompt
    starts = []
    for j in range(n_prompts):
        s = int((j + 0.5) / n_prompts * len(text))
        s = 0 if s == 0 else text.find("\n", s - 1) + 1
        if s <= 0 or s > last:
            raise ValueError(f"n_prompts: {n_prompts} prompts of {prompt_chars} characters do not fit in the "
                             f"{len(text)} held-out characters of {domain!r} at line starts")
        starts.append(s)
    if len(set(starts)) < n_prompts:
        raise ValueError(f"n_prompts: {n_prompts} is more than the distinct line starts of {domain!r} "
                         f"at that spacing; ask for fewer")
    return starts


class PromptRun(NamedTuple):
    """One generation of :func:`run_prompts`: its prompt and seed, its counters, and its steps."""

    prompt: int  #: index of the prompt
    seed: int
    tokens: int  #: tokens generated (up to and including the stop token)
    target_passes: int
    draft_passes: int
    accepted: int
    verified: int
    accepted_per_step: np.ndarray
    verified_per_step: np.ndarray  #: drafts the target judged at each step: the accepted, and the first rejected one


def run_prompts(target, proposer, prompts, n_new: int, k, seeds=(0,), stop: int | None = None,
                reuse_prompt: bool = False) -> list[PromptRun]:
    """Generate from every prompt with every seed through the one loop; the counters of each run.

    Prompt ``j`` with seed ``s`` draws with ``numpy.random.default_rng([s, j])``:
    :func:`speclib.core.decoding.speculative_generate`'s loop (:func:`~speclib.core.decoding.prepare_run`,
    stepped) with ``proposer`` drafting ``k`` tokens per step for ``target``, ``n_new`` tokens, or
    fewer when ``stop`` (a token id, such as a chat model's end of turn) is emitted.

    ``reuse_prompt`` (``target`` a :class:`FeatureTarget`): the target reads each prompt but its
    last token once, and every run of that prompt starts from that cache
    (:meth:`FeatureTarget.reuse`); its first step then drafts too.
    """
    from ..core.decoding import prepare_run
    from ..core.sampling import as_chooser

    n_new = as_int(n_new, "n_new", minimum=1)
    seeds = [as_int(x, "seeds", minimum=0) for x in (seeds if hasattr(seeds, "__len__") else [seeds])]
    if not seeds:
        raise ValueError("seeds: expected at least one seed")
    if stop is not None:
        stop = as_int(stop, "stop", minimum=0)
    if as_bool(reuse_prompt, "reuse_prompt") and not isinstance(target, FeatureTarget):
        raise TypeError(f"target: reuse_prompt needs a FeatureTarget, got {type(target).__name__}")
    runs = []
    for j, prompt in enumerate(prompts):
        prompt = np.asarray(prompt, dtype=np.int64)
        if reuse_prompt:
            if prompt.size < 2:
                raise ValueError(f"prompts[{j}]: reuse_prompt needs prompts of at least two tokens")
            cache = target.model.cache(features=True, capacity=prompt.size + n_new + MAX_DRAFT_LENGTH + 2)
            cache.extend_logits(prompt[:-1])
            target.reuse(cache)
        try:
            for seed in seeds:
                run = prepare_run(target, proposer, prompt, n_new, k)
                choose = as_chooser(np.random.default_rng([seed, j]))
                while not run.done:
                    before = run.n
                    run.step(choose)
                    if stop is not None and (run.text[before:run.n] == stop).any():
                        break
                st = run.stats
                acc = np.array(st.accepted_per_step, dtype=np.int64)
                ver = acc + (acc < np.array(st.k_per_step, dtype=np.int64))
                runs.append(PromptRun(j, seed, int(run.n - run.start), st.target_passes, st.draft_passes,
                                      st.accepted, st.draft_verified, acc, ver))
        finally:
            if reuse_prompt:
                target.reuse(None)
    return runs


class PromptsAcceptance(NamedTuple):
    """What :func:`acceptance_on_prompts` measured (pooled over its runs)."""

    rate: float  #: accepted / verified drafts
    low: float  #: lower end of the batch-means interval (:func:`speclib.core.stats.batch_means_ratio`)
    high: float
    level: float
    accepted: int
    verified: int
    tokens: int
    target_passes: int
    draft_passes: int
    runs: list  #: the :class:`PromptRun` of every generation

    def summary(self) -> dict:
        """The pooled figures as plain numbers, and the rate of every run (for a JSON record)."""
        return {"rate": round(self.rate, 4), f"interval{round(100 * self.level)}": [round(self.low, 4),
                                                                                   round(self.high, 4)],
                "accepted": self.accepted, "verified": self.verified, "tokens": self.tokens,
                "target_passes": self.target_passes, "draft_passes": self.draft_passes,
                "tokens_per_pass": round(self.tokens / self.target_passes, 4), "runs": len(self.runs),
                "rate_per_run": [round(r.accepted / r.verified, 4) if r.verified else None for r in self.runs]}


def acceptance_on_prompts(target, proposer, prompts, n_new: int, k, seeds=(0,), stop: int | None = None,
                          reuse_prompt: bool = False, batches: int = 10, level: float = 0.95) -> PromptsAcceptance:
    """A drafter's acceptance rate per verified draft inside the loop, on given prompts, with a batch-means interval.

    The runs of :func:`run_prompts` (same arguments); the rate is accepted over verified
    drafts pooled over them.  The interval: every step of every run, in order, cut into
    ``batches`` batches of about equal verified drafts
    (:func:`speclib.core.stats.batch_means_ratio`): it describes how much the rate varies with
    the text the target happens to write from these prompts, not over other prompts.

    Examples
    --------
    >>> from speclib.core.proposers import PromptLookup
    >>> from speclib.lm.models import markov_pair
    >>> target, _ = markov_pair(vocab_size=4, seed=0)
    >>> m = acceptance_on_prompts(target, PromptLookup(), [[0, 1, 2, 0, 1]], 200, 3, batches=4)
    >>> m.low <= m.rate <= m.high and m.verified > 0
    True
    """
    from ..core.stats import batch_means_ratio

    runs = run_prompts(target, proposer, prompts, n_new, k, seeds, stop, reuse_prompt)
    acc = np.concatenate([r.accepted_per_step for r in runs])
    ver = np.concatenate([r.verified_per_step for r in runs])
    if not ver.sum():
        raise ValueError("proposer: proposed nothing the target verified; no rate to measure")
    ci = batch_means_ratio(acc, ver, batches, level)
    return PromptsAcceptance(ci.mean, ci.low, ci.high, ci.level, int(acc.sum()), int(ver.sum()),
                             sum(r.tokens for r in runs), sum(r.target_passes for r in runs),
                             sum(r.draft_passes for r in runs), runs)


class LoopAcceptance(NamedTuple):
    """What :func:`loop_acceptance` measured (``per_prompt_*``: one entry per prompt)."""

    rate: float  #: accepted / verified drafts, pooled over the prompts
    low: float  #: lower end of the 95% bootstrap interval of ``rate`` (prompts resampled)
    high: float  #: upper end
    accepted: int
    verified: int
    tokens_per_pass: float  #: generated tokens per target pass, pooled
    per_prompt_accepted: np.ndarray
    per_prompt_verified: np.ndarray
    per_prompt_passes: np.ndarray

    def summary(self) -> dict:
        """The pooled figures as plain numbers (for a JSON record)."""
        return {"rate": round(self.rate, 4), "interval95": [round(self.low, 4), round(self.high, 4)],
                "accepted": self.accepted, "verified": self.verified,
                "tokens_per_pass": round(self.tokens_per_pass, 4), "prompts": int(self.per_prompt_verified.size)}


def loop_acceptance(name, domain: str = "code", temperature: float = 1.0, k: int = 4, n_prompts: int = 100,
                    n_new: int = 100, prompt_chars: int = 40, seed: int = 0, *, n_boot: int = 2000,
                    target: Transformer | None = None, path: str | Path | None = None) -> LoopAcceptance:
    """A drafter's acceptance rate inside the loop, with a 95% interval.

    From each of :func:`heldout_prompts` ``(domain, n_prompts, prompt_chars)``,
    :func:`speclib.core.decoding.speculative_generate` generates ``n_new`` tokens with the
    drafter as proposer at draft length ``k`` and ``temperature`` (prompt ``j`` with seed
    ``(seed, j)``).  Unlike a teacher-forced rate on held-out text, this is the rate the
    loop meets: every draft of a step, the later ones drafted on the earlier drafts (or, for
    EAGLE, on its own predicted states), on the text the target itself writes.

    ``rate`` is accepted / verified drafts pooled over prompts; the interval resamples the
    prompts ``n_boot`` times (seeded by ``seed``) and takes the 2.5th and 97.5th percentiles
    of the pooled ratio.

    Parameters
    ----------
    name : str or proposer
        A name of :data:`DRAFTER_NAMES` (loaded by :func:`load_drafter` with ``target`` and
        ``path``), or a drafter with a ``target`` attribute, used as it is (its temperature
        is its own).

    Examples
    --------
    >>> m = loop_acceptance("pair", n_prompts=4, n_new=20)
    >>> 0.0 < m.rate < 1.0 and m.low <= m.rate <= m.high and m.verified > 0
    True
    """
    k = as_int(k, "k", minimum=1)
    n_new = as_int(n_new, "n_new", minimum=1)
    seed = as_int(seed, "seed", minimum=0)
    n_boot = as_int(n_boot, "n_boot", minimum=1)
    if isinstance(name, str):
        drafter = load_drafter(name, temperature, domain, target=target, path=path)
    else:
        drafter = name
        if not hasattr(drafter, "target") or not hasattr(drafter, "propose"):
            raise TypeError(f"name: expected a drafter name or a proposer with a target attribute, "
                            f"got {type(name).__name__}")
    runs = run_prompts(drafter.target, drafter, heldout_prompts(domain, n_prompts, prompt_chars), n_new, k, (seed,))
    acc, ver, passes = (np.array([getattr(r, name) for r in runs], dtype=np.int64)
                        for name in ("accepted", "verified", "target_passes"))
    if not ver.sum():
        raise ValueError("name: the drafter proposed nothing the target verified; no rate to measure")
    rng = np.random.default_rng([seed, len(runs), 95])
    idx = rng.integers(0, len(runs), (n_boot, len(runs)))
    boot = acc[idx].sum(axis=1) / np.maximum(ver[idx].sum(axis=1), 1)
    low, high = np.percentile(boot, [2.5, 97.5])
    return LoopAcceptance(float(acc.sum() / ver.sum()), float(low), float(high), int(acc.sum()), int(ver.sum()),
                          float(n_new * len(runs) / passes.sum()), acc, ver, passes)


class DraftCost(NamedTuple):
    """What :func:`draft_costs` (or :func:`pass_costs`) measured for one drafter."""

    c: float  #: median one-token draft pass / median one-token target pass
    draft_pass_ms: float
    target_pass_ms: float
    draft_passes_timed: int
    target_passes_timed: int
    #: median target pass over ``k + 1`` tokens inside the loop / median one-token target pass: r(k+1)
    verify_ratio: float | None = None
    verify_pass_ms: float | None = None
    verify_passes_timed: int | None = None

    def summary(self) -> dict:
        """The figures as plain numbers (for a JSON record)."""
        out = {"c": round(self.c, 4), "draft_pass_ms": round(self.draft_pass_ms, 4),
               "target_pass_ms": round(self.target_pass_ms, 4), "draft_passes_timed": self.draft_passes_timed,
               "target_passes_timed": self.target_passes_timed}
        if self.verify_ratio is not None:
            out.update(verify_ratio=round(self.verify_ratio, 4), verify_pass_ms=round(self.verify_pass_ms, 4),
                       verify_passes_timed=self.verify_passes_timed)
        return out


def draft_costs(names, domain: str = "code", temperature: float = 1.0, k: int = 4, n_prompts: int = 20,
                n_new: int = 100, prompt_chars: int = 40, seed: int = 0, *, compiled: bool = False,
                device: str | None = None, target: Transformer | None = None,
                paths: dict | None = None) -> dict[str, DraftCost]:
    """Each drafter's cost ``c`` inside the loop: its one-token pass over the target's.

    For each of :func:`heldout_prompts` ``(domain, n_prompts, prompt_chars)`` in turn, the
    target generates ``n_new`` tokens by plain cached decoding, then each drafter of
    ``names`` generates them with :func:`speclib.core.decoding.speculative_generate` at
    draft length ``k``: the drafters are interleaved prompt by prompt, so a machine that
    slows down for a while slows them all.  ``c`` is the median of the drafter's passes that
    read one token over the median of the target's one-token passes in plain decoding
    (the passes that read a prompt or several states are left out).  ``compiled``: target
    and drafters run compiled, ``device``: on that PyTorch device (:func:`load_drafter`).
    Wall-clock times: run it on a quiet machine.

    Examples
    --------
    >>> costs = draft_costs(["pair"], n_prompts=2, n_new=10)
    >>> 0.0 < costs["pair"].c < 1.0
    True
    """
    names = [names] if isinstance(names, str) else list(names)
    if not names:
        raise ValueError("names: expected at least one drafter name")
    paths = {} if paths is None else dict(paths)
    drafters = {n: load_drafter(n, temperature, domain, target=target, path=paths.get(n), compiled=compiled,
                                device=device) for n in names}
    model = next(iter(drafters.values())).target
    return pass_costs(model, drafters, heldout_prompts(domain, n_prompts, prompt_chars), n_new, k, seed)


def pass_costs(model, drafters: dict, prompts, n_new: int, k: int, seed: int = 0) -> dict[str, DraftCost]:
    """Each drafter's cost ``c`` inside the loop, and the target's r(k+1), timed interleaved.

    For each prompt in turn, ``model`` generates ``n_new`` tokens by plain cached decoding,
    then each drafter of ``drafters`` (name to a proposer with a ``target`` attribute) does
    with :func:`speclib.core.decoding.speculative_generate` at draft length ``k`` (prompt ``j``
    seeded ``[seed, j]``).  ``c``: the median of the drafter's passes that read one token
    over the median of the target's one-token passes in plain decoding; ``verify_ratio``:
    the median of the target's passes over ``k + 1`` tokens inside the drafter's loop over
    the same one-token median (the passes that read a prompt are left out).  One BLAS thread.
    Wall-clock times: run it on a quiet machine.
    """
    from ..core.decoding import autoregressive_generate, speculative_generate

    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    n_new = as_int(n_new, "n_new", minimum=1)
    if not drafters:
        raise ValueError("drafters: expected at least one drafter")
    plain: list[float] = []
    drafts: dict[str, list[float]] = {n: [] for n in drafters}
    verify: dict[str, list[float]] = {n: [] for n in drafters}
    with blas_threads(1):
        for j, prompt in enumerate(prompts):
            timings: dict = {"passes": []}
            autoregressive_generate(model, prompt, n_new, np.random.default_rng([seed, j]), timings=timings)
            plain += [s for who, n, s in timings["passes"] if who == "model" and n == 1]
            for name, drafter in drafters.items():
                timings = {"passes": []}
                speculative_generate(drafter.target, drafter, prompt, n_new, k,
                                     rng=np.random.default_rng([seed, j]), timings=timings)
                drafts[name] += [s for who, n, s in timings["passes"] if who == "draft" and n == 1]
                verify[name] += [s for who, n, s in timings["passes"] if who == "target" and n == k + 1]
    if not plain:
        raise ValueError("prompts: the plain decoding made no one-token pass (n_new must be at least 2)")
    t1 = float(np.median(plain))
    out = {}
    for name, seconds in drafts.items():
        if not seconds:
            raise ValueError(f"drafters: {name!r} made no one-token draft pass in {len(prompts)} prompts; "
                             "no cost to measure")
        ms = float(np.median(seconds))
        v = float(np.median(verify[name])) if verify[name] else None
        out[name] = DraftCost(ms / t1, ms * 1e3, t1 * 1e3, len(seconds), len(plain),
                              None if v is None else v / t1, None if v is None else v * 1e3, len(verify[name]))
    return out

"""One cached pass of the numpy transformer for a batch of sequences.

A server does not run one sequence at a time: ``B`` requests share every forward pass.  Each
has its own :class:`~speclib.lm.transformer.KVCache` and its own length, and under
speculative decoding each feeds its own number of new tokens (its draft plus one, and after a
rejection the tokens its cache has not read yet).  :func:`batched_extend_logits` runs all of
them through the network in one pass:

* **ragged, not padded.**  The new tokens of all sequences are stacked into one matrix of
  ``sum_i n_i`` rows, and that matrix goes through every weight matrix at once (the QKV,
  output, MLP and vocabulary projections: almost all of a pass's arithmetic, and all of its
  weight reads).  Attention, the only part where a sequence must see its own past, is then
  computed per sequence against its own cache.  Padding every sequence to the longest
  ``n_i`` (and every cache to the longest length) would make the batch a rectangle, which
  is what a GPU kernel wants, but it multiplies padding rows through every weight matrix
  and needs a mask per sequence; here a matrix product costs by the row, so the rows that a
  padded batch would waste are simply never formed.  Serving engines do the same
  ("continuous batching" with ragged, "packed" sequences: vLLM's flattened token batch,
  SGLang's ragged prefill).
* **the 128-position window.**  The transformer reads long texts through a window that
  moves every ``block_size / 2`` tokens (:func:`~speclib.lm.transformer.window_start`).  A
  sequence whose window would move during this pass, or must be re-read first (its window
  moved, or a rollback went behind it), takes its own cache's ordinary path
  (:meth:`KVCache.extend_logits`) instead of joining the stacked pass; that happens once
  every few dozen tokens of a sequence, and that path's re-read costs far more than the
  pass itself anyway.

The rows of each sequence equal those of its own unbatched pass up to float32 rounding
(a stacked product sums in another order), and each cache ends exactly where its own
pass would leave it.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..core.cache import fed_tokens
from .transformer import KVCache, Transformer, _gelu, _layer_norm, _max, _softmax, _sum, window_start


def _joins_batch(cache: KVCache, n: int) -> bool:
    """Whether ``n`` new tokens fit in the cache's current window with nothing to re-read."""
    pos = cache._length
    start = window_start(pos, cache.model.config.block_size)
    return (start == cache._start and cache._start + cache._filled == pos
            and pos + n <= start + cache.model.config.block_size)


def _check_batch(caches: Sequence[KVCache], feeds: Sequence[object]) -> tuple[Transformer, list[np.ndarray]]:
    if isinstance(caches, KVCache) or not isinstance(caches, (list, tuple)):
        raise TypeError(f"caches: expected a list of KVCache, got {type(caches).__name__}")
    if not isinstance(feeds, (list, tuple)):
        raise TypeError(f"feeds: expected a list of token arrays (one per cache), got {type(feeds).__name__}")
    if len(caches) != len(feeds):
        raise ValueError(f"feeds: expected one token array per cache ({len(caches)}), got {len(feeds)}")
    if not caches:
        raise ValueError("caches: need at least one cache")
    for i, cache in enumerate(caches):
        if not isinstance(cache, KVCache):
            raise TypeError(f"caches[{i}]: expected a KVCache, got {type(cache).__name__}")
    model = caches[0].model
    for i, cache in enumerate(caches):
        if cache.model.params is not model.params:
            raise ValueError(f"caches[{i}]: belongs to another model than caches[0] (a batch shares one model)")
    if len({id(c) for c in caches}) != len(caches):
        raise ValueError("caches: the same cache appears twice (each sequence needs its own)")
    return model, [fed_tokens(t, model.vocab_size, f"feeds[{i}]") for i, t in enumerate(feeds)]


def batched_extend_logits(caches: Sequence[KVCache], feeds: Sequence[object]) -> list[np.ndarray]:
    """Feed ``feeds[i]`` to ``caches[i]`` for every ``i`` in one pass; return each one's raw scores.

    Parameters
    ----------
    caches : list of KVCache
        One cache per sequence, all of the same :class:`~speclib.lm.transformer.Transformer`.
    feeds : list of array_like of int
        The new tokens of each sequence (any lengths, empty allowed).

    Returns
    -------
    list of ndarray
        ``rows[i]`` has shape ``(len(feeds[i]), V)`` (float32): what
        ``caches[i].extend_logits(feeds[i])`` returns, up to float32 rounding.

    Examples
    --------
    >>> from speclib.lm.transformer import TransformerConfig, random_transformer
    >>> cfg = TransformerConfig(vocab_size=5, block_size=8, d_model=8, n_layers=1, n_heads=2)
    >>> model = random_transformer(cfg, seed=0)
    >>> a, b = model.cache(), model.cache()
    >>> rows = batched_extend_logits([a, b], [[1, 2, 3], [4]])
    >>> [r.shape for r in rows], len(a), len(b)
    ([(3, 5), (1, 5)], 3, 1)
    >>> bool(np.allclose(rows[0], model.logits(np.array([1, 2, 3])), atol=1e-5))
    True
    """
    model, feeds = _check_batch(caches, feeds)
    out: list[np.ndarray | None] = [None] * len(caches)
    stacked = []
    for i, (cache, tokens) in enumerate(zip(caches, feeds)):
        if tokens.size and _joins_batch(cache, tokens.size):
            stacked.append(i)
        else:  # the window moves (or nothing to feed): the sequence's own ordinary path
            out[i] = cache._extend_logits(tokens)
    if stacked:
        rows = _run_stacked(model, [caches[i] for i in stacked], [feeds[i] for i in stacked])
        for i, r in zip(stacked, rows):
            out[i] = r
    return out


def batched_extend(caches: Sequence[KVCache], feeds: Sequence[object]) -> list[np.ndarray]:
    """Like :func:`batched_extend_logits`, returning each sequence's next-token distributions.

    The rows are at the model's temperature, as :meth:`KVCache.extend` returns them; this is
    the ``target_pass`` that :func:`speclib.core.variants.batch_generate` takes.

    Examples
    --------
    >>> from speclib.lm.transformer import TransformerConfig, random_transformer
    >>> cfg = TransformerConfig(vocab_size=5, block_size=8, d_model=8, n_layers=1, n_heads=2)
    >>> model = random_transformer(cfg, seed=0)
    >>> rows = batched_extend([model.cache(), model.cache()], [[1, 2], [3]])
    >>> [round(float(r.sum()), 6) for r in rows]
    [2.0, 1.0]
    """
    temperature = caches[0].model.temperature if caches and isinstance(caches[0], KVCache) else 1.0
    return [_softmax(r, temperature) for r in batched_extend_logits(caches, feeds)]


def _run_stacked(model: Transformer, caches: list[KVCache], feeds: list[np.ndarray]) -> list[np.ndarray]:
    """The pass itself: every weight matrix once on the stacked rows, attention per sequence.

    Mirrors :meth:`Transformer._run` (same layer tuples, products and norms) with one
    difference: the rows of several sequences share the products, and the attention block
    loops over the sequences, each at its own window offset ``filled``.
    """
    cfg = model.config
    h, dh, d = cfg.n_heads, cfg.head_dim, cfg.d_model
    sizes = [t.size for t in feeds]
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    filled = [c._filled for c in caches]
    positions = np.concatenate([np.arange(f, f + n) for f, n in zip(filled, sizes)])
    x = model.params["wte"][np.concatenate(feeds)] + model.params["wpe"][positions]
    masks = [None if n == 1 else np.triu(np.full((n, f + n), -np.inf, dtype=np.float32), k=f + 1)
             for f, n in zip(filled, sizes)]
    scale = np.float32(1.0 / math.sqrt(dh))
    y = np.empty_like(x)
    for layer, (g1, b1, w_qkv, b_qkv, w_o, b_o, g2, b2, w_up, b_up, w_down, b_down) in enumerate(model._layers):
        qkv = (model._mm(_layer_norm(x, g1, b1), w_qkv) + b_qkv).reshape(-1, 3, h, dh)
        for s, cache in enumerate(caches):
            lo, hi, f = bounds[s], bounds[s + 1], filled[s]
            end = f + sizes[s]
            part = qkv[lo:hi].transpose(1, 2, 0, 3)  # (3, heads, n, head_dim)
            keys, values = cache._keys[layer], cache._values[layer]
            keys[:, f:end] = part[1]
            values[:, f:end] = part[2]
            att = (part[0] * scale) @ keys[:, :end].transpose(0, 2, 1)  # (heads, n, end)
            if masks[s] is not None:
                att += masks[s]
            att -= _max(att, axis=-1, keepdims=True)
            np.exp(att, out=att)
            att /= _sum(att, axis=-1, keepdims=True)
            y[lo:hi] = (att @ values[:, :end]).transpose(1, 0, 2).reshape(sizes[s], d)
        x = x + (model._mm(y, w_o) + b_o)
        x = x + (model._mm(_gelu(model._mm(_layer_norm(x, g2, b2), w_up) + b_up), w_down) + b_down)
    x = _layer_norm(x, model.params["ln_f.g"], model.params["ln_f.b"])
    logits = model._mm(x, model._w_out)
    rows = []
    for s, cache in enumerate(caches):
        lo, hi = bounds[s], bounds[s + 1]
        if getattr(cache, "keep_features", False):
            cache._grow(cache._length + sizes[s])
            cache._features[cache._length:cache._length + sizes[s]] = x[lo:hi]
        cache._append(feeds[s])
        cache._filled += sizes[s]
        cache.tokens_computed += sizes[s]  # as the cache's own pass counts them
        rows.append(logits[lo:hi])
    return rows

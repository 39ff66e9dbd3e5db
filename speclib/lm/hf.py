"""Hugging Face ``transformers`` causal language models as speclib models.

This module is optional: it needs PyTorch and ``transformers``, which the rest of speclib
does not (``pip install -r requirements-hf.txt`` from the repository root installs the
pinned versions).  It turns any causal LM of ``transformers`` into a model of the book's
protocol (:mod:`speclib.lm.models`), so that every decoding loop of speclib runs on it:

* :class:`HFModel` ``(tokens) -> probs``: one forward pass without gradients, the logits
  turned into float64 probabilities at the model's ``temperature`` (0: the greedy one-hot
  row), shape ``(n, V)``.
* :meth:`HFModel.cache` returns an :class:`HFCache`, the incremental state of one sequence,
  built on the library's own key/value cache (``transformers.DynamicCache``):
  :meth:`HFCache.extend` feeds new tokens only and :meth:`HFCache.rollback` crops the cache
  back to an accepted prefix.  Extending after a rollback gives what a fresh computation on
  the same tokens gives (the tests check it).
* :func:`pair` wraps a target and a draft together and refuses pairs whose tokenizers or
  vocabularies differ; :func:`to_gpt2` exports the book's numpy transformer into a
  ``GPT2LMHeadModel`` (same architecture, same weights), and :func:`book_pair` does it for
  the shipped pair of :func:`speclib.lm.transformer.load_pair`.
* :func:`library_generate` runs the library's own ``generate`` (assisted by a draft, or the
  target alone) with the book's sampling settings, or with its defaults, and counts its passes
  as speclib's loops do; :func:`first_tokens_law` is the exact law of the first two tokens,
  the reference for testing either decoder.

Vocabulary policy
-----------------
Real models often pad their output layer beyond the tokenizer's vocabulary (to a multiple
of 64 or 128), and two models of a family may pad differently (e.g. a logits width of
151,936 for a tokenizer of 151,665 ids).  Ids past the tokenizer's vocabulary are never
produced by the tokenizer, so speclib's vocabulary is the tokenizer's: ``V = len(tokenizer)``
(or the ``vocab_size`` you pass).  The logits columns past ``V`` are dropped and the softmax
is taken over the first ``V`` columns only, which renormalises the row: the model's
distribution conditioned on not emitting a padding id.  A draft and a target then share the
same ``V`` whatever their padding.  Without a tokenizer, ``V`` is the model's logits width,
and :func:`pair` refuses two widths that differ (pass the tokenizer or ``vocab_size``).

Positions
---------
Models with learned positions (GPT-2: ``config.n_positions``) cannot read past their
last position; ``transformers`` then fails with an IndexError from inside PyTorch.  Here a
pass that would go past ``max_positions`` (``n_positions`` or ``max_position_embeddings``
from the config) raises a ValueError that names the limit.  The decoding loops must keep
prompt plus new tokens within it.
"""

from __future__ import annotations

INSTALL_HINT = ("speclib.lm.hf needs PyTorch and transformers, which speclib does not install by default. "
                "Install the pinned versions with:  pip install -r requirements-hf.txt  (from the repository root)"
                "; from a notebook of the book (in book/), run  %pip install -r ../requirements-hf.txt  in a "
                "cell, then restart the kernel")

try:
    import torch
    import transformers
    from transformers import DynamicCache
except ImportError as exc:  # pragma: no cover - exercised where torch is absent
    raise ImportError(INSTALL_HINT) from exc

import copy
import inspect
from typing import Any

import numpy as np

from .._validate import as_int, as_real, as_tokens
from ..core.tree import ancestor_mask, check_parents, depths, path_to
from .transformer import LN_EPS, Transformer, _softmax


def _position_limit(config: Any) -> int | None:
    """The number of positions a model can read, from its config (None: no stated limit)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for attr in ("n_positions", "max_position_embeddings"):
        value = getattr(text, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _logits_width(model: Any) -> int:
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if out is not None and getattr(out, "weight", None) is not None:
        return int(out.weight.shape[0])
    return int(model.config.get_text_config().vocab_size)


class HFModel:
    """A causal LM of ``transformers`` following the model protocol of :mod:`speclib.lm.models`.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal language model (``AutoModelForCausalLM``, ``GPT2LMHeadModel``, ...).  It is
        put in evaluation mode (no dropout); its weights are left as they are.
    tokenizer : transformers tokenizer, optional
        Sets the vocabulary (``len(tokenizer)``), lets :func:`pair` compare a draft's
        tokenizer with the target's, and gives :meth:`encode` / :meth:`decode`.
    temperature : float, default 1.0
        Sampling temperature applied to the logits (0: greedy one-hot rows).
    vocab_size : int, optional
        Override the vocabulary size ``V`` (at most the model's logits width); see the module
        docstring for what happens to the columns past ``V``.

    Attributes
    ----------
    vocab_size : int
        ``V``, the number of columns of every probability row.
    logits_width : int
        The model's own output width (``V`` or more when the output layer is padded).
    max_positions : int or None
        The longest sequence the model can read (None: its config states no limit).

    Examples
    --------
    >>> from transformers import GPT2Config, GPT2LMHeadModel
    >>> _ = torch.manual_seed(0)
    >>> net = GPT2LMHeadModel(GPT2Config(vocab_size=11, n_positions=16, n_embd=8, n_layer=1, n_head=2))
    >>> model = HFModel(net)
    >>> probs = model(np.array([1, 2, 3]))
    >>> probs.shape, probs.dtype, bool(np.allclose(probs.sum(axis=1), 1.0))
    ((3, 11), dtype('float64'), True)
    """

    #: The model reads every token (absolute positions matter), so loops must pass all of them.
    context_length = None

    def __init__(self, model: Any, tokenizer: Any = None, *, temperature: float = 1.0,
                 vocab_size: int | None = None) -> None:
        if not isinstance(model, torch.nn.Module) or not hasattr(model, "config"):
            raise TypeError(f"model: expected a transformers causal LM (a torch.nn.Module with a config), "
                            f"got {type(model).__name__}")
        self.hf_model = model.eval()
        self.tokenizer = tokenizer
        self.logits_width = _logits_width(model)
        if vocab_size is None:
            vocab_size = len(tokenizer) if tokenizer is not None else self.logits_width
        self.vocab_size = as_int(vocab_size, "vocab_size", minimum=2)
        if self.vocab_size > self.logits_width:
            raise ValueError(f"vocab_size: {self.vocab_size} ids but the model scores only {self.logits_width} "
                             "(is the tokenizer the model's own?)")
        self.max_positions = _position_limit(model.config)
        self.temperature = as_real(temperature, "temperature", low=0.0)
        self.device = next(model.parameters()).device

    def __repr__(self) -> str:
        name = getattr(self.hf_model.config, "_name_or_path", "") or type(self.hf_model).__name__
        return (f"HFModel({name!r}, vocab_size={self.vocab_size}, logits_width={self.logits_width}, "
                f"max_positions={self.max_positions}, temperature={self.temperature:g})")

    def with_temperature(self, temperature: float) -> "HFModel":
        """The same model (weights shared, not copied) sampling at another temperature."""
        other = copy.copy(self)
        other.temperature = as_real(temperature, "temperature", low=0.0)
        return other

    def cache(self) -> "HFCache":
        """An empty :class:`HFCache` for incremental decoding."""
        return HFCache(self)

    def _check_positions(self, end: int, name: str) -> None:
        if self.max_positions is not None and end > self.max_positions:
            raise ValueError(f"{name}: position {end - 1} is past the model's limit of {self.max_positions} positions "
                             f"(config n_positions / max_position_embeddings); keep prompt + new tokens "
                             f"<= {self.max_positions}")

    def _forward(self, tokens: np.ndarray, past: Any = None) -> np.ndarray:
        ids = torch.as_tensor(tokens, dtype=torch.long, device=self.device).reshape(1, -1)
        with torch.no_grad():
            if past is None:
                out = self.hf_model(input_ids=ids, use_cache=False)
            else:
                out = self.hf_model(input_ids=ids, past_key_values=past, use_cache=True)
        return out.logits[0, :, :self.vocab_size].float().cpu().numpy()

    def logits(self, tokens: np.ndarray) -> np.ndarray:
        """Raw next-token scores, shape ``(n, V)`` float32, for every position of ``tokens``."""
        tokens = as_tokens(tokens, "tokens", self.vocab_size)
        if tokens.size == 0:
            return np.zeros((0, self.vocab_size), dtype=np.float32)
        self._check_positions(tokens.size, "tokens")
        return self._forward(tokens)

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        """Next-token distributions, shape ``(n, V)`` float64: the model protocol."""
        return _softmax(self.logits(tokens), self.temperature)

    def encode(self, text: str) -> np.ndarray:
        """Token ids of ``text`` through the tokenizer (no special tokens added)."""
        if self.tokenizer is None:
            raise ValueError("tokenizer: this HFModel was built without a tokenizer")
        return np.asarray(self.tokenizer.encode(text, add_special_tokens=False), dtype=np.int64)

    def decode(self, tokens: np.ndarray) -> str:
        """Text of the token ids ``tokens`` through the tokenizer."""
        if self.tokenizer is None:
            raise ValueError("tokenizer: this HFModel was built without a tokenizer")
        return self.tokenizer.decode([int(t) for t in as_tokens(tokens, "tokens", self.vocab_size)])


class HFCache:
    """The incremental state of one :class:`HFModel` reading one sequence.

    Holds a ``transformers.DynamicCache`` (attribute ``past_key_values``) with the keys and
    values of every token fed so far.  ``len(cache)`` is that number of tokens;
    :meth:`extend` feeds more and returns their next-token distributions; :meth:`rollback`
    crops the library's cache back to an earlier length.

    Examples
    --------
    >>> from transformers import GPT2Config, GPT2LMHeadModel
    >>> _ = torch.manual_seed(0)
    >>> model = HFModel(GPT2LMHeadModel(GPT2Config(vocab_size=11, n_positions=16, n_embd=8, n_layer=1, n_head=2)))
    >>> cache = model.cache()
    >>> q = cache.extend([1, 2, 3, 4])      # four positions at once
    >>> cache.rollback(2)                   # forget tokens 3 and 4
    >>> q2 = cache.extend([3])              # ... and continue from "1 2"
    >>> bool(np.allclose(q[2], q2[0], atol=1e-6)), len(cache)
    (True, 3)
    """

    #: Rows right by construction: the loops do not check them again (speclib.core.cache.rows_trusted).
    trusted_rows = True

    def __init__(self, model: HFModel) -> None:
        if not isinstance(model, HFModel):
            raise TypeError(f"model: expected an HFModel, got {type(model).__name__}")
        self.model = model
        self.past_key_values = DynamicCache(config=model.hf_model.config)
        self._tokens = np.zeros(0, dtype=np.int64)
        self._tree = None  # (fed length, tokens, parents) of a tree scored by extend_tree

    def __len__(self) -> int:
        return self._tokens.size

    @property
    def tokens(self) -> np.ndarray:
        """The tokens fed so far (a copy)."""
        return self._tokens.copy()

    def extend_logits(self, tokens: np.ndarray) -> np.ndarray:
        """Feed ``tokens``; return their raw next-token scores, shape ``(len(tokens), V)`` float32."""
        tokens = as_tokens(tokens, "tokens", self.model.vocab_size)
        if tokens.size == 0:
            return np.zeros((0, self.model.vocab_size), dtype=np.float32)
        self.model._check_positions(len(self) + tokens.size, "tokens")
        self._discard_tree()
        out = self.model._forward(tokens, self.past_key_values)
        self._tokens = np.concatenate([self._tokens, tokens])
        return out

    def extend(self, tokens: np.ndarray) -> np.ndarray:
        """Feed ``tokens``; return their next-token distributions (float64) at the model's temperature."""
        return _softmax(self.extend_logits(tokens), self.model.temperature)

    @property
    def scores_trees(self) -> bool:
        """Whether :meth:`extend_tree` runs (the loop reads the model one path at a time otherwise)."""
        return tree_attention_problem(self.model) is None

    def extend_tree(self, tokens: np.ndarray, parents: np.ndarray) -> np.ndarray:
        """Score a token tree after the fed tokens in one pass; its next-token distributions, ``(n, V)``.

        As :meth:`speclib.lm.transformer.KVCache.extend_tree`: node ``i`` holds ``tokens[i]``
        below node ``parents[i]`` (``-1``: the last fed token), sits at the position its
        depth gives (``position_ids``) and attends to the fed tokens and its own ancestors
        only (a 4-D additive ``attention_mask``, which the library passes to the attention
        as it is).  The tree stays pending until :meth:`accept_tree` keeps one branch;
        :meth:`extend` and :meth:`rollback` forget it.  A model that cannot take such a mask
        (see :func:`tree_attention_problem`) raises a ValueError saying why.
        """
        return _softmax(self.extend_tree_logits(tokens, parents), self.model.temperature)

    def extend_tree_logits(self, tokens: np.ndarray, parents: np.ndarray) -> np.ndarray:
        """:meth:`extend_tree`, returning raw scores (float32)."""
        problem = tree_attention_problem(self.model)
        if problem is not None:
            raise ValueError(f"extend_tree: {problem}; score the tree one path at a time (the decoding loop does "
                             "this by itself for such a model)")
        tokens = as_tokens(tokens, "tokens", self.model.vocab_size)
        parents = check_parents(parents, tokens.size)
        self._discard_tree()
        n, past = tokens.size, len(self)
        if n == 0:
            return np.zeros((0, self.model.vocab_size), dtype=np.float32)
        depth = depths(parents)
        self.model._check_positions(past + int(depth.max()), "tokens")
        dtype = next(self.model.hf_model.parameters()).dtype
        mask = torch.zeros((n, past + n), dtype=dtype)
        mask[:, past:][torch.as_tensor(~ancestor_mask(parents))] = torch.finfo(dtype).min
        device = self.model.device
        ids = torch.as_tensor(tokens, dtype=torch.long, device=device).reshape(1, -1)
        position_ids = torch.as_tensor(past + depth - 1, dtype=torch.long, device=device).reshape(1, -1)
        with torch.no_grad():
            out = self.model.hf_model(input_ids=ids, past_key_values=self.past_key_values,
                                      attention_mask=mask.to(device)[None, None], position_ids=position_ids,
                                      use_cache=True)
        self._tree = (past, tokens, parents)
        return out.logits[0, :, :self.model.vocab_size].float().cpu().numpy()

    def accept_tree(self, node: int) -> None:
        """Keep the branch of the pending tree that ends at ``node`` (``-1``: none of it)."""
        tree = getattr(self, "_tree", None)
        if tree is None or tree[0] != len(self):
            raise ValueError("accept_tree: no tree is pending (call extend_tree first; extend and rollback "
                             "forget a pending tree)")
        past, tokens, parents = tree
        node = as_int(node, "node", minimum=-1, maximum=tokens.size - 1)
        path = path_to(parents, node)
        keep = torch.as_tensor(list(range(past)) + [past + i for i in path], dtype=torch.long)
        for layer in self.past_key_values.layers:
            layer.keys = layer.keys.index_select(-2, keep.to(layer.keys.device))
            layer.values = layer.values.index_select(-2, keep.to(layer.values.device))
        self._tree = None
        self._tokens = np.concatenate([self._tokens, tokens[path]])

    def _discard_tree(self) -> None:
        """Forget a pending tree: crop its nodes off the library's cache."""
        if getattr(self, "_tree", None) is not None:
            held = self.past_key_values.get_seq_length()
            if held > len(self):
                self.past_key_values.crop(len(self) - held)
            self._tree = None

    def rollback(self, length: int) -> None:
        """Forget every token after the first ``length`` (0 <= length <= len(self))."""
        length = as_int(length, "length", minimum=0)
        if length > len(self):
            raise ValueError(f"length: cannot roll forward, the cache holds {len(self)} tokens, got {length}")
        self._discard_tree()
        if length < len(self):
            self.past_key_values.crop(length - len(self))  # transformers 5: crop(-n) drops the last n
            self._tokens = self._tokens[:length]
        held = self.past_key_values.get_seq_length()
        if held != length:
            raise RuntimeError(f"rollback: the library's cache holds {held} positions after cropping to {length}; "
                               f"{type(self.past_key_values).__name__} cannot be rolled back for this model")


#: Attention implementations that add a custom 4-D mask to the scores as they are given it.
TREE_ATTENTION = ("eager", "sdpa")


def tree_attention_problem(model: HFModel) -> str | None:
    """Why ``model`` cannot score a token tree in one pass, or None when it can.

    A tree pass gives every node its own ``position_ids`` and a 4-D ``attention_mask`` that
    lets it see its ancestors only.  The library passes such a mask unchanged to the
    ``eager`` and ``sdpa`` attention implementations; flash attention (which supports only
    causal and padding masks) and models whose ``forward`` takes no ``position_ids`` or
    ``attention_mask`` cannot take it.

    Examples
    --------
    >>> from transformers import GPT2Config, GPT2LMHeadModel
    >>> net = GPT2LMHeadModel(GPT2Config(vocab_size=11, n_positions=16, n_embd=8, n_layer=1, n_head=2))
    >>> tree_attention_problem(HFModel(net)) is None
    True
    """
    if not isinstance(model, HFModel):
        raise TypeError(f"model: expected an HFModel, got {type(model).__name__}")
    net = model.hf_model
    attention = getattr(net.config, "_attn_implementation", None)
    if attention not in TREE_ATTENTION:
        return (f"the model's attention implementation {attention!r} takes no custom 4-D attention mask "
                f"(tree attention needs one of {TREE_ATTENTION})")
    params = inspect.signature(net.forward).parameters
    missing = [name for name in ("attention_mask", "position_ids") if name not in params]
    if missing and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return f"{type(net).__name__}.forward takes no {' or '.join(missing)}"
    return None


def _vocabulary(tokenizer: Any) -> dict:
    return dict(tokenizer.get_vocab())


def check_pair(target: HFModel, draft: HFModel) -> None:
    """Raise ValueError unless ``draft`` can draft for ``target``: same vocabulary, same tokenizer.

    The tokenizers are compared id by id where both models have one.  Speculative decoding
    compares the two models' probabilities of the *same token id*, so a draft whose ids mean
    other strings is not slower but wrong.
    """
    for name, m in (("target", target), ("draft", draft)):
        if not isinstance(m, HFModel):
            raise TypeError(f"{name}: expected an HFModel, got {type(m).__name__}")
    if draft.vocab_size != target.vocab_size:
        hint = ("" if target.tokenizer is not None else
                " (logits widths of padded output layers differ: pass the shared tokenizer, or vocab_size, "
                "to score only the real ids)")
        raise ValueError(f"draft: vocabulary of {draft.vocab_size} ids differs from the target's "
                         f"{target.vocab_size}{hint}")
    if target.tokenizer is not None and draft.tokenizer is not None:
        tv, dv = _vocabulary(target.tokenizer), _vocabulary(draft.tokenizer)
        if tv != dv:
            diff = sorted((set(tv.items()) ^ set(dv.items())), key=lambda kv: kv[1])
            example = diff[0] if diff else None
            raise ValueError(f"draft: tokenizer differs from the target's ({len(diff)} (token, id) entries differ, "
                             f"e.g. {example!r}); speculative decoding needs both models to give every id "
                             "the same meaning")


def pair(target: Any, draft: Any, tokenizer: Any = None, draft_tokenizer: Any = None, *,
         temperature: float = 1.0, vocab_size: int | None = None) -> tuple[HFModel, HFModel]:
    """A checked (target, draft) pair of :class:`HFModel` (see :func:`check_pair`).

    ``tokenizer`` is the target's; ``draft_tokenizer`` defaults to it.  Pass both when each
    model comes with its own, so that they are compared.  ``vocab_size`` overrides ``V`` for
    both (the module docstring says what happens to padded columns).
    """
    t = target if isinstance(target, HFModel) else HFModel(target, tokenizer, temperature=temperature,
                                                            vocab_size=vocab_size)
    dtok = tokenizer if draft_tokenizer is None else draft_tokenizer
    d = draft if isinstance(draft, HFModel) else HFModel(draft, dtok, temperature=temperature,
                                                         vocab_size=vocab_size)
    check_pair(t, d)
    return t, d


# --------------------------------------------------------------------------- the book's pair


#: The attention implementations of ``transformers`` that run on any CPU.
ATTENTION = ("eager", "sdpa")


def _check_attention(attn_implementation: object) -> None:
    if not isinstance(attn_implementation, str):
        raise TypeError(f"attn_implementation: expected one of {ATTENTION}, got {attn_implementation!r} "
                        f"({type(attn_implementation).__name__})")
    if attn_implementation not in ATTENTION:
        raise ValueError(f"attn_implementation: expected one of {ATTENTION}, got {attn_implementation!r}")


def to_gpt2(model: Transformer, attn_implementation: str = "eager") -> "transformers.GPT2LMHeadModel":
    """The numpy :class:`speclib.lm.transformer.Transformer` as a ``transformers.GPT2LMHeadModel``.

    The architecture is GPT-2's (pre-layer-norm blocks, learned positions, GELU with the tanh
    approximation, tied or separate output embedding), so the weights copy over one to one;
    the sizes come from ``model.config``.  The result reads at most ``block_size`` positions
    (``n_positions``): the numpy model's moving window past its block has no GPT-2
    counterpart.  No file is written or downloaded.
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"model: expected a speclib.lm.transformer.Transformer, got {type(model).__name__}")
    _check_attention(attn_implementation)
    cfg = model.config
    config = transformers.GPT2Config(
        vocab_size=cfg.vocab_size, n_positions=cfg.block_size, n_embd=cfg.d_model, n_layer=cfg.n_layers,
        n_head=cfg.n_heads, n_inner=4 * cfg.d_model, activation_function="gelu_new", layer_norm_epsilon=LN_EPS,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=cfg.tied,
        bos_token_id=None, eos_token_id=None, pad_token_id=None, attn_implementation=attn_implementation)
    net = transformers.GPT2LMHeadModel(config)
    P = {name: torch.from_numpy(np.asarray(value, dtype=np.float32)) for name, value in model.params.items()}
    # GPT-2's Conv1D stores weights as (in, out) and computes x @ W + b, as the numpy model does.
    state = {"transformer.wte.weight": P["wte"], "transformer.wpe.weight": P["wpe"],
             "transformer.ln_f.weight": P["ln_f.g"], "transformer.ln_f.bias": P["ln_f.b"]}
    for i in range(cfg.n_layers):
        src, dst = f"h{i}.", f"transformer.h.{i}."
        for a, b in (("ln1.g", "ln_1.weight"), ("ln1.b", "ln_1.bias"), ("ln2.g", "ln_2.weight"),
                     ("ln2.b", "ln_2.bias"), ("attn.w_qkv", "attn.c_attn.weight"), ("attn.b_qkv", "attn.c_attn.bias"),
                     ("attn.w_o", "attn.c_proj.weight"), ("attn.b_o", "attn.c_proj.bias"),
                     ("mlp.w_up", "mlp.c_fc.weight"), ("mlp.b_up", "mlp.c_fc.bias"),
                     ("mlp.w_down", "mlp.c_proj.weight"), ("mlp.b_down", "mlp.c_proj.bias")):
            state[dst + b] = P[src + a]
    state["lm_head.weight"] = P["wte"] if cfg.tied else P["w_out"].T.contiguous()
    missing, unexpected = net.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith(".attn.bias") and not m.endswith(".attn.masked_bias")]
    if missing or unexpected:
        raise RuntimeError(f"to_gpt2: weights that did not map: missing {missing[:4]}, unexpected {unexpected[:4]}")
    if cfg.tied:
        net.tie_weights()
    return net.eval()


def export_pair(target: Transformer, draft: Transformer, *, temperature: float = 1.0,
                attn_implementation: str = "eager") -> tuple[HFModel, HFModel]:
    """A numpy (target, draft) pair exported with :func:`to_gpt2`, wrapped and checked by :func:`pair`."""
    return pair(to_gpt2(target, attn_implementation), to_gpt2(draft, attn_implementation), temperature=temperature)


def book_pair(temperature: float = 1.0, attn_implementation: str = "eager") -> tuple[HFModel, HFModel]:
    """The book's shipped (target, draft) pair (:func:`speclib.lm.transformer.load_pair`) as GPT-2 models.

    The two models share the 97-symbol character vocabulary of :mod:`speclib.lm.corpora`;
    their sizes and position limits are read from the shipped weights.
    """
    from .transformer import load_pair

    return export_pair(*load_pair(), temperature=temperature, attn_implementation=attn_implementation)


# --------------------------------------------------------------------------- transformers' own loop


class torch_threads:
    """Context manager: run PyTorch on ``n`` intra-op threads inside the block (restored after).

    Timings of one decoding stream are taken on one thread, as with
    :class:`speclib.lm.transformer.blas_threads`: small passes gain nothing from more threads
    and on a busy machine waiting threads make them erratic.
    """

    def __init__(self, n: int = 1) -> None:
        self.n = as_int(n, "n", minimum=1)
        self._previous = None

    def __enter__(self) -> "torch_threads":
        self._previous = torch.get_num_threads()
        torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc: object) -> None:
        torch.set_num_threads(self._previous)


#: The book's sampling law in the settings of ``generate``: no top-k (its default is 50), no
#: top-p, the temperature of the models (``do_sample=False`` at temperature 0).
BOOK_SAMPLING = {"top_k": 0, "top_p": 1.0}


def _assistant_settings(k: int) -> dict:
    # A fixed draft length: the library's defaults are 20 tokens, a constant schedule, and a stop
    # as soon as the assistant's probability of its own token falls below 0.4 (0 turns it off).
    return {"num_assistant_tokens": k, "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": 0.0}


def library_generate(target: HFModel, draft: HFModel | None, prompt: np.ndarray, max_new_tokens: int,
                     k: int | None = None, *, seed: int = 0,
                     library_defaults: bool = False) -> tuple[np.ndarray, "GenerationStats"]:
    """Run transformers' own ``generate``, assisted by ``draft`` (``assistant_model=``), counted like speclib.

    ``draft=None`` runs the target alone (plain decoding, one pass per token).

    With ``library_defaults=False`` (the default), the settings are the book's: sampling at
    the models' temperature with ``top_k=0`` and ``top_p=1.0`` (:data:`BOOK_SAMPLING`; greedy at
    temperature 0), and an assistant that drafts exactly ``k`` tokens per step (constant
    schedule, no confidence cut-off).  With ``library_defaults=True``, ``generate`` gets only
    ``do_sample`` and the temperature and the assistant keeps its own generation config
    (``k`` must then be None): in transformers 5, top-k 50, 20 drafted tokens and a 0.4
    confidence cut-off.  The draft's generation config is restored afterwards.

    Random numbers come from PyTorch's global generator, seeded with ``torch.manual_seed(seed)``.
    Forward hooks count the passes: each target pass is one step of the returned
    :class:`speclib.core.decoding.GenerationStats` (proposed = drafts it scored, accepted =
    tokens it kept of them, draft passes = assistant passes since the previous step).  The
    library samples over its full logits width; use models whose width is the vocabulary.
    """
    from ..core.decoding import GenerationStats

    models = {"target": target} if draft is None else {"target": target, "draft": draft}
    if draft is None:
        if not isinstance(target, HFModel):
            raise TypeError(f"target: expected an HFModel, got {type(target).__name__}")
        if k is not None:
            raise ValueError("k: leave it None without a draft")
    else:
        check_pair(target, draft)
        if target.temperature != draft.temperature:
            raise ValueError(f"draft: temperature {draft.temperature:g} differs from the target's "
                             f"{target.temperature:g}")
        if library_defaults and k is not None:
            raise ValueError("k: leave it None with library_defaults=True (the assistant's own setting is used)")
        if not library_defaults:
            if k is None:
                raise ValueError("k: the number of drafted tokens per step is required with the book's settings")
            k = as_int(k, "k", minimum=1)
    prompt = as_tokens(prompt, "prompt", target.vocab_size, allow_empty=False)
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", minimum=1)
    for name, m in models.items():
        m._check_positions(prompt.size + max_new_tokens, f"max_new_tokens ({name})")
    seed = as_int(seed, "seed", minimum=0)

    temperature = target.temperature
    kwargs: dict = {"max_new_tokens": max_new_tokens}
    if temperature == 0:
        kwargs["do_sample"] = False
    else:
        kwargs.update(do_sample=True, temperature=temperature)
        if not library_defaults:
            kwargs.update(BOOK_SAMPLING)
    config = target.hf_model.config
    pad = config.pad_token_id if config.pad_token_id is not None else (config.eos_token_id or 0)
    if isinstance(pad, list):
        pad = pad[0]

    passes: list[tuple[int, int, int]] = []  # (cached length, fed tokens, draft passes before it)
    drafted = [0]

    def on_target(module, args, kw):
        ids = kw.get("input_ids", args[0] if args else None)
        past = kw.get("past_key_values")
        passes.append((past.get_seq_length() if past is not None else 0, int(ids.shape[1]), drafted[0]))
        drafted[0] = 0

    def on_draft(module, args, kw):
        drafted[0] += 1

    hooks = [target.hf_model.register_forward_pre_hook(on_target, with_kwargs=True)]
    saved, assistant_config = {}, None
    if draft is not None:
        kwargs["assistant_model"] = draft.hf_model
        assistant_config = draft.hf_model.generation_config
        saved = {name: getattr(assistant_config, name, None) for name in _assistant_settings(1)}
        hooks.append(draft.hf_model.register_forward_pre_hook(on_draft, with_kwargs=True))
    try:
        if draft is not None and not library_defaults:
            for name, value in _assistant_settings(k).items():
                setattr(assistant_config, name, value)
        ids = torch.as_tensor(prompt, device=target.device).reshape(1, -1)
        torch.manual_seed(seed)
        with torch.no_grad():
            out = target.hf_model.generate(ids, attention_mask=torch.ones_like(ids), pad_token_id=pad, **kwargs)
    finally:
        for h in hooks:
            h.remove()
        for name, value in saved.items():
            setattr(assistant_config, name, value)

    tokens = out[0, prompt.size:].cpu().numpy().astype(np.int64)
    stats = GenerationStats()
    cur = prompt.size
    for i, (past, fed, draft_passes) in enumerate(passes):
        proposed = past + fed - cur  # the candidates scored after the text so far
        nxt = passes[i + 1][0] + 1 if i + 1 < len(passes) else prompt.size + tokens.size
        emitted = nxt - cur
        stats.record_step(proposed, emitted - 1, emitted, draft_passes)
        cur = nxt
    return tokens, stats


def first_tokens_law(model, prompt: np.ndarray) -> np.ndarray:
    """The exact law of the first two tokens after ``prompt``: ``out[a, b] = q(a | prompt) q(b | prompt, a)``.

    One pass over the prompt and one one-token pass per first token ``a`` (``V + 1`` passes in
    all) through ``model.cache()``, rolled back after each: the reference against which the
    chapter tests the first two sampled tokens.
    """
    from ..core.cache import extend_checked, model_cache
    from ..core.proposers import check_model

    vocab = check_model(model, "model")
    prompt = as_tokens(prompt, "prompt", vocab, allow_empty=False)
    cache = model_cache(model)
    first = extend_checked(cache, prompt, "model")[-1]
    out = np.empty((vocab, vocab))
    for a in range(vocab):
        out[a] = first[a] * extend_checked(cache, np.array([a]), "model")[0]
        cache.rollback(prompt.size)
    return out

"""An EAGLE draft for a Llama target, with a reduced draft vocabulary: the real model's trained draft.

:class:`LlamaEagle` drafts for a :class:`speclib.lm.llama.Llama` target (the book's real
model, SmolLM2-135M-Instruct) the way EAGLE does, and plugs into the one loop,
:func:`speclib.core.decoding.speculative_generate`, as a proposer; how it drafts there
(entries built from the target's hidden states, then from its own predictions) is
:class:`speclib.lm.drafters.EagleLoop`'s, shared with the book's small EAGLE.  Its network:

* entry ``j`` reads ``fc([f_j, e(x_{j+1})])``: the target's final hidden state at position ``j``
  (after the final norm, the head's input: ``model.cache(features=True)`` keeps it) and the
  target's embedding of the next token;
* one Llama block of the target's width (RMSNorm, grouped-query attention with the rotary
  embedding over the entries it holds, SwiGLU) and a final RMSNorm predict ``f_{j+1}``;
* the target's own (tied) head reads the prediction, restricted to a **draft vocabulary** of
  ``N`` tokens (EAGLE-3): the ``N`` tokens the target itself outputs most often.  The draft's
  row over the whole vocabulary has zeros elsewhere; a token outside it is never drafted,
  and the verifier, which divides by the row of a drafted token only, stays exact.

The block runs through the target's own pass (:meth:`speclib.lm.llama.Llama.states`, compiled
when the target is), and the head reads ``N`` rows of the target's embedding instead of all
49,152, so a draft pass costs a few hundredths of a target pass.

The draft reads the last ``context`` tokens of the prompt (as in training) and everything
after them.  :func:`load_smollm_draft` loads the shipped draft (``speclib/data/smollm_draft.npz``,
trained by ``training/train_smollm_draft.py``) with its target.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np

from .._validate import as_bool, as_int, as_real
from .drafters import EagleLoop, load_weights
from .llama import Llama, LlamaBlock, LlamaConfig, ROPE_LAYOUTS
from .quant import BLOCK, Linear
from .transformer import DATA_DIR

#: The shipped draft of SmolLM2-135M-Instruct.
DRAFT_FILE = DATA_DIR / "smollm_draft.npz"
#: Its training record (settings, times, held-out figures), written by the training script.
METRICS_FILE = DATA_DIR / "smollm_draft_metrics.json"
#: The matrices and gains of a draft (``(out, in)`` matrices, as :class:`~speclib.lm.quant.Linear`).
ARRAY_NAMES = ("fc", "attn_norm", "qkv", "wo", "ffn_norm", "gate_up", "down", "out_norm", "vocab")


def draft_shapes(d_model: int, n_heads: int, n_kv_heads: int, d_ff: int) -> dict[str, tuple[int, ...]]:
    """The shape of every array of a draft of width ``d_model`` (``vocab``: any length).

    Examples
    --------
    >>> draft_shapes(8, 2, 1, 12)["qkv"]
    (16, 8)
    """
    dh = d_model // n_heads
    return {"fc": (d_model, 2 * d_model), "attn_norm": (d_model,), "qkv": ((n_heads + 2 * n_kv_heads) * dh, d_model),
            "wo": (d_model, d_model), "ffn_norm": (d_model,), "gate_up": (2 * d_ff, d_model),
            "down": (d_model, d_ff), "out_norm": (d_model,)}


def q8_0(weights: np.ndarray, name: str = "weight") -> Linear:
    """``weights`` ``(out, in)`` quantized as GGUF's Q8_0 does: per block of 32, ``scale = max |w| / 127``, codes ``round(w / scale)``.

    A :class:`~speclib.lm.quant.Linear` of layout ``"q8"`` (one byte a weight); the error of a
    weight is at most half its block's scale.

    Examples
    --------
    >>> w = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 64)
    >>> lin = q8_0(w)
    >>> lin.layout, bool(np.abs(lin.dequantize() - w).max() <= 0.5 / 127 + 1e-7)
    ('q8', True)
    """
    w = np.asarray(weights, dtype=np.float32)
    if w.ndim != 2 or w.shape[1] % BLOCK:
        raise ValueError(f"weights: expected a matrix whose rows are whole blocks of {BLOCK}, got shape {w.shape}")
    blocks = w.reshape(w.shape[0], -1, BLOCK)
    scale = np.abs(blocks).max(axis=2) / np.float32(127.0)
    safe = np.where(scale > 0, scale, np.float32(1.0))
    codes = np.clip(np.rint(blocks / safe[..., None]), -127, 127).astype(np.int8).reshape(w.shape)
    return Linear(np.ascontiguousarray(codes), np.ascontiguousarray(scale, dtype=np.float32), None, name=name)


def _head_rows(head: Linear, ids: np.ndarray) -> Linear:
    """Rows ``ids`` of the target's head, in its own layout (the file's numbers, not a copy decoded)."""
    if head.layout == "f32":
        return Linear.from_f32(head.codes[ids], name="draft_head")
    offset = None if head.offset is None else np.ascontiguousarray(head.offset[ids])
    return Linear(np.ascontiguousarray(head.codes[ids]), np.ascontiguousarray(head.scale[ids]), offset,
                  name="draft_head")


class LlamaEagle(EagleLoop):
    """An EAGLE head on a Llama target, drafting over a reduced vocabulary (see the module docstring).

    Parameters
    ----------
    target : Llama
        The target (its temperature is the draft's; its layout and ``compiled`` setting are
        the draft's too).
    arrays : dict of str to array
        The draft's weights (:data:`ARRAY_NAMES`, shapes of :func:`draft_shapes`): ``fc``,
        the block's ``attn_norm``, ``qkv`` (query, key and value rows stacked), ``wo``,
        ``ffn_norm``, ``gate_up`` (gate and up rows stacked), ``down``, the final ``out_norm``,
        and ``vocab``: the draft vocabulary, distinct token ids.
    n_heads, n_kv_heads : int
        The block's query and key/value heads.
    context : int, default 64
        Prompt tokens the draft reads before the answer (its first entry is at
        ``max(0, len(prompt) - context)``), as in training.
    rope_layout : str, default "half"
        How the block's rotary embedding pairs coordinates (:data:`speclib.lm.llama.ROPE_LAYOUTS`).
    layout : str, optional
        ``"f32"`` or ``"q8"`` (the block's matrices quantized with :func:`q8_0`); the target's by default.

    Examples
    --------
    >>> from speclib.lm.llama import random_llama
    >>> from speclib.core.decoding import speculative_generate
    >>> target = random_llama(LlamaConfig(vocab_size=50, d_model=64, n_layers=1, n_heads=2, n_kv_heads=1,
    ...                                   d_ff=32), seed=0)
    >>> drafter = random_draft(target, vocab=np.arange(0, 50, 2), seed=1)
    >>> tokens, stats = speculative_generate(drafter.target, drafter, [1, 2, 3], 12, k=3, rng=0)
    >>> len(tokens), stats.draft_proposed > 0
    (12, True)
    """

    name = "eagle"
    trusted = True  #: its proposals are well-formed by construction: the loop does not check them

    def __init__(self, target: Llama, arrays: dict[str, np.ndarray], n_heads: int, n_kv_heads: int,
                 context: int = 64, rope_layout: str = "half", layout: str | None = None) -> None:
        if not isinstance(target, Llama):
            raise TypeError(f"target: expected a speclib.lm.llama.Llama, got {type(target).__name__}")
        super().__init__(target)
        if not isinstance(arrays, dict):
            raise TypeError(f"arrays: expected a dict of the draft's arrays, got {type(arrays).__name__}")
        self.context = as_int(context, "context", minimum=0)
        layout = target.layout if layout is None else layout
        if layout not in ("f32", "q8"):
            raise ValueError(f"layout: expected 'f32' or 'q8', got {layout!r}")
        if rope_layout not in ROPE_LAYOUTS:
            raise ValueError(f"rope_layout: expected one of {', '.join(map(repr, ROPE_LAYOUTS))}, got {rope_layout!r}")
        tc = target.config
        d = tc.d_model
        d_ff = np.shape(arrays.get("down", np.zeros((0, 0))))[-1]
        n_heads = as_int(n_heads, "n_heads", minimum=1)
        n_kv_heads = as_int(n_kv_heads, "n_kv_heads", minimum=1)
        if not d_ff:
            raise ValueError("arrays: missing 'down' (the feed-forward layer's output matrix)")
        for name, shape in draft_shapes(d, n_heads, n_kv_heads, d_ff).items():
            if name not in arrays or np.shape(arrays[name]) != shape:
                raise ValueError(f"arrays[{name!r}]: expected shape {shape}, got "
                                 f"{np.shape(arrays[name]) if name in arrays else 'nothing'}")
            if not np.isfinite(arrays[name]).all():
                raise ValueError(f"arrays[{name!r}]: holds NaN or infinite values")
        vocab = np.asarray(arrays.get("vocab", np.zeros(0)))
        if vocab.ndim != 1 or vocab.size < 2 or vocab.dtype.kind not in "iu":
            raise ValueError(f"arrays['vocab']: expected the draft vocabulary, at least two integer token ids, "
                             f"got shape {vocab.shape} of dtype {vocab.dtype}")
        if vocab.min() < 0 or vocab.max() >= target.vocab_size or np.unique(vocab).size != vocab.size:
            raise ValueError(f"arrays['vocab']: expected distinct token ids in [0, {target.vocab_size}), "
                             f"got ids from {int(vocab.min())} to {int(vocab.max())}, {vocab.size - np.unique(vocab).size} "
                             "repeated")
        self.vocab = vocab.astype(np.int64)
        matrix = (lambda w, name: q8_0(w, name)) if layout == "q8" else (lambda w, name: Linear.from_f32(w, name))
        self.fc = matrix(arrays["fc"], "fc")
        block = LlamaBlock(arrays["attn_norm"], matrix(arrays["qkv"], "qkv"), matrix(arrays["wo"], "wo"),
                           arrays["ffn_norm"], matrix(arrays["gate_up"], "gate_up"), matrix(arrays["down"], "down"))
        config = LlamaConfig(vocab_size=self.vocab.size, d_model=d, n_layers=1, n_heads=n_heads, n_kv_heads=n_kv_heads,
                             d_ff=d_ff, rope_base=tc.rope_base, rms_eps=tc.rms_eps, max_positions=tc.max_positions,
                             rope_layout=rope_layout)
        # One block whose tied head is the target's head restricted to the draft vocabulary.
        self.core = Llama(config, _head_rows(target.head, self.vocab), [block], arrays["out_norm"],
                          temperature=target.temperature).with_compiled(target.compiled)
        self._embedding = target.embedding
        self.d = d
        self._keys = np.zeros((1, n_kv_heads, 64, config.head_dim), dtype=np.float32)
        self._values = np.zeros_like(self._keys)
        self._first = self._count = self._real = 0

    @property
    def vocab_fraction(self) -> float:
        """The draft vocabulary's share of the target's vocabulary."""
        return self.vocab.size / self.vocab_size

    def first_entry(self, prompt_length: int) -> int:
        return max(0, prompt_length - self.context)

    def _pass(self, feats: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Feed entries ``(feats[i], tokens[i])``; return their predicted next hidden states ``(n, d)``."""
        n, d = tokens.size, self.d
        x = np.empty((n, 2 * d), dtype=np.float32)
        x[:, :d] = feats
        x[:, d:] = self._embedding.rows(tokens)
        slot = self._count - self._first
        self._reserve(slot + n)
        out = self.core.states(self.fc(x), slot, self._keys, self._values)
        self._count += n
        return out

    def _reserve(self, need: int) -> None:
        limit = self.core.config.max_positions
        if need > limit:
            raise ValueError(f"tokens: the draft reads at most {limit} entries (the target's context length); "
                             f"this pass would reach {need}")
        if need > self._keys.shape[2]:
            size = min(limit, max(need, 2 * self._keys.shape[2]))
            for name in ("_keys", "_values"):
                old = getattr(self, name)
                grown = np.zeros(old.shape[:2] + (size,) + old.shape[3:], dtype=np.float32)
                grown[:, :, :old.shape[2]] = old
                setattr(self, name, grown)

    def draft_logits(self, f: np.ndarray) -> np.ndarray:
        """The head's scores over the draft vocabulary for predicted states ``f`` ``(n, d)``: ``(n, N)`` float32."""
        return self.core.head(np.ascontiguousarray(f, dtype=np.float32))

    def draft_row(self, f: np.ndarray) -> np.ndarray:
        row = np.zeros(self.vocab_size)
        row[self.vocab] = self._rows(self.draft_logits(f))[0]
        return row

    def __deepcopy__(self, memo: dict) -> "LlamaEagle":
        # The weights are shared (they never change); the state is copied, and the target's
        # cache through memo, so that a copied run's drafter reads the copied run's cache.
        other = copy.copy(self)
        memo[id(self)] = other
        other.features_cache = copy.deepcopy(self.features_cache, memo)
        other._keys, other._values = self._keys.copy(), self._values.copy()
        return other

    def __repr__(self) -> str:
        c = self.core.config
        return (f"LlamaEagle(vocab={self.vocab.size} of {self.vocab_size}, d_ff={c.d_ff}, context={self.context}, "
                f"layout={self.core.layout!r}, compiled={self.core.compiled}, target={self.target.model!r})")


def random_draft(target: Llama, vocab: np.ndarray | None = None, d_ff: int | None = None, seed: int = 0,
                 scale: float = 0.5, context: int = 64) -> LlamaEagle:
    """A :class:`LlamaEagle` with random weights for ``target`` (for tests and examples).

    ``vocab``: the draft vocabulary (all of the target's by default); ``d_ff``: the block's
    feed-forward width (the target's by default).
    """
    from .._validate import as_generator

    if not isinstance(target, Llama):
        raise TypeError(f"target: expected a speclib.lm.llama.Llama, got {type(target).__name__}")
    rng = as_generator(seed, "seed")
    c = target.config
    shapes = draft_shapes(c.d_model, c.n_heads, c.n_kv_heads, c.d_ff if d_ff is None else d_ff)
    arrays = {}
    for name, shape in shapes.items():
        if len(shape) == 1:
            arrays[name] = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            arrays[name] = rng.standard_normal(shape) * (scale / math.sqrt(shape[1]))
    arrays["vocab"] = np.arange(target.vocab_size) if vocab is None else np.asarray(vocab)
    return LlamaEagle(target, arrays, c.n_heads, c.n_kv_heads, context=context)


def load_draft(target: Llama, path: str | Path | None = None, layout: str | None = None) -> LlamaEagle:
    """The draft stored at ``path`` (by default the shipped :data:`DRAFT_FILE`) for ``target``.

    Raises a ValueError naming the file when it was trained for a target of another width
    or vocabulary.
    """
    path = DRAFT_FILE if path is None else Path(path)
    header, arrays = load_weights(path)
    if header.get("kind") != "llama-eagle":
        raise ValueError(f"path: {path} holds a {header.get('kind')!r} drafter, not a 'llama-eagle' one")
    for key, want in (("d_target", target.config.d_model), ("vocab_size", target.vocab_size)):
        if header.get(key) != want:
            raise ValueError(f"path: {path} was trained for a target with {key} = {header.get(key)}; this target "
                             f"has {want}")
    return LlamaEagle(target, arrays, header["n_heads"], header["n_kv_heads"], header["context"],
                      header.get("rope_layout", "half"), layout)


def load_smollm_draft(temperature: float = 1.0, layout: str = "q8", compiled: bool = True,
                      target: Llama | None = None, path: str | Path | None = None) -> LlamaEagle:
    """SmolLM2-135M-Instruct (:func:`speclib.lm.smollm.load_smollm2`) with its trained EAGLE draft.

    Pass ``drafter.target`` as the loop's target: ``speculative_generate(d.target, d, prompt, n, k, rng)``.
    ``target`` replaces the loaded model (its temperature and compiled setting are then set
    from the arguments); ``path`` the shipped draft.

    Examples
    --------
    >>> from speclib.core.decoding import speculative_generate
    >>> d = load_smollm_draft(temperature=0.0)
    >>> prompt = d.target.model.tokenizer.encode_chat([{"role": "user", "content": "Name three colours."}])
    >>> tokens, stats = speculative_generate(d.target, d, prompt, 16, k=4, rng=0)
    >>> len(tokens), stats.target_passes < 16
    (16, True)
    """
    temperature = as_real(temperature, "temperature", low=0.0)
    compiled = as_bool(compiled, "compiled")
    if target is None:
        from .smollm import load_smollm2

        target = load_smollm2(layout=layout, temperature=temperature)
    elif not isinstance(target, Llama):
        raise TypeError(f"target: expected a speclib.lm.llama.Llama, got {type(target).__name__}")
    else:
        target = target.with_temperature(temperature)
    return load_draft(target.with_compiled(compiled), path)


def save_draft(path: str | Path, arrays: dict[str, np.ndarray], target: Llama, context: int,
               rope_layout: str = "half", **header: object) -> None:
    """Write a draft for ``target`` (float16 weights, the vocabulary as int32) with the header :func:`load_draft` reads."""
    from .drafters import save_weights

    c = target.config
    save_weights(path, "llama-eagle", arrays, d_target=c.d_model, vocab_size=c.vocab_size, n_heads=c.n_heads,
                 n_kv_heads=c.n_kv_heads, context=as_int(context, "context", minimum=0), rope_layout=rope_layout,
                 **header)


# --------------------------------------------------------------------------- the draft measured in the loop

#: The draft's measured acceptance and cost (``benchmarks/smollm_draft.py`` writes it).
RECORD_FILE = DATA_DIR / "smollm_draft_loop.json"
#: The temperatures the record measures.
TEMPERATURES = ("0", "1")


def measure_loop(target: Llama, prompts: dict[str, list], path: str | Path | None = None, k: int = 4,
                 n_new: int = 192, seeds: dict | None = None, stop: int | None = None, cost_family: str | None = None,
                 cost_new: int = 64, batches: int = 10, pass_repeats: int = 15) -> dict:
    """The draft's acceptance inside the loop per family of prompts, its cost, and the predicted speed-up.

    * **acceptance** at T = 0 and T = 1 (:func:`speclib.lm.drafters.acceptance_on_prompts`):
      from every prompt of each family (token arrays), with ``seeds[T]`` (by default one at
      T = 0, where the answers are the same for every seed, and three at T = 1), ``n_new``
      tokens or up to ``stop``, ``k`` drafts per step, each prompt read once and reused by its
      runs; accepted over verified drafts with a batch-means interval (``batches``);
    * **cost** (:func:`speclib.lm.drafters.pass_costs`, T = 1, on the prompts of
      ``cost_family``, by default the first family, ``cost_new`` tokens each): ``c``, the draft's
      one-token pass over the target's, and ``verify_ratio`` r(k+1), the target's pass over
      ``k + 1`` tokens inside the loop over its one-token pass, timed interleaved;
    * **predicted speed-up** per family and temperature: :func:`speclib.lm.transformer.speedup_with_costs`
      of the measured rate, ``k``, ``c`` and r(k+1) (tokens per unit of one-token target passes);
      and, for every draft length ``j = 1 .. k``, the same with r(j+1) from the target's isolated
      passes over 1 to ``k + 1`` tokens (:func:`speclib.lm.transformer.pass_times`,
      ``pass_repeats`` repeats), taking the rate measured at ``k`` as the rate at ``j`` (the
      rate per verified draft changes little with the draft length): which ``j`` to run.

    ``path``: the draft's file (the shipped one by default).  Returns the record (plain
    numbers), without provenance (:func:`check_record` checks it once that is added).
    """
    from .drafters import acceptance_on_prompts, pass_costs
    from .transformer import speedup_with_costs

    if not isinstance(prompts, dict) or not prompts:
        raise ValueError("prompts: expected a dict of family name to a list of prompts (token arrays)")
    k = as_int(k, "k", minimum=1)
    seeds = {"0": (0,), "1": (0, 1, 2)} if seeds is None else {str(t): tuple(s) for t, s in seeds.items()}
    cost_family = next(iter(prompts)) if cost_family is None else cost_family
    if cost_family not in prompts:
        raise ValueError(f"cost_family: {cost_family!r} is not one of the families {list(prompts)}")
    record = {"settings": {"k": k, "n_new": n_new, "seeds": {t: list(seeds[t]) for t in TEMPERATURES},
                           "stop": stop, "batches": batches, "prompts": {f: len(p) for f, p in prompts.items()},
                           "cost_family": cost_family, "cost_new": cost_new, "layout": target.layout,
                           "compiled": target.compiled},
              "acceptance": {}, "predicted_speedup": {}}
    for t in TEMPERATURES:
        drafter = load_draft(target.with_temperature(float(t)), path)
        record["acceptance"][t] = {
            family: acceptance_on_prompts(drafter.target, drafter, ps, n_new, k, seeds[t], stop, reuse_prompt=True,
                                          batches=batches).summary()
            for family, ps in prompts.items()}
    drafter = load_draft(target.with_temperature(1.0), path)
    cost = pass_costs(drafter.target, {"eagle": drafter}, prompts[cost_family], cost_new, k)["eagle"]
    if cost.verify_ratio is None:
        raise ValueError(f"cost_new: no verification pass over k + 1 = {k + 1} tokens in {cost_new} tokens; "
                         "generate more")
    record["cost"] = cost.summary()
    from .transformer import pass_times

    times = np.median(pass_times(target, tuple(range(1, k + 2)), repeats=pass_repeats).seconds, axis=0)
    record["cost"]["isolated_ratios"] = {str(n): round(float(times[n - 1] / times[0]), 4) for n in range(2, k + 2)}
    record["predicted_speedup_by_k"] = {}
    for t in TEMPERATURES:
        record["predicted_speedup"][t] = {
            family: round(speedup_with_costs(m["rate"], k, record["cost"]["c"], record["cost"]["verify_ratio"]), 4)
            for family, m in record["acceptance"][t].items()}
        record["predicted_speedup_by_k"][t] = {
            family: {str(j): round(speedup_with_costs(m["rate"], j, record["cost"]["c"],
                                                      record["cost"]["isolated_ratios"][str(j + 1)]), 4)
                     for j in range(1, k + 1)}
            for family, m in record["acceptance"][t].items()}
    record["draft"] = {"vocab": int(drafter.vocab.size), "vocab_fraction": round(drafter.vocab_fraction, 4),
                       "d_ff": drafter.core.config.d_ff, "context": drafter.context}
    return record


def check_record(record: object) -> dict:
    """Check a record of :func:`measure_loop` (with its provenance); return it, or raise ValueError naming the fault.

    Both temperatures and the same families at each; every rate in [0, 1], equal to accepted
    over verified, inside its interval; ``c`` and r(k+1) positive and equal to their times'
    ratios; every predicted speed-up equal to :func:`speclib.lm.transformer.speedup_with_costs`
    of the stored figures; the provenance names the processor, the date and the draft file's
    SHA-256.
    """
    from .transformer import speedup_with_costs

    if not isinstance(record, dict):
        raise ValueError(f"record: expected a JSON object, got {type(record).__name__}")
    for key in ("settings", "acceptance", "cost", "predicted_speedup", "draft", "provenance"):
        if key not in record:
            raise ValueError(f"record: missing {key!r}")
    prov = record["provenance"]
    for key in ("processor", "date", "draft_sha256", "command"):
        if not isinstance(prov, dict) or not prov.get(key):
            raise ValueError(f"record['provenance']: missing {key!r}")
    k = record["settings"].get("k")
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"record['settings']['k']: expected a draft length >= 1, got {k!r}")
    cost = record["cost"]
    for key, (num, den) in (("c", ("draft_pass_ms", "target_pass_ms")),
                            ("verify_ratio", ("verify_pass_ms", "target_pass_ms"))):
        value = cost.get(key)
        if not isinstance(value, (int, float)) or not value > 0 or not cost.get(den):
            raise ValueError(f"record['cost'][{key!r}]: expected a positive ratio, got {value!r}")
        if abs(value - cost[num] / cost[den]) > 1e-3 * max(1.0, value):
            raise ValueError(f"record['cost'][{key!r}]: {value} is not {num} / {den} = {cost[num] / cost[den]:.4f}")
    families = None
    for t in TEMPERATURES:
        acc = record["acceptance"].get(t)
        if not isinstance(acc, dict) or not acc:
            raise ValueError(f"record['acceptance']: no families at temperature {t}")
        if families is None:
            families = set(acc)
        elif set(acc) != families:
            raise ValueError(f"record['acceptance'][{t!r}]: families {sorted(acc)} differ from {sorted(families)}")
        for family, m in acc.items():
            where = f"record['acceptance'][{t!r}][{family!r}]"
            low, high = m.get("interval95", (None, None))
            if not (isinstance(m.get("verified"), int) and m["verified"] > 0 and 0 <= m.get("accepted", -1) <= m["verified"]):
                raise ValueError(f"{where}: expected 0 <= accepted <= verified and verified > 0")
            if abs(m["rate"] - m["accepted"] / m["verified"]) > 1e-4:
                raise ValueError(f"{where}: rate {m['rate']} is not accepted / verified = "
                                 f"{m['accepted'] / m['verified']:.4f}")
            if not (isinstance(low, (int, float)) and isinstance(high, (int, float)) and low <= m["rate"] <= high):
                raise ValueError(f"{where}: the interval {[low, high]} does not hold the rate {m['rate']}")
            want = speedup_with_costs(m["rate"], k, cost["c"], cost["verify_ratio"])
            got = record["predicted_speedup"].get(t, {}).get(family)
            if not isinstance(got, (int, float)) or abs(got - want) > 1e-3:
                raise ValueError(f"record['predicted_speedup'][{t!r}][{family!r}]: {got!r} is not the cost model's "
                                 f"{want:.4f} from the stored rate, k, c and r(k+1)")
            by_k = record.get("predicted_speedup_by_k", {}).get(t, {}).get(family, {})
            ratios = cost.get("isolated_ratios", {})
            for j in range(1, k + 1):
                r = ratios.get(str(j + 1))
                if not isinstance(r, (int, float)) or not r > 0:
                    raise ValueError(f"record['cost']['isolated_ratios']: no positive r({j + 1})")
                want = speedup_with_costs(m["rate"], j, cost["c"], r)
                if not isinstance(by_k.get(str(j)), (int, float)) or abs(by_k[str(j)] - want) > 1e-3:
                    raise ValueError(f"record['predicted_speedup_by_k'][{t!r}][{family!r}][{str(j)!r}]: "
                                     f"{by_k.get(str(j))!r} is not the cost model's {want:.4f}")
    return record


def load_record(path: str | Path | None = None) -> dict:
    """The stored record (:data:`RECORD_FILE`, or ``path``), checked by :func:`check_record`."""
    import json

    path = RECORD_FILE if path is None else Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"path: no record at {path} (write it with benchmarks/smollm_draft.py)") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"path: {path} is not JSON ({error})") from None
    return check_record(record)

"""Train the EAGLE draft of the real model (SmolLM2-135M-Instruct) on the model's own outputs.

    python training/train_smollm_draft.py                   # data, training, record (about an hour)
    python training/train_smollm_draft.py --stage data      # only generate the target's outputs
    python training/train_smollm_draft.py --stage train --resume   # continue a stopped training

Needs PyTorch (CPU) and speclib importable, as the other training scripts (``training/README.md``).
Deterministic given ``--seed`` and ``--threads`` on one machine (the compiled pass and the
products of PyTorch may round differently on another processor).

1. **The target's own outputs** (``--stage data``).  The target, speclib's compiled pass over
   the file's own numbers (``load_smollm2("q8").with_compiled()``, one core), answers
   :data:`SETTINGS` ``["prompts"]`` training prompts of :mod:`speclib.lm.smollm_tasks` (disjoint
   from the evaluation prompts), at temperature 1 (one prompt in :data:`SETTINGS`
   ``["greedy_every"]`` greedily), up to ``max_new`` tokens or its end-of-turn token.  For the
   last ``context`` prompt tokens and every generated token it keeps, from that one pass, the
   *feature* (the hidden state after the final norm: the head's input) and the ``top_k``
   most probable next tokens with their probabilities at temperature 1 (the soft labels).
   Every prompt has its own seed; the outputs go in shards of ``shard`` prompts, so a stopped
   run resumes where it stopped (``training/checkpoints/smollm_draft/``).
2. **The draft vocabulary**: the ``vocab`` tokens the target outputs most often, counted as
   expected counts (the sum of their soft-label probabilities over the training positions).
3. **Training** (``--stage train``): the head of :class:`speclib.lm.smollm_draft.LlamaEagle`
   in PyTorch: ``fc([feature_j, embedding of token j+1])``, one Llama block of the target's
   width (RMSNorm, grouped-query attention with the rotary embedding, SwiGLU), a final RMSNorm:
   the predicted feature at ``j + 1``, read by the target's own embedding rows of the draft
   vocabulary.  Losses as for the book's small EAGLE (``train_drafters.py``): smooth L1 on
   the feature, cross-entropy to the target's soft labels and their total-variation distance
   (one minus the acceptance of the draft), each over ``ttt_depth`` unrolled steps
   (training-time test: step ``u`` reads the drafter's own step ``u - 1`` predictions, as
   the loop's ``u``-th draft does), uniform noise on the input features.  AdamW, warm-up
   then cosine decay, one torch thread, bfloat16 autocast for the products; checkpoints
   every ``CHECKPOINT_EVERY`` steps (``--resume``).
4. **The record**: the weights (float16, ``speclib/data/smollm_draft.npz``) and, in
   ``speclib/data/smollm_draft_metrics.json``, the settings, seed, data and training times,
   and on the held-out prompts (one in ``heldout_every`` of the generated ones, never trained
   on) the draft vocabulary's coverage of the target's probability and the teacher-forced
   acceptance of the first draft at T = 0 and T = 1, computed by speclib's numpy drafter
   from the shipped float16 file.

Budget: about an hour of one core in all; measured times are in the metrics file and in
``training/README.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from speclib.lm.transformer import DATA_DIR, blas_threads  # noqa: E402

#: What the shipped draft was made with.
SETTINGS = {
    # data: prompts per family (the first ones of a seeded shuffle of each family's training prompts)
    "prompts": [{"open": 240, "code_edit": 32, "summary": 24, "quote": 24}] * 2,  # two rounds
    "max_new": 160,  # tokens generated per prompt at most (fewer when the target ends its turn)
    "greedy_every": 4,  # one prompt in 4 answered greedily (T = 0), the others at T = 1
    "stored_context": 2048,  # prompt tokens whose outputs are kept before the answer (2048: all of them)
    "top_k": 64,  # soft labels kept per position
    "heldout_every": 20,  # one generated prompt in 20 is held out (teacher-forced figures)
    "shard": 20,  # prompts per shard file
    # the draft
    "vocab": 8192,  # draft vocabulary: the most frequent tokens of the target's outputs
    "d_ff": 1536,  # the block's feed-forward width (the target's own)
    "context": 128,  # prompt tokens the draft reads before the answer in the loop
    # training
    "steps": 2400, "batch": 4, "lr": 2e-3, "warmup": 30, "noise": 0.1, "ttt_depth": 3,
    "l1_weight": 0.2, "soft_weight": 1.0, "tv_weight": 1.0,
    "window": 256,  # entries per training sequence (a random stretch of an answer with its prompt)
}
CHECKPOINT_DIR = ROOT / "training" / "checkpoints" / "smollm_draft"
CHECKPOINT_EVERY = 50
WEIGHTS_FILE = DATA_DIR / "smollm_draft.npz"
METRICS_FILE = DATA_DIR / "smollm_draft_metrics.json"


# --------------------------------------------------------------------------- 1. the target's outputs


def plan_prompts(tasks: dict, rounds, seed: int) -> list[dict]:
    """The training prompts to answer, round after round: round ``r`` takes ``rounds[r][family]``
    more prompts of each family (the next ones of a seeded shuffle of the family's training
    prompts) and deals the families out in proportion, so that a run stopped early has answered
    some of every family.  (A dict is one round.)
    """
    from speclib.lm.smollm_tasks import FAMILIES, training_prompts

    rounds = [rounds] if isinstance(rounds, dict) else list(rounds)
    rng = np.random.default_rng(seed)
    pools = {}
    for family in FAMILIES:
        pool = training_prompts(tasks, family)
        pools[family] = [pool[i] for i in rng.permutation(len(pool))]
    used = {family: 0 for family in FAMILIES}
    plan = []
    for counts in rounds:
        order = []
        for family in FAMILIES:
            n = int(counts.get(family, 0))
            if used[family] + n > len(pools[family]):
                raise ValueError(f"counts[{family!r}]: {used[family] + n} prompts asked in all, the training set "
                                 f"has {len(pools[family])}")
            chosen = pools[family][used[family]:used[family] + n]
            used[family] += n
            # prompt i of a family lands at fraction (i + 0.5) / n of the round
            order += [((i + 0.5) / n, family, p) for i, p in enumerate(chosen)]
        order.sort(key=lambda item: (item[0], item[1]))
        plan += [p for _, _, p in order]
    return plan


def _soft_labels(logits: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``top_k`` most probable tokens of each row at temperature 1 and their probabilities, most probable first."""
    from speclib.lm.transformer import _softmax

    probs = _softmax(logits, 1.0)
    top = np.argpartition(-probs, top_k - 1, axis=1)[:, :top_k]
    top_p = np.take_along_axis(probs, top, axis=1)
    order = np.argsort(-top_p, axis=1, kind="stable")
    return np.take_along_axis(top, order, axis=1).astype(np.int32), np.take_along_axis(top_p, order, axis=1)


def answer(target, prompt: np.ndarray, max_new: int, temperature: float, rng: np.random.Generator, eos: int,
           context: int, top_k: int) -> dict:
    """The target's answer to ``prompt``, with its features and soft labels, from one pass per token.

    ``target`` is a Llama (speclib.lm.llama); its cache keeps the features.  Returns arrays
    for the positions ``start .. end - 1`` where ``start = max(0, len(prompt) - context)``:
    ``tokens`` (the tokens at ``start .. end``, one more than the positions), ``features``
    (float16), ``top_ids`` / ``top_p`` (the ``top_k`` most probable next tokens at temperature 1
    and their probabilities, float32), and ``prompt_length`` (counted from ``start``).
    """
    from speclib.lm.transformer import _softmax

    p = prompt.size
    start = max(0, p - context)
    cache = target.cache(features=True, capacity=p + max_new + 1)
    chunk = 128  # the prompt in pieces: soft labels per piece, never a (prompt, vocabulary) array
    for s in range(0, start, chunk):
        cache.extend_logits(prompt[s:min(start, s + chunk)])
    ids, probs = [], []
    for s in range(start, p, chunk):
        logits = cache.extend_logits(prompt[s:min(p, s + chunk)])
        for out, part in zip((ids, probs), _soft_labels(logits, top_k)):
            out.append(part)
    tokens = list(prompt.tolist())
    while True:
        row = logits[-1].astype(np.float64)
        if temperature == 0.0:
            x = int(row.argmax())
        else:
            x = int(rng.choice(row.size, p=_softmax(row[None], temperature)[0]))
        tokens.append(x)
        if x == eos or len(tokens) - p >= max_new:
            break
        logits = cache.extend_logits(np.array([x]))
        for out, part in zip((ids, probs), _soft_labels(logits, top_k)):
            out.append(part)
    return {"tokens": np.array(tokens[start:], dtype=np.int32),
            "features": cache.features[start:].astype(np.float16),
            "top_ids": np.concatenate(ids), "top_p": np.concatenate(probs).astype(np.float32),
            "prompt_length": p - start}


def generate_data(target, prompts: list[np.ndarray], out_dir: Path, settings: dict, seed: int, eos: int,
                  families: list[str] | None = None, log=print, part: int = 0, parts: int = 1) -> dict:
    """Answer every prompt (``answer``) into shards under ``out_dir``; skip the shards already there.

    With ``parts`` > 1, only the shards whose number is ``part`` modulo ``parts`` (so that
    ``parts`` processes can share the work).

    Prompt ``i`` is answered at temperature 0 when ``i % greedy_every == greedy_every - 1``,
    else at 1, with the generator ``default_rng([seed, i])``, so the data do not depend on
    where a run was stopped.  Returns the times: the wall-clock and processor seconds spent
    now, and the totals recorded with the shards.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    size = settings["shard"]
    spent_wall = spent_cpu = 0.0
    for first in range(0, len(prompts), size):
        path = out_dir / f"shard_{first // size:04d}.npz"
        if path.is_file() or (first // size) % parts != part:
            continue
        t0, c0 = time.time(), time.process_time()
        items = []
        for i in range(first, min(len(prompts), first + size)):
            temperature = 0.0 if i % settings["greedy_every"] == settings["greedy_every"] - 1 else 1.0
            out = answer(target, prompts[i], settings["max_new"], temperature, np.random.default_rng([seed, i]), eos,
                         settings["stored_context"], settings["top_k"])
            out.update(index=i, temperature=temperature, family=families[i] if families else "")
            items.append(out)
        wall, cpu = time.time() - t0, time.process_time() - c0
        spent_wall, spent_cpu = spent_wall + wall, spent_cpu + cpu
        _save_shard(path, items, wall, cpu)
        new = sum(it["tokens"].size - it["prompt_length"] - 1 for it in items)
        log(f"shard {path.name}: {len(items)} prompts, {new} tokens generated, {wall:.0f} s "
            f"({cpu:.0f} s of processor, {1e3 * cpu / max(new, 1):.1f} ms a token)")
    return {"wall_seconds": spent_wall, "cpu_seconds": spent_cpu}


def _save_shard(path: Path, items: list[dict], wall: float, cpu: float) -> None:
    lengths = np.array([it["tokens"].size for it in items])
    meta = [{k: it[k] for k in ("index", "temperature", "family", "prompt_length")} for it in items]
    tmp = path.with_suffix(".part.npz")
    np.savez(tmp, lengths=lengths, tokens=np.concatenate([it["tokens"] for it in items]),
             features=np.concatenate([it["features"] for it in items]),
             top_ids=np.concatenate([it["top_ids"] for it in items]),
             top_p=np.concatenate([it["top_p"] for it in items]),
             meta=np.array(json.dumps({"items": meta, "wall_seconds": wall, "cpu_seconds": cpu})))
    tmp.replace(path)


def load_data(out_dir: Path) -> tuple[list[dict], dict]:
    """Every answer in the shards under ``out_dir`` (in prompt order) and the times they record."""
    items, wall, cpu = [], 0.0, 0.0
    for path in sorted(Path(out_dir).glob("shard_*.npz")):
        if path.name.endswith(".part.npz"):
            continue
        with np.load(path) as data:  # each array read once (data[name] reads it again at every access)
            arrays = {name: data[name] for name in ("lengths", "tokens", "features", "top_ids", "top_p")}
            meta = json.loads(str(data["meta"]))
        wall, cpu = wall + meta["wall_seconds"], cpu + meta["cpu_seconds"]
        t_end = np.cumsum(arrays["lengths"])
        f_end = t_end - np.arange(1, t_end.size + 1)  # one feature fewer than tokens per answer
        for j, m in enumerate(meta["items"]):
            t0, f0 = (t_end[j - 1], f_end[j - 1]) if j else (0, 0)
            items.append(dict(m, tokens=arrays["tokens"][t0:t_end[j]], features=arrays["features"][f0:f_end[j]],
                              top_ids=arrays["top_ids"][f0:f_end[j]], top_p=arrays["top_p"][f0:f_end[j]]))
    items.sort(key=lambda it: it["index"])
    return items, {"wall_seconds": wall, "cpu_seconds": cpu}


def split(items: list[dict], heldout_every: int) -> tuple[list[dict], list[dict]]:
    """Training and held-out answers: prompt ``i`` is held out when ``i % heldout_every == heldout_every - 1``."""
    held = [it for it in items if it["index"] % heldout_every == heldout_every - 1]
    return [it for it in items if it["index"] % heldout_every != heldout_every - 1], held


def draft_vocabulary(items: list[dict], size: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``size`` tokens with the largest expected counts over the answers' positions, sorted by id.

    A token's expected count is the sum, over the positions, of the target's probability of
    it (its soft labels); ties go to the smaller id.  Returns ``(ids, counts of all tokens)``.
    """
    counts = np.zeros(vocab_size)
    for it in items:
        np.add.at(counts, it["top_ids"].ravel(), it["top_p"].ravel())
    order = np.lexsort((np.arange(vocab_size), -counts))
    return np.sort(order[:size]), counts


# --------------------------------------------------------------------------- 2. the draft in PyTorch


def _torch():
    import torch  # a training-only dependency: imported when training starts

    return torch


def rotary(x, positions, base: float):
    """The rotary embedding of ``x`` ``(..., t, heads, dh)`` at ``positions`` ``(t,)``, coordinates
    ``i`` and ``i + dh/2`` paired (speclib.lm.llama's ``"half"`` layout)."""
    torch = _torch()
    dh = x.shape[-1]
    inv = base ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
    angles = positions.to(torch.float64)[:, None] * inv
    cos = torch.cos(angles).float()[:, None, :].repeat(1, 1, 2)
    sin = torch.sin(angles).float()[:, None, :]
    sin = torch.cat([-sin, sin], dim=-1)
    partner = torch.cat([x[..., dh // 2:], x[..., :dh // 2]], dim=-1)
    return x * cos + partner * sin


class TorchDraft:
    """The draft of :class:`speclib.lm.smollm_draft.LlamaEagle` in PyTorch, with the target's arrays it reads.

    Its parameters have the names, shapes (``(out, in)`` matrices) and meaning of
    :func:`speclib.lm.smollm_draft.draft_shapes`; :meth:`arrays` exports them.  ``head`` is the
    target's embedding rows of the draft vocabulary, ``embedding`` the target's whole embedding
    (both frozen, float32).
    """

    def __init__(self, config, vocab: np.ndarray, embedding: np.ndarray, d_ff: int, seed: int,
                 init: dict | None = None, out_norm: np.ndarray | None = None) -> None:
        from speclib.lm.smollm_draft import draft_shapes

        torch = _torch()
        self.d, self.h, self.kv = config.d_model, config.n_heads, config.n_kv_heads
        self.dh, self.d_ff = config.head_dim, d_ff
        self.eps, self.base = config.rms_eps, config.rope_base
        self.vocab = np.asarray(vocab, dtype=np.int64)
        gen = torch.Generator().manual_seed(seed)
        self.params = {}
        for name, shape in draft_shapes(self.d, self.h, self.kv, d_ff).items():
            if init is not None:
                value = torch.tensor(np.asarray(init[name], dtype=np.float32))
            elif name == "out_norm" and out_norm is not None:  # the target's own scale of features
                value = torch.tensor(np.asarray(out_norm, dtype=np.float32))
            elif len(shape) == 1:
                value = torch.ones(shape)
            else:  # the two products that write into the residual stream start smaller
                value = torch.randn(shape, generator=gen) * ((0.5 if name in ("wo", "down") else 1.0)
                                                             / math.sqrt(shape[1]))
            self.params[name] = value.requires_grad_(True)
        self.embedding = torch.tensor(embedding, dtype=torch.float32)
        self.head = self.embedding[torch.from_numpy(self.vocab)].clone()
        # where each token id sits in the draft vocabulary (-1: outside it)
        index = np.full(embedding.shape[0], -1, dtype=np.int64)
        index[self.vocab] = np.arange(self.vocab.size)
        self.index = torch.from_numpy(index)

    def parameters(self) -> list:
        return list(self.params.values())

    def arrays(self) -> dict[str, np.ndarray]:
        out = {n: p.detach().numpy().copy() for n, p in self.params.items()}
        out["vocab"] = self.vocab.copy()
        return out

    def _rms(self, x, gain):
        torch = _torch()
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * gain

    def unrolled(self, feature, tokens_next, depth: int) -> list:
        """The draft's predicted features at unroll steps ``1 .. depth`` for entries ``(feature[:, j], tokens_next[:, j])``.

        ``feature`` ``(b, t, d)``, ``tokens_next`` ``(b, t)``.  Step 1 reads the target's
        features (what the loop's first draft of a step reads); step ``u`` reads, at entry
        ``j``, the step ``u - 1`` prediction of ``f_j`` and attends as the loop's ``u``-th draft
        does: to the entries built from the target's states up to ``j - u + 1``, then to the
        entries the chain from there built at steps ``2 .. u`` (entry ``i``'s key from step
        ``u - (j - i)``).  Entries ``j < u - 1`` have no such chain (the loss ignores them).
        The same scheme as ``train_drafters.py``'s EAGLE (EAGLE-3's and HASS's training-time test).
        """
        torch = _torch()
        F = torch.nn.functional
        p = self.params
        b, t, d = feature.shape
        h, kv, dh = self.h, self.kv, self.dh
        rep = h // kv
        positions = torch.arange(t)
        lag = positions[:, None] - positions[None, :]  # j - i
        causal = lag >= 0
        emb = self.embedding[tokens_next]
        keys, values, preds = [], [], []
        feat = feature
        for u in range(1, depth + 1):
            if u > 1:  # entry j reads the previous step's prediction of f_j (entry 0 keeps f_0)
                feat = torch.cat([feature[:, :1], preds[-1][:, :-1]], dim=1)
            x = torch.cat([feat, emb], dim=-1) @ p["fc"].T
            a = self._rms(x, p["attn_norm"]) @ p["qkv"].T
            q = rotary(a[..., :h * dh].view(b, t, h, dh), positions, self.base)
            k = rotary(a[..., h * dh:(h + kv) * dh].view(b, t, kv, dh), positions, self.base)
            v = a[..., (h + kv) * dh:].view(b, t, kv, dh)
            # (b, kv, rep * t, dh) queries grouped by their key/value head
            q = q.view(b, t, kv, rep, dh).permute(0, 2, 3, 1, 4).reshape(b, kv, rep * t, dh)
            keys.append(k.permute(0, 2, 1, 3))
            values.append(v.permute(0, 2, 1, 3))
            step_of_key = (u - lag).clamp(min=1).repeat(rep, 1)  # (rep t, t): which step's key entry i holds
            scores = torch.zeros(b, kv, rep * t, t)
            for m in range(1, u + 1):
                scores = scores + torch.where(step_of_key == m, q @ keys[m - 1].transpose(-1, -2), 0.0)
            scores = (scores / math.sqrt(dh)).masked_fill(~causal.repeat(rep, 1), float("-inf"))
            att = F.softmax(scores, dim=-1)
            y = sum(torch.where(step_of_key == m, att, 0.0) @ values[m - 1] for m in range(1, u + 1))
            y = y.view(b, kv, rep, t, dh).permute(0, 3, 1, 2, 4).reshape(b, t, h * dh)
            x = x + y @ p["wo"].T
            gu = self._rms(x, p["ffn_norm"]) @ p["gate_up"].T
            x = x + (F.silu(gu[..., :self.d_ff]) * gu[..., self.d_ff:]) @ p["down"].T
            preds.append(self._rms(x, p["out_norm"]))
        return preds

    def logits(self, pred):
        """Scores over the draft vocabulary for predicted features ``pred`` ``(..., d)``."""
        return pred @ self.head.T


def shared_prefix(items: list[dict]) -> int:
    """How many first tokens every answer's sequence shares (the chat template's system turn)."""
    first = items[0]["tokens"]
    n = min(it["tokens"].size for it in items)
    for it in items[1:]:
        same = np.flatnonzero(it["tokens"][:n] != first[:n])
        n = int(same[0]) if same.size else n
    return n


def _batch(items: list[dict], chosen: list[int], starts: list[float], window: int, prefix: int) -> dict:
    """A stretch of at most ``window`` entries of each chosen answer, padded to one length.

    Entry ``j`` of an answer reads ``(f_j, x_{j+1})`` and is trained towards ``f_{j+1}`` and the
    target's soft labels at ``j + 1``; ``starts[i]`` in [0, 1) picks where sequence ``i``'s
    stretch begins.  The loss mask leaves out the padding and the rows of the shared system
    turn (positions below ``prefix``), which every prompt repeats.
    """
    torch = _torch()
    spans = []
    for i, u in zip(chosen, starts):
        n = items[i]["features"].shape[0] - 1  # entries j = 0 .. n - 1 predict f_{j+1}
        a = int(u * (max(0, n - window) + 1))
        spans.append((i, a, min(n, a + window)))
    t = max(e - a for _, a, e in spans)
    b, d, k = len(chosen), items[chosen[0]]["features"].shape[1], items[chosen[0]]["top_ids"].shape[1]
    feat = torch.zeros(b, t, d)
    want = torch.zeros(b, t, d)
    nxt = torch.zeros(b, t, dtype=torch.int64)
    top_ids = torch.zeros(b, t, k, dtype=torch.int64)
    top_p = torch.zeros(b, t, k)
    mask = torch.zeros(b, t, dtype=torch.bool)
    for row, (i, a, e) in enumerate(spans):
        it, m = items[i], e - a
        feat[row, :m] = torch.from_numpy(it["features"][a:e].astype(np.float32))
        want[row, :m] = torch.from_numpy(it["features"][a + 1:e + 1].astype(np.float32))
        nxt[row, :m] = torch.from_numpy(it["tokens"][a + 1:e + 1].astype(np.int64))
        top_ids[row, :m] = torch.from_numpy(it["top_ids"][a + 1:e + 1].astype(np.int64))
        top_p[row, :m] = torch.from_numpy(it["top_p"][a + 1:e + 1])
        mask[row, :m] = torch.from_numpy(np.arange(a + 1, e + 1) >= prefix)
    return {"feature": feat, "want": want, "next": nxt, "top_ids": top_ids, "top_p": top_p, "mask": mask}


def losses(draft: TorchDraft, batch: dict, s: dict, noise) -> tuple:
    """The training loss on a batch and its parts (averaged over the unrolled steps)."""
    torch = _torch()
    F = torch.nn.functional
    feature = batch["feature"]
    if noise is not None and s["noise"] > 0:
        feature = feature + (torch.rand(feature.shape, generator=noise) * 2 - 1) * s["noise"]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        preds = draft.unrolled(feature, batch["next"], s["ttt_depth"])
    index = draft.index[batch["top_ids"]]  # (b, t, K) positions in the draft vocabulary, -1 outside
    inside = index >= 0
    q = batch["top_p"]
    total, parts = 0.0, {"l1": 0.0, "soft": 0.0, "tv": 0.0}
    for u, pred in enumerate(preds, start=1):
        mask = batch["mask"].clone()
        mask[:, :u - 1] = False  # no chain of u steps ends there
        pred = pred.float()
        count = mask.sum().clamp(min=1)
        l1 = (F.smooth_l1_loss(pred, batch["want"], reduction="none").mean(-1) * mask).sum() / count
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = draft.logits(pred)
        logp = F.log_softmax(logits.float(), dim=-1)
        logp_top = torch.gather(logp, -1, index.clamp(min=0)).masked_fill(~inside, 0.0)
        soft = (-(q * logp_top).sum(-1) * mask).sum() / count
        # 1 - sum_x min(p(x), q(x)) over the target's top tokens: an upper bound on one minus the acceptance
        overlap = torch.minimum(logp_top.exp().masked_fill(~inside, 0.0), q).sum(-1)
        tv = ((1.0 - overlap) * mask).sum() / count
        loss = s["l1_weight"] * l1 + s["soft_weight"] * soft + s["tv_weight"] * tv
        total = total + loss / len(preds)
        for name, value in (("l1", l1), ("soft", soft), ("tv", tv)):
            parts[name] += value.item() / len(preds)
    return total, parts


def learning_rate(step: int, steps: int, peak: float, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay, never below 5% of ``peak`` (as the other scripts)."""
    lr = peak * min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * step / steps))
    return max(lr, peak * 0.05)


def train(target, items: list[dict], vocab: np.ndarray, s: dict, seed: int, out_path: Path, checkpoint_dir: Path,
          resume: bool = False, log=print) -> dict:
    """Train the draft on ``items`` (training answers); write its float16 file; return its metrics entry."""
    from speclib.lm.smollm_draft import save_draft

    torch = _torch()
    torch.manual_seed(seed)
    cfg = target.config
    embedding = target.embedding.dequantize()
    draft = TorchDraft(cfg, vocab, embedding, s["d_ff"], seed, out_norm=target.out_norm)
    params = draft.parameters()
    decay = [p for p in params if p.ndim == 2]
    no_decay = [p for p in params if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=s["lr"], betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(seed + 1)
    noise = torch.Generator().manual_seed(seed + 2)
    steps = s["steps"]
    prefix = shared_prefix(items)
    record = {k: s[k] for k in ("steps", "batch", "lr", "warmup", "noise", "ttt_depth", "l1_weight", "soft_weight",
                                "tv_weight", "d_ff", "vocab", "window", "context")}
    record["seed"] = seed
    record["shared_prefix"] = prefix
    checkpoint = Path(checkpoint_dir) / "draft.pt"
    first, history, elapsed = 0, [], 0.0
    if resume and checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=False)
        if state["settings"] != record:
            raise SystemExit(f"--resume: {checkpoint} was written with other settings; delete it to start afresh")
        for name, value in state["params"].items():
            draft.params[name].data.copy_(value)
        opt.load_state_dict(state["opt"])
        gen.set_state(state["gen"])
        noise.set_state(state["noise"])
        first, history, elapsed = state["step"], state["log"], state["elapsed"]
        log(f"resumed from step {first} ({elapsed:.0f} s done)")
    t0, c0 = time.time() - elapsed, time.process_time()
    for step in range(first, steps):
        lr = learning_rate(step, steps, s["lr"], s["warmup"])
        for group in opt.param_groups:
            group["lr"] = lr
        chosen = torch.randint(0, len(items), (s["batch"],), generator=gen).tolist()
        starts = torch.rand(s["batch"], generator=gen).tolist()
        loss, parts = losses(draft, _batch(items, chosen, starts, s["window"], prefix), s, noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 10 == 0 or step == steps - 1:
            history.append((step, round(loss.item(), 4), round(parts["tv"], 4)))
            log(f"step {step:5d}  lr {lr:.2e}  loss {loss.item():.4f}  (l1 {parts['l1']:.3f}, soft {parts['soft']:.3f}, "
                f"tv {parts['tv']:.3f})  {time.time() - t0:7.1f} s")
        if (step + 1) % CHECKPOINT_EVERY == 0 and step + 1 < steps:
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"settings": record, "params": {n: p.detach().clone() for n, p in draft.params.items()},
                        "opt": opt.state_dict(), "gen": gen.get_state(), "noise": noise.get_state(),
                        "step": step + 1, "log": history, "elapsed": time.time() - t0}, checkpoint.with_suffix(".tmp"))
            checkpoint.with_suffix(".tmp").replace(checkpoint)
    seconds = time.time() - t0
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    save_draft(out_path, draft.arrays(), target, s["context"], "half", seed=seed)
    return {"settings": record, "train_seconds": round(seconds, 1),
            "train_cpu_seconds": round(time.process_time() - c0, 1), "train_log": history,
            "parameters": int(sum(p.numel() for p in params)), "file_bytes": out_path.stat().st_size}


# --------------------------------------------------------------------------- 4. held-out figures


COVERAGE_SIZES = (1024, 2048, 4096, 8192, 16384)


def heldout_figures(target, held: list[dict], counts: np.ndarray, draft_path: Path | None, context: int,
                    sizes=COVERAGE_SIZES) -> dict:
    """Coverage of draft vocabularies and the draft's teacher-forced acceptance on the held-out answers.

    The target reads each held-out sequence again (a pass over a few thousand tokens, in
    pieces), for its exact rows.  *Coverage* of the ``N`` tokens with the largest ``counts``:
    the target's probability on them at T = 1 and how often its most probable token is one of
    them (T = 0), averaged over the rows that predict answer tokens (``answer``) and over all
    rows after the shared system turn (``all``).  *Acceptance*: ``sum_x min(p(x), q(x))`` of the
    draft's first draft (read by speclib's numpy drafter from ``draft_path``, entries from
    ``max(0, prompt - context)`` as in the loop) against the target's row, at T = 1 and T = 0,
    over the answer rows from the second answer token on (the rows the loop drafts).
    """
    from speclib.lm.smollm_draft import load_draft
    from speclib.lm.transformer import _softmax

    prefix = shared_prefix(held)
    order = np.lexsort((np.arange(counts.size), -counts))
    rank = np.empty(counts.size, dtype=np.int64)
    rank[order] = np.arange(counts.size)
    drafter = load_draft(target, draft_path) if draft_path is not None else None
    cover = {part: {"t1": {n: [] for n in sizes}, "t0": {n: [] for n in sizes}} for part in ("answer", "all")}
    accept = {"1": [], "0": []}
    for it in held:
        tokens = it["tokens"][:it["features"].shape[0]].astype(np.int64)
        p_len = it["prompt_length"]
        cache = target.cache(features=True, capacity=tokens.size)
        logits = np.concatenate([cache.extend_logits(tokens[s:s + 128]) for s in range(0, tokens.size, 128)])
        rows = np.arange(tokens.size)
        for lo in range(prefix, tokens.size, 128):
            q1 = _softmax(logits[lo:lo + 128], 1.0)
            cum = np.cumsum(q1[:, order], axis=1)
            top = rank[logits[lo:lo + 128].argmax(axis=1)]
            answer = rows[lo:lo + 128] >= p_len - 1
            for n in sizes:
                for part, keep in (("answer", answer), ("all", np.ones_like(answer))):
                    cover[part]["t1"][n] += cum[keep, n - 1].tolist()
                    cover[part]["t0"][n] += (top[keep] < n).tolist()
        if drafter is None:
            continue
        e0 = max(0, p_len - context)
        drafter._first = drafter._count = 0
        pred = drafter._pass(cache.features[e0:-1], tokens[e0 + 1:])  # entry j predicts row j + 1
        drafted = np.arange(e0 + 1, tokens.size) >= p_len  # rows of answer tokens after the first
        z_p = drafter.draft_logits(pred[drafted]).astype(np.float64)
        z_q = logits[e0 + 1:][drafted].astype(np.float64)
        for t in ("1", "0"):
            p_sub = _softmax(z_p, float(t))
            q = _softmax(z_q, float(t))
            accept[t] += np.minimum(p_sub, q[:, drafter.vocab]).sum(axis=1).tolist()

    def mean(values):
        return round(float(np.mean(values)), 4) if values else None

    out = {"heldout_answers": len(held), "shared_prefix": prefix,
           "coverage": {part: {t: {str(n): mean(v) for n, v in by.items()} for t, by in c.items()}
                        for part, c in cover.items()},
           "coverage_rows": {part: len(c["t1"][sizes[0]]) for part, c in cover.items()}}
    if drafter is not None:
        out["teacher_forced_acceptance"] = {t: mean(v) for t, v in accept.items()}
        out["teacher_forced_rows"] = len(accept["1"])
    return out


def data_summary(items: list[dict], held: list[dict]) -> dict:
    """What the generated data hold: answers, tokens and positions per family and temperature."""
    out = {"answers": len(items), "heldout_answers": len(held), "positions": 0, "answer_tokens": 0, "families": {}}
    for it in items:
        generated = it["tokens"].size - it["prompt_length"]
        fam = out["families"].setdefault(it["family"], {"answers": 0, "answer_tokens": 0, "greedy_answers": 0})
        fam["answers"] += 1
        fam["answer_tokens"] += int(generated)
        fam["greedy_answers"] += int(it["temperature"] == 0.0)
        out["answer_tokens"] += int(generated)
        out["positions"] += int(it["features"].shape[0])
    return out


def data_stage(seed: int, workers: int = 1, log=print) -> None:
    """Answer the planned training prompts with the compiled target (resuming), in ``workers`` processes."""
    if workers > 1:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        jobs = [context.Process(target=_data_part, args=(seed, i, workers)) for i in range(workers)]
        for job in jobs:
            job.start()
        for job in jobs:
            job.join()
        if any(job.exitcode for job in jobs):
            raise SystemExit(f"data: a worker failed (exit codes {[job.exitcode for job in jobs]})")
        return
    _data_part(seed, 0, 1)


def _data_part(seed: int, part: int, parts: int) -> None:
    from speclib.lm.smollm import load_smollm2
    from speclib.lm.smollm_tasks import load_tasks

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {f'worker {part}: ' if parts > 1 else ''}{message}", flush=True)

    target = load_smollm2("q8").with_compiled()
    chosen = plan_prompts(load_tasks(), SETTINGS["prompts"], seed)
    prompts = [target.tokenizer.encode_chat(p["messages"]) for p in chosen]
    if part == 0:
        log(f"{len(prompts)} prompts, {sum(p.size for p in prompts)} prompt tokens")
    with blas_threads(1):
        generate_data(target, prompts, CHECKPOINT_DIR / "data", SETTINGS, seed, target.tokenizer.eos_id,
                      [p["family"] for p in chosen], log, part, parts)


def train_stage(seed: int, threads: int, resume: bool, log=print) -> dict:
    """Choose the draft vocabulary, train, write the weights and the metrics entry."""
    from speclib.book.wallclock import processor_summary
    from speclib.lm.smollm import load_smollm2

    torch = _torch()
    torch.set_num_threads(threads)
    items, data_times = load_data(CHECKPOINT_DIR / "data")
    if not items:
        raise SystemExit("train: no data; run --stage data first")
    train_items, held = split(items, SETTINGS["heldout_every"])
    target = load_smollm2("q8").with_compiled()
    vocab, counts = draft_vocabulary(train_items, SETTINGS["vocab"], target.vocab_size)
    log(f"{len(train_items)} training answers, {len(held)} held out; draft vocabulary of {vocab.size} tokens")
    entry = train(target, train_items, vocab, SETTINGS, seed, WEIGHTS_FILE, CHECKPOINT_DIR, resume, log)
    log(f"trained: {entry['train_seconds']:.0f} s; held-out figures next")
    t0 = time.time()
    with blas_threads(1):
        figures = heldout_figures(target, held, counts, WEIGHTS_FILE, SETTINGS["context"])
    log(f"held out: {figures}")
    metrics = {
        "about": "The EAGLE draft of SmolLM2-135M-Instruct (speclib.lm.smollm_draft), trained by "
                 "training/train_smollm_draft.py on the target's own answers to the training prompts of "
                 "speclib.lm.smollm_tasks; held-out figures on answers never trained on.",
        "data_settings": {k: SETTINGS[k] for k in ("prompts", "max_new", "greedy_every", "stored_context", "top_k",
                                                   "heldout_every")},
        "data": data_summary(items, held),
        "data_seconds": {"wall_summed_over_shards": round(data_times["wall_seconds"], 1),
                         "processor": round(data_times["cpu_seconds"], 1)},
        **entry,
        "heldout_seconds": round(time.time() - t0, 1),
        **figures,
        "threads": threads, "torch_version": torch.__version__, "numpy_version": np.__version__,
        "python_version": platform.python_version(), "processor": processor_summary(),
    }
    METRICS_FILE.write_text(json.dumps(metrics, indent=1) + "\n")
    log(f"wrote {WEIGHTS_FILE.name} ({WEIGHTS_FILE.stat().st_size / 1e6:.1f} MB) and {METRICS_FILE.name}")
    return metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", choices=("data", "train", "all"), default="all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (results depend on it)")
    parser.add_argument("--resume", action="store_true", help="continue training from the last checkpoint")
    parser.add_argument("--workers", type=int, default=1, help="processes that generate the data (one core each)")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)

    if args.stage in ("data", "all"):
        data_stage(args.seed, args.workers, log)
    if args.stage in ("train", "all"):
        train_stage(args.seed, args.threads, args.resume, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())

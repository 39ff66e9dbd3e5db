"""Train the drafters that read the book's target: distilled draft, Medusa, EAGLE, early exit.

    python training/train_drafters.py                      # all four, default settings
    python training/train_drafters.py --drafter medusa --steps 20   # a quick try

Needs PyTorch and speclib importable, as ``train_transformer.py`` (whose data, model and
export it reuses).  Deterministic given ``--seed`` and ``--threads``.

1. Runs the shipped target (float32, no gradients) once over the training text, cut into
   consecutive windows of ``block_size + 1`` characters, and keeps for every position its
   final hidden state after the final layer norm (the *feature*: the target's next-token
   logits are ``feature @ wte.T``, its soft labels their softmax) and its residual stream
   after the first ``EXIT_LAYER`` blocks.
2. Trains, on random batches of those windows:

   - ``distilled``: a draft of the shipped draft's shape (1 layer x 64), initialised from
     the shipped draft and fine-tuned on the KL divergence to the target's soft labels
     (DistillSpec, forward KL at temperature 1);
   - ``medusa``: ``heads`` residual blocks ``f + silu(f W_i + b_i)`` read by the target's
     own (tied, frozen) output head; head ``i`` at position ``t`` predicts the token at
     ``t + i + 2`` (Medusa-1: cross-entropy, head ``i`` weighted ``0.8**i``);
   - ``eagle``: one transformer block of width ``d_model`` without position embeddings,
     fed ``fc([feature at t, embedding of token t+1])``, whose output (final layer norm,
     projection to the target's width) predicts the feature at ``t + 1``; smooth-L1 on
     the feature, plus ``soft_weight`` x cross-entropy through the target's head to the
     target's own row for the token at ``t + 2`` (its soft labels) and ``ce_weight`` x
     cross-entropy to the token itself, with uniform noise on the input features (EAGLE);
   - ``early-exit``: the target's first ``EXIT_LAYER`` blocks (frozen) and a trained exit
     (a layer norm and an untied output matrix, initialised from the target's), on the KL
     divergence to the target's soft labels (LayerSkip's exit, as self-distillation).
3. Writes each drafter to ``speclib/data`` (float16), and records in
   ``speclib/data/neural_metrics.json`` under ``"drafters"`` its settings, training time,
   file size and held-out figures on the same held-out slices as the pair: bits/char for
   the models that predict the next character (computed by the numpy model from the
   shipped weights), and for every drafter the teacher-forced acceptance
   ``sum_x min(p(x), q(x))`` against the target's row for the same token at temperature 1.
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
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_transformer import (  # noqa: E402  (the pair's data, model and export)
    learning_rate,
    BLOCK_SIZE,
    CHECKPOINT_DIR,
    METRICS_FILE,
    TorchGPT,
    evaluate,
    heldout_slices,
    training_ids,
)

from speclib.lm import kernel  # noqa: E402
from speclib.lm.corpora import shared_vocabulary  # noqa: E402
from speclib.lm.drafters import DRAFTER_FILES, draft_costs, loop_acceptance, save_weights  # noqa: E402
from speclib.lm.transformer import (  # noqa: E402
    DATA_DIR,
    Transformer,
    TransformerConfig,
    load_transformer,
    save_transformer,
)

#: The target's blocks that the early exit keeps (the first ``EXIT_LAYER`` of 4).
EXIT_LAYER = 1
#: Training settings of each drafter (``steps`` sized for a few minutes of one core each).
SETTINGS = {
    "medusa": dict(heads=4, steps=400, batch=16, lr=2e-3, warmup=30, decay=0.8),
    "eagle": dict(d_model=128, n_heads=4, steps=7000, batch=16, lr=3e-3, warmup=100, noise=0.1, ce_weight=0.0,
                  soft_weight=1.0, tv_weight=1.0, ttt_depth=4, ttt_decay=1.0),
    "early-exit": dict(exit_layer=EXIT_LAYER, steps=300, batch=32, lr=3e-3, warmup=30),
    "distilled": dict(steps=600, batch=32, lr=1e-3, warmup=50, init="the shipped draft (neural_draft.npz)"),
}
#: Training windows on which the target's outputs are computed (evenly spaced over the text);
#: None: all of them (10,061 windows, the whole 1.3 million training characters).
WINDOWS = None
ORDER = ("medusa", "eagle", "early-exit", "distilled")
#: The loop in which ``--evaluate`` measures each drafter's acceptance (``loop_acceptance``).
LOOP_RUN = dict(domain="code", temperature=1.0, k=4, n_prompts=200, n_new=100, prompt_chars=40, seed=0)
#: The loop in which ``--evaluate`` times each drafter's pass against the target's (``draft_costs``).
COST_RUN = dict(domain="code", temperature=1.0, k=4, n_prompts=20, n_new=100, prompt_chars=40, seed=0)
COST_HOW = ("median one-token draft pass inside speculative decoding (k = 4, temperature 1) over the median "
            "one-token pass of the target inside plain cached decoding, both {}, on one BLAS thread, "
            "all drafters interleaved prompt by prompt over held-out code prompts (speclib.lm.drafters.draft_costs)")
#: Temperatures at which the held-out acceptance is recorded.
TEMPERATURES = (0.0, 0.7, 1.0)
CHECKPOINT_EVERY = 100


# --------------------------------------------------------------------------- the target's outputs


def cut_windows(ids: np.ndarray, block: int, limit: int | None = None) -> np.ndarray:
    """Windows of ``block + 1`` ids from consecutive slots of ``block``, shape ``(n, block + 1)``;
    at most ``limit`` of them, evenly spaced over the text (both domains)."""
    n = (ids.size - 1) // block
    if n < 1:
        raise ValueError(f"ids: need at least {block + 1} ids for one window, got {ids.size}")
    slots = np.arange(n) if limit is None or limit >= n else np.linspace(0, n - 1, limit).round().astype(int)
    return np.stack([ids[i * block:i * block + block + 1] for i in slots])


@torch.no_grad()
def target_outputs(target: Transformer, windows: np.ndarray, exit_layer: int = EXIT_LAYER,
                   chunk: int = 16) -> dict[str, torch.Tensor]:
    """The target's features (after ``ln_f``) and its residual stream after ``exit_layer``
    blocks at every input position of ``windows``, float16, each ``(n, block, d_model)``."""
    net = TorchGPT.from_numpy(target)
    n, b = windows.shape[0], windows.shape[1] - 1
    d = target.config.d_model
    features = torch.empty((n, b, d), dtype=torch.float16)
    early = torch.empty((n, b, d), dtype=torch.float16)
    tokens = torch.from_numpy(windows)
    for i in range(0, n, chunk):
        idx = tokens[i:i + chunk, :-1]
        x = net.blocks(net.p("wte")[idx] + net.p("wpe")[:b], 0, exit_layer)
        early[i:i + chunk] = x.half()
        features[i:i + chunk] = net.final_norm(net.blocks(x, exit_layer)).half()
    return {"tokens": tokens, "features": features, "early": early,
            "wte": net.p("wte").detach().clone(), "net": net}


# --------------------------------------------------------------------------- the drafters in torch


class Medusa(torch.nn.Module):
    """``heads`` residual blocks on the target's feature, read by the target's frozen head."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(heads, d, d))  # zero: each head starts as the target's
        self.b = torch.nn.Parameter(torch.zeros(heads, d))

    def forward(self, f: torch.Tensor, wte: torch.Tensor) -> list[torch.Tensor]:
        return [(f + F.silu(f @ self.w[i] + self.b[i])) @ wte.T for i in range(self.w.shape[0])]

    def arrays(self) -> dict[str, np.ndarray]:
        out = {}
        for i in range(self.w.shape[0]):
            out[f"w{i}"] = self.w[i].detach().numpy()
            out[f"b{i}"] = self.b[i].detach().numpy()
        return out


class Eagle(torch.nn.Module):
    """fc([feature, embedding]) -> one transformer block (TorchGPT's) -> ln -> out: the next feature."""

    def __init__(self, d_target: int, vocab: int, block: int, d: int, n_heads: int, seed: int) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.core = TorchGPT(TransformerConfig(vocab_size=vocab, block_size=block, d_model=d,
                                               n_layers=1, n_heads=n_heads), seed)
        self.fc_w = torch.nn.Parameter(torch.randn(2 * d_target, d, generator=gen) * 0.02)
        self.fc_b = torch.nn.Parameter(torch.zeros(d))
        self.out_w = torch.nn.Parameter(torch.randn(d, d_target, generator=gen) * 0.02)
        self.out_b = torch.nn.Parameter(torch.zeros(d_target))

    def forward(self, feature: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        z = torch.cat([feature, embedding], dim=-1) @ self.fc_w + self.fc_b
        return self.core.final_norm(self.core.blocks(z)) @ self.out_w + self.out_b

    def unrolled(self, feature: torch.Tensor, embedding: torch.Tensor, depth: int) -> list[torch.Tensor]:
        """The drafter's predictions at unroll steps ``1 .. depth`` (training-time test).

        Entry ``j`` reads ``(f_j, e(x_{j+1}))`` and predicts ``f_{j+1}``.  Step 1 reads the
        target's states (what ``forward`` computes).  Step ``u`` reads, at entry ``j``, the
        drafter's own step ``u - 1`` prediction of ``f_j`` and attends as the loop's ``u``-th
        draft does: to the entries built from the target's states up to ``j - u + 1``, then
        to the draft entries the chain from there built at steps ``2 .. u`` (entry ``i``'s
        key from step ``u - (j - i)``).  Entries ``j < u - 1`` have no such chain (ignored
        by the loss).  EAGLE-3 and HASS train this way, so that later drafts are trained on
        the drafter's own states, as the loop feeds them.
        """
        p = lambda n: self.core.p(f"h0.{n}")  # noqa: E731
        cfg = self.core.config
        b, t, _ = feature.shape
        h, dh, d = cfg.n_heads, cfg.head_dim, cfg.d_model
        j = torch.arange(t)
        lag = j[:, None] - j[None, :]  # j - i
        causal = lag >= 0
        keys, values, preds = [], [], []
        feat = feature
        for u in range(1, depth + 1):
            if u > 1:  # entry j reads the previous step's prediction of f_j (entry 0 keeps f_0)
                feat = torch.cat([feature[:, :1], preds[-1][:, :-1]], dim=1)
            x = torch.cat([feat, embedding], dim=-1) @ self.fc_w + self.fc_b
            a = F.layer_norm(x, (d,), p("ln1.g"), p("ln1.b"), eps=1e-5) @ p("attn.w_qkv") + p("attn.b_qkv")
            q, k, v = a.view(b, t, 3, h, dh).permute(2, 0, 3, 1, 4)
            keys.append(k)
            values.append(v)
            step_of_key = (u - lag).clamp(min=1)  # which step's key entry i holds for query j
            scores = torch.zeros(b, h, t, t)
            for m in range(1, u + 1):
                scores = scores + torch.where(step_of_key == m, q @ keys[m - 1].transpose(-1, -2), 0.0)
            scores = (scores / math.sqrt(dh)).masked_fill(~causal, float("-inf"))
            att = F.softmax(scores, dim=-1)
            y = sum(torch.where(step_of_key == m, att, 0.0) @ values[m - 1] for m in range(1, u + 1))
            x = x + (y.transpose(1, 2).reshape(b, t, d) @ p("attn.w_o") + p("attn.b_o"))
            m_ = F.layer_norm(x, (d,), p("ln2.g"), p("ln2.b"), eps=1e-5) @ p("mlp.w_up") + p("mlp.b_up")
            x = x + (F.gelu(m_, approximate="tanh") @ p("mlp.w_down") + p("mlp.b_down"))
            preds.append(self.core.final_norm(x) @ self.out_w + self.out_b)
        return preds

    def parameters_used(self) -> list[torch.nn.Parameter]:
        """Everything but the core's unused token and position embeddings."""
        return [p for n, p in self.named_parameters() if n not in ("core.wte", "core.wpe")]

    def arrays(self) -> dict[str, np.ndarray]:
        out = {n: self.core.p(n).detach().numpy() for n in self.core.names if n.startswith(("h0.", "ln_f."))}
        out.update({"fc.w": self.fc_w.detach().numpy(), "fc.b": self.fc_b.detach().numpy(),
                    "out.w": self.out_w.detach().numpy(), "out.b": self.out_b.detach().numpy()})
        return out


class Exit(torch.nn.Module):
    """A layer norm and an output matrix on the residual stream after the first blocks."""

    def __init__(self, target: Transformer) -> None:
        super().__init__()
        self.g = torch.nn.Parameter(torch.from_numpy(target.params["ln_f.g"].copy()))
        self.b = torch.nn.Parameter(torch.from_numpy(target.params["ln_f.b"].copy()))
        self.w_out = torch.nn.Parameter(torch.from_numpy(target.params["wte"].T.copy()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.g, self.b, eps=1e-5) @ self.w_out

    def arrays(self) -> dict[str, np.ndarray]:
        return {"ln_f.g": self.g.detach().numpy(), "ln_f.b": self.b.detach().numpy(),
                "w_out": self.w_out.detach().numpy()}


def _soft_ce(logits: torch.Tensor, target_logits: torch.Tensor) -> torch.Tensor:
    """Cross-entropy to the target's soft labels (the KL divergence up to the target's entropy)."""
    return -(F.softmax(target_logits.float(), -1) * F.log_softmax(logits.float(), -1)).sum(-1).mean()


def build(name: str, s: dict, target: Transformer, seed: int, draft: Transformer | None):
    """The torch module of drafter ``name`` and the parameters its optimiser trains."""
    d, vocab, block = target.config.d_model, target.vocab_size, target.config.block_size
    if name == "medusa":
        module = Medusa(d, s["heads"])
        return module, list(module.parameters())
    if name == "eagle":
        module = Eagle(d, vocab, block, s["d_model"], s["n_heads"], seed)
        return module, module.parameters_used()
    if name == "early-exit":
        module = Exit(target)
        return module, list(module.parameters())
    if name == "distilled":
        module = TorchGPT.from_numpy(draft) if draft is not None else TorchGPT(_draft_config(target), seed)
        return module, list(module.parameters())
    raise ValueError(f"name: unknown drafter {name!r}; expected one of {list(SETTINGS)}")


def _draft_config(target: Transformer) -> TransformerConfig:
    return TransformerConfig(vocab_size=target.vocab_size, block_size=target.config.block_size,
                             d_model=64, n_layers=1, n_heads=4)


def losses(name: str, module, s: dict, out: dict, idx: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
    """The training loss of drafter ``name`` on windows ``idx`` (``gen``: EAGLE's feature noise)."""
    tok = out["tokens"][idx]
    f = out["features"][idx].float()
    wte = out["wte"]
    b = f.shape[1]
    if name == "medusa":
        total, weights = 0.0, 0.0
        for i, logits in enumerate(module(f, wte)):
            if b - i - 1 <= 0:
                break
            w = s["decay"] ** i
            total = total + w * F.cross_entropy(logits[:, :b - i - 1].reshape(-1, wte.shape[0]),
                                                tok[:, i + 2:].reshape(-1))
            weights += w
        return total / weights
    if name == "eagle":
        feat_in = f[:, :-1]
        if gen is not None and s["noise"] > 0:
            feat_in = feat_in + (torch.rand(feat_in.shape, generator=gen) * 2 - 1) * s["noise"]
        depth = s.get("ttt_depth", 1)
        preds = module.unrolled(feat_in, wte[tok[:, 1:b]], depth) if depth > 1 else [module(feat_in, wte[tok[:, 1:b]])]
        total, weights = 0.0, 0.0
        for u, pred in enumerate(preds, start=1):  # step u: entries j >= u - 1 (a chain from j - u + 1)
            pred, want = pred[:, u - 1:], f[:, u:]
            loss = F.smooth_l1_loss(pred, want)
            if s["ce_weight"]:
                loss = loss + s["ce_weight"] * F.cross_entropy((pred @ wte.T).reshape(-1, wte.shape[0]),
                                                               tok[:, u + 1:].reshape(-1))
            if s.get("soft_weight"):  # the target's own row for the same token: what acceptance compares
                loss = loss + s["soft_weight"] * _soft_ce(pred @ wte.T, want @ wte.T)
            if s.get("tv_weight"):  # 1 - sum min(p, q): one minus the acceptance of this draft
                diff = F.softmax(pred @ wte.T, -1) - F.softmax(want @ wte.T, -1)
                loss = loss + s["tv_weight"] * 0.5 * diff.abs().sum(-1).mean()
            w = s.get("ttt_decay", 1.0) ** (u - 1)
            total, weights = total + w * loss, weights + w
        return total / weights
    target_logits = f @ wte.T
    if name == "early-exit":
        return _soft_ce(module(out["early"][idx].float()), target_logits)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = module(tok[:, :-1])
    return _soft_ce(logits, target_logits)


# --------------------------------------------------------------------------- training, export


def train(name: str, target: Transformer, out: dict, seed: int = 0, steps: int | None = None,
          resume: bool = False, out_dir: Path = DATA_DIR, checkpoint_dir: Path = CHECKPOINT_DIR,
          draft: Transformer | None = None, heldout: dict | None = None) -> dict:
    """Train drafter ``name`` on the target's outputs ``out``; write its file; return its metrics entry."""
    s = dict(SETTINGS[name])
    steps = s["steps"] if steps is None else steps
    torch.manual_seed(seed)
    module, params = build(name, s, target, seed, draft)
    decay = [p for p in params if p.ndim == 2 or (name == "medusa" and p.ndim == 3)]
    no_decay = [p for p in params if not any(p is q for q in decay)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1 if name != "medusa" else 0.0},
                             {"params": no_decay, "weight_decay": 0.0}], lr=s["lr"], betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(seed + 1)
    noise = torch.Generator().manual_seed(seed + 2)
    n_windows = out["tokens"].shape[0]
    log, first, elapsed = [], 0, 0.0
    checkpoint = Path(checkpoint_dir) / f"drafter_{name}.pt"
    record = dict(s, steps=steps, seed=seed)
    if resume and checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=False)
        if state["settings"] != record:
            raise SystemExit(f"--resume: {checkpoint} was written with other settings; delete it to start afresh")
        module.load_state_dict(state["module"])
        opt.load_state_dict(state["opt"])
        gen.set_state(state["gen"])
        noise.set_state(state["noise"])
        first, log, elapsed = state["step"], state["log"], state["elapsed"]
        print(f"{name}: resumed from step {first} ({elapsed:.0f} s done)", flush=True)
    t0 = time.time() - elapsed
    for step in range(first, steps):
        lr = learning_rate(step, steps, s["lr"], s["warmup"])
        for group in opt.param_groups:
            group["lr"] = lr
        idx = torch.randint(0, n_windows, (s["batch"],), generator=gen)
        loss = losses(name, module, s, out, idx, noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 20 == 0 or step == steps - 1:
            log.append((step, round(loss.item(), 4)))
            print(f"{name} step {step:5d}  lr {lr:.2e}  loss {loss.item():.4f}  {time.time() - t0:7.1f} s", flush=True)
        if (step + 1) % CHECKPOINT_EVERY == 0 and step + 1 < steps:
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"settings": record, "module": module.state_dict(), "opt": opt.state_dict(),
                        "gen": gen.get_state(), "noise": noise.get_state(), "step": step + 1, "log": log,
                        "elapsed": time.time() - t0}, checkpoint.with_suffix(".tmp"))
            checkpoint.with_suffix(".tmp").replace(checkpoint)
    seconds = time.time() - t0

    path = Path(out_dir) / DRAFTER_FILES[name]
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = {k: v for k, v in s.items() if k != "steps"}
    if name == "distilled":
        vocab = shared_vocabulary().chars if target.vocab_size == shared_vocabulary().size else ""
        save_transformer(Transformer(module.config, module.numpy_params()), path, vocabulary=vocab,
                         role="distilled", seed=seed)
    else:
        header = dict(settings, d_target=target.config.d_model, seed=seed)
        save_weights(path, name, module.arrays(), **header)
    entry = {"settings": settings, "seed": seed, "steps": steps, "train_seconds": round(seconds, 1),
             "file_bytes": path.stat().st_size, "train_log_loss": log,
             "parameters": int(sum(p.numel() for p in params))}
    if heldout is not None:
        entry.update(heldout_figures(name, target, path, heldout))
    print(f"{name}: {seconds:.0f} s, {path.stat().st_size / 1e3:.0f} kB, "
          f"{ {k: v for k, v in entry.items() if k.startswith('heldout')} }", flush=True)
    return entry


@torch.no_grad()
def heldout_figures(name: str, target: Transformer, path: Path, heldout: dict[str, dict]) -> dict:
    """Held-out bits/char (next-character models) and teacher-forced acceptance of the shipped file."""
    from speclib.lm.drafters import teacher_forced_logits
    from speclib.lm.transformer import softmax_rows

    figures: dict = {"heldout_acceptance": {}, "heldout_acceptance_by_temperature": {}}
    if name in ("distilled", "early-exit"):
        from speclib.lm.drafters import load_drafter_model

        figures["heldout_bits_per_char"] = evaluate(load_drafter_model(name, path=path, target=target))
    for domain, ids in heldout.items():
        logits_q, logits_p = teacher_forced_logits(name, target, ids, path=path)
        for t in TEMPERATURES:
            by_domain = figures["heldout_acceptance_by_temperature"].setdefault(f"{t:g}", {})
            by_domain[domain] = [round(float(np.minimum(softmax_rows(p, t), softmax_rows(q, t)).sum(-1).mean()), 4)
                                 for p, q in zip(logits_p, logits_q)]
    figures["heldout_acceptance"] = figures["heldout_acceptance_by_temperature"]["1"]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drafter", nargs="+", choices=list(ORDER) + ["all"], default=["all"],
                        help="which drafters (in this order)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (results depend on it)")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    parser.add_argument("--steps", type=int, default=None, help="override the number of steps (a quick try)")
    parser.add_argument("--windows", type=int, default=WINDOWS, help="training windows (evenly spaced; default all)")
    parser.add_argument("--evaluate", action="store_true",
                        help="train nothing: record the held-out figures of the shipped drafters (numpy)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    target = load_transformer(DATA_DIR / "neural_target.npz")
    draft = load_transformer(DATA_DIR / "neural_draft.npz")
    vocab = shared_vocabulary()
    heldout = {d: vocab.encode(t) for d, t in heldout_slices().items()}
    names = ORDER if "all" in args.drafter else args.drafter
    if args.evaluate:
        evaluated = (["pair"] if "all" in args.drafter else []) + list(names)
        costs = draft_costs(evaluated, **COST_RUN)
        compiled = draft_costs(evaluated, **COST_RUN, compiled=True) if kernel.available() else None
        for name in evaluated:
            path = DATA_DIR / ("neural_draft.npz" if name == "pair" else DRAFTER_FILES[name])
            figures = heldout_figures(name, target, path, heldout)
            figures["loop_acceptance"] = dict(loop_acceptance(name, **LOOP_RUN).summary(), **LOOP_RUN)
            figures["cost"] = dict(costs[name].summary(), how=COST_HOW.format("numpy"))
            if compiled is not None:
                figures["cost_compiled"] = dict(compiled[name].summary(), how=COST_HOW.format(
                    "compiled (Transformer.compiled: every network's pass one numba call)"))
            print(name, figures, flush=True)
            metrics = json.loads(METRICS_FILE.read_text())
            if name == "pair":  # the shipped separate draft, for comparison (trained by train_transformer.py)
                metrics.setdefault("drafters_baseline", {}).setdefault("pair", {}).update(figures)
            else:
                metrics["drafters"][name].update(figures)
            METRICS_FILE.write_text(json.dumps(metrics, indent=1) + "\n")
        return 0
    t0 = time.time()
    windows = cut_windows(training_ids(), BLOCK_SIZE, args.windows)
    out = target_outputs(target, windows)
    print(f"target outputs over {windows.shape[0]} windows: {time.time() - t0:.0f} s", flush=True)
    for name in names:
        entry = train(name, target, out, args.seed, args.steps, args.resume, draft=draft)
        entry["training_windows"] = int(windows.shape[0])
        metrics = json.loads(METRICS_FILE.read_text())  # re-read: other writers keep their entries
        metrics.setdefault("drafters", {})[name] = dict(entry, threads=args.threads,
                                                        torch_version=torch.__version__,
                                                        python_version=platform.python_version())
        METRICS_FILE.write_text(json.dumps(metrics, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

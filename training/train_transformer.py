"""Train the book's character-level transformer pair and ship it as numpy weights.

    python training/train_transformer.py            # both models, default settings
    python training/train_transformer.py --role draft --steps 50   # a quick try

Needs PyTorch (a training-only dependency: the book, speclib and the tests run without it)
and speclib importable (``pip install -e . --no-deps`` in the training environment).

What it does, deterministically given ``--seed`` and ``--threads``:

1. Reads both text domains of :mod:`speclib.corpora` (Python's help topics and
   standard-library source), encodes them with the shared 97-symbol vocabulary and
   concatenates their *training* parts (the held-out documents are never seen).
2. Trains a GPT of the architecture in :mod:`speclib.transformer` (same parameter names,
   matrices stored ``(in, out)``) on random windows of ``block_size + 1`` characters:
   AdamW, linear warm-up then cosine decay, gradient clipping, bfloat16 autocast for the
   matrix products (float32 master weights).
3. Writes ``speclib/data/neural_<role>.npz`` with :func:`speclib.transformer.save_transformer`
   (float16 weights, config and vocabulary inside), reloads it with numpy and records in
   ``speclib/data/neural_metrics.json`` the settings, the training time and the held-out
   cross-entropy in bits per character computed *by the numpy model* on a fixed held-out
   slice of each domain, with the slice's sha256 and the Python version that produced it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from speclib.lm.corpora import DOMAINS, load_corpus, shared_vocabulary
from speclib.lm.transformer import (
    DATA_DIR,
    Transformer,
    TransformerConfig,
    heldout_cross_entropy,
    load_transformer,
    save_transformer,
)

#: The shipped pair: a target of 3.2 million weights (4 layers of width 256) and a draft of
#: about 64 thousand (one layer of width 64), about 50 times fewer.  The target sees about
#: 7.5 passes over the 1.3 million training characters (steps x batch x block_size); the
#: draft, which cannot overfit at its size, about 25 (its steps are 40 times cheaper).
SETTINGS = {
    "target": dict(d_model=256, n_layers=4, n_heads=4, tied=True, steps=2400, batch=32, lr=2e-3, warmup=100),
    "draft": dict(d_model=64, n_layers=1, n_heads=4, tied=True, steps=8000, batch=32, lr=4e-3, warmup=100),
}
BLOCK_SIZE = 128
#: Steps between checkpoints (a stopped run resumes from the last one with ``--resume``).
CHECKPOINT_EVERY = 100
CHECKPOINT_DIR = Path(__file__).resolve().parent / "checkpoints"
#: Characters of each domain's held-out text on which the metrics JSON records cross-entropy.
HELDOUT_CHARS = 4096
METRICS_FILE = DATA_DIR / "neural_metrics.json"



def _causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal scaled dot-product attention.

    Where ``ATEN_CPU_CAPABILITY=default`` forbids the processor's vector extensions, PyTorch
    2.13's fused CPU kernel still packs its operands with AVX-512 instructions on a processor
    that has them and fails ("pack_vnni2 is only supported when avx512 is supported"); there
    the reference (math) kernel runs instead.  Elsewhere the fused kernel runs, as it did for
    the shipped models.
    """
    if os.environ.get("ATEN_CPU_CAPABILITY", "").strip().lower() == "default":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel([SDPBackend.MATH]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)

class TorchGPT(torch.nn.Module):
    """The architecture of speclib.transformer.Transformer in PyTorch, same parameter names."""

    def __init__(self, config: TransformerConfig, seed: int) -> None:
        super().__init__()
        self.config = config
        gen = torch.Generator().manual_seed(seed)
        self.names = list(config.parameter_shapes())
        for name, shape in config.parameter_shapes().items():
            if name.endswith(".g"):
                value = torch.ones(shape)
            elif len(shape) == 1:
                value = torch.zeros(shape)
            else:
                std = 0.02
                if name.endswith("w_o") or name.endswith("w_down"):  # GPT-2's residual scaling
                    std /= math.sqrt(2 * max(1, config.n_layers))
                value = torch.randn(shape, generator=gen) * std
            self.register_parameter(name.replace(".", "__"), torch.nn.Parameter(value))

    def p(self, name: str) -> torch.Tensor:
        return getattr(self, name.replace(".", "__"))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.p("wte")[idx] + self.p("wpe")[:idx.shape[1]])
        return self.head(self.final_norm(x))

    def blocks(self, x: torch.Tensor, start: int = 0, stop: int | None = None) -> torch.Tensor:
        """The residual stream ``x`` (batch, time, d_model) after blocks ``start .. stop - 1``."""
        cfg = self.config
        b, t, _ = x.shape
        h, dh = cfg.n_heads, cfg.head_dim
        for i in range(start, cfg.n_layers if stop is None else stop):
            p = lambda n: self.p(f"h{i}.{n}")  # noqa: E731
            a = F.layer_norm(x, (cfg.d_model,), p("ln1.g"), p("ln1.b"), eps=1e-5) @ p("attn.w_qkv") + p("attn.b_qkv")
            q, k, v = a.view(b, t, 3, h, dh).permute(2, 0, 3, 1, 4)
            y = _causal_attention(q, k, v)
            x = x + (y.transpose(1, 2).reshape(b, t, cfg.d_model) @ p("attn.w_o") + p("attn.b_o"))
            m = F.layer_norm(x, (cfg.d_model,), p("ln2.g"), p("ln2.b"), eps=1e-5) @ p("mlp.w_up") + p("mlp.b_up")
            x = x + (F.gelu(m, approximate="tanh") @ p("mlp.w_down") + p("mlp.b_down"))
        return x

    def final_norm(self, x: torch.Tensor) -> torch.Tensor:
        """The final layer norm: what the output head reads (the "feature" of Medusa and EAGLE)."""
        return F.layer_norm(x, (self.config.d_model,), self.p("ln_f.g"), self.p("ln_f.b"), eps=1e-5)

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """The output projection (the token embedding transposed when tied)."""
        return x @ (self.p("wte").T if self.config.tied else self.p("w_out"))

    def numpy_params(self) -> dict[str, np.ndarray]:
        return {n: self.p(n).detach().float().numpy().copy() for n in self.names}

    @classmethod
    def from_numpy(cls, model: Transformer) -> "TorchGPT":
        """A float32 PyTorch copy of a numpy Transformer (used by the tests)."""
        net = cls(model.config, seed=0)
        with torch.no_grad():
            for name in net.names:
                net.p(name).copy_(torch.from_numpy(model.params[name]))
        return net


def training_ids() -> np.ndarray:
    vocab = shared_vocabulary()
    return np.concatenate([vocab.encode(load_corpus(d).train + "\n\n") for d in DOMAINS])


def heldout_slices() -> dict[str, str]:
    """The fixed held-out text on which cross-entropy is recorded: the first HELDOUT_CHARS of each domain."""
    return {d: load_corpus(d).heldout[:HELDOUT_CHARS] for d in DOMAINS}


def learning_rate(step: int, steps: int, peak: float, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay, never below 5% of ``peak``."""
    lr = peak * min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * step / steps))
    return max(lr, peak * 0.05)


def train(role: str, seed: int, steps: int | None = None, resume: bool = False,
          out_dir: Path = DATA_DIR, checkpoint_dir: Path = CHECKPOINT_DIR) -> dict:
    """Train one role; write ``out_dir/neural_<role>.npz`` and return its metrics entry."""
    s = dict(SETTINGS[role])
    steps = s["steps"] if steps is None else steps
    vocab = shared_vocabulary()
    config = TransformerConfig(vocab_size=vocab.size, block_size=BLOCK_SIZE, d_model=s["d_model"],
                               n_layers=s["n_layers"], n_heads=s["n_heads"], tied=s["tied"])
    torch.manual_seed(seed)
    data = torch.from_numpy(training_ids())
    net = TorchGPT(config, seed)
    decay = [p for n, p in net.named_parameters() if p.ndim == 2]
    no_decay = [p for n, p in net.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=s["lr"], betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(seed + 1)
    offsets = torch.arange(BLOCK_SIZE + 1)
    log, first, elapsed = [], 0, 0.0
    checkpoint = Path(checkpoint_dir) / f"{role}.pt"
    if resume and checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=False)
        if state["settings"] != dict(s, steps=steps, seed=seed):
            raise SystemExit(f"--resume: {checkpoint} was written with other settings; delete it to start afresh")
        net.load_state_dict(state["net"])
        opt.load_state_dict(state["opt"])
        gen.set_state(state["gen"])
        first, log, elapsed = state["step"], state["log"], state["elapsed"]
        print(f"{role}: resumed from step {first} ({elapsed:.0f} s done)", flush=True)
    t0 = time.time() - elapsed
    for step in range(first, steps):
        lr = learning_rate(step, steps, s["lr"], s["warmup"])
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, data.numel() - BLOCK_SIZE - 1, (s["batch"],), generator=gen)
        batch = data[starts[:, None] + offsets]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = net(batch[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, config.vocab_size), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        if step % 20 == 0 or step == steps - 1:
            bits = loss.item() / math.log(2)
            log.append((step, round(bits, 4)))
            print(f"{role} step {step:5d}  lr {lr:.2e}  train {bits:.3f} bits/char  {time.time() - t0:7.1f} s", flush=True)
        if (step + 1) % CHECKPOINT_EVERY == 0 and step + 1 < steps:
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"settings": dict(s, steps=steps, seed=seed), "net": net.state_dict(), "opt": opt.state_dict(),
                        "gen": gen.get_state(), "step": step + 1, "log": log, "elapsed": time.time() - t0},
                       checkpoint.with_suffix(".tmp"))
            checkpoint.with_suffix(".tmp").replace(checkpoint)
    seconds = time.time() - t0

    Path(out_dir).mkdir(parents=True, exist_ok=True)
    path = Path(out_dir) / f"neural_{role}.npz"
    save_transformer(Transformer(config, net.numpy_params()), path, vocabulary=vocab.chars, role=role, seed=seed)
    ce = evaluate(load_transformer(path))  # what ships: the float16-rounded weights, run by numpy
    print(f"{role}: held-out {ce} bits/char, {seconds:.0f} s, {path.stat().st_size / 1e6:.2f} MB", flush=True)
    return {
        "config": {k: getattr(config, k) for k in ("vocab_size", "block_size", "d_model", "n_layers", "n_heads", "tied")},
        "parameters": config.n_parameters(),
        "file_bytes": path.stat().st_size,
        "seed": seed, "steps": steps, "batch": s["batch"], "lr": s["lr"], "warmup": s["warmup"],
        "train_seconds": round(seconds, 1),
        "train_log_bits_per_char": log,
        "heldout_bits_per_char": ce,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", choices=["target", "draft", "both"], default="both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (results depend on it)")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint in training/checkpoints/")
    parser.add_argument("--deterministic", action="store_true",
                        help="torch.use_deterministic_algorithms(True): not needed on the CPU (see README), 1.3-2.4x slower")
    parser.add_argument("--steps", type=int, default=None, help="override the number of steps (for a quick try)")
    parser.add_argument("--evaluate", action="store_true",
                        help="train nothing: recompute the held-out cross-entropy of the shipped weights")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(args.deterministic)

    roles = ["target", "draft"] if args.role == "both" else [args.role]
    for role in roles:
        if args.evaluate:
            entry = _read_metrics()["models"][role]
            entry["heldout_bits_per_char"] = evaluate(load_transformer(DATA_DIR / f"neural_{role}.npz"))
            print(f"{role}: held-out {entry['heldout_bits_per_char']} bits/char", flush=True)
        else:
            entry = train(role, args.seed, args.steps, args.resume)
        # Re-read just before writing, so that the two roles can train at once in two processes.
        metrics = _read_metrics()
        metrics["models"][role] = entry
        _write_metrics(metrics, args.threads, args.deterministic)  # after each model, so a stopped run keeps what it finished
    return 0


def evaluate(model: Transformer) -> dict[str, float]:
    """Held-out cross-entropy (bits/char) of a numpy model on each domain's fixed slice."""
    vocab = shared_vocabulary()
    return {d: round(heldout_cross_entropy(model, vocab.encode(t)), 6) for d, t in heldout_slices().items()}


def _read_metrics() -> dict:
    return json.loads(METRICS_FILE.read_text()) if METRICS_FILE.is_file() else {"models": {}}


def _write_metrics(metrics: dict, threads: int, deterministic: bool) -> None:
    metrics.update({
        "deterministic_algorithms": deterministic,
        "python_version": platform.python_version(),
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "threads": threads,
        "block_size": BLOCK_SIZE,
        "training_data": "training parts of both speclib.corpora domains (prose and code), concatenated",
        "heldout": {d: {"chars": len(t), "sha256": hashlib.sha256(t.encode("utf-8")).hexdigest()}
                    for d, t in heldout_slices().items()},
    })
    METRICS_FILE.write_text(json.dumps(metrics, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())

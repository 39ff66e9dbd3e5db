"""The book's pair and drafters on an accelerator: r(k+1), c, acceptance and the speed-up, with provenance.

Run on a machine with a CUDA GPU and PyTorch (nothing else beyond what speclib needs)::

    python3 benchmarks/accelerator.py --device cuda --commit $(git rev-parse HEAD)

Every network of the book (the target, the separate and distilled drafts, the early exit,
EAGLE's block and Medusa's heads) runs its passes in PyTorch on the device
(``Transformer.with_device``), in float32 with TF32 off; the decoding loops, the sampling
and the verification rule run on the host as they always do, so each pass ends by bringing
its logits back.  The script measures, in this order:

1. ``agreement``: the largest difference between the device's logits and numpy's for every
   network on the same held-out text (fed a few tokens at a time, with rollbacks and the
   window's moves), and whether speculative decoding gives the same tokens either way for
   every drafter (same seed).
2. ``isolated``: cached passes of the target over 1..16 new tokens after 64
   (:func:`speclib.lm.transformer.pass_times`), on the device and, for comparison, numpy's
   pass on this machine's processor (one BLAS thread).
3. ``cost``: each drafter's ``c`` inside the loop (:func:`speclib.lm.drafters.draft_costs`).
4. ``drafters``: the paired wall-clock speed-up over cached plain decoding at every ``k``
   for every drafter (``benchmarks/drafters.py``'s ``measure``: median and middle half,
   acceptance, ``c`` and ``r(k+1)`` inside the runs).

and writes all of it with its provenance to ``speclib/data/accelerator_pair.json``, the
record chapter 7 shows beside the CPU figures (checked by
:func:`speclib.book.accelerator.check_accelerator_record`).  ``--device cpu --quick`` runs the
same code on PyTorch's CPU build in a few seconds, with a record marked ``quick`` that the
book refuses: the test of the script.  ``--prompts FILE`` reads the prompts (JSON lists of
token ids) instead of choosing them from this Python's standard library, so that a machine
with another Python runs the prompts the book's figures ran.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from drafters import check_device, measure, prompts_at_line_starts  # noqa: E402

from speclib.book.accelerator import (ACCELERATOR_RECORD, NETWORKS, check_accelerator_record,  # noqa: E402
                                      stepped_logit_difference)
from speclib.book.wallclock import processor_summary  # noqa: E402
from speclib.core.decoding import speculative_generate  # noqa: E402
from speclib.lm.corpora import load_corpus, shared_vocabulary  # noqa: E402
from speclib.lm.drafters import DRAFTER_NAMES, draft_costs, load_drafter, load_drafter_model  # noqa: E402
from speclib.lm.transformer import load_pair, pass_times  # noqa: E402

#: The full run and the quick one (the script's test): draft lengths, repetitions, sizes.
SETTINGS = {
    "full": {"ks": list(range(1, 9)), "reps": 5, "n_new": 100, "prompt_chars": 40, "pass_tokens": list(range(1, 17)),
             "pass_repeats": 100, "host_repeats": 30, "cost_prompts": 20, "agreement_tokens": 300},
    "quick": {"ks": [1, 3], "reps": 1, "n_new": 12, "prompt_chars": 40, "pass_tokens": [1, 2, 4],
              "pass_repeats": 3, "host_repeats": 3, "cost_prompts": 2, "agreement_tokens": 40},
}


def networks(device: str) -> dict:
    """The book's networks as (numpy model, the same model on ``device``)."""
    target, draft = load_pair()
    out = {"target": target, "pair": draft}
    for name in ("distilled", "early-exit"):
        out[name] = load_drafter_model(name, target=target)
    return {name: (model, model.with_device(device)) for name, model in out.items()}


def agreement(device: str, n_tokens: int, prompts: list, n_new: int) -> dict:
    """Largest |logit difference| per network, and per drafter whether the device's tokens are numpy's."""
    ids = shared_vocabulary().encode(load_corpus("code").heldout[:n_tokens])
    logits = {name: stepped_logit_difference(host, dev, ids) for name, (host, dev) in networks(device).items()}
    same = {}
    for name in DRAFTER_NAMES:
        runs = []
        for place in (None, device):
            drafter = load_drafter(name, device=place)
            runs.append([speculative_generate(drafter.target, drafter, p, n_new, 4, rng=j)[0].tolist()
                         for j, p in enumerate(prompts)])
        same[name] = sum(x == y for x, y in zip(*runs)) / len(prompts)
    return {"max_abs_logit_difference": logits, "same_tokens_fraction": same, "tokens_fed": int(ids.size)}


def isolated(model, counts: list, repeats: int) -> dict:
    times = pass_times(model, tuple(counts), repeats=repeats)
    med = np.median(times.seconds, axis=0)
    lo, hi = np.percentile(times.seconds, [25, 75], axis=0)
    return {"n_tokens": counts, "median_ms": (1e3 * med).round(5).tolist(), "q25_ms": (1e3 * lo).round(5).tolist(),
            "q75_ms": (1e3 * hi).round(5).tolist(), "r": (med / med[0]).round(4).tolist(), "repeats": repeats}


def device_summary(device: str) -> dict:
    import torch

    from speclib.lm.torch_pass import full_float32

    with full_float32():  # as every pass runs
        tf32 = bool(torch.backends.cuda.matmul.allow_tf32)
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": device, "tf32": tf32}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        out.update({"name": props.name, "memory_gib": round(props.total_memory / 2**30, 1),
                    "multiprocessors": props.multi_processor_count})
        try:
            out["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out["driver"] = None
    else:
        out["name"] = "PyTorch's CPU device"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="the PyTorch device (default cuda)")
    parser.add_argument("--commit", default="", help="the git commit the code came from")
    parser.add_argument("--prompts", help="JSON file of prompts (lists of token ids)")
    parser.add_argument("--write-prompts", metavar="FILE", help="write this Python's prompts to FILE and stop")
    parser.add_argument("--quick", action="store_true", help="a few seconds' run, to test the script")
    parser.add_argument("--out", default=str(ACCELERATOR_RECORD), help="where the record goes")
    args = parser.parse_args(argv)
    s = SETTINGS["quick" if args.quick else "full"]
    check_device(parser, args.device)
    if args.write_prompts:
        chosen = [p.tolist() for p in prompts_at_line_starts("code", s["prompt_chars"])]
        Path(args.write_prompts).write_text(json.dumps(chosen))
        return 0
    if args.prompts:
        prompts = [np.array(p, dtype=np.int64) for p in json.loads(Path(args.prompts).read_text())]
    else:
        prompts = prompts_at_line_starts("code", s["prompt_chars"])
    started = time.perf_counter()
    record = {"provenance": {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": args.commit, "command": " ".join(["benchmarks/accelerator.py", *(argv or sys.argv[1:])]),
        "accelerator": device_summary(args.device), "host": processor_summary(),
        "python": platform.python_version(), "numpy": np.__version__, "quick": args.quick}}
    record["settings"] = {"domain": "code", "temperature": 1.0, "prompts": [p.tolist() for p in prompts], **s}
    print(record["provenance"], flush=True)
    record["agreement"] = agreement(args.device, s["agreement_tokens"], prompts, s["n_new"])
    print("agreement", record["agreement"], flush=True)
    target = load_pair()[0]
    record["isolated"] = {"device": isolated(target.with_device(args.device), s["pass_tokens"], s["pass_repeats"]),
                          "host_numpy": isolated(target, s["pass_tokens"], s["host_repeats"])}
    print("isolated", {k: v["r"] for k, v in record["isolated"].items()}, flush=True)
    costs = draft_costs(list(NETWORKS), n_prompts=s["cost_prompts"], n_new=s["n_new"], device=args.device)
    record["cost"] = {name: cost.summary() for name, cost in costs.items()}
    print("cost", {n: c["c"] for n, c in record["cost"].items()}, flush=True)
    record["drafters"] = measure(DRAFTER_NAMES, "code", 1.0, s["ks"], s["prompt_chars"], s["n_new"], s["reps"],
                                 device=args.device, prompts=prompts)
    for name, r in record["drafters"].items():
        print(name, "best k", r["best_k"], r["best_speedup"], (r["best_q25"], r["best_q75"]), flush=True)
    record["provenance"]["seconds"] = round(time.perf_counter() - started, 1)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")  # written first: a measurement is never lost
    print("wrote", args.out, "in", record["provenance"]["seconds"], "s")
    if not args.quick:
        check_accelerator_record(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The paired wall-clock speed-up of every drafter of the book's target over cached plain decoding.

    .venv/bin/python benchmarks/drafters.py                  # all drafters, k = 1..8, code, T = 1
    .venv/bin/python benchmarks/drafters.py --json out.json  # also write the figures
    .venv/bin/python benchmarks/drafters.py --drafters medusa eagle --reps 2
    .venv/bin/python benchmarks/drafters.py --compiled       # every network's pass compiled (numba)
    python3 benchmarks/drafters.py --device cuda             # every network's pass in PyTorch on a GPU

For each drafter of :func:`speclib.lm.drafters.load_drafter`, one
:func:`speclib.book.wallclock.wallclock_experiment` times plain decoding and speculative
decoding at every ``k`` on the same prompts, seeds and repetitions, interleaved, on one BLAS
thread (chapter 9's machinery: the loops themselves, with their ``timings``).  The speed-up
of a run is the plain run's seconds over the speculative run's, for the same prompt and
repetition; the table gives their median and middle half, the acceptance rate (accepted /
verified), ``c`` (the median one-token draft pass over the median plain target pass ``t1``;
for Medusa one pass evaluates all heads), ``r(k+1)``, tokens per target pass, and the time
per step outside both models' passes (the loop's sampling, verification rule and roll-backs),
in units of ``t1``, which the cost model leaves out.

For Medusa and EAGLE the target is ``drafter.target``, whose cache also keeps the hidden
states, in the plain runs too (one copy of ``d_model`` floats per token, negligible).
With ``--compiled`` the target and every network drafter run their passes as one compiled
call each (``Transformer.compiled``), plain decoding included: the same arithmetic without
numpy's overhead per operation.  Prints ratios and asserts nothing: the goal (1.5x at the
best ``k`` on code at T = 1) is reported, not tested.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from speclib.book.wallclock import processor_summary, wallclock_experiment
from speclib.lm.corpora import load_corpus, shared_vocabulary
from speclib.lm.drafters import DATA_DIR, DRAFTER_FILES, DRAFTER_NAMES, load_drafter

GOAL = 1.5


def prompts_at_line_starts(domain: str, n_prompt: int, fractions=(0.2, 0.5, 0.8)) -> list[np.ndarray]:
    """Prompts of ``n_prompt`` held-out characters starting at lines near ``fractions`` of the text
    (as chapter 9 chooses them)."""
    text = load_corpus(domain).heldout
    vocab = shared_vocabulary()
    starts = [text.index("\n", int(f * len(text))) + 1 for f in fractions]
    return [vocab.encode(text[s:s + n_prompt]) for s in starts]


def measure(names, domain: str, temperature: float, ks, n_prompt: int, n_new: int, reps: int,
            seed: int = 0, compiled: bool = False, device: str | None = None, prompts=None) -> dict:
    prompts = prompts_at_line_starts(domain, n_prompt) if prompts is None else prompts
    out = {}
    for name in names:
        drafter = load_drafter(name, temperature, domain, compiled=compiled, device=device)
        t0 = time.perf_counter()
        run = wallclock_experiment(drafter.target, drafter, prompts, n_new=n_new, ks=ks, reps=reps, seed=seed)
        s = run.speedups()
        med = np.median(s, axis=1)
        lo, hi = np.percentile(s, [25, 75], axis=1)
        best_k, best, best_lo, best_hi = run.best()
        steps = run.steps.reshape(len(run.ks), -1).sum(axis=1)
        out[name] = {
            "ks": run.ks[1:].tolist(),
            "speedup_median": med[1:].round(4).tolist(),
            "speedup_q25": lo[1:].round(4).tolist(),
            "speedup_q75": hi[1:].round(4).tolist(),
            "acceptance": run.acceptance[1:].round(4).tolist(),
            "c": run.c[1:].round(4).tolist(),
            "r": run.verify_ratio[1:].round(4).tolist(),
            "tokens_per_pass": run.tokens_per_pass[1:].round(4).tolist(),
            # the loop's own work per step (sampling, the rule, roll-backs), in one-token target passes
            "outside_per_step": run.outside_per_step[1:].round(4).tolist(),
            "outside_per_token_plain": round(float(run.outside_per_step[0]), 4),
            "draft_passes_per_step": (run.draft_passes.reshape(len(run.ks), -1).sum(axis=1)
                                      / steps)[1:].round(4).tolist(),
            "t1_ms": round(1e3 * run.t1, 4),
            "best_k": best_k, "best_speedup": round(best, 4),
            "best_q25": round(best_lo, 4), "best_q75": round(best_hi, 4),
            "seconds": round(time.perf_counter() - t0, 1),
        }
    return out


def report(results: dict) -> str:
    lines = []
    for name, r in results.items():
        lines.append(f"\n{name}  (t1 = {r['t1_ms']:.3f} ms, measured in {r['seconds']:.0f} s)")
        lines.append("   k  speed-up  middle half    alpha      c   r(k+1)  tokens/pass  draft passes/step  outside/step")
        for i, k in enumerate(r["ks"]):
            lines.append(f"  {k:2d}  {r['speedup_median'][i]:7.2f}x  {r['speedup_q25'][i]:5.2f} - "
                         f"{r['speedup_q75'][i]:5.2f}  {r['acceptance'][i]:6.3f}  {r['c'][i]:6.3f}  "
                         f"{r['r'][i]:6.2f}  {r['tokens_per_pass'][i]:10.2f}  {r['draft_passes_per_step'][i]:10.2f}"
                         f"  {r['outside_per_step'][i]:12.3f}")
    lines.append("\nbest k per drafter (median speed-up over cached plain decoding, middle half):")
    for name, r in results.items():
        mark = "meets" if r["best_speedup"] >= GOAL else "misses"
        lines.append(f"  {name:<11} k = {r['best_k']}: {r['best_speedup']:.2f}x "
                     f"({r['best_q25']:.2f} - {r['best_q75']:.2f})  {mark} the {GOAL}x goal")
    return "\n".join(lines)


def check_device(parser: argparse.ArgumentParser, device: str) -> None:
    """Stop with a one-line error when PyTorch is missing or cannot use ``device``."""
    try:
        from speclib.lm.torch_pass import device_of

        device_of(device)
    except ValueError as exc:  # its message starts "device: "
        parser.error(f"--{exc}")
    except ImportError as exc:
        parser.error(f"--device: {exc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drafters", nargs="+", choices=DRAFTER_NAMES, default=list(DRAFTER_NAMES))
    parser.add_argument("--domain", choices=["code", "prose"], default="code")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--ks", type=int, nargs="+", default=list(range(1, 9)))
    parser.add_argument("--prompt-chars", type=int, default=40)
    parser.add_argument("--new-tokens", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--compiled", action="store_true", help="run every network's pass compiled (numba)")
    parser.add_argument("--device", help="run every network's pass on this PyTorch device (cuda, cpu)")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    args = parser.parse_args(argv)
    if args.compiled and args.device:
        parser.error("--compiled and --device: choose one (a compiled pass runs on the host)")
    if args.device:
        check_device(parser, args.device)
    names = [n for n in args.drafters if n not in DRAFTER_FILES or (DATA_DIR / DRAFTER_FILES[n]).is_file()]
    for n in sorted(set(args.drafters) - set(names)):
        print(f"{n}: no weights in speclib/data (train them with training/train_drafters.py); skipped")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    passes = f"on {args.device}" if args.device else "compiled" if args.compiled else "numpy"
    print(f"{args.domain}, T = {args.temperature:g}, k = {args.ks}, {args.reps} repetitions x 3 prompts of "
          f"{args.prompt_chars} characters, {args.new_tokens} new tokens; load average {load:.1f} "
          f"on {os.cpu_count()} cores; passes {passes}")
    print(processor_summary())
    results = measure(names, args.domain, args.temperature, args.ks, args.prompt_chars, args.new_tokens,
                      args.reps, compiled=args.compiled, device=args.device)
    print(report(results))
    if args.json:
        meta = {"domain": args.domain, "temperature": args.temperature, "reps": args.reps,
                "prompts": 3, "prompt_chars": args.prompt_chars, "new_tokens": args.new_tokens,
                "load_average_at_start": load, "load_average_at_end": os.getloadavg()[0],
                "passes": passes, "processor": processor_summary(),
                "python": platform.python_version(), "numpy": np.__version__,
                "time": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "drafters": results}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

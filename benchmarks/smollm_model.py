"""What the real model costs here: memory to load SmolLM2-135M-Instruct, and a pass over 1 and 8 tokens.

    .venv/bin/python benchmarks/smollm_model.py                 # both layouts, 20 repeats
    .venv/bin/python benchmarks/smollm_model.py --layout q8 --repeats 50 --json out.json

Each layout (``f32``: the weights decoded to float32; ``q8``: the file's codes at one byte a
weight, speclib.lm.quant) runs in a fresh Python process, so that its peak memory is its own:

* **peak RSS of loading**: the process's largest resident size (``ru_maxrss``) after
  ``load_smollm2``, with the imports it needs (numpy, speclib, tokenizers) included; the size of
  the imports alone is printed beside it;
* **peak RSS of a short run**: the same after a 64-token prompt and 32 greedy tokens
  (speclib's ``autoregressive_generate``), what a notebook that runs the model holds at least;
* **a pass over n = 1 and n = 8 new tokens** after a 64-token prefix (extend, then roll back),
  on one BLAS thread, for the numpy pass and (with numba) the compiled one
  (``Llama.with_compiled``), every (pass, size) pair interleaved in random order in every
  repeat, each timed pass after an untimed one of the same pair; medians and quartiles, and
  r(8) = t(8) / t(1) of each pass (in both halves of the repeats, to see it settle).

The first line names the processor, the BLAS kernel and the load average.  Prints figures and
asserts nothing; the notebook goal it is read against: peak memory below 1.5 GB.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COUNTS = (1, 8)
PREFIX = 64


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def child(layout: str, repeats: int, seed: int = 0) -> dict:
    import numpy as np

    import tokenizers  # noqa: F401  (imported by the load; counted in the baseline)

    from speclib.core.decoding import autoregressive_generate
    from speclib.lm import kernel
    from speclib.lm.smollm import load_smollm2
    from speclib.lm.transformer import blas_threads

    base = rss_mb()
    t0 = time.perf_counter()
    model = load_smollm2(layout=layout)
    loaded = {"imports_mb": round(base, 1), "load_peak_mb": round(rss_mb(), 1),
              "load_seconds": round(time.perf_counter() - t0, 2), "weights_mb": round(model.nbytes / 2**20, 1)}
    rng = np.random.default_rng(seed)
    variants = {"numpy": model}
    if kernel.available():
        variants["compiled"] = model.with_compiled()
    with blas_threads(1):
        autoregressive_generate(model.with_temperature(0), rng.integers(0, model.vocab_size, 64), 32, rng=0)
        loaded["run_peak_mb"] = round(rss_mb(), 1)
        prefix, new = rng.integers(0, model.vocab_size, PREFIX), rng.integers(0, model.vocab_size, max(COUNTS))
        caches = {}
        for name, m in variants.items():
            caches[name] = m.cache(capacity=PREFIX + max(COUNTS))
            caches[name].extend_logits(prefix)
        pairs = [(name, j) for name in variants for j in range(len(COUNTS))]
        seconds = {name: np.empty((repeats, len(COUNTS))) for name in variants}
        for r in range(-1, repeats):
            for i in rng.permutation(len(pairs)):
                name, j = pairs[i]
                for timed in (False, True):
                    t0 = time.perf_counter()
                    caches[name].extend_logits(new[:COUNTS[j]])
                    elapsed = time.perf_counter() - t0
                    caches[name].rollback(PREFIX)
                    if timed and r >= 0:
                        seconds[name][r, j] = elapsed
    loaded["passes"] = {}
    for name, sec in seconds.items():
        q25, med, q75 = np.percentile(sec, [25, 50, 75], axis=0)
        loaded["passes"][name] = {
            "ms": {str(n): {"median": round(1e3 * med[j], 2), "q25": round(1e3 * q25[j], 2),
                            "q75": round(1e3 * q75[j], 2)} for j, n in enumerate(COUNTS)},
            "r8": round(float(med[1] / med[0]), 3),
            "r8_halves": [round(float(np.median(h[:, 1]) / np.median(h[:, 0])), 3) for h in np.array_split(sec, 2)]}
    return loaded


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layout", choices=("f32", "q8", "both"), default="both")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.repeats)))
        return 0
    from speclib.book.wallclock import processor_summary

    print(processor_summary())
    out = {"processor": processor_summary(), "repeats": args.repeats, "layouts": {}}
    for layout in (("f32", "q8") if args.layout == "both" else (args.layout,)):
        done = subprocess.run([sys.executable, __file__, "--child", layout, "--repeats", str(args.repeats)],
                              capture_output=True, text=True, cwd=ROOT)
        if done.returncode:
            print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}")
            return done.returncode
        fig = json.loads(done.stdout.strip().splitlines()[-1])
        out["layouts"][layout] = fig
        print(f"{layout}: weights {fig['weights_mb']} MB; peak RSS {fig['load_peak_mb']} MB after loading "
              f"({fig['load_seconds']} s; imports alone {fig['imports_mb']} MB), {fig['run_peak_mb']} MB after a "
              f"64-token prompt and 32 greedy tokens")
        for name, f in fig["passes"].items():
            p = f["ms"]
            print(f"  {name} pass: 1 token {p['1']['median']} ms [{p['1']['q25']}, {p['1']['q75']}], 8 tokens "
                  f"{p['8']['median']} ms [{p['8']['q25']}, {p['8']['q75']}]; r(8) {f['r8']} "
                  f"(halves {f['r8_halves'][0]}, {f['r8_halves'][1]})")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

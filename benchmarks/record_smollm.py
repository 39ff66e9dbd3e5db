#!/usr/bin/env python3
"""The real model's record: what the book states about SmolLM2-135M-Instruct on this processor.

    .venv/bin/python benchmarks/record_smollm.py --engines-json benchmarks/results/smollm_engines.json
    .venv/bin/python benchmarks/record_smollm.py --quick --engines-json /tmp/e.json --out /tmp/r.json

Writes ``speclib/data/record_smollm.json`` (read with the book's other records,
:mod:`speclib.book.record`) from

1. **the target's passes**, measured here: a pass of the compiled model over n = 1 .. 16 new
   tokens after a 64-token prefix, each layout (``q8``: the file's numbers at one byte a
   weight; ``f32``: decoded to float32), every count once per repeat in a fresh order
   (:func:`speclib.lm.transformer.pass_times`), one thread; ``t1_ms`` and ``r<n>`` with the
   middle half of the per-repeat ratios; and numpy's own matrix-vector products over the same
   float32 matrices, the reference a one-token pass is held against;
2. **the engines' run** (``benchmarks/smollm_engines.py``'s JSON, its provenance kept under
   ``engines``): per engine, setting, temperature and task (each family, ``grounded`` = the
   three families that give the answer's text, ``all``), the decoding rate (new tokens after
   the first step over the seconds after it) and the speed-up over the engine's own plain
   decoding, both pooled over the task's prompts within a repetition ("all their tokens over
   all their time"), then the median and range over repetitions; speclib's speed-up over
   llama.cpp's plain decoding paired the same way; for speclib's settings the acceptance
   (drafts kept over drafts judged, pooled) and the cost model's prediction from the pass
   table: plain decoding's one-token passes over the passes the run made (``r(k+1)`` for a
   step of k drafts, ``c`` per draft pass), without the loop's own work;
3. **the trained draft's record** (``speclib/data/smollm_draft_loop.json``): its acceptance per
   family and temperature with its interval, and ``c``.

Names: ``decode_tokens_per_s/speclib-lookup/k8/T0/grounded/q8/cpu``,
``speedup/llamacpp-lookup/k3/T1/open/ggml/cpu``, ``r4/smollm/isolated/q8/cpu``... (engine and
setting kind in the subject; ``q8`` speclib's passes, ``torch`` transformers', ``ggml``
llama.cpp's).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from speclib.book.record import FORMAT, name, provenance, write_record  # noqa: E402

OUT = ROOT / "speclib" / "data" / "record_smollm.json"
COUNTS = tuple(range(1, 10)) + (12, 16)
GROUNDED = ("code_edit", "summary", "quote")
PASSES = {"speclib": "q8", "transformers": "torch", "llama.cpp": "ggml"}
SUBJECT = {"speclib": "speclib", "transformers": "transformers", "llama.cpp": "llamacpp"}


def _quantity(values, n=None, interval="the middle half (25th to 75th percentile) over repeats",
              spread: str = "range") -> dict:
    """Median and quartiles of ``values``; its interval (``low``, ``high``) the range
    (``spread="range"``, for a few repetitions) or the middle half (``"middle"``, for many
    repeats, where the range is set by the one pass the machine interrupted)."""
    values = np.asarray(values, dtype=float)
    q25, med, q75 = np.percentile(values, [25, 50, 75])
    out = {"value": float(med), "q25": float(q25), "q75": float(q75), "n": int(n if n is not None else values.size)}
    if values.size > 1 and spread == "range":
        out.update(low=float(values.min()), high=float(values.max()), interval="the range over repetitions")
    elif values.size > 1:
        out.update(low=float(q25), high=float(q75), interval="the middle half (25th to 75th percentile) over repeats")
    return out


# --- 1. the target's passes -------------------------------------------------------------------------

def pass_table(repeats: int) -> tuple[dict, dict]:
    """The quantities of the target's isolated passes, and ``{layout: median seconds per count}``."""
    from speclib.lm.smollm import load_smollm2
    from speclib.lm.transformer import blas_threads, pass_times

    quantities, medians = {}, {}
    gemv = []
    for layout in ("q8", "f32"):
        model = load_smollm2(layout=layout).with_compiled()
        pt = pass_times(model, COUNTS, repeats=repeats, prefix_length=64)
        seconds = pt.seconds  # (repeats, counts)
        medians[layout] = dict(zip(map(int, pt.n_tokens), np.median(seconds, axis=0)))
        quantities[name("t1_ms", "smollm", where="isolated", passes=layout, device="cpu")] = \
            _quantity(1e3 * seconds[:, 0], spread="middle")
        quantities[name("weights_mib", "smollm", passes=layout)] = {"value": model.nbytes / 2**20}
        for j, n in enumerate(pt.n_tokens[1:], start=1):
            quantities[name(f"r{int(n)}", "smollm", where="isolated", passes=layout, device="cpu")] = \
                _quantity(seconds[:, j] / seconds[:, 0], spread="middle")
        if layout == "f32":  # numpy's own one-row products over the same float32 matrices
            mats = [m.codes for b in model.blocks for m in (b.qkv, b.wo, b.gate_up, b.down)] + [model.head.codes]
            x = {w.shape[1]: np.ones((1, w.shape[1]), np.float32) for w in mats}
            with blas_threads(1):
                for _ in range(2 + repeats):
                    t0 = time.perf_counter()
                    for w in mats:
                        x[w.shape[1]] @ w.T
                    gemv.append(time.perf_counter() - t0)
            quantities[name("ms", "numpy-gemv", where="isolated", passes="f32", device="cpu")] = \
                _quantity(1e3 * np.array(gemv[2:]), spread="middle")
        del model
    return quantities, medians


# --- 2. the engines' run ------------------------------------------------------------------------------

def _kind(setting: str) -> tuple[str, int | None]:
    if setting == "plain":
        return "plain", None
    kind, k = setting.rsplit("-", 1)
    return kind, int(k)


def _decoding(run: dict) -> tuple[int, float]:
    """(new tokens after the first step, seconds after it) of one run."""
    first = run["first_tokens"]
    seconds = run["seconds"] - (run["prefill_seconds"] or 0.0)
    return run["new_tokens"] - first, seconds


def _predicted(run: dict, t: dict, c: float) -> float | None:
    """Plain decoding's passes over the passes this run made, from the pass table ``t`` (seconds by count)."""
    ks = run.get("extra", {}).get("k_per_step")
    if not ks or len(ks) < 2:
        return None
    later = ks[1:]  # the first step read the prompt
    emitted = run["new_tokens"] - run["first_tokens"]
    # the draft passes of the later steps: one per draft (EAGLE drafts one token a pass)
    counts = sorted(t)
    spent = sum(np.interp(k + 1, counts, [t[n] for n in counts]) for k in later) + c * t[1] * sum(later)
    return emitted * t[1] / spent if spent > 0 else None


def engine_quantities(record: dict, t_q8: dict, c_draft: float | None) -> dict:
    runs = record["runs"]
    families = record["settings"]["families"]
    tasks = {f: (f,) for f in families}
    if all(f in families for f in GROUNDED):
        tasks["grounded"] = GROUNDED
    tasks["all"] = tuple(families)
    reps = sorted({r["repetition"] for r in runs})
    index = {}
    for r in runs:
        index.setdefault((r["engine"], r["setting"], r["temperature"], r["repetition"]), []).append(r)
    out = {}
    for engine, settings in record["settings"]["engines"].items():
        passes = PASSES.get(engine)
        for setting in settings:
            kind, k = _kind(setting)
            subject = f"{SUBJECT.get(engine, engine)}-{kind}"
            for T in record["settings"]["temperatures"]:
                for task, fams in tasks.items():
                    rates, speedups, over_llamacpp, kept, judged, predicted = [], [], [], 0, 0, []
                    for rep in reps:
                        mine = [r for r in index.get((engine, setting, T, rep), []) if r["family"] in fams]
                        plain = {r["prompt"]: r for r in index.get((engine, "plain", T, rep), []) if r["family"] in fams}
                        if not mine:
                            continue
                        tok, sec = map(sum, zip(*map(_decoding, mine)))
                        rates.append(tok / sec)
                        ptok, psec = map(sum, zip(*(_decoding(plain[r["prompt"]]) for r in mine)))
                        speedups.append((tok / sec) / (ptok / psec))
                        other = {r["prompt"]: r for r in index.get(("llama.cpp", "plain", T, rep), [])}
                        if engine == "speclib" and all(r["prompt"] in other for r in mine):
                            otok, osec = map(sum, zip(*(_decoding(other[r["prompt"]]) for r in mine)))
                            over_llamacpp.append((tok / sec) / (otok / osec))
                        for r in mine:
                            kept += r.get("extra", {}).get("accepted", 0)
                            judged += r.get("extra", {}).get("draft_verified", 0)
                            if engine == "speclib" and kind != "plain":
                                p = _predicted(r, t_q8, c_draft if kind == "draft" else 0.0)
                                if p is not None:
                                    predicted.append(p)
                    if not rates:
                        continue
                    keys = dict(k=k, T=T, task=task, passes=passes, device="cpu")
                    out[name("decode_tokens_per_s", subject, **keys)] = _quantity(rates)
                    if kind != "plain":
                        out[name("speedup", subject, **keys)] = _quantity(speedups)
                        if predicted:
                            out[name("predicted", subject, **keys)] = _quantity(
                                predicted, interval="the middle half over runs")
                        if judged:
                            out[name("alpha", subject, k=k, T=T, task=task, where="loop")] = {
                                "value": kept / judged, "n": judged}
                    if over_llamacpp:
                        out[name("speedup", f"{subject}-over-llamacpp-plain", **keys)] = _quantity(over_llamacpp)
    return out


def greedy_identity(record: dict) -> dict:
    """Per engine and setting at T = 0: runs identical to the engine's own plain output, runs
    compared, and the first differing position of each that differs."""
    out = {}
    for engine, settings in record.get("identity", {}).get("by_temperature", {}).get("0.0", {}).items():
        out[engine] = {s: {"identical": v["identical"], "compared": v["compared"],
                           "first_differences": [d["first_difference"] for d in v["differing"]]}
                       for s, v in settings.items()}
    return out


# --- 3. the trained draft ------------------------------------------------------------------------------

def draft_quantities(path: Path) -> tuple[dict, float | None, dict]:
    """The draft's record as quantities, its c, and its settings (k, the draft vocabulary's size)."""
    if not path.is_file():
        return {}, None, {}
    import numpy as np

    from speclib.lm.smollm_draft import DRAFT_FILE, load_record

    draft = load_record(path)  # checked there
    with np.load(DRAFT_FILE) as arrays:
        settings = {"k": int(draft["settings"]["k"]), "vocab": int(arrays["vocab"].size),
                    "sha256": draft["provenance"]["draft_sha256"]}
    out = {}
    k = draft["settings"]["k"]
    for T, families in draft["acceptance"].items():
        for family, a in families.items():
            low, high = a["interval95"]
            out[name("alpha", "smollm-eagle", k=k, T=float(T), task=family, where="loop")] = {
                "value": a["rate"], "low": low, "high": high, "n": a["verified"],
                "interval": "95% batch-means interval over the steps"}
    c = float(draft["cost"]["c"])
    out[name("c", "smollm-eagle", where="loop", passes="q8", device="cpu")] = {"value": c}
    out[name(f"r{k + 1}", "smollm-eagle", where="loop", passes="q8", device="cpu")] = {
        "value": float(draft["cost"]["verify_ratio"])}
    return out, c, settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines-json", type=Path, required=True, help="benchmarks/smollm_engines.py's record")
    parser.add_argument("--draft-json", type=Path, default=ROOT / "speclib" / "data" / "smollm_draft_loop.json")
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--quick", action="store_true", help="3 repeats of the passes; a test run")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if not args.engines_json.is_file():
        parser.error(f"--engines-json: no file {args.engines_json}")
    start = time.perf_counter()
    engines = json.loads(args.engines_json.read_text())
    quantities, medians = pass_table(3 if args.quick else args.repeats)
    draft, c, draft_settings = draft_quantities(args.draft_json)
    quantities.update(draft)
    quantities.update(engine_quantities(engines, medians["q8"], c))
    record = {"format": FORMAT,
              "provenance": provenance("benchmarks/record_smollm.py " + " ".join(argv or sys.argv[1:]), args.quick,
                                       time.perf_counter() - start, engines=engines["provenance"]),
              "settings": {"counts": list(COUNTS), "repeats": 3 if args.quick else args.repeats,
                           "engines": engines["settings"], "grounded": list(GROUNDED),
                           "draft": draft_settings,
                           # greedy outputs against each engine's plain ones, and tokenizations
                           "identity": greedy_identity(engines), "tokenization": engines.get("tokenization", {})},
              "quantities": quantities}
    write_record(args.out, record)
    print(f"wrote {len(quantities)} quantities to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

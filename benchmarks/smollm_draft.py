"""The real model's trained EAGLE draft inside the loop: its acceptance per family, its cost, the predicted speed-up.

    .venv/bin/python benchmarks/smollm_draft.py              # writes speclib/data/smollm_draft_loop.json
    .venv/bin/python benchmarks/smollm_draft.py --quick      # 2 prompts a family, 48 tokens: a try, not written

SmolLM2-135M-Instruct (``load_smollm2("q8")``, compiled) and its draft
(``speclib/data/smollm_draft.npz``, :mod:`speclib.lm.smollm_draft`), on the *evaluation*
prompts of :mod:`speclib.lm.smollm_tasks` (never trained on), each family in turn:

* **acceptance** per verified draft inside the one loop (``k = 4``), at T = 0 (one run per
  prompt: the answer is the greedy one) and T = 1 (three seeds per prompt), up to 192 tokens
  or the end-of-turn token, with a 95% batch-means interval over the steps
  (:func:`speclib.lm.drafters.acceptance_on_prompts`);
* **cost** ``c``: the draft's one-token pass over the target's one-token pass of plain
  decoding, and the target's r(k+1): its pass over ``k + 1`` tokens inside the loop over its
  one-token pass, both compiled, timed interleaved prompt by prompt on the open family
  (:func:`speclib.lm.drafters.pass_costs`), one BLAS thread;
* the **predicted speed-up** of each family at each temperature from those figures
  (:func:`speclib.lm.transformer.speedup_with_costs`), and at every draft length up to 4 with
  the target's isolated r(j+1) (:func:`speclib.lm.smollm_draft.measure_loop`).

Writes the record with its provenance (processor, BLAS kernel, load average, date, the draft
file's SHA-256) to ``speclib/data/smollm_draft_loop.json``
(:func:`speclib.lm.smollm_draft.load_record` reads and checks it).  The acceptance figures
are counts and do not depend on the machine's load; ``c`` and r(k+1) are wall-clock ratios:
measure them on a quiet machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="two prompts a family, 48 tokens; prints, writes nothing")
    parser.add_argument("--json", type=Path, default=None, help="where to write the record (default: the shipped one)")
    args = parser.parse_args(argv)

    import numba
    import numpy as np

    from speclib.book.wallclock import processor_summary
    from speclib.lm.smollm import load_smollm2
    from speclib.lm.smollm_draft import DRAFT_FILE, RECORD_FILE, check_record, measure_loop
    from speclib.lm.smollm_tasks import FAMILIES, evaluation_prompts
    from speclib.lm.transformer import blas_threads

    print(processor_summary(), flush=True)
    target = load_smollm2("q8").with_compiled()
    tok = target.tokenizer
    per_family = 2 if args.quick else None
    prompts = {f: [tok.encode_chat(p["messages"]) for p in evaluation_prompts(family=f, per_family=per_family)]
               for f in FAMILIES}
    t0 = time.time()
    with blas_threads(1):
        record = measure_loop(target, prompts, n_new=48 if args.quick else 192, stop=tok.eos_id,
                              cost_family="open", cost_new=32 if args.quick else 64,
                              seeds={"0": (0,), "1": (0,) if args.quick else (0, 1, 2)},
                              pass_repeats=3 if args.quick else 15)
    record["about"] = ("The EAGLE draft of SmolLM2-135M-Instruct (speclib/data/smollm_draft.npz) inside "
                       "speclib's loop on the evaluation prompts of each family: acceptance per verified draft "
                       "with a 95% batch-means interval, its cost c and the target's r(k+1) (compiled, "
                       "interleaved), and the cost model's predicted speed-up (one-token target passes as the "
                       "unit). Written by benchmarks/smollm_draft.py.")
    record["provenance"] = {
        "processor": processor_summary(), "load_average": [round(x, 2) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "seconds": round(time.time() - t0, 1),
        "python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
        "draft_sha256": hashlib.sha256(DRAFT_FILE.read_bytes()).hexdigest(),
        "command": "benchmarks/smollm_draft.py" + (" --quick" if args.quick else "")}
    check_record(record)
    for t, by in record["acceptance"].items():
        for family, m in by.items():
            by_k = record["predicted_speedup_by_k"][t][family]
            best = max(by_k, key=by_k.get)
            print(f"T = {t} {family:9s}: alpha {m['rate']:.3f} [{m['interval95'][0]:.3f}, {m['interval95'][1]:.3f}] "
                  f"over {m['verified']} verified drafts, {m['tokens_per_pass']:.2f} tokens a pass; "
                  f"predicted {record['predicted_speedup'][t][family]:.2f}x (best k = {best}: {by_k[best]:.2f}x)")
    c = record["cost"]
    print(f"c = {c['c']:.4f} (draft {c['draft_pass_ms']:.2f} ms, target {c['target_pass_ms']:.2f} ms), "
          f"r({record['settings']['k'] + 1}) = {c['verify_ratio']:.3f}; {record['provenance']['seconds']:.0f} s")
    if not args.quick or args.json is not None:
        path = RECORD_FILE if args.json is None else args.json
        path.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

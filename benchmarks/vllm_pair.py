"""The book's models in vLLM, beside speclib on the same prompts: what chapter 16 shows.

Runs the models that ``python -m speclib export`` writes through vLLM's offline ``LLM``
engine (plain decoding; ``speculative_config`` with ``method: ngram``; ``method:
draft_model`` with the book's draft, the distilled draft, the early-exit draft and the
target itself), at temperatures 0 and 1, reads its acceptance counters from
``LLM.get_metrics()``, runs speclib's loop on the same prompts with the same ``k`` (the
draft sampled, as the book's rule has it, and drafted greedily, as vLLM's proposers do), and
writes everything with its provenance to ``speclib/data/vllm_pair.json``.

Needs the optional ``requirements-engines.txt`` (a CPU build of vLLM; not installed by
``dev.py``)::

    python3 -m venv /tmp/engines && /tmp/engines/bin/pip install -r requirements-engines.txt
    /tmp/engines/bin/pip uninstall -y torchvision torchaudio torchcodec
    /tmp/engines/bin/python benchmarks/vllm_pair.py            # about half an hour on 2 cores

Every engine runs in a subprocess of its own (``--one NAME``), so that one engine's worker
processes and memory are gone before the next one starts.  Nothing is downloaded: the
models are exported from ``speclib/data`` and the hub is switched off.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "speclib" / "data" / "vllm_pair.json"
RESULT = "VLLM_PAIR_RESULT "  #: marks the child's result line among vLLM's log lines
#: Draft length, prompt length (characters), new tokens, prompts per domain, samples per prompt.
K, PROMPT_LEN, NEW_TOKENS, PROMPTS_PER_DOMAIN, SAMPLES = 4, 32, 64, 8, 4
TEMPERATURES = (0.0, 1.0)
#: n-gram lookup as vLLM's ``prompt_lookup_min`` / ``prompt_lookup_max`` and speclib's PromptLookup.
NGRAM_MIN, NGRAM_MAX = 1, 3
#: vLLM's CPU attention runs heads of 32 to 512 dimensions; the book's draft has heads of 16,
#: so it is exported widened to an equivalent network (:func:`speclib.lm.export.widen_gpt2`).
MIN_HEAD_DIM = 32
#: The engines, by name: the speculative_config of each (None: plain decoding).
ENGINES = {
    "plain": None,
    "ngram": {"method": "ngram", "num_speculative_tokens": K,
              "prompt_lookup_min": NGRAM_MIN, "prompt_lookup_max": NGRAM_MAX},
    "draft": {"method": "draft_model", "model": "draft", "num_speculative_tokens": K},
    "distilled": {"method": "draft_model", "model": "distilled", "num_speculative_tokens": K},
    "early-exit": {"method": "draft_model", "model": "early-exit", "num_speculative_tokens": K},
    "identical": {"method": "draft_model", "model": "target", "num_speculative_tokens": K},
    # vLLM's draft-model proposer drafts greedily by default and verifies against a one-hot
    # row; "probabilistic" samples the draft and keeps its row, as the book's rule does.
    "draft-probabilistic": {"method": "draft_model", "model": "draft", "num_speculative_tokens": K,
                            "draft_sample_method": "probabilistic"},
    "identical-probabilistic": {"method": "draft_model", "model": "target", "num_speculative_tokens": K,
                                "draft_sample_method": "probabilistic"},
}
SETTINGS = {"enforce_eager": True, "dtype": "float32", "max_model_len": 128, "seed": 0,
            "disable_log_stats": False, "VLLM_CPU_KVCACHE_SPACE": "2", "HF_HUB_OFFLINE": "1"}


def prompts() -> list[dict]:
    """Held-out text of each domain: ``PROMPTS_PER_DOMAIN`` prompts that start at a line start."""
    from speclib.lm.corpora import DOMAINS, load_corpus, shared_vocabulary

    vocab, chosen = shared_vocabulary(), []
    for domain in DOMAINS:
        text = load_corpus(domain).heldout
        starts = [i + 1 for i, ch in enumerate(text[:-PROMPT_LEN]) if ch == "\n" and text[i + 1].strip()]
        step = max(1, len(starts) // PROMPTS_PER_DOMAIN)
        for s in starts[::step][:PROMPTS_PER_DOMAIN]:
            piece = text[s:s + PROMPT_LEN]
            chosen.append({"domain": domain, "text": piece, "ids": vocab.encode(piece).tolist()})
    return chosen


def _expand_fixed(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):  # noqa: N803
    """vLLM's ``expand_kernel`` (one value per request spread over its draft positions) in torch.

    The CPU build's replacement converts ``output`` and ``input_val`` to int64 copies for its
    C++ kernel and never writes the result back, so a float tensor (the temperatures) comes
    out as uninitialised memory.  Same contract, any dtype.
    """
    import torch

    counts = torch.diff(cu_num_tokens.long(), prepend=cu_num_tokens.new_zeros(1).long())
    values = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
    output.copy_(torch.repeat_interleave(values, counts, output_size=output.numel()))


def diagnose_expand() -> dict:
    """What the CPU build's expand kernel returns for three temperatures spread over 2, 3, 1 positions."""
    import torch
    from vllm.platforms.cpu import CpuPlatform
    from vllm.v1.sample.rejection_sampler import GREEDY_TEMPERATURE, expand_batch_to_tokens

    CpuPlatform.import_kernels()
    CpuPlatform.register_triton_kernel_overrides()
    x = torch.tensor([0.7, 1.0, 2.0], dtype=torch.float32)
    got = expand_batch_to_tokens(x, torch.tensor([2, 5, 6]), 6, replace_from=GREEDY_TEMPERATURE, replace_to=1)
    return {"input": x.tolist(), "cu_num_tokens": [2, 5, 6], "expected": [0.7, 0.7, 1.0, 1.0, 1.0, 2.0],
            "returned": [float(v) for v in got.tolist()]}


def run_engine(name: str, folder: Path, prompt_list: list[dict], fix_expand: bool = False) -> dict:
    """One engine in this process: generate at each temperature and read its counters.

    ``fix_expand``: run the engine inside this process (no engine or worker subprocesses) with
    :func:`_expand_fixed` in place of the CPU build's expand kernel.
    """
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", SETTINGS["VLLM_CPU_KVCACHE_SPACE"])
    os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
    extra = {}
    if fix_expand:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        extra["distributed_executor_backend"] = "uni"
        import vllm.utils.cpu_triton_utils as cpu_tl

        cpu_tl._expand_kernel_impl = _expand_fixed
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    spec = ENGINES[name]
    if spec is not None and spec.get("model"):
        spec = {**spec, "model": str(folder / spec["model"])}
    started = time.perf_counter()
    llm = LLM(model=str(folder / "target"), tokenizer=str(folder / "target"), speculative_config=spec,
              enforce_eager=True, dtype="float32", max_model_len=SETTINGS["max_model_len"],
              seed=SETTINGS["seed"], disable_log_stats=False, **extra)
    load_s = time.perf_counter() - started
    requests = [TokensPrompt(prompt_token_ids=p["ids"]) for p in prompt_list]
    result = {"load_s": load_s, "temperatures": {}}
    if fix_expand:
        from vllm.v1.sample.rejection_sampler import GREEDY_TEMPERATURE, expand_batch_to_tokens
        import torch

        probe = expand_batch_to_tokens(torch.tensor([0.7, 2.0]), torch.tensor([1, 3]), 3,
                                       replace_from=GREEDY_TEMPERATURE, replace_to=1)
        result["expand_fixed"] = probe.tolist() == [0.699999988079071, 2.0, 2.0]
    for temperature in (TEMPERATURES if not fix_expand else (1.0,)):
        samples = 1 if temperature == 0.0 else SAMPLES
        params = [SamplingParams(temperature=temperature, max_tokens=NEW_TOKENS, ignore_eos=True,
                                 detokenize=False, seed=1000 * s + i)
                  for s in range(samples) for i in range(len(prompt_list))]
        before = counters(llm)
        started = time.perf_counter()
        outputs = llm.generate(requests * samples, params, use_tqdm=False)
        seconds = time.perf_counter() - started
        after = counters(llm)
        delta = {key: _minus(after.get(key, 0), before.get(key, 0)) for key in after}
        result["temperatures"][str(temperature)] = {
            "requests": len(outputs), "seconds": seconds,
            "generated": sum(len(o.outputs[0].token_ids) for o in outputs),
            "counters": delta,
            "tokens": [list(o.outputs[0].token_ids) for o in outputs[:len(prompt_list)]],
        }
    return result


def counters(llm) -> dict:
    """vLLM's speculative-decoding and generation counters, by metric name."""
    values = {}
    for metric in llm.get_metrics():
        if "spec_decode" in metric.name or metric.name == "vllm:generation_tokens":
            values[metric.name] = list(metric.values) if hasattr(metric, "values") else metric.value
    return values


def _minus(a, b):
    if isinstance(a, list):
        b = b if isinstance(b, list) else [0] * len(a)
        return [x - y for x, y in zip(a, b + [0] * (len(a) - len(b)))]
    return a - b


def run_speclib(prompt_list: list[dict]) -> dict:
    """speclib's loop on the same prompts: sampled and greedy drafts, as the engines run them."""
    import numpy as np

    from speclib.core.decoding import autoregressive_generate, speculative_generate
    from speclib.core.proposers import PromptLookup
    from speclib.lm.export import book_models
    from speclib.lm.transformer import blas_threads

    models = book_models()
    target = models["target"]
    drafts = {"draft": models["draft"], "distilled": models["distilled"],
              "early-exit": models["early-exit"], "identical": target}
    out = {}
    with blas_threads(1):
        for temperature in TEMPERATURES:
            samples = 1 if temperature == 0.0 else SAMPLES
            t = target.with_temperature(temperature)
            rows = {}
            jobs = [(f"{name}/{mode}", d.with_temperature(temperature if mode == "sampled" else 0.0))
                    for name, d in drafts.items() for mode in ("sampled", "greedy")]
            jobs.append(("ngram/greedy", PromptLookup(n_max=NGRAM_MAX, n_min=NGRAM_MIN)))
            for label, draft in jobs:
                row = {"accepted": 0, "verified": 0, "proposed": 0, "blocks": 0, "target_passes": 0, "generated": 0,
                       "accepted_per_pos": [0] * K}
                for s in range(samples):
                    for i, p in enumerate(prompt_list):
                        _, st = speculative_generate(t, draft, np.array(p["ids"]), NEW_TOKENS, K,
                                                     rng=1000 * s + i)
                        row["accepted"] += st.accepted
                        row["verified"] += st.draft_verified
                        row["proposed"] += st.draft_proposed
                        row["target_passes"] += st.target_passes
                        row["generated"] += st.tokens_generated
                        for k, kept in zip(st.k_per_step, st.accepted_per_step):
                            row["blocks"] += k > 0
                            for pos in range(min(kept, K)):
                                row["accepted_per_pos"][pos] += 1
                rows[label] = row
            plain = [autoregressive_generate(t, np.array(p["ids"]), NEW_TOKENS, rng=i)[0].tolist()
                     for i, p in enumerate(prompt_list)] if temperature == 0.0 else None
            out[str(temperature)] = {"runs": rows, **({"plain_tokens": plain} if plain else {})}
    return out


def dump(record: dict) -> str:
    """The record as JSON, indented, with every list of numbers on one line (token lists are long)."""
    import re

    text = json.dumps(record, indent=1)
    return re.sub(r"\[\s*(-?[\d.e+-]+(?:,\s*-?[\d.e+-]+)*)\s*\]",
                  lambda m: "[" + ", ".join(m.group(1).split()).replace(",,", ",") + "]", text) + "\n"


def provenance() -> dict:
    import numpy
    import torch
    import transformers
    import vllm

    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return {"date": datetime.date.today().isoformat(), "vllm": vllm.__version__, "torch": torch.__version__,
            "transformers": transformers.__version__, "numpy": numpy.__version__,
            "python": platform.python_version(), "cpu": cpu, "cores": os.cpu_count(),
            "repository_commit": commit, "script": "benchmarks/vllm_pair.py"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--one", choices=list(ENGINES), help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--engines", nargs="*", choices=list(ENGINES), default=list(ENGINES),
                        help="which engines to run (default: all)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write (default {OUT.relative_to(ROOT)})")
    parser.add_argument("--fix-expand", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--speclib-only", action="store_true",
                        help="recompute only speclib's side of an existing --out file")
    args = parser.parse_args(argv)
    prompt_list = prompts()
    if args.speclib_only:
        record = json.loads(args.out.read_text())
        record["speclib"] = run_speclib(record["prompts"])
        args.out.write_text(dump(record))
        return 0
    if args.one:  # a child: one engine, its result as JSON on a line of its own (vLLM logs to stdout too)
        print(RESULT + json.dumps(run_engine(args.one, args.folder, prompt_list, args.fix_expand)), flush=True)
        return 0
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        print(f"vllm_pair.py: needs requirements-engines.txt (a CPU build of vLLM): {exc}", file=sys.stderr)
        return 1
    from speclib.lm.export import export_pair_files

    record = {"provenance": provenance(),
              "settings": {"k": K, "prompt_chars": PROMPT_LEN, "new_tokens": NEW_TOKENS,
                           "prompts": len(prompt_list), "samples_at_T1": SAMPLES,
                           "temperatures": list(TEMPERATURES), "engine": SETTINGS,
                           "export_min_head_dim": MIN_HEAD_DIM,
                           "speculative_config": ENGINES},
              "prompts": prompt_list, "vllm": {}, "errors": {}}
    # Each engine's result is kept beside the output as it comes, so that a run stopped half
    # way resumes where it stopped (delete the folder to start afresh).
    parts = args.out.with_suffix(".parts")
    parts.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "models"
        export_pair_files(folder, min_head_dim=MIN_HEAD_DIM)
        # As the build ships, then (temperature 1 only: temperature 0 never reads the
        # temperatures) with its expand kernel replaced by a correct one.
        for key, flags in (("vllm", []), ("vllm_fixed_expand", ["--fix-expand"])):
            record[key] = {}
            for name in args.engines:
                if flags and ENGINES[name] is None:
                    continue  # plain decoding does not use the verifier's kernels
                part = parts / f"{name}{'.fixed' if flags else ''}.json"
                if part.exists():
                    record[key][name] = json.loads(part.read_text())
                    continue
                print(f"vllm_pair.py: engine {name} {' '.join(flags)}...", file=sys.stderr, flush=True)
                child = subprocess.run([sys.executable, __file__, "--one", name, "--folder", str(folder), *flags],
                                       capture_output=True, text=True)
                lines = [x for x in child.stdout.splitlines() if x.startswith(RESULT)]
                if child.returncode != 0 or not lines:
                    errors = [x for x in (child.stdout + child.stderr).splitlines() if "Error" in x]
                    record["errors"][name + " ".join(flags)] = "\n".join(errors[-3:]) or f"exit code {child.returncode}"
                    print(record["errors"][name + " ".join(flags)], file=sys.stderr)
                    continue
                record[key][name] = json.loads(lines[-1][len(RESULT):])
                part.write_text(json.dumps(record[key][name]))
    record["diagnosis"] = {"expand_kernel": diagnose_expand()}
    print("vllm_pair.py: speclib on the same prompts ...", file=sys.stderr, flush=True)
    record["speclib"] = run_speclib(prompt_list)
    args.out.write_text(dump(record))
    print(f"vllm_pair.py: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

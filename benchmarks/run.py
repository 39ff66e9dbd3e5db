#!/usr/bin/env python3
"""Benchmarks: the readable loops against the vectorized engine, and each notebook's run time.

    .venv/bin/python benchmarks/run.py                  # everything
    .venv/bin/python benchmarks/run.py --no-notebooks   # the speed measurements only (about 1 min)
    .venv/bin/python benchmarks/run.py --notebooks-only

Prints, side by side and as ratios:

1. The article's K sweep and noise sweep (2000 tokens per row), run by the book's readable
   loop (``speclib.core.decoding.speculative_generate``), by the article's own loop
   (``speclib.book.article.SpeculativeDecoder``) and by the engine (``speclib.core.engine``): the same
   number of tokens for each, and the statistics each one finds.
2. The article's whole set of experiments (its three tables and the data behind its three
   figures): the article's loop against the engine.
3. Simulated tokens per second as the number of independent streams grows from 1 to 100,000,
   for the article's fixed-context pair and a Markov pair, with the peak memory of each run.
4. The execution time of every notebook under book/ (each in a fresh kernel, not saved).

Times 1-3 are CPU seconds of this process (``time.process_time``), the best of several
repeats, so that other work on a shared machine disturbs them less; notebook times are
wall-clock seconds (the kernel is another process).  The engine's cache of samplers is
emptied before every timed repeat.  Nothing here is asserted: the tests check correctness,
this script only measures.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import platform
import re
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from speclib.book import article  # noqa: E402
from speclib.core import engine  # noqa: E402
from speclib.core.decoding import speculative_generate  # noqa: E402
from speclib.core.engine import run_fixed_steps, run_streams  # noqa: E402
from speclib.lm.models import fixed_pair, markov_pair  # noqa: E402
from speclib.core.sampling import acceptance_rate  # noqa: E402
from speclib.core.theory import expected_tokens_per_pass  # noqa: E402

K_SWEEP = {"noise": 0.3, "ks": (1, 2, 4, 8, 16)}
NOISE_SWEEP = {"k": 4, "noises": (0.0, 0.1, 0.3, 0.5, 0.8, 1.0)}
N_TOKENS = 2000  # per row of a sweep, as in the article
STREAMS = (1, 10, 100, 1_000, 10_000, 100_000)
TOKENS_PER_STREAM = 100
NOTEBOOK_LIMIT_S = 60


def best_time(fn, repeat: int):
    """Best CPU time of ``repeat`` calls, and the last call's result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        result = fn()
        best = min(best, time.process_time() - start)
    return best, result


def cold(fn):
    """``fn`` with the engine's cache of samplers emptied first, so that no repeat starts warm."""
    def run():
        engine._SAMPLERS.clear()
        return fn()
    return run


@functools.lru_cache(maxsize=None)
def pair(noise: float):
    """The article's pair: its seed-0 Dirichlet table, context 42, a noisy draft.

    Built once per noise level, before any timing: building models is neither loop's work.
    (The article's loop builds its table in its constructor, as the article's code does.)
    """
    return fixed_pair(vocab_size=64, draft_noise=noise, seed=0, context_id=article.CONTEXT_ID)


def sweeps() -> dict[str, list[tuple[int, float]]]:
    return {
        "K sweep (noise 0.3)": [(k, K_SWEEP["noise"]) for k in K_SWEEP["ks"]],
        "noise sweep (K = 4)": [(NOISE_SWEEP["k"], noise) for noise in NOISE_SWEEP["noises"]],
    }


# --- the three runners of one sweep row -------------------------------------------------------

def readable_row(k: int, noise: float, seed: int):
    target, draft = pair(noise)
    return speculative_generate(target, draft, [0], N_TOKENS, k, seed)[1]


def article_row(k: int, noise: float, seed: int):
    decoder = article.SpeculativeDecoder(draft_noise=noise, draft_k=k, seed=seed)
    return decoder.generate(article.CONTEXT_ID, N_TOKENS)[1]


def engine_row(k: int, noise: float, seed: int):
    target, draft = pair(noise)
    return run_streams(target, draft, k, 1, N_TOKENS, seed).stats()


RUNNERS = {"readable": readable_row, "article": article_row, "engine": engine_row}


def section_sweeps(repeat_loops: int, repeat_engine: int) -> None:
    print("\n1. The article's sweeps: 2000 tokens per row, one stream (CPU ms for the whole sweep)\n")
    print(f"   {'sweep':<21}{'tokens':>7}{'readable':>10}{'article':>9}{'engine':>8}"
          f"{'readable/engine':>17}{'article/engine':>16}")
    for name, rows in sweeps().items():
        ms = {}
        for label, runner in RUNNERS.items():
            repeat = repeat_engine if label == "engine" else repeat_loops
            seconds, _ = best_time(cold(lambda: [runner(k, noise, 0) for k, noise in rows]), repeat)
            ms[label] = 1e3 * seconds
        ratios = f"{ms['readable'] / ms['engine']:>16.0f}x{ms['article'] / ms['engine']:>15.0f}x"
        print(f"   {name:<21}{len(rows) * N_TOKENS:>7}{ms['readable']:>10.1f}{ms['article']:>9.1f}"
              f"{ms['engine']:>8.2f}{ratios}")

    print("\n   The same statistics (one run each, seed 0; they differ by sampling noise only):")
    print(f"   {'K':>3}{'noise':>6} | {'acceptance (accepted / verified)':^35} |"
          f" {'tokens per target pass':^35}")
    head = f"{'readable':>10}{'article':>9}{'engine':>8}"
    print(f"   {'':>9} | {head}{'alpha':>8} | {head}{'theory':>8}")
    for rows in sweeps().values():
        for k, noise in rows:
            stats = [runner(k, noise, 0) for runner in RUNNERS.values()]
            target, draft = pair(noise)
            alpha = acceptance_rate(draft.dist, target.dist)
            acc = "".join(f"{s.acceptance_rate:>{w}.3f}" for s, w in zip(stats, (10, 9, 8)))
            tpp = "".join(f"{s.tokens_per_target_pass:>{w}.2f}" for s, w in zip(stats, (10, 9, 8)))
            theory = expected_tokens_per_pass(min(alpha, 1.0), k)
            print(f"   {k:>3}{noise:>6.1f} | {acc}{alpha:>8.3f} | {tpp}{theory:>8.2f}")


# --- the article's whole set of experiments ---------------------------------------------------

def article_set_with_article_loop() -> int:
    """Every simulation the article runs: three tables, then the data of its three figures."""
    tokens = 0
    for k in K_SWEEP["ks"]:  # table 1, and the same runs again for figure 1
        tokens += article_row(k, 0.3, 0).tokens_generated + article_row(k, 0.3, 0).tokens_generated
    for noise in NOISE_SWEEP["noises"]:  # table 2
        tokens += article_row(4, noise, 0).tokens_generated
    decoder = article.SpeculativeDecoder(draft_noise=0.3, draft_k=4, seed=1)  # table 3
    tokens += decoder.generate(article.CONTEXT_ID, 500)[1].tokens_generated
    baseline = article.SpeculativeDecoder(draft_noise=0.3, draft_k=4, seed=1)
    tokens += baseline.generate_greedy(article.CONTEXT_ID, 500)[1].tokens_generated
    for noise in (0.1, 0.3, 0.8):  # figure 2: 2000 single steps at three noise levels
        decoder = article.SpeculativeDecoder(draft_noise=noise, draft_k=4, seed=0)
        tokens += sum(len(decoder.speculative_step(article.CONTEXT_ID)[0]) for _ in range(2000))
    for k in (2, 4, 8, 16):  # figure 3, then its operating point
        for noise in NOISE_SWEEP["noises"]:
            tokens += article_row(k, noise, 0).tokens_generated
    return tokens + article_row(4, 0.3, 0).tokens_generated


def article_set_with_engine() -> int:
    """The same experiments with the engine: the same tokens, statistically the same results."""
    rng = np.random.default_rng(0)

    def generate(k: int, noise: float, n_tokens: int = N_TOKENS) -> int:
        return run_streams(*pair(noise), k, 1, n_tokens, rng).stats().tokens_generated

    tokens = sum(generate(k, 0.3) + generate(k, 0.3) for k in K_SWEEP["ks"])
    tokens += sum(generate(4, noise) for noise in NOISE_SWEEP["noises"])
    tokens += generate(4, 0.3, 500)
    tokens += rng.choice(64, size=500, p=pair(0.3)[0].dist).size  # the one-token-per-pass baseline
    for noise in (0.1, 0.3, 0.8):
        target, draft = pair(noise)
        tokens += int(run_fixed_steps(draft.dist, target.dist, 4, 2000, rng).emitted.sum())
    tokens += sum(generate(k, noise) for k in (2, 4, 8, 16) for noise in NOISE_SWEEP["noises"])
    return tokens + generate(4, 0.3)


def section_article_set(repeat_engine: int) -> None:
    print("\n2. The article's whole set of experiments (3 tables, the data of 3 figures)\n")
    t_article, n_article = best_time(article_set_with_article_loop, 1)
    t_engine, n_engine = best_time(cold(article_set_with_engine), repeat_engine)
    print(f"   article's loop: {n_article:>7} tokens in {t_article:6.2f} s CPU")
    print(f"   engine:         {n_engine:>7} tokens in {t_engine:6.3f} s CPU"
          f"   ({t_article / t_engine:.0f}x faster)")


# --- scaling with the number of streams -------------------------------------------------------

def peak_memory(fn) -> int:
    """Peak bytes held by Python and numpy while ``fn`` runs (tracemalloc sees numpy's buffers)."""
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def section_scaling(repeat_engine: int) -> None:
    print(f"\n3. Tokens per second as the streams grow ({TOKENS_PER_STREAM} tokens per stream,"
          " K = 4, noise 0.3)\n")
    pairs = {"fixed context": pair(0.3),
             "Markov, V = 64": markov_pair(vocab_size=64, draft_noise=0.3, seed=0)}
    reference = {}
    for name, (target, draft) in pairs.items():
        seconds, _ = best_time(lambda: speculative_generate(target, draft, [0], N_TOKENS, 4, 0), 2)
        reference[name] = N_TOKENS / seconds
        print(f"   readable loop, {name}: {reference[name]:,.0f} tokens/s (one stream of {N_TOKENS} tokens)")
    print(f"\n   {'pair':<16}{'streams':>9}{'tokens':>12}{'CPU s':>8}{'tokens/s':>12}"
          f"{'x readable':>12}{'peak MiB':>10}")
    for name, (target, draft) in pairs.items():
        for n in STREAMS:
            run = cold(lambda: run_streams(target, draft, 4, n, TOKENS_PER_STREAM, 0))
            seconds, _ = best_time(run, repeat_engine if n <= 1000 else 1)
            peak = peak_memory(run) / 2**20
            rate = n * TOKENS_PER_STREAM / seconds
            ratio = rate / reference[name]
            print(f"   {name:<16}{n:>9,}{n * TOKENS_PER_STREAM:>12,}{seconds:>8.3f}{rate:>12,.0f}"
                  f"{ratio:>11.{1 if ratio < 10 else 0}f}x{peak:>10.1f}")
    tokens_mib = STREAMS[-1] * TOKENS_PER_STREAM * 4 / 2**20
    print("\n   peak MiB: the most memory Python and numpy held during the run (tracemalloc);")
    print(f"   the {STREAMS[-1]:,}-stream result alone holds {tokens_mib:.0f} MiB of int32 tokens.")


# --- notebooks --------------------------------------------------------------------------------

def section_notebooks() -> None:
    import nbformat
    from nbclient import NotebookClient

    paths = sorted((ROOT / "book").glob("*.ipynb"))
    print(f"\n4. Notebook execution times: {len(paths)} notebooks, each in a fresh kernel, not saved"
          f" (limit {NOTEBOOK_LIMIT_S} s)\n")
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}})
        start = time.perf_counter()
        try:
            client.execute(stderr=subprocess.DEVNULL)  # hides the kernel's start-up chatter only
            status = "ok"
        except Exception as err:  # report and go on: one broken chapter should not hide the others
            text = re.sub(r"\x1b\[[0-9;]*m", "", str(err))  # drop the traceback's colours
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            status = f"FAILED: {lines[-1][:80] if lines else type(err).__name__}"
        wall = time.perf_counter() - start
        flag = f"  OVER THE {NOTEBOOK_LIMIT_S} s LIMIT" if wall > NOTEBOOK_LIMIT_S else ""
        print(f"   {path.relative_to(ROOT)!s:<42}{wall:>7.1f} s wall  {status}{flag}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-notebooks", action="store_true", help="skip the notebook timings")
    parser.add_argument("--notebooks-only", action="store_true", help="only time the notebooks")
    parser.add_argument("--quick", action="store_true", help="fewer repeats (noisier numbers)")
    args = parser.parse_args(argv)

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print("Speculative decoding benchmarks")
    print(f"{datetime.date.today()}, {platform.platform()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, numpy {np.__version__}; load average {load}")
    start = time.perf_counter()
    if not args.notebooks_only:
        for noise in {*NOISE_SWEEP["noises"], K_SWEEP["noise"]}:
            pair(noise)
        repeat_loops, repeat_engine = (1, 3) if args.quick else (3, 10)
        section_sweeps(repeat_loops, repeat_engine)
        section_article_set(repeat_engine)
        section_scaling(2 if args.quick else 3)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        print(f"\n   peak resident memory of this process so far: {rss:.0f} MiB")
    if not args.no_notebooks:
        section_notebooks()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nTotal {time.perf_counter() - start:.0f} s wall; load average at the end {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Chapter 14's harness: speclib's loop and transformers' assisted generation, side by side.

The chapter asks three things of a pair of :class:`speclib.lm.hf.HFModel` models, and each
has its function here:

- greedy equality: :func:`greedy_agreement` counts the prompts on which speclib's loop and the
  library's assisted generation reproduce the library's own greedy text of the target;
- the sampling law: :func:`first_two_test` samples the first two tokens after a prompt many
  times and tests their frequencies against the exact law
  (:func:`speclib.lm.hf.first_tokens_law`), pooling the rare pairs of each first token
  (:func:`pooled_pair_cells`);
- speed: :func:`pass_ms` times one cached pass (:func:`pass_costs` several, in interleaved
  rounds), :func:`book_settings` names the five ways of
  generating the chapter compares and :func:`time_settings` runs them over prompts and
  repetitions, giving ms per token, tokens per target pass, acceptance and draft passes per
  token (:class:`SettingSpeed`, shown by :func:`speed_table`).

The models are read through the cache protocol of :mod:`speclib.core.cache`, so
:func:`pass_ms` and :func:`first_two_test` work on any model of the book; the functions that
call the library need PyTorch and transformers and import :mod:`speclib.lm.hf` only when
called, so that this module imports without them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._validate import MAX_DRAFT_LENGTH, MAX_NEW_TOKENS, MAX_REPEATS, as_int, as_real, as_real_array, as_tokens, timing_repeats

#: Pairs expected fewer times than this are merged with the other rare pairs of their first token.
POOL_BELOW = 5.0
#: The most samples one sampling call draws (refused at once above it); timing calls take at
#: most :data:`speclib._validate.MAX_REPEATS` repetitions.
MAX_REPS = 1_000_000


def _hf_model(model: object, name: str):
    from ..lm import hf

    if not isinstance(model, hf.HFModel):
        raise TypeError(f"{name}: expected a speclib.lm.hf.HFModel, got {type(model).__name__}")
    return hf


def _prompt_list(prompts: object, name: str = "prompts", vocab: int | None = None) -> list[np.ndarray]:
    if isinstance(prompts, (str, bytes, np.ndarray)) or not hasattr(prompts, "__iter__"):
        raise TypeError(f"{name}: expected a list of prompts (token arrays), got {type(prompts).__name__}")
    out = [as_tokens(p, f"{name}[{i}]", vocab, allow_empty=False) for i, p in enumerate(prompts)]
    if not out:
        raise ValueError(f"{name}: must contain at least one prompt")
    return out


# ------------------------------------------------------------------------------ greedy

def greedy_agreement(target, draft, prompts: list, n_new: int, k: int) -> dict[str, int]:
    """On how many ``prompts`` each speculative decoder writes the target's greedy text.

    Both models are taken at temperature 0.  The reference is the library's greedy decoding
    of the target alone (``generate(do_sample=False)``); against it run speclib's
    ``speculative_generate`` and the library's assisted generation, both with ``k`` drafts per
    step, for ``n_new`` tokens.  Returns ``{"speclib": count, "transformers": count}``.
    """
    from ..core.decoding import speculative_generate

    hf = _hf_model(target, "target")
    _hf_model(draft, "draft")
    prompts = _prompt_list(prompts, vocab=target.vocab_size)
    n_new = as_int(n_new, "n_new", minimum=1, maximum=MAX_NEW_TOKENS)
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    target, draft = target.with_temperature(0), draft.with_temperature(0)
    same = {"speclib": 0, "transformers": 0}
    for prompt in prompts:
        reference, _ = hf.library_generate(target, None, prompt, n_new)
        ours, _ = speculative_generate(target, draft, prompt, n_new, k=k, rng=0)
        theirs, _ = hf.library_generate(target, draft, prompt, n_new, k=k)
        same["speclib"] += bool(np.array_equal(ours, reference))
        same["transformers"] += bool(np.array_equal(theirs, reference))
    return same


# ------------------------------------------------------------------------------ the law

def first_two_counts(sample: Callable[[int], object], n_samples: int, vocab_size: int) -> np.ndarray:
    """``counts[a, b]``: how often ``sample(i)``, for ``i = 0 .. n_samples - 1``, returned ``(a, b)``.

    ``sample(i)`` returns the first two generated tokens of one run (``i`` may serve as its seed).
    """
    if not callable(sample):
        raise TypeError(f"sample: expected a function of the run's index, got {type(sample).__name__}")
    n_samples = as_int(n_samples, "n_samples", minimum=1, maximum=MAX_REPS)
    vocab_size = as_int(vocab_size, "vocab_size", minimum=1, maximum=2**13,
                        why="the table has vocab_size**2 cells")
    counts = np.zeros((vocab_size, vocab_size), dtype=np.int64)
    for i in range(n_samples):
        tokens = as_tokens(sample(i), f"sample({i})", vocab_size)
        if tokens.size != 2:
            raise ValueError(f"sample({i}): expected the first two tokens, got {tokens.size}")
        counts[tokens[0], tokens[1]] += 1
    return counts


def pooled_pair_cells(counts: object, law: object, pool_below: float = POOL_BELOW) -> tuple[np.ndarray, np.ndarray]:
    """The cells of the test of the first two tokens: ``(observed counts, probabilities)``, both 1-D.

    ``counts`` and ``law`` are square tables over (first token, second token).  The pairs
    expected at least ``pool_below`` times (``law * counts.sum()``) keep a cell each; the
    others are merged into one cell per first token, so that the test still sees how often
    each first token came.  Totals are unchanged.
    """
    counts = as_real_array(counts, "counts", "a table of counts")
    law = as_real_array(law, "law", "a table of probabilities")
    pool_below = as_real(pool_below, "pool_below", low=0.0)
    if counts.ndim != 2 or counts.shape[0] != counts.shape[1]:
        raise ValueError(f"counts: expected a square table (first token, second token), got shape {counts.shape}")
    if law.shape != counts.shape:
        raise ValueError(f"law: expected the shape of counts {counts.shape}, got {law.shape}")
    if not np.isfinite(counts).all() or (counts < 0).any() or (counts != np.round(counts)).any():
        raise ValueError("counts: expected non-negative whole numbers")
    if counts.sum() == 0:
        raise ValueError("counts: no draw at all")
    if not np.isfinite(law).all() or (law < 0).any() or abs(law.sum() - 1.0) > 1e-6:
        raise ValueError(f"law: expected non-negative probabilities summing to 1, got a sum of {law.sum():.6g}")
    keep = law * counts.sum() >= pool_below

    def rest(table):
        return np.where(keep, 0, table).sum(axis=1)

    return (np.concatenate([counts[keep], rest(counts)]).astype(np.int64),
            np.concatenate([law[keep], rest(law)]))


def first_two_test(sample: Callable[[int], object], law: object, n_samples: int, pool_below: float = POOL_BELOW):
    """Pearson's test of ``n_samples`` draws of ``sample(i)`` against the exact law of the first two tokens.

    The cells are those of :func:`pooled_pair_cells`; what is still rare after pooling per
    first token is merged by :func:`speclib.core.stats.chi_square_test` (below 5 expected).
    Returns its :class:`speclib.core.stats.ChiSquareResult`.
    """
    from ..core.stats import chi_square_test

    law = as_real_array(law, "law", "a table of probabilities")
    if law.ndim != 2 or law.shape[0] != law.shape[1]:
        raise ValueError(f"law: expected a square table (first token, second token), got shape {law.shape}")
    counts = first_two_counts(sample, n_samples, law.shape[0])
    return chi_square_test(*pooled_pair_cells(counts, law, pool_below))


# ------------------------------------------------------------------------------ speed

def pass_ms(model, prefix: object, tokens: object, reps: int = 40) -> float:
    """Median milliseconds of one cached pass over ``tokens`` after ``prefix``, over ``reps`` passes.

    The cache reads ``prefix`` once; each timed pass feeds ``tokens`` and is rolled back to the
    prefix.  One untimed pass first checks the rows the model returns.
    """
    from ..core.cache import extend_checked, model_cache
    from ..core.proposers import check_model

    vocab = check_model(model, "model")
    prefix = as_tokens(prefix, "prefix", vocab, allow_empty=False)
    tokens = as_tokens(tokens, "tokens", vocab, allow_empty=False)
    reps = timing_repeats(as_int(reps, "reps", minimum=1, maximum=MAX_REPEATS, why="timings settle long before"))
    cache = model_cache(model)
    extend_checked(cache, prefix, "model")
    extend_checked(cache, tokens, "model")
    cache.rollback(prefix.size)
    times = np.empty(reps)
    for i in range(reps):
        t0 = time.perf_counter()
        cache.extend(tokens)
        times[i] = 1e3 * (time.perf_counter() - t0)
        cache.rollback(prefix.size)
    return float(np.median(times))


def pass_costs(passes: dict, prefix: object, tokens: object, reps: int = 40, rounds: int = 5) -> dict[str, float]:
    """Milliseconds of one cached pass for each entry of ``passes``, robust to a busy machine.

    ``passes`` maps names to ``(model, n)``: a pass of ``model`` over ``tokens[:n]`` after
    ``prefix``.  Each round times every pass in turn with :func:`pass_ms` (``reps`` passes,
    their median); the result is, for each pass, the smallest median over ``rounds`` rounds:
    a slow spell of a shared machine only ever makes a pass look slower, and with the rounds
    interleaved it cannot make one pass look cheaper relative to another.
    """
    if not isinstance(passes, dict) or not passes:
        raise TypeError(f"passes: expected a non-empty dict of name -> (model, n), got {type(passes).__name__}")
    tokens = as_tokens(tokens, "tokens", allow_empty=False)
    rounds = timing_repeats(as_int(rounds, "rounds", minimum=1, maximum=MAX_REPEATS, why="timings settle long before"))
    for name, entry in passes.items():
        if not (isinstance(entry, tuple) and len(entry) == 2):
            raise TypeError(f"passes[{name!r}]: expected (model, number of tokens), got {entry!r}")
        as_int(entry[1], f"passes[{name!r}]: the number of tokens", minimum=1, maximum=tokens.size)
    best = {name: math.inf for name in passes}
    for _ in range(rounds):
        for name, (model, n) in passes.items():
            best[name] = min(best[name], pass_ms(model, prefix, tokens[:n], reps))
    return best


def book_settings(target, draft, n_new: int, k: int) -> dict[str, Callable]:
    """The five ways of generating ``n_new`` tokens that chapter 14 times, by name.

    Each value is ``run(prompt, seed) -> (tokens, GenerationStats)``: the target alone
    (speclib's cached loop and the library's ``generate``), the two speculative decoders with
    ``k`` drafts per step, and the library's assisted generation with its own defaults.
    """
    from ..core.decoding import autoregressive_generate, speculative_generate

    hf = _hf_model(target, "target")
    _hf_model(draft, "draft")
    n_new = as_int(n_new, "n_new", minimum=1, maximum=MAX_NEW_TOKENS)
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    gen = hf.library_generate
    return {
        "speclib, target alone": lambda p, s: autoregressive_generate(target, p, n_new, rng=s),
        "transformers, target alone": lambda p, s: gen(target, None, p, n_new, seed=s),
        f"speclib, k = {k}": lambda p, s: speculative_generate(target, draft, p, n_new, k=k, rng=s),
        f"transformers, k = {k}": lambda p, s: gen(target, draft, p, n_new, k=k, seed=s),
        "transformers, its defaults": lambda p, s: gen(target, draft, p, n_new, seed=s, library_defaults=True),
    }


@dataclass(frozen=True)
class SettingSpeed:
    """What :func:`time_settings` measured for one setting, over all its runs."""

    ms_per_token: float  #: median over the runs of the run's milliseconds per generated token
    tokens_per_pass: float  #: generated tokens / target passes, summed over the runs
    acceptance: float  #: accepted / verified drafts, summed over the runs (nan without drafts)
    draft_passes_per_token: float  #: draft passes / generated tokens, summed over the runs
    n_runs: int  #: prompts x repetitions
    ms_middle_half: tuple[float, float] = (math.nan, math.nan)  #: quartiles of the runs' ms per token
    tokens_per_pass_middle_half: tuple[float, float] = (math.nan, math.nan)  #: quartiles over the runs


def time_settings(settings: dict, prompts: list, reps: int = 2) -> dict[str, SettingSpeed]:
    """Run every setting on every prompt, ``reps`` times, and time each run.

    ``settings`` maps names to ``run(prompt, seed) -> (tokens, GenerationStats)``, as
    :func:`book_settings` returns.  In each repetition every setting runs on each prompt in
    turn, so that a slow spell of the machine hits all settings alike; run ``rep`` on prompt
    ``j`` gets the seed ``100 * rep + j``.
    """
    from ..core.decoding import GenerationStats

    if not isinstance(settings, dict) or not settings:
        raise TypeError(f"settings: expected a non-empty dict of name -> run(prompt, seed), "
                        f"got {type(settings).__name__}")
    for name, run in settings.items():
        if not callable(run):
            raise TypeError(f"settings[{name!r}]: expected a function run(prompt, seed), got {type(run).__name__}")
    prompts = _prompt_list(prompts)
    reps = timing_repeats(as_int(reps, "reps", minimum=1, maximum=MAX_REPEATS, why="timings settle long before"))
    ms = {name: [] for name in settings}
    tpp = {name: [] for name in settings}
    totals = {name: GenerationStats() for name in settings}
    for rep in range(reps):
        for j, prompt in enumerate(prompts):
            for name, run in settings.items():
                t0 = time.perf_counter()
                out = run(prompt, 100 * rep + j)
                seconds = time.perf_counter() - t0
                stats = out[1] if isinstance(out, tuple) and len(out) == 2 else None
                if not isinstance(stats, GenerationStats) or stats.tokens_generated < 1:
                    raise ValueError(f"settings[{name!r}]: expected (tokens, GenerationStats) with at least "
                                     f"one token, got {type(out).__name__}")
                ms[name].append(1e3 * seconds / stats.tokens_generated)
                tpp[name].append(stats.tokens_per_target_pass)
                totals[name].add(stats)

    def quartiles(values):
        lo, hi = np.percentile(values, [25, 75])
        return float(lo), float(hi)

    return {name: SettingSpeed(float(np.median(ms[name])), t.tokens_per_target_pass, t.acceptance_rate,
                               t.draft_passes / t.tokens_generated, len(ms[name]),
                               quartiles(ms[name]), quartiles(tpp[name]))
            for name, t in totals.items()}


def speed_table(speed: dict) -> str:
    """A Markdown table of :func:`time_settings`' results, one row per setting."""
    from .render import markdown_table

    if not isinstance(speed, dict) or not all(isinstance(s, SettingSpeed) for s in speed.values()):
        raise TypeError("speed: expected the dict of SettingSpeed that time_settings returns")

    def acc(a):
        return "n/a" if math.isnan(a) else f"{a:.2f}"

    def spread(pair, digits):
        return "" if any(math.isnan(v) for v in pair) else f" ({pair[0]:.{digits}f} to {pair[1]:.{digits}f})"

    # five columns, each value with its middle half in brackets: the table fits the book's column
    rows = [[name, f"{s.ms_per_token:.1f}{spread(s.ms_middle_half, 1)}",
             f"{s.tokens_per_pass:.2f}{spread(s.tokens_per_pass_middle_half, 2)}",
             acc(s.acceptance), f"{s.draft_passes_per_token:.2f}"]
            for name, s in speed.items()]
    return markdown_table(["setting", "ms / token", "tokens / target pass", "acceptance", "draft passes / token"],
                          rows)


def outside_ms_per_token(ms_per_token: float, tokens_per_pass: float, draft_passes_per_token: float,
                         target_ms: float, verify_ratio: float, draft_ms: float) -> float:
    """Milliseconds per generated token spent outside the models' forward passes.

    A run that emits ``tokens_per_pass`` tokens per target pass pays, per token, a fraction
    ``1 / tokens_per_pass`` of a verification pass (``verify_ratio`` one-token target passes of
    ``target_ms``) and ``draft_passes_per_token`` draft passes of ``draft_ms``; whatever else
    its measured ``ms_per_token`` holds is the loop's own work (sampling, verification, cache
    bookkeeping, a library's per-step set-up).  Plain decoding is ``tokens_per_pass = 1``,
    ``verify_ratio = 1``, no draft passes.

    Examples
    --------
    >>> round(outside_ms_per_token(5.0, 2.5, 1.2, target_ms=3.0, verify_ratio=1.25, draft_ms=0.5), 3)
    2.9
    """
    from .._validate import as_real

    ms_per_token = as_real(ms_per_token, "ms_per_token", low=0.0)
    tokens_per_pass = as_real(tokens_per_pass, "tokens_per_pass", low=1.0)
    draft_passes_per_token = as_real(draft_passes_per_token, "draft_passes_per_token", low=0.0)
    target_ms = as_real(target_ms, "target_ms", low=0.0)
    verify_ratio = as_real(verify_ratio, "verify_ratio", low=0.0)
    draft_ms = as_real(draft_ms, "draft_ms", low=0.0)
    return ms_per_token - target_ms * verify_ratio / tokens_per_pass - draft_ms * draft_passes_per_token

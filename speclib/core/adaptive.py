"""Choosing the draft length step by step, and falling back when speculation stops paying.

The draft-length policies themselves (:class:`FixedK`, :class:`HeuristicK`,
:class:`ConfidenceStop`, :class:`PeekingStop`, :class:`FallbackMonitor`) live in
:mod:`speclib.core.policies` and plug into the one loop as its ``k``:
``speculative_generate(target, draft, prompt, n, HeuristicK(2), rng)``.  This module runs
them: :func:`run_segments` carries a policy across stretches of text, :func:`compare_controllers`
measures them side by side, and :func:`hindsight_oracle`, the ceiling: the best ``k`` for every step, picked after the
target's verdicts are known.  It is not a decoder (no decoder can see those verdicts
before drafting), only a yardstick.

Why every controller keeps the output exact
-------------------------------------------
Verification is exact for *any* block of drafts, whatever its length, as long as each
drafted token was sampled from the row the verifier is shown.  A controller may therefore
choose the length from anything that is already fixed when the next token is drafted: past
acceptances, the draft's own distribution for that token.  What it must not use is the
drafted token itself (keeping a token only when it looks likely skews the tokens that are
kept; :class:`PeekingStop` is that mistake, the negative control) or the target's verdict on
it.  :func:`speclib.core.exact.output_distribution` checks the claim by running the loop
with the policy along every branch.

Costs are counted in target-pass units: a step costs one target pass plus ``c`` for every
draft pass, including a draft pass whose row made :class:`ConfidenceStop` stop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple, Sequence

import numpy as np

from .._validate import MAX_DRAFT_LENGTH, MAX_NEW_TOKENS, as_generator, as_int, as_real, as_tokens
from .policies import (ConfidenceStop, Controller, FallbackMonitor, FixedK, HeuristicK, PeekingStop,  # noqa: F401
                       _check_controller, speculation_pays)
from .decoding import GenerationStats, speculative_generate
from .proposers import check_model


# --- Running the policies --------------------------------------------------------------------


class Segment(NamedTuple):
    """A stretch of generation with its own model pair and a category label (e.g. "prose")."""

    target: Callable
    draft: Callable
    prompt: np.ndarray
    n_tokens: int
    label: str


def run_segments(
    segments: Sequence[Segment],
    controllers: Controller | Mapping[str, Controller],
    rng: np.random.Generator | int,
) -> tuple[GenerationStats, dict[str, GenerationStats]]:
    """Generate the segments one after another, carrying the controllers' state across them.

    ``controllers`` is one controller for every segment, or a mapping from a segment's label
    to its own controller (a monitor per category).  Returns the totals and the counters of
    each label.
    """
    if isinstance(segments, (str, bytes, Segment)) or not isinstance(segments, Sequence) or not segments:
        raise TypeError(f"segments: expected a non-empty sequence of Segment, got {type(segments).__name__}")
    rng = as_generator(rng)
    total = GenerationStats()
    per_label: dict[str, GenerationStats] = {}
    for i, seg in enumerate(segments):
        if not isinstance(seg, Segment):
            raise TypeError(f"segments[{i}]: expected a Segment, got {type(seg).__name__}")
        if isinstance(controllers, Mapping):
            if seg.label not in controllers:
                raise ValueError(f"controllers: no controller for label {seg.label!r} (segment {i})")
            ctrl = controllers[seg.label]
        else:
            ctrl = controllers
        _, seg_stats = speculative_generate(seg.target, seg.draft, seg.prompt, seg.n_tokens, ctrl, rng)
        for acc in (total, per_label.setdefault(seg.label, GenerationStats())):
            acc.add(seg_stats)
    return total, per_label


# --- The hindsight oracle --------------------------------------------------------------------


class OracleResult(NamedTuple):
    """What the best draft length per step would have cost, on one run's acceptance pattern."""

    tokens: int
    target_passes: int
    draft_passes: int
    k_per_step: np.ndarray

    def walltime(self, c: float) -> float:
        return self.target_passes + as_real(c, "c", low=0.0) * self.draft_passes

    def speedup(self, c: float) -> float:
        return self.tokens / self.walltime(c)


def hindsight_oracle(accepted_per_step: Sequence[int], k_max: int, c: float) -> OracleResult:
    """The ceiling: per step, the ``k`` that would have cost least per token, chosen in hindsight.

    Run a fixed ``k_max`` decoder and record how many drafts each step accepted (``n``).
    With the same random draws, a step with any ``k <= k_max`` would have emitted
    ``min(n, k) + 1`` tokens at a cost of ``1 + c k``.  The oracle picks, for every step,
    the ``k`` with the most tokens per unit of cost (ties: the shorter draft); for ``c < 1``
    that is ``k = n``, every accepted draft and not one more.  No decoder can do this, since
    it needs the target's verdicts before drafting; it bounds what any controller could
    gain on this acceptance pattern.

    Parameters
    ----------
    accepted_per_step : sequence of int
        ``GenerationStats.accepted_per_step`` of a run with :class:`FixedK` (``k_max``).
    k_max : int
        The draft length of that run.
    c : float
        Draft/target cost ratio.

    Examples
    --------
    >>> hindsight_oracle([0, 4, 2], k_max=4, c=0.1).k_per_step
    array([0, 4, 2])
    """
    k_max = as_int(k_max, "k_max", minimum=1, maximum=MAX_DRAFT_LENGTH)
    c = as_real(c, "c", low=0.0)
    n = np.asarray(accepted_per_step)
    if n.ndim != 1 or (n.size and (not np.issubdtype(n.dtype, np.integer) or n.min() < 0 or n.max() > k_max)):
        raise ValueError(f"accepted_per_step: expected integers in [0, k_max={k_max}], got {accepted_per_step!r}")
    ks = np.arange(k_max + 1)
    tokens = np.minimum(n[:, None], ks[None, :]) + 1  # (steps, k_max + 1)
    ratio = tokens / (1.0 + c * ks)[None, :]
    best = np.argmax(ratio >= ratio.max(axis=1, keepdims=True) - 1e-12, axis=1)  # first (shortest) maximiser
    return OracleResult(int(tokens[np.arange(n.size), best].sum()), int(n.size), int(best.sum()), best)


# --- Comparing controllers -------------------------------------------------------------------


@dataclass
class Comparison:
    """Speed of several controllers on one model pair, at several cost ratios.

    ``speedup[name][i]`` is the pooled speed-up at ``c_values[i]``: all tokens of all runs
    divided by their total cost (plain decoding: 1).  ``stderr[name][i]`` is the standard
    error of the mean of the per-run speed-ups, a measure of run-to-run noise (NaN when
    ``n_runs`` is 1: one run has no spread to measure); ``tokens_per_pass`` and
    ``acceptance`` are pooled the same way (the oracle has no acceptance rate of its own).
    """

    c_values: np.ndarray
    speedup: dict[str, np.ndarray]
    stderr: dict[str, np.ndarray]
    tokens_per_pass: dict[str, np.ndarray]
    acceptance: dict[str, np.ndarray]
    n_runs: int = 0  #: runs per controller (one per prompt); ``stderr`` needs at least 2

    def best(self, i: int, include_oracle: bool = False) -> str:
        """Name of the fastest controller at ``c_values[i]``."""
        i = as_int(i, "i", minimum=-self.c_values.size, maximum=self.c_values.size - 1)
        if not isinstance(include_oracle, (bool, np.bool_)):
            raise TypeError(f"include_oracle: expected True or False, got {include_oracle!r}")
        names = [n for n in self.speedup if include_oracle or n != ORACLE]
        return max(names, key=lambda n: self.speedup[n][i])


def _never_falls_back(monitor: FallbackMonitor, run: GenerationStats) -> bool:
    """Whether ``monitor`` (wrapping the fixed ``k`` of ``run``) would speculate at every step of ``run``."""
    for drafted, accepted in zip(run.k_per_step, run.accepted_per_step):
        if not monitor.speculating:
            return False
        monitor.draft_length()
        monitor.update(drafted, accepted)
    return True


#: Name of the hindsight oracle in a :class:`Comparison`.
ORACLE = "oracle (hindsight)"


def compare_controllers(
    target: Callable,
    draft: Callable,
    prompts: Sequence[np.ndarray],
    n_tokens: int,
    c_values: Sequence[float],
    seed: int,
    *,
    k: int = 4,
    k_init: int = 5,
    p_min: float = 0.5,
    k_max: int = 8,
) -> Comparison:
    """Run the book's controllers on one pair and measure their speed at every cost ratio.

    The controllers: :class:`FixedK` (``k``), :class:`HeuristicK` (``k_init``),
    :class:`ConfidenceStop` (``p_min``, ``k_max``), :class:`FixedK` (``k``) wrapped in a
    :class:`FallbackMonitor` for each ``c``, and the :func:`hindsight_oracle` computed on a
    :class:`FixedK` (``k_max``) run.  Each generates ``n_tokens`` after every prompt.  Run
    ``j`` of every controller uses the random seed ``seed + j`` (common random numbers:
    a monitor that never falls back reproduces the fixed-``k`` run exactly, so differences
    between controllers are not sampling noise of separate streams).  Controllers that do not
    depend on ``c`` run once; their cost at each ``c`` comes from the same counters.

    With a single prompt the standard errors are NaN (``Comparison.n_runs`` says so): pass
    two prompts or more to measure the run-to-run noise.
    """
    vocab = check_model(target, "target")
    if not hasattr(draft, "propose"):  # a proposer is checked by the loop
        check_model(draft, "draft")
    if isinstance(c_values, (str, bytes)) or not hasattr(c_values, "__iter__"):
        raise TypeError(f"c_values: expected a sequence of cost ratios, got {type(c_values).__name__}")
    c_values = np.array([as_real(c, "c_values", low=0.0) for c in c_values])
    if c_values.size == 0:
        raise ValueError("c_values: need at least one cost ratio")
    seed = as_int(seed, "seed", minimum=0)
    n_tokens = as_int(n_tokens, "n_tokens", minimum=1, maximum=MAX_NEW_TOKENS, why="tokens one call generates")
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    k_init = as_int(k_init, "k_init", minimum=1, maximum=MAX_DRAFT_LENGTH)
    k_max = as_int(k_max, "k_max", minimum=1, maximum=MAX_DRAFT_LENGTH)
    p_min = as_real(p_min, "p_min", low=0.0, high=1.0)
    if isinstance(prompts, np.ndarray) and prompts.ndim == 1:
        raise TypeError("prompts: expected a sequence of prompts, got a single 1-D array (wrap it in a list)")
    if isinstance(prompts, (str, bytes)) or not hasattr(prompts, "__len__"):
        raise TypeError(f"prompts: expected a sequence of prompts (token-id sequences), got {type(prompts).__name__}")
    if len(prompts) == 0:
        raise ValueError("prompts: need at least one prompt")
    for j, prompt in enumerate(prompts):
        if isinstance(prompt, (str, bytes)) or np.ndim(prompt) != 1:
            raise TypeError(f"prompts: prompt {j} is not a sequence of token ids: {prompt!r}")
        as_tokens(prompt, f"prompts (prompt {j})", vocab, allow_empty=False)
    makers: dict[str, Callable[[float], Controller]] = {
        f"fixed K={k}": lambda c: FixedK(k),
        "heuristic +2/-1": lambda c: HeuristicK(k_init),
        f"p_min={p_min:g}": lambda c: ConfidenceStop(p_min, k_max),
        f"fixed K={k} + fallback": lambda c: FallbackMonitor(FixedK(k), c),
    }
    depends_on_c = {f"fixed K={k} + fallback"}
    out = {key: {} for key in ("speedup", "stderr", "tokens_per_pass", "acceptance")}

    def record(name: str, runs_per_c: list[list]) -> None:
        for key in out:
            out[key][name] = np.zeros(c_values.size)
        for i, (c, runs) in enumerate(zip(c_values, runs_per_c)):
            tokens = sum(r.tokens_generated if hasattr(r, "tokens_generated") else r.tokens for r in runs)
            cost = sum(r.walltime(c) for r in runs)
            passes = sum(r.target_passes for r in runs)
            per_run = np.array([r.speedup(c) for r in runs])
            out["speedup"][name][i] = tokens / cost
            out["stderr"][name][i] = per_run.std(ddof=1) / np.sqrt(per_run.size) if per_run.size > 1 else np.nan
            out["tokens_per_pass"][name][i] = tokens / passes
            verified = sum(getattr(r, "draft_verified", 0) for r in runs)
            out["acceptance"][name][i] = sum(getattr(r, "accepted", 0) for r in runs) / verified if verified else np.nan

    def run_all(make: Callable[[], Controller], reuse: list[GenerationStats] | None = None) -> list[GenerationStats]:
        # With common random numbers a monitor that would never fall back on a fixed-k run
        # reproduces that run exactly, so its replay stands in for a second decoding.
        return [reuse[j] if reuse is not None and _never_falls_back(make(), reuse[j]) else
                speculative_generate(target, draft, prompt, n_tokens, make(), seed + j)[1]
                for j, prompt in enumerate(prompts)]

    fixed_runs = None
    for name, make in makers.items():
        if name in depends_on_c:
            record(name, [run_all(lambda: make(float(c)), fixed_runs) for c in c_values])
        else:
            runs = run_all(lambda: make(0.0))
            fixed_runs = runs if name == f"fixed K={k}" else fixed_runs
            record(name, [runs] * c_values.size)
    long_runs = run_all(lambda: FixedK(k_max))
    record(ORACLE, [[hindsight_oracle(r.accepted_per_step, k_max, float(c)) for r in long_runs] for c in c_values])
    out["acceptance"][ORACLE][:] = np.nan
    return Comparison(c_values, **out, n_runs=len(prompts))

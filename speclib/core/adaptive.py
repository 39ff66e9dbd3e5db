"""Choosing the draft length step by step, and falling back when speculation stops paying.

A *controller* decides how many tokens the draft may propose at the next step.  Four are
here, and a monitor that wraps any of them:

:class:`FixedK`
    The same ``k`` every step.
:class:`HeuristicK`
    Hugging Face's assisted-generation schedule: ``k + 2`` after a step whose drafts were all
    accepted, ``k - 1`` (never below 1) after any rejection.
:class:`ConfidenceStop`
    llama.cpp's ``p_min`` rule: draft up to ``k_max`` tokens, but stop as soon as the draft's
    own top probability for the next token falls below ``p_min``.
:class:`FallbackMonitor`
    Keeps a rolling acceptance rate and switches to plain decoding when it drops to the
    break-even ``alpha <= c`` of :func:`speclib.core.theory.optimal_k`; while falling back it
    probes with one drafted token now and then, and resumes when speculation pays again.

and :func:`hindsight_oracle`, the ceiling: the best ``k`` for every step, picked after the
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
it.  :func:`controlled_sequence_distribution` checks the claim by enumerating every branch.

Costs are counted in target-pass units: a step costs one target pass plus ``c`` for every
draft pass, including a draft pass whose row made :class:`ConfidenceStop` stop.
"""

from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Mapping, NamedTuple, Protocol, Sequence, runtime_checkable

import numpy as np

from .._validate import as_generator, as_int, as_real, as_tokens
from .decoding import GenerationStats, _check_model, _last_rows
from .exact import _check_sizes
from .sampling import _residual, acceptance_probability, sample_token, verify


# --- Controllers ------------------------------------------------------------------------------


@runtime_checkable
class Controller(Protocol):
    """What :func:`adaptive_generate` asks of a controller.

    ``draft_length()``
        The most tokens the draft may propose at the next step; 0 means a plain step (one
        target pass, no draft).
    ``keep_drafting(p, x)``
        Called after the draft proposed token ``x`` from row ``p``; returning False throws
        ``x`` away and ends the draft.  An exact controller decides from ``p`` (and its own
        state) only, never from ``x``.
    ``update(n_drafted, n_accepted)``
        Called after each step with how many tokens were drafted and how many the target
        accepted.
    """

    name: str

    def draft_length(self) -> int: ...

    def keep_drafting(self, p: np.ndarray, x: int) -> bool: ...

    def update(self, n_drafted: int, n_accepted: int) -> None: ...


class FixedK:
    """Draft ``k`` tokens at every step."""

    def __init__(self, k: int) -> None:
        self.k = as_int(k, "k", minimum=1)
        self.name = f"fixed K={self.k}"

    def draft_length(self) -> int:
        return self.k

    def keep_drafting(self, p: np.ndarray, x: int) -> bool:
        return True

    def update(self, n_drafted: int, n_accepted: int) -> None:
        pass

    def __repr__(self) -> str:
        return f"FixedK(k={self.k})"


class HeuristicK:
    """Hugging Face's schedule: ``+2`` after an all-accepted step, ``-1`` otherwise (floor 1).

    Parameters
    ----------
    k_init : int, default 5
        The draft length of the first step.
    k_max : int, optional
        A ceiling on the draft length (none by default, as in the original schedule).

    Examples
    --------
    >>> ctrl = HeuristicK(k_init=3)
    >>> ctrl.update(3, 3); ctrl.draft_length()
    5
    >>> ctrl.update(5, 1); ctrl.draft_length()
    4
    """

    def __init__(self, k_init: int = 5, k_max: int | None = None) -> None:
        self.k = as_int(k_init, "k_init", minimum=1)
        self.k_max = None if k_max is None else as_int(k_max, "k_max", minimum=self.k)
        self.name = "heuristic +2/-1"

    def draft_length(self) -> int:
        return self.k

    def keep_drafting(self, p: np.ndarray, x: int) -> bool:
        return True

    def update(self, n_drafted: int, n_accepted: int) -> None:
        if n_drafted == 0:
            return
        if n_accepted == n_drafted:
            self.k += 2
            if self.k_max is not None:
                self.k = min(self.k, self.k_max)
        else:
            self.k = max(1, self.k - 1)

    def __repr__(self) -> str:
        return f"HeuristicK(k={self.k}, k_max={self.k_max})"


class ConfidenceStop:
    """llama.cpp's ``p_min`` rule: stop drafting when the draft's top probability is below ``p_min``.

    The test looks at the draft's whole row (its largest entry), which is fixed before the
    token is drawn, so the rule keeps the output exact.  The row that triggers the stop has
    cost a draft pass although it yields no draft token; the decoder counts it.
    """

    def __init__(self, p_min: float, k_max: int) -> None:
        self.p_min = as_real(p_min, "p_min", low=0.0, high=1.0)
        self.k_max = as_int(k_max, "k_max", minimum=1)
        self.name = f"p_min={self.p_min:g}"

    def draft_length(self) -> int:
        return self.k_max

    def keep_drafting(self, p: np.ndarray, x: int) -> bool:
        return bool(p.max() >= self.p_min)

    def update(self, n_drafted: int, n_accepted: int) -> None:
        pass

    def __repr__(self) -> str:
        return f"ConfidenceStop(p_min={self.p_min}, k_max={self.k_max})"


class PeekingStop(ConfidenceStop):
    """The negative control: stop when the *drawn token's* probability is below ``p_min``.

    With greedy drafting the drawn token is the top token, so this looks like the ``p_min``
    rule; with sampled drafts it keeps a token only when the token itself is likely, which
    biases the kept tokens towards the draft's favourites.  The exactness checks must
    reject it.
    """

    def __init__(self, p_min: float, k_max: int) -> None:
        super().__init__(p_min, k_max)
        self.name = f"peeking p_min={self.p_min:g} (wrong)"

    def keep_drafting(self, p: np.ndarray, x: int) -> bool:
        return bool(p[x] >= self.p_min)


def speculation_pays(alpha: float, c: float) -> bool:
    """The break-even of the theory chapter: some draft length beats plain decoding iff ``alpha > c``.

    Equivalent to ``speclib.core.theory.optimal_k(alpha, c) > 0`` (a test checks it), but cheap
    enough to call at every step.

    Examples
    --------
    >>> speculation_pays(0.5, 0.3), speculation_pays(0.3, 0.5)
    (True, False)
    """
    return as_real(alpha, "alpha", 0.0, 1.0) > as_real(c, "c", low=0.0)


class FallbackMonitor:
    """Wrap a controller; fall back to plain decoding while speculation does not pay.

    The monitor keeps the outcomes of the last ``window`` *verified* drafts (accepted ones,
    and the first rejected one of each block).  Once it has ``min_samples`` of them, it
    speculates only while their acceptance rate exceeds the cost ratio ``c``, the
    break-even of :func:`speculation_pays`.  After ``probe_every`` plain steps in a row it
    drafts one probe token, so that it notices when acceptance recovers.  A plain step is
    one where the monitor has fallen back, or where the wrapped controller itself chose
    ``k = 0`` (a controller that stops drafting would otherwise never learn again).  The
    wrapped controller is told the outcome of every step, probes included.

    Parameters
    ----------
    controller : Controller
        Chooses ``k`` while the monitor speculates.
    c : float
        Cost of a draft pass relative to a target pass.
    window : int, default 40
        How many verified drafts the rolling estimate covers.
    probe_every : int, default 10
        Plain steps in a row before a one-token probe.
    min_samples : int, default 10
        Verified drafts needed before the monitor may fall back.

    Attributes
    ----------
    speculating : bool
        The current mode.
    history : list of bool
        Every step so far: True if it was allowed to draft (speculative, or a probe), False
        for a plain step.
    estimates : list of float
        The rolling acceptance estimate after every step (nan before the first verified draft).
    """

    def __init__(self, controller: Controller, c: float, window: int = 40, probe_every: int = 10,
                 min_samples: int = 10) -> None:
        if not isinstance(controller, Controller):
            raise TypeError(f"controller: expected a controller (draft_length, keep_drafting, update), "
                            f"got {type(controller).__name__}")
        self.controller = controller
        self.c = as_real(c, "c", low=0.0)
        self.window = as_int(window, "window", minimum=1)
        self.probe_every = as_int(probe_every, "probe_every", minimum=1)
        self.min_samples = as_int(min_samples, "min_samples", minimum=1)
        if self.min_samples > self.window:
            raise ValueError(f"min_samples: must be <= window ({self.window}), got {self.min_samples}")
        self.outcomes: deque[bool] = deque(maxlen=self.window)
        self.speculating = True
        self.plain_steps = 0
        self.history: list[bool] = []
        self.estimates: list[float] = []
        self._probing = False
        self._plain = False  # the step being decoded drafts nothing
        self.name = f"{controller.name} + fallback"

    @property
    def alpha_estimate(self) -> float:
        """Acceptance rate over the window (nan before any verified draft)."""
        return float(np.mean(self.outcomes)) if self.outcomes else float("nan")

    def draft_length(self) -> int:
        k = self.controller.draft_length() if self.speculating else 0
        # A plain step, the monitor's choice or the wrapped controller's: probe now and then.
        self._probing = k == 0 and self.plain_steps >= self.probe_every
        self._plain = k == 0 and not self._probing
        return 1 if self._probing else k

    def keep_drafting(self, p: np.ndarray, x: int) -> bool:
        return True if self._probing else self.controller.keep_drafting(p, x)

    def update(self, n_drafted: int, n_accepted: int) -> None:
        self.history.append(not self._plain)
        self.controller.update(n_drafted, n_accepted)
        self.plain_steps = self.plain_steps + 1 if self._plain else 0
        if n_drafted > 0:
            # Verified drafts: the accepted ones and the first rejected one.
            self.outcomes.extend([True] * n_accepted + [False] * int(n_accepted < n_drafted))
            if len(self.outcomes) >= self.min_samples:
                self.speculating = speculation_pays(self.alpha_estimate, self.c)
        self.estimates.append(self.alpha_estimate)

    def __repr__(self) -> str:
        return f"FallbackMonitor({self.controller!r}, c={self.c}, window={self.window})"


def _check_controller(controller: object) -> Controller:
    if not isinstance(controller, Controller):
        raise TypeError(f"controller: expected an object with name, draft_length(), keep_drafting(p, x) "
                        f"and update(n_drafted, n_accepted), got {type(controller).__name__}")
    return controller


# --- The decoder -----------------------------------------------------------------------------


@dataclass
class AdaptiveStats(GenerationStats):
    """:class:`~speclib.core.decoding.GenerationStats` plus what a controller did at every step."""

    k_per_step: list[int] = field(default_factory=list)  #: tokens drafted (and kept for verification)
    accepted_per_step: list[int] = field(default_factory=list)

    def walltime(self, c: float) -> float:
        """Cost in target-pass units: ``target_passes + c * draft_passes``."""
        return self.target_passes + as_real(c, "c", low=0.0) * self.draft_passes

    def speedup(self, c: float) -> float:
        """Tokens per unit of cost, relative to plain decoding (which makes 1 token per unit)."""
        return self.tokens_generated / self.walltime(c)


def adaptive_generate(
    target: Callable,
    draft: Callable,
    prompt: np.ndarray,
    max_new_tokens: int,
    controller: Controller,
    rng: np.random.Generator | int,
    *,
    stats: AdaptiveStats | None = None,
) -> tuple[np.ndarray, AdaptiveStats]:
    """Speculative decoding whose draft length is chosen by ``controller`` at every step.

    Each step asks the controller for a draft length ``k`` (capped by the tokens still
    needed).  ``k = 0`` is a plain step: one target pass, one token.  Otherwise the draft
    proposes up to ``k`` tokens, the controller may end the draft early after seeing the
    row of each proposal, and :func:`speclib.core.sampling.verify` checks the block in one target
    pass.  The controller then learns how many drafts were accepted.

    Parameters
    ----------
    target, draft : model
        Models following the protocol of :mod:`speclib.lm.models`, with the same vocabulary.
    prompt : array_like of int
        At least one token.
    max_new_tokens : int
    controller : Controller
        :class:`FixedK`, :class:`HeuristicK`, :class:`ConfidenceStop`, :class:`FallbackMonitor`
        or any object with the same methods.  It is updated in place.
    rng : numpy.random.Generator or int
    stats : AdaptiveStats, optional
        Counters to add to (to run several segments as one generation).

    Returns
    -------
    tokens : ndarray of int, shape (max_new_tokens,)
    stats : AdaptiveStats

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=8, draft_noise=0.2, seed=0)
    >>> tokens, stats = adaptive_generate(target, draft, [0], 30, HeuristicK(2), rng=1)
    >>> len(tokens), stats.target_passes < 30
    (30, True)
    """
    vocab = _check_model(target, "target")
    if _check_model(draft, "draft") != vocab:
        raise ValueError(f"draft: vocabulary of {draft.vocab_size} tokens differs from the target's {vocab}")
    prompt = as_tokens(prompt, "prompt", vocab, allow_empty=False)
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", minimum=0)
    controller = _check_controller(controller)
    rng = as_generator(rng)
    stats = AdaptiveStats() if stats is None else stats

    tokens = prompt.copy()
    while tokens.size - prompt.size < max_new_tokens:
        remaining = max_new_tokens - (tokens.size - prompt.size)
        k = min(as_int(controller.draft_length(), "controller.draft_length()", minimum=0), remaining)

        # 1. Draft up to k tokens; the controller may stop after seeing each proposal's row.
        drafted, p_rows = tokens, []
        for _ in range(k):
            p = _last_rows(draft, drafted, 1, "draft")[0]
            stats.draft_passes += 1
            x = sample_token(p, rng)
            if not controller.keep_drafting(p, x):
                break
            p_rows.append(p)
            drafted = np.append(drafted, x)
        n_drafted = len(p_rows)

        # 2. One target pass scores every drafted position and the one after.
        q_rows = _last_rows(target, drafted, n_drafted + 1, "target")
        if n_drafted == 0:
            emitted, n_accepted = np.array([sample_token(q_rows[0], rng)]), 0
        else:
            out = verify(drafted[tokens.size:], np.array(p_rows), q_rows, rng)
            emitted, n_accepted = out.tokens, out.n_accepted
        controller.update(n_drafted, n_accepted)

        emitted = emitted[:remaining]
        tokens = np.concatenate([tokens, emitted])
        stats.record_step(n_drafted, n_accepted, len(emitted), draft_passes=0)  # counted while drafting
        stats.k_per_step.append(n_drafted)
        stats.accepted_per_step.append(n_accepted)
    return tokens[prompt.size:], stats


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
) -> tuple[AdaptiveStats, dict[str, AdaptiveStats]]:
    """Generate the segments one after another, carrying the controllers' state across them.

    ``controllers`` is one controller for every segment, or a mapping from a segment's label
    to its own controller (a monitor per category).  Returns the totals and the counters of
    each label.
    """
    rng = as_generator(rng)
    total: AdaptiveStats = AdaptiveStats()
    per_label: dict[str, AdaptiveStats] = {}
    for i, seg in enumerate(segments):
        if not isinstance(seg, Segment):
            raise TypeError(f"segments[{i}]: expected a Segment, got {type(seg).__name__}")
        if isinstance(controllers, Mapping):
            if seg.label not in controllers:
                raise ValueError(f"controllers: no controller for label {seg.label!r} (segment {i})")
            ctrl = controllers[seg.label]
        else:
            ctrl = controllers
        _, seg_stats = adaptive_generate(seg.target, seg.draft, seg.prompt, seg.n_tokens, ctrl, rng)
        for acc in (total, per_label.setdefault(seg.label, AdaptiveStats())):
            _add_stats(acc, seg_stats)
    return total, per_label


def _add_stats(acc: AdaptiveStats, s: AdaptiveStats) -> None:
    for name in ("tokens_generated", "target_passes", "draft_passes", "draft_proposed", "draft_verified", "accepted"):
        setattr(acc, name, getattr(acc, name) + getattr(s, name))
    acc.tokens_per_step += s.tokens_per_step
    acc.k_per_step += s.k_per_step
    acc.accepted_per_step += s.accepted_per_step


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
        ``AdaptiveStats.accepted_per_step`` of a run with :class:`FixedK` (``k_max``).
    k_max : int
        The draft length of that run.
    c : float
        Draft/target cost ratio.

    Examples
    --------
    >>> hindsight_oracle([0, 4, 2], k_max=4, c=0.1).k_per_step
    array([0, 4, 2])
    """
    k_max = as_int(k_max, "k_max", minimum=1)
    c = as_real(c, "c", low=0.0)
    n = np.asarray(accepted_per_step)
    if n.ndim != 1 or (n.size and (not np.issubdtype(n.dtype, np.integer) or n.min() < 0 or n.max() > k_max)):
        raise ValueError(f"accepted_per_step: expected integers in [0, k_max={k_max}], got {accepted_per_step!r}")
    ks = np.arange(k_max + 1)
    tokens = np.minimum(n[:, None], ks[None, :]) + 1  # (steps, k_max + 1)
    ratio = tokens / (1.0 + c * ks)[None, :]
    best = np.argmax(ratio >= ratio.max(axis=1, keepdims=True) - 1e-12, axis=1)  # first (shortest) maximiser
    return OracleResult(int(tokens[np.arange(n.size), best].sum()), int(n.size), int(best.sum()), best)


# --- Exactness, by enumeration ----------------------------------------------------------------


def controlled_sequence_distribution(
    target: Callable, draft: Callable, prefix: np.ndarray, length: int, controller: Controller
) -> np.ndarray:
    """Exact distribution of the first ``length`` tokens that :func:`adaptive_generate` emits.

    Every branch is listed: each drafted token, each controller decision (the controller is
    copied into every branch, so its state follows that branch's history), each accept or
    reject, each correction or bonus token.  For an exact controller the result equals
    :func:`speclib.core.exact.target_sequence_distribution`.

    Returns
    -------
    ndarray of shape ``(V,) * length``.
    """
    vocab = _check_model(target, "target")
    if _check_model(draft, "draft") != vocab:
        raise ValueError("draft: vocabulary differs from the target's")
    prefix = as_tokens(prefix, "prefix", vocab, allow_empty=False)
    length = as_int(length, "length", minimum=1)
    _check_sizes(vocab, length)
    controller = _check_controller(controller)
    out = np.zeros((vocab,) * length)
    n0 = prefix.size

    def step(seq: np.ndarray, prob: float, ctrl: Controller) -> None:
        done = seq.size - n0
        if done >= length:
            out[tuple(seq[n0:n0 + length])] += prob
            return
        k = min(ctrl.draft_length(), length - done)
        draft_branch(seq, seq, prob, [], k, ctrl)

    def draft_branch(base: np.ndarray, seq: np.ndarray, prob: float, p_rows: list, k: int, ctrl: Controller) -> None:
        if len(p_rows) < k:
            p = np.asarray(draft(seq))[-1]
            for x in range(vocab):
                if p[x] == 0.0:
                    continue
                branch = copy.deepcopy(ctrl)
                if branch.keep_drafting(p, x):
                    draft_branch(base, np.append(seq, x), prob * p[x], p_rows + [p], k, branch)
                else:
                    verify_branch(base, seq, prob * p[x], p_rows, branch)
            return
        verify_branch(base, seq, prob, p_rows, ctrl)

    def verify_branch(base: np.ndarray, seq: np.ndarray, prob: float, p_rows: list, ctrl: Controller) -> None:
        n = len(p_rows)
        q_rows = np.asarray(target(seq))[base.size - 1:]
        drafts = seq[base.size:]
        for i in range(n + 1):
            if i < n:
                x = drafts[i]
                a = acceptance_probability(p_rows[i][x], q_rows[i, x])
                fix, fix_mass = _residual(p_rows[i], q_rows[i]), prob * (1.0 - a)
            else:
                fix, fix_mass = q_rows[n], prob  # plain step or bonus
            if fix_mass > 0:
                for y in range(vocab):
                    if fix[y] > 0:
                        branch = copy.deepcopy(ctrl)
                        branch.update(n, i)
                        step(np.concatenate([seq[:base.size + i], [y]]), fix_mass * fix[y], branch)
            if i < n:
                prob *= a
                if prob == 0.0:
                    return

    step(prefix, 1.0, copy.deepcopy(controller))
    return out


# --- Comparing controllers -------------------------------------------------------------------


@dataclass
class Comparison:
    """Speed of several controllers on one model pair, at several cost ratios.

    ``speedup[name][i]`` is the pooled speed-up at ``c_values[i]``: all tokens of all runs
    divided by their total cost (plain decoding: 1).  ``stderr[name][i]`` is the standard
    error of the mean of the per-run speed-ups, a measure of run-to-run noise;
    ``tokens_per_pass`` and ``acceptance`` are pooled the same way (the oracle has no
    acceptance rate of its own).
    """

    c_values: np.ndarray
    speedup: dict[str, np.ndarray]
    stderr: dict[str, np.ndarray]
    tokens_per_pass: dict[str, np.ndarray]
    acceptance: dict[str, np.ndarray]

    def best(self, i: int, include_oracle: bool = False) -> str:
        """Name of the fastest controller at ``c_values[i]``."""
        names = [n for n in self.speedup if include_oracle or n != ORACLE]
        return max(names, key=lambda n: self.speedup[n][i])


def _never_falls_back(monitor: FallbackMonitor, run: AdaptiveStats) -> bool:
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
    """
    c_values = np.array([as_real(c, "c_values", low=0.0) for c in c_values])
    seed = as_int(seed, "seed", minimum=0)
    if isinstance(prompts, np.ndarray) and prompts.ndim == 1:
        raise TypeError("prompts: expected a sequence of prompts, got a single 1-D array (wrap it in a list)")
    if len(prompts) == 0:
        raise ValueError("prompts: need at least one prompt")
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

    def run_all(make: Callable[[], Controller], reuse: list[AdaptiveStats] | None = None) -> list[AdaptiveStats]:
        # With common random numbers a monitor that would never fall back on a fixed-k run
        # reproduces that run exactly, so its replay stands in for a second decoding.
        return [reuse[j] if reuse is not None and _never_falls_back(make(), reuse[j]) else
                adaptive_generate(target, draft, prompt, n_tokens, make(), seed + j)[1]
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
    return Comparison(c_values, **out)

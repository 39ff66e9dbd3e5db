"""A vectorized speculative-decoding engine for models whose distributions can be tabulated.

The loop in :mod:`speclib.core.decoding` is the readable one: a step at a time, a token at a
time, the algorithm as the paper states it.  This module runs the *same* algorithm on many
independent streams at once, with numpy doing the work in bulk, for chapters that need large
samples (smooth curves, tight confidence intervals, chi-square tests with real power).

It is exact in law: every stream follows the random process of
:func:`speclib.core.decoding.speculative_generate` (draft ``k`` tokens, keep each with probability
``min(1, q(x)/p(x))``, replace the first rejection by a draw from the residual
``max(0, q - p)/Z``, add a bonus token when all survive, draft no more than is still needed
on the last steps).  Only the order in which random numbers are drawn differs, so the two
give different samples from the same distribution.  ``tests/test_engine.py`` compares the
engine with the theory, the exact enumerator and the reference loop.

Supported models (target and draft, with the same vocabulary, in any combination):

* :class:`speclib.lm.models.FixedContextModel`: one row; the context never advances.
* :class:`speclib.lm.models.MarkovModel`: a ``(V, V)`` transition table.
* :class:`speclib.lm.ngram.NGramModel` of a low order: its ``V ** (order - 1)`` contexts are
  tabulated from the model's own rows (at most :data:`MAX_TABLE` entries), and the prompt
  must hold at least ``order - 1`` tokens.

All are finite-state machines: a state (the context) picks a row of next-token
probabilities, and each emitted token moves the state on.  The engine keeps one state per
stream and per model, which is all it needs to know about a model.

Entry points
------------
:func:`run_streams`
    ``n_streams`` independent generations of ``n_tokens`` tokens each; returns an
    :class:`EngineResult` with the tokens, one record per speculative step, and
    :meth:`EngineResult.stats` (a :class:`speclib.core.decoding.GenerationStats` with the
    reference loop's meanings).
:func:`run_fixed_steps`
    The article's fixed-context setting reduced to its core: ``n_steps`` independent
    speculative steps with the full draft length ``k``, returning the tokens emitted and the
    drafts accepted per step.

How it goes fast
----------------
Every stream is independent, so one speculative step of *all* unfinished streams is a
handful of array operations (a "round").  When both models are fixed-context, the steps of
a stream are independent too: the engine draws hundreds of steps per stream at once and
finds with a cumulative sum where each stream's text ends (see :func:`_fixed_streams` for
why the last, shortened steps may be cut from full ones).  Draws use a guide table per model
(:class:`_Sampler`), which returns exactly the token that
:func:`speclib.core.sampling.sample_token` returns for the same uniform number.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Callable, NamedTuple

import numpy as np

from .._validate import MAX_DRAFT_LENGTH, as_distribution, as_generator, as_int, as_probability_array, as_tokens
from .decoding import GenerationStats
from ..lm.models import FixedContextModel, MarkovModel

if TYPE_CHECKING:
    from ..lm.ngram import NGramModel

__all__ = [
    "EngineResult",
    "FixedSteps",
    "StreamCounts",
    "acceptance_probabilities",
    "residual_rows",
    "run_fixed_steps",
    "run_streams",
]

SUPPORTED_MODELS = ("speclib.lm.models.FixedContextModel, speclib.lm.models.MarkovModel or "
                    "speclib.lm.ngram.NGramModel (of a low enough order)")

#: Largest ``n * V`` for which a batch of draws compares whole CDF rows (else binary search).
_DENSE_DRAW = 1 << 16
#: Most buckets in a guide table (all rows together).
_GUIDE_BUCKETS = 1 << 16
#: Largest number of running sums one guide bucket may hold (else: binary search).
_MAX_OCCUPANCY = 8
#: Largest table (contexts x vocabulary) the engine builds for an n-gram model.
MAX_TABLE = 1 << 22
#: Tables up to this many entries keep their sampler for the next call with the same table.
_CACHED_SIZE = 1 << 16
#: Rough number of array elements one bulk batch of fixed-context steps may hold.
_BULK_ELEMENTS = 1 << 20
#: Largest ``n_streams * n_tokens`` the engine will allocate (400 MB of tokens).
MAX_TOKENS = 100_000_000


# --- the sampling rule, vectorized ----------------------------------------------------------

def acceptance_probabilities(p_x: np.ndarray, q_x: np.ndarray) -> np.ndarray:
    """``min(1, q(x)/p(x))`` element by element (1 where ``p(x) = 0``, as a float division gives).

    Examples
    --------
    >>> acceptance_probabilities(np.array([0.5, 0.2]), np.array([0.25, 0.4]))
    array([0.5, 1. ])
    """
    p_x = as_probability_array(p_x, "p_x")
    q_x = as_probability_array(q_x, "q_x")
    if p_x.shape != q_x.shape:
        raise ValueError(f"p_x and q_x must have the same shape, got {p_x.shape} and {q_x.shape}")
    return _acceptance_probabilities(p_x, q_x)


def _acceptance_probabilities(p_x: np.ndarray, q_x: np.ndarray) -> np.ndarray:
    ratio = np.divide(q_x, p_x, out=np.ones_like(q_x, dtype=float), where=p_x > 0)
    return np.minimum(1.0, ratio)


def residual_rows(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``max(0, q - p) / Z`` row by row; a row with ``Z = 0`` (``p == q``) gives ``q`` itself.

    The vectorized form of :func:`speclib.core.sampling.residual_distribution`.

    Examples
    --------
    >>> residual_rows(np.array([[0.5, 0.5, 0.0]]), np.array([[0.25, 0.25, 0.5]]))
    array([[0., 0., 1.]])
    """
    p = as_distribution(p, "p")
    q = as_distribution(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    return _residual_rows(p, q)


def _residual_rows(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    excess = np.maximum(q - p, 0.0)
    z = excess.sum(axis=-1, keepdims=True)
    return np.where(z > 0, excess / np.where(z > 0, z, 1.0), q)


#: The trusted cores the engine calls on its own, already checked rows (once per round).
acceptance_probabilities.step = _acceptance_probabilities
residual_rows.step = _residual_rows


def _hook(rule: Callable, name: str) -> Callable:
    """The function the engine calls for an ``accept`` or ``correct`` rule.

    speclib's own rules run unchecked (their trusted cores); a user's rule has what it
    returns checked at every call (once per round, on whole arrays): ``accept`` gives an
    acceptance probability in [0, 1] per drafted token, ``correct`` a probability row per
    rejection.  A rule returning NaN would otherwise reject silently, and 2.0 accept.
    """
    if not callable(rule):
        raise TypeError(f"{name}: expected a function, got {type(rule).__name__}")
    if rule is acceptance_probabilities or rule is residual_rows:
        return rule.step

    def checked(p: np.ndarray, q: np.ndarray) -> np.ndarray:
        out = rule(p, q)
        arr = np.asarray(out)
        if arr.dtype.kind not in "fiu" or arr.shape != np.shape(p):
            raise ValueError(f"{name}: the rule returned {type(out).__name__} of shape {np.shape(out)} for inputs "
                             f"of shape {np.shape(p)}; expected {np.shape(p)}")
        if name == "accept":
            if arr.size and not (arr.min() >= 0.0 and arr.max() <= 1.0):  # NaN fails both
                raise ValueError(f"accept: the rule returned {float(arr[~((arr >= 0) & (arr <= 1))].ravel()[0]):.6g}; an "
                                 "acceptance probability must lie in [0, 1]")
        elif arr.size:
            sums = arr.sum(axis=-1)
            if not (arr.min() >= 0.0 and np.all(sums > 0) and np.all(np.isfinite(sums))):
                raise ValueError("correct: the rule returned a row with NaN, infinite or negative entries, or no "
                                 "mass at all; a correction rule returns probability rows")
        return arr

    return checked


# --- results ----------------------------------------------------------------------------------

class StreamCounts(NamedTuple):
    """Per-stream counters (arrays of shape ``(n_streams,)``), for confidence intervals."""

    passes: np.ndarray  #: target passes (speculative steps)
    proposed: np.ndarray  #: drafts proposed
    verified: np.ndarray  #: drafts the target judged: accepted + first rejected of each step
    accepted: np.ndarray  #: drafts accepted


def _stats(emitted: np.ndarray, accepted: np.ndarray, proposed: np.ndarray) -> GenerationStats:
    verified = accepted + (accepted < proposed)
    stats = GenerationStats(
        tokens_generated=int(emitted.sum()),
        target_passes=int(emitted.size),
        draft_passes=int(proposed.sum()),
        draft_proposed=int(proposed.sum()),
        draft_verified=int(verified.sum()),
        accepted=int(accepted.sum()),
        tokens_per_step=emitted.tolist(),
        k_per_step=proposed.tolist(),
        accepted_per_step=accepted.tolist(),
    )
    stats.scored_nodes = int(proposed.sum())  # one chain per step: every drafted position is scored
    return stats


@dataclass(frozen=True, eq=False)
class EngineResult:
    """What :func:`run_streams` returns.

    Attributes
    ----------
    tokens : ndarray of int32, shape (n_streams, n_tokens)
        Row ``s`` is the text stream ``s`` generated (the prompt is not repeated).
    stream, start, emitted, accepted, proposed : ndarray of int32, shape (n_steps,)
        One entry per speculative step (one target pass), grouped by stream and in
        chronological order within a stream: the stream's id, how many tokens it had before
        the step, the tokens the step emitted (after the last step's surplus is dropped),
        the drafts it accepted, and the drafts it proposed (``k``, or fewer on the last
        steps, which draft only what is still needed).
    k : int
    bonus : bool
    """

    tokens: np.ndarray
    stream: np.ndarray
    start: np.ndarray
    emitted: np.ndarray
    accepted: np.ndarray
    proposed: np.ndarray
    k: int
    bonus: bool

    @property
    def n_streams(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def n_tokens(self) -> int:
        return int(self.tokens.shape[1])

    @property
    def verified(self) -> np.ndarray:
        """Drafts the target judged per step: the accepted ones plus the first rejected one."""
        return self.accepted + (self.accepted < self.proposed)

    def stats(self) -> GenerationStats:
        """All streams' counters added up, with the meanings of the reference loop.

        ``tokens_per_step`` lists the steps stream by stream, each stream in order.
        """
        return _stats(self.emitted, self.accepted, self.proposed)

    def per_stream(self) -> StreamCounts:
        """Counters stream by stream (each stream is an independent sample)."""
        n = self.n_streams

        def total(values: np.ndarray) -> np.ndarray:
            return np.bincount(self.stream, weights=values, minlength=n).astype(np.int64)

        passes = np.bincount(self.stream, minlength=n).astype(np.int64)
        return StreamCounts(passes, total(self.proposed), total(self.verified), total(self.accepted))


@dataclass(frozen=True, eq=False)
class FixedSteps:
    """What :func:`run_fixed_steps` returns: one entry per independent step.

    Attributes
    ----------
    emitted : ndarray of int32, shape (n_steps,)
        Tokens the step emitted: 1 to ``k + 1`` (1 to ``k`` without the bonus token).
    accepted : ndarray of int32, shape (n_steps,)
        Drafts the step accepted: 0 to ``k``.
    k : int
    bonus : bool
    """

    emitted: np.ndarray
    accepted: np.ndarray
    k: int
    bonus: bool

    def stats(self) -> GenerationStats:
        """Counters over all steps, as the reference loop would count them."""
        return _stats(self.emitted, self.accepted, np.full(self.emitted.shape, self.k))


# --- models as tables -----------------------------------------------------------------------

class _Sampler:
    """Inverse-CDF draws from the rows of a table, with a guide table to skip the search.

    ``draw(rows, u)`` returns, for each uniform ``u[i]``, the token that
    :func:`speclib.core.sampling.sample_token` returns for row ``rows[i]`` and the same uniform:
    the first token whose running sum exceeds ``u * total`` (``V - 1`` if none does).
    Only tokens of positive probability can be that token, so each row keeps just those,
    with their running sums (the same floats: adding 0.0 changes none).  A guide table holds
    the answer's index at the bucket edges ``b / m``; the answer lies at most ``occupancy``
    entries further on, so a few vectorized comparisons replace a search per draw.
    """

    def __init__(self, probs: np.ndarray) -> None:
        n_rows, vocab = probs.shape
        self.single = n_rows == 1
        full_cdf = np.cumsum(probs, axis=1)
        self.total = full_cdf[:, -1].copy()
        support = probs > 0
        if support.all():
            width, valid, cdf = vocab, support, full_cdf
            order = np.broadcast_to(np.arange(vocab), probs.shape)
        else:
            width = int(support.sum(axis=1).max())
            order = np.argsort(~support, axis=1, kind="stable")[:, :width]  # positive tokens, in order
            valid = np.take_along_axis(support, order, axis=1)
            cdf = np.where(valid, np.take_along_axis(full_cdf, order, axis=1), np.inf)
        # One extra column: running past the last positive token gives V - 1, like sample_token.
        pad = np.full((n_rows, 1), vocab - 1)
        self.token = np.concatenate([np.where(valid, order, vocab - 1), pad], axis=1).reshape(-1)
        self.cdf = np.concatenate([cdf, np.full((n_rows, 1), np.inf)], axis=1).reshape(-1)
        self.width = width + 1
        # Buckets: a power of two (so that b / m is exact), narrow enough that no three running
        # sums share one, but at most 16 per token (a cluster of tiny probabilities may then
        # share a bucket) and _GUIDE_BUCKETS for all rows together.
        rel = cdf / self.total[:, None]
        spread = np.subtract(rel[:, 2:], rel[:, :-2], out=np.full((n_rows, max(width - 2, 0)), np.inf),
                             where=valid[:, 2:])
        narrowest = float(spread.min()) if spread.size else 1.0
        wanted = 16.0 * width if narrowest * 16.0 * width <= 1.0 else max(2.0 * width, 1.0 / narrowest)
        budget = _GUIDE_BUCKETS // n_rows
        self.guide = None  # no guide table: binary search in the row instead
        if budget < 2 * width:
            return
        self.m = 1 << min(int(np.ceil(np.log2(wanted))), budget.bit_length() - 1)
        edges = np.arange(self.m + 1) / self.m
        # The same rounding as in draw(): edge <= u implies fl(edge * total) <= fl(u * total).
        if self.single:
            guide = np.searchsorted(cdf[0], edges * self.total[0], side="right")[None, :]
        else:
            guide = np.stack([np.searchsorted(r, edges * t, side="right") for r, t in zip(cdf, self.total)])
        self.occupancy = int(np.diff(guide, axis=1).max())
        if self.occupancy <= _MAX_OCCUPANCY:
            self.guide = guide.reshape(-1)

    def draw(self, rows: np.ndarray | None, u: np.ndarray) -> np.ndarray:
        """One token per uniform in ``u`` (``rows`` of the same shape, or None for one row)."""
        if self.single:  # one row: no row offsets to add
            v, base = u * self.total[0], 0
        else:
            v, base = u * self.total[rows], rows * self.width
        if self.guide is None:
            # Binary search for the number of running sums <= v (the padding is infinite).
            lo, hi = np.zeros(u.shape, dtype=np.intp), np.full(u.shape, self.width - 1)
            for _ in range(self.width.bit_length()):
                mid = (lo + hi) >> 1
                right = self.cdf[base + mid] <= v
                lo, hi = np.where(right & (lo < hi), mid + 1, lo), np.where(right, hi, mid)
            return self.token[base + lo]
        bucket = (u * self.m).astype(np.intp)
        j = self.guide[bucket] if self.single else self.guide[rows * (self.m + 1) + bucket] + base
        for _ in range(self.occupancy):
            j += self.cdf[j] <= v
        return self.token[j]


_SAMPLERS: dict[bytes, _Sampler] = {}


def _sampler(probs: np.ndarray) -> _Sampler:
    """A sampler for ``probs``, reused when the same small table comes back (sweeps, repeats)."""
    if probs.size > _CACHED_SIZE:
        return _Sampler(probs)
    key = np.ascontiguousarray(probs, dtype=float).tobytes() + repr(probs.shape).encode()
    if key not in _SAMPLERS:
        if len(_SAMPLERS) >= 256:
            _SAMPLERS.clear()
        _SAMPLERS[key] = _Sampler(probs)
    return _SAMPLERS[key]


@dataclass(eq=False)
class _Table:
    """A model as a finite-state machine over contexts ("states")."""

    probs: np.ndarray  # (R, V): next-token distribution in each state
    next_state: np.ndarray  # (R, V): the state after emitting a token
    min_prompt: int = 1  # prompt tokens needed to know the state

    @cached_property
    def sampler(self) -> _Sampler:
        return _sampler(self.probs)

    def state_after(self, prompt: np.ndarray) -> int:
        state = 0
        for token in prompt:
            state = int(self.next_state[state, token])
        return state


def _de_bruijn(vocab: int, length: int) -> np.ndarray:
    """A cyclic sequence holding every string of ``length`` tokens exactly once (FKM algorithm)."""
    out, a = [], [0] * (length + 1)

    def extend(t: int, p: int) -> None:
        if t > length:
            if length % p == 0:
                out.extend(a[1:p + 1])
            return
        a[t] = a[t - p]
        extend(t + 1, p)
        for j in range(a[t - p] + 1, vocab):
            a[t] = j
            extend(t + 1, t)

    extend(1, 1)
    return np.array(out, dtype=np.int64)


def _ngram_table(model, name: str) -> _Table:
    """Every context of an n-gram model, listed by one call on a de Bruijn sequence.

    The state is the last ``c = order - 1`` tokens read as a base-V number; the row for a
    context is the model's own row after it, so nothing about the smoothing is re-derived.
    """
    c, vocab = model.context_length, model.vocab_size
    if vocab ** c * vocab > MAX_TABLE:
        raise ValueError(
            f"{name}: an order-{model.order} n-gram model over {vocab} tokens has {vocab}**{c} contexts; "
            f"their table ({vocab ** c * vocab:,} entries) is more than the engine builds ({MAX_TABLE:,}). "
            "Use a lower order, or speclib.core.decoding.speculative_generate"
        )
    if c == 0:
        probs = np.asarray(model(np.zeros(1, dtype=np.int64)), dtype=float)
        return _Table(probs, np.zeros((1, vocab), dtype=np.int64), 0)
    cycle = _de_bruijn(vocab, c)
    text = np.concatenate([cycle, cycle[: c - 1]])
    rows = np.asarray(model(text), dtype=float)[c - 1:]
    keys = sum(text[d: d + cycle.size] * vocab ** (c - 1 - d) for d in range(c))
    probs = np.empty((vocab**c, vocab))
    probs[keys] = rows
    next_state = (np.arange(vocab**c)[:, None] * vocab + np.arange(vocab)) % vocab**c
    return _Table(probs, next_state, c)


def _tabulate(model: object, name: str) -> _Table:
    try:
        from ..lm.ngram import NGramModel
    except ImportError:  # pragma: no cover - the n-gram module is optional here
        NGramModel = ()
    if isinstance(model, FixedContextModel):
        return _Table(model.dist[None, :], np.zeros((1, model.vocab_size), dtype=np.int64), 0)
    if isinstance(model, MarkovModel):
        probs = model.transition
        return _Table(probs, np.broadcast_to(np.arange(probs.shape[1]), probs.shape), 1)
    if NGramModel and isinstance(model, NGramModel):
        return _ngram_table(model, name)
    raise TypeError(
        f"{name}: the engine runs tabulated models only ({SUPPORTED_MODELS}), got "
        f"{type(model).__name__}; use speclib.core.decoding.speculative_generate for other models"
    )


def _draw(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws from rows built on the fly: row ``i`` of ``cdf`` with uniform ``u[i]``."""
    n, vocab = cdf.shape
    v = u * cdf[:, -1]
    if n * vocab <= _DENSE_DRAW:
        idx = np.count_nonzero(cdf <= v[:, None], axis=1)
    else:
        # Binary search in each row: count the entries <= v.
        flat, base = cdf.reshape(-1), np.arange(n) * vocab
        lo, hi = np.zeros(n, dtype=np.int64), np.full(n, vocab)
        for _ in range(vocab.bit_length()):
            mid = (lo + hi) >> 1
            still = lo < hi
            right = flat[base + np.minimum(mid, vocab - 1)] <= v
            lo = np.where(still & right, mid + 1, lo)
            hi = np.where(still & ~right, mid, hi)
        idx = lo
    return np.minimum(idx, vocab - 1)


# --- the engine -----------------------------------------------------------------------------

class _Run(NamedTuple):
    """Everything a run shares: models, parameters, output and step records."""

    P: _Table
    Q: _Table
    k: int
    n_tokens: int
    bonus: bool
    rng: np.random.Generator
    accept: Callable
    correct: Callable
    final: _Sampler | None  # rows of q, then correction rows, when both models share their states
    out: np.ndarray  # (n_streams * n_tokens,), a flat view of the tokens
    n_steps: np.ndarray  # (n_streams,): steps recorded so far, stream by stream
    records: list  # (stream, step index within the stream, start, emitted, accepted, proposed)

    def record(self, *columns: np.ndarray) -> None:
        self.records.append(tuple(c.astype(np.int32) for c in columns))


def _rounds(run: _Run, streams: np.ndarray, pos: np.ndarray, sp: np.ndarray, sq: np.ndarray) -> None:
    """One speculative step of every unfinished stream per round, until all are done."""
    P, Q, k, N = run.P, run.Q, run.k, run.n_tokens
    cols = np.arange(k + 1)
    keep = pos < N
    streams, pos, sp, sq = streams[keep], pos[keep], sp[keep], sq[keep]
    while streams.size:
        n = streams.size
        rows = np.arange(n)
        k_step = np.minimum(k, N - pos)
        u = run.rng.random((n, 2 * k + 1))  # k drafts, k acceptance tests, 1 final token

        # 1. Draft k tokens per stream (only the first k_step count), tracking both models' states.
        block = np.empty((n, k + 1), dtype=np.int64)  # the drafts, then room for the bonus
        sps, sqs = np.empty((n, k + 1), dtype=np.int64), np.empty((n, k + 1), dtype=np.int64)
        p_x, q_x = np.empty((n, k)), np.empty((n, k))
        sps[:, 0], sqs[:, 0] = sp, sq
        for i in range(k):
            x = P.sampler.draw(sps[:, i], u[:, i])
            block[:, i], p_x[:, i], q_x[:, i] = x, P.probs[sps[:, i], x], Q.probs[sqs[:, i], x]
            sps[:, i + 1], sqs[:, i + 1] = P.next_state[sps[:, i], x], Q.next_state[sqs[:, i], x]

        # 2-3. Verify: the first rejection among the k_step live drafts ends the block.
        rejected = (u[:, k:2 * k] >= run.accept(p_x, q_x)) & (cols[:k] < k_step[:, None])
        has_rej = rejected.any(axis=1)
        n_acc = np.where(has_rej, rejected.argmax(axis=1), k_step)

        # 4. The token after the kept drafts: a correction after a rejection, else the bonus.
        sp_f, sq_f = sps[rows, n_acc], sqs[rows, n_acc]
        if run.final is not None:
            final = run.final.draw(sq_f + Q.probs.shape[0] * has_rej, u[:, 2 * k])
        else:  # the models' contexts differ: build the correction rows on the fly
            final = Q.sampler.draw(sq_f, u[:, 2 * k])
            r = np.flatnonzero(has_rej)
            fix = np.cumsum(run.correct(P.probs[sp_f[r]], Q.probs[sq_f[r]]), axis=1)
            final[r] = _draw(fix, u[r, 2 * k])
        block[rows, n_acc] = final
        emitted = np.minimum(np.where(has_rej, n_acc + 1, k_step + int(run.bonus)), N - pos)

        live = cols < emitted[:, None]
        run.out[((streams * N + pos)[:, None] + cols)[live]] = block[live]
        run.record(streams, run.n_steps[streams], pos, emitted, n_acc, k_step)
        run.n_steps[streams] += 1

        # Advance: the states after the emitted tokens.
        with_final = emitted > n_acc
        sp = np.where(with_final, P.next_state[sp_f, final], sp_f)
        sq = np.where(with_final, Q.next_state[sq_f, final], sq_f)
        pos = pos + emitted
        keep = pos < N
        streams, pos, sp, sq = streams[keep], pos[keep], sp[keep], sq[keep]


def _fixed_streams(run: _Run, n_streams: int) -> None:
    """Fixed context: many steps per stream at once, placed with a cumulative sum.

    With the context fixed, steps are independent and identically distributed, except that
    a step starting with ``rem < k`` tokens to go drafts only ``rem``.  Its first ``rem``
    acceptance tests have the same law as the first ``rem`` of a full step, so a full step
    stands in for it: it keeps ``min(n_acc, rem)`` drafts and emits ``min(emitted, rem)``
    tokens (a rejection inside the first ``rem`` drafts emits the same block, anything
    else emits ``rem`` drafts).  Each stream is then a prefix of a sequence of full steps.
    """
    p, q, k, N = run.P.probs[0], run.Q.probs[0], run.k, run.n_tokens
    accept = run.accept(p, q)  # acceptance probability of each token as a draft
    # Law of the tokens a full step emits, to size the batches: n_acc = j with probability
    # alpha^j (1 - alpha) for j < k and alpha^k for j = k.
    alpha = float(p @ accept)
    law = alpha ** np.arange(k + 1) * np.append(np.full(k, 1.0 - alpha), 1.0)
    sizes = np.append(np.arange(1, k + 1), k + int(run.bonus))
    mean = float(law @ sizes)
    spread = float(np.sqrt(max(law @ sizes**2 - mean**2, 0.0)))
    cols = np.arange(k + 1)
    pos = np.zeros(n_streams, dtype=np.int64)
    pending = np.flatnonzero(pos < N)
    while pending.size:
        need = N - int(pos[pending].min())  # tokens the furthest-behind stream still needs
        # Enough steps for all but about one stream in a thousand; those go round again.
        n_steps = min(need, int(need / mean + 3.0 * spread * np.sqrt(need) / mean**1.5) + 4)
        chunk = max(1, _BULK_ELEMENTS // (n_steps * (2 * k + 1)))
        for c0 in range(0, pending.size, chunk):
            ids = pending[c0:c0 + chunk]
            u = run.rng.random((ids.size, n_steps, 2 * k + 1))  # k drafts, k tests, 1 final token
            # 1. Draft, 2-3. verify, 4. correct or add the bonus: full steps, all at once.
            block = np.empty((ids.size, n_steps, k + 1), dtype=np.int64)
            block[..., :k] = run.P.sampler.draw(None, u[..., :k])
            kept = u[..., k:2 * k] < accept[block[..., :k]]
            has_rej = ~kept.all(axis=2)
            n_acc = np.where(has_rej, kept.argmin(axis=2), k)
            final = run.final.draw(has_rej.astype(np.intp), u[..., 2 * k])
            np.put_along_axis(block, n_acc[..., None], final[..., None], axis=2)
            full = np.where(has_rej, n_acc + 1, k + int(run.bonus))
            # Place the steps: those starting at N or later are unused, and those starting with
            # fewer than k + 1 tokens to go are shortened as the docstring says.
            starts = pos[ids][:, None] + np.cumsum(full, axis=1) - full
            used = starts < N  # a prefix of each stream's steps
            rem = N - starts
            emitted, proposed = np.minimum(full, rem), np.minimum(k, rem)

            live = (cols < emitted[..., None]) & used[..., None]
            run.out[((ids[:, None] * N + starts)[..., None] + cols)[live]] = block[live]
            step = run.n_steps[ids][:, None] + np.arange(n_steps)
            stream = np.broadcast_to(ids[:, None], used.shape)[used]
            accepted = np.minimum(n_acc, proposed)
            run.record(stream, step[used], starts[used], emitted[used], accepted[used], proposed[used])
            run.n_steps[ids] += used.sum(axis=1)
            pos[ids] += np.where(used, emitted, 0).sum(axis=1)
        pending = pending[pos[pending] < N]


def _check_bool(value: object, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def run_streams(
    target: FixedContextModel | MarkovModel | NGramModel,
    draft: FixedContextModel | MarkovModel | NGramModel,
    k: int,
    n_streams: int,
    n_tokens: int,
    rng: np.random.Generator | int,
    *,
    prompt: int | np.ndarray = 0,
    bonus: bool = True,
    accept: Callable[[np.ndarray, np.ndarray], np.ndarray] = acceptance_probabilities,
    correct: Callable[[np.ndarray, np.ndarray], np.ndarray] = residual_rows,
) -> EngineResult:
    """Run ``n_streams`` independent speculative generations of ``n_tokens`` tokens each.

    Every stream follows the law of :func:`speclib.core.decoding.speculative_generate` with the
    same arguments: ``k`` drafts per step (fewer on the last steps, which draft only what is
    still needed), the surplus of the last step dropped, and the same counters.

    Parameters
    ----------
    target, draft : FixedContextModel, MarkovModel or NGramModel
        Tabulated models with the same vocabulary, in any combination (an n-gram model
        only up to :data:`MAX_TABLE` table entries; see the module docstring).
    k : int
        Draft length, at least 1.
    n_streams : int
        Number of independent streams, at least 1.
    n_tokens : int
        Tokens each stream generates (0 or more), after the prompt.
    rng : numpy.random.Generator or int
    prompt : int or array_like of int, default 0
        The token (or token sequence) every stream starts after.
    bonus : bool, default True
        Draw the free extra token when all drafts of a step are accepted.
    accept, correct : callable, optional
        Vectorized acceptance probability ``(p_x, q_x) -> array`` and correction rows
        ``(p_rows, q_rows) -> rows``.  Only the tests' negative controls change them.

    Returns
    -------
    EngineResult
        The tokens (shape ``(n_streams, n_tokens)``), one record per step, and ``stats()``.

    Raises
    ------
    TypeError
        If a model is not one of the supported kinds, or an argument has the wrong type.
    ValueError
        If the vocabularies differ, an n-gram table would be too large, or ``k``,
        ``n_streams``, ``n_tokens`` or ``prompt`` is out of range (a prompt shorter than a
        model's context included).

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=8, draft_noise=0.2, seed=0)
    >>> result = run_streams(target, draft, k=4, n_streams=1000, n_tokens=20, rng=1)
    >>> result.tokens.shape
    (1000, 20)
    >>> s = result.stats()
    >>> s.tokens_generated, s.target_passes < 20 * 1000
    (20000, True)
    """
    Q, P = _tabulate(target, "target"), _tabulate(draft, "draft")
    vocab = Q.probs.shape[1]
    if P.probs.shape[1] != vocab:
        raise ValueError(f"draft: vocabulary of {P.probs.shape[1]} tokens differs from the target's {vocab}")
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    n_streams = as_int(n_streams, "n_streams", minimum=1)
    n_tokens = as_int(n_tokens, "n_tokens", minimum=0)
    if n_streams * n_tokens > MAX_TOKENS:
        raise ValueError(
            f"n_streams * n_tokens = {n_streams * n_tokens:,} tokens is more than the engine "
            f"allocates at once ({MAX_TOKENS:,}); run several smaller batches"
        )
    rng = as_generator(rng)
    prompt = as_tokens(np.atleast_1d(prompt), "prompt", vocab, allow_empty=False)
    for table, name in ((Q, "target"), (P, "draft")):
        if prompt.size < table.min_prompt:
            raise ValueError(f"prompt: the {name} reads the last {table.min_prompt} tokens; give a prompt "
                             f"of at least {table.min_prompt} tokens (got {prompt.size})")
    bonus = _check_bool(bonus, "bonus")
    accept, correct = _hook(accept, "accept"), _hook(correct, "correct")

    tokens = np.zeros((n_streams, n_tokens), dtype=np.int32)
    # When both models are in the same context at every position (both fixed, or both Markov),
    # the correction rows can be tabulated once, next to the target's rows for the bonus.
    shared = P.next_state.shape == Q.next_state.shape and np.array_equal(P.next_state, Q.next_state)
    final = _sampler(np.concatenate([Q.probs, correct(P.probs, Q.probs)])) if shared else None
    n_steps = np.zeros(n_streams, dtype=np.int64)
    run = _Run(P, Q, k, n_tokens, bonus, rng, accept, correct, final, tokens.reshape(-1), n_steps, [])
    if P.probs.shape[0] == Q.probs.shape[0] == 1:
        _fixed_streams(run, n_streams)
    else:
        sp, sq = np.full(n_streams, P.state_after(prompt)), np.full(n_streams, Q.state_after(prompt))
        _rounds(run, np.arange(n_streams), np.zeros(n_streams, dtype=np.int64), sp, sq)

    # Gather the step records stream by stream, each stream's steps in order.
    offset = np.cumsum(n_steps) - n_steps
    columns = [np.empty(int(n_steps.sum()), dtype=np.int32) for _ in range(5)]
    for stream, step, *values in run.records:
        at = offset[stream] + step
        columns[0][at] = stream
        for column, value in zip(columns[1:], values):
            column[at] = value
    stream, start, emitted, accepted, proposed = columns
    return EngineResult(tokens, stream, start, emitted, accepted, proposed, k, bonus)


def run_fixed_steps(
    p: np.ndarray,
    q: np.ndarray,
    k: int,
    n_steps: int,
    rng: np.random.Generator | int,
    bonus: bool = True,
    *,
    accept: Callable[[np.ndarray, np.ndarray], np.ndarray] = acceptance_probabilities,
) -> FixedSteps:
    """``n_steps`` independent speculative steps of the fixed-context setting.

    Each step drafts ``k`` tokens from ``p``, accepts each with probability
    ``min(1, q(x)/p(x))`` until the first rejection, and emits the accepted drafts plus one
    token (the correction, or the bonus when all ``k`` survive and ``bonus`` is on).  Only
    the counts are returned: which token the correction or bonus is does not change them.

    Parameters
    ----------
    p, q : array_like, shape (V,)
        Draft and target distributions.
    k : int
        Draft length, at least 1.
    n_steps : int
        Number of steps (0 or more).
    rng : numpy.random.Generator or int
    bonus : bool, default True
    accept : callable, optional
        As in :func:`run_streams`; only the tests' negative controls change it.

    Returns
    -------
    FixedSteps
        ``emitted`` and ``accepted`` per step, and ``stats()``.

    Examples
    --------
    >>> from speclib.lm.models import fixed_pair
    >>> from speclib.core.theory import expected_tokens_per_pass
    >>> target, draft = fixed_pair(draft_noise=0.3)
    >>> steps = run_fixed_steps(draft.dist, target.dist, k=4, n_steps=100_000, rng=0)
    >>> alpha = float(np.minimum(draft.dist, target.dist).sum())
    >>> bool(abs(steps.emitted.mean() - expected_tokens_per_pass(alpha, 4)) < 0.02)
    True
    """
    p = as_distribution(p, "p", ndim=1)
    q = as_distribution(q, "q", ndim=1)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    n_steps = as_int(n_steps, "n_steps", minimum=0, maximum=MAX_TOKENS, why="steps one call simulates")
    rng = as_generator(rng)
    bonus = _check_bool(bonus, "bonus")
    accept = _hook(accept, "accept")

    sampler = _sampler(p[None, :])
    accept_x = accept(p, q)
    emitted, accepted = np.empty(n_steps, dtype=np.int32), np.empty(n_steps, dtype=np.int32)
    chunk = max(1, _BULK_ELEMENTS // (2 * k))
    for c0 in range(0, n_steps, chunk):
        n = min(chunk, n_steps - c0)
        u = rng.random((n, 2 * k))
        kept = u[:, k:] < accept_x[sampler.draw(None, u[:, :k])]
        has_rej = ~kept.all(axis=1)
        n_acc = np.where(has_rej, kept.argmin(axis=1), k)
        accepted[c0:c0 + n] = n_acc
        emitted[c0:c0 + n] = np.where(has_rej, n_acc + 1, k + int(bonus))
    return FixedSteps(emitted, accepted, k, bonus)

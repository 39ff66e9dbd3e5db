"""Wall-clock measurements of a real model pair, taken the way the decoding loops incur them.

Chapter 9 asks whether speculative decoding makes a neural network faster in seconds, and
whether the cost model of :mod:`speclib.core.theory` predicts by how much.  Everything here
times the very loops the book teaches (:func:`speclib.core.decoding.autoregressive_generate`
and :func:`speclib.core.decoding.speculative_generate`, which read every model through its
cache), with their ``timings`` facility, so that the costs fed to the prediction are the
ones the runs paid:

- ``t1``: the seconds of one target pass inside plain decoding (the baseline of every ratio);
- ``c``: a draft pass inside speculative decoding, in units of ``t1``;
- ``r(k+1)``: a target pass inside speculative decoding (it reads the last token and the
  ``k`` drafts), in units of ``t1``;
- the time a step spends outside any forward pass (sampling, verification, rollbacks), also
  in units of ``t1``.

:func:`greedy_divergence` and :func:`block_pass_differences` measure how far a pass over
``k + 1`` tokens and ``k + 1`` passes over one token disagree in floating point, and
whether greedy speculative decoding then ever writes another text than greedy decoding.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .._validate import (MAX_DRAFT_LENGTH, MAX_ENTRIES, MAX_NEW_TOKENS, MAX_REPEATS, as_int, as_int_list,
                         as_real, as_real_list, as_tokens, timing_repeats)
from ..core.decoding import autoregressive_generate, speculative_generate
from ..core.proposers import check_model
from ..core.theory import expected_tokens_per_pass
from ..lm.transformer import blas_threads

__all__ = [
    "WallClock",
    "change_phrase",
    "cost_model_rows",
    "pass_cost_sentences",
    "gap_sentence",
    "block_pass_differences",
    "goal_sentence",
    "greedy_divergence",
    "last_level_cache_bytes",
    "needed_alpha",
    "processor_summary",
    "position_alphas",
    "speedup_with_fixed",
    "wallclock_experiment",
]


def speedup_with_fixed(alpha: float, k: int, c: float, verify_ratio: float, n: int,
                       fixed_plain: float = 0.0, fixed_spec: float = 0.0) -> float:
    """The cost model of a whole run of ``n`` tokens, in units of one target pass.

    Plain decoding costs ``fixed_plain + n``; speculative decoding costs ``fixed_spec`` plus
    ``n / E`` steps of ``k c + verify_ratio``, where ``E = (1 - alpha**(k+1)) / (1 - alpha)``
    is the expected number of tokens a step emits.  The fixed parts are the passes of other
    sizes a run makes (the prompt, a draft catching up after a rejection).  Without them this
    is :func:`speclib.lm.transformer.speedup_with_costs`.

    Examples
    --------
    >>> round(speedup_with_fixed(0.8, 3, 0.05, 1.5, n=100), 3)
    1.789
    >>> round(speedup_with_fixed(0.8, 3, 0.05, 1.5, n=100, fixed_plain=20, fixed_spec=25), 3)
    1.483
    """
    k = as_int(k, "k", minimum=1)
    c = as_real(c, "c", low=0.0)
    verify_ratio = as_real(verify_ratio, "verify_ratio", low=0.0)
    n = as_int(n, "n", minimum=1)
    fixed_plain = as_real(fixed_plain, "fixed_plain", low=0.0)
    fixed_spec = as_real(fixed_spec, "fixed_spec", low=0.0)
    if verify_ratio + k * c == 0:
        raise ValueError("verify_ratio: a step must cost something (verify_ratio + k c > 0)")
    steps = n / float(expected_tokens_per_pass(alpha, k))
    return (fixed_plain + n) / (fixed_spec + steps * (k * c + verify_ratio))


@dataclass
class WallClock:
    """What :func:`wallclock_experiment` measured.

    Arrays of shape ``(len(ks), n_prompts, reps)``, indexed ``[setting, prompt, repetition]``;
    setting 0 (``ks[0] == 0``) is plain decoding.  ``seconds`` is the whole call,
    ``target_seconds`` / ``draft_seconds`` the part spent in each model's forward passes,
    ``target_passes`` / ``draft_passes`` / ``steps`` the counts, ``accepted`` / ``verified``
    the draft tokens kept and judged.  ``target_pass`` is the median time of the run's
    ordinary target passes (one token in plain decoding, ``k + 1`` in a speculative step),
    ``draft_pass`` that of its one-token draft passes, and ``fixed_seconds`` what all the
    run's passes cost beyond that many passes at those medians: the prompt, a draft that
    catches up after a rejection, and the passes that also re-read the cache's window (when
    it moves, and again when a rejection rolls the cache back behind a move).
    """

    ks: np.ndarray
    n_new: int
    seconds: np.ndarray
    target_seconds: np.ndarray
    draft_seconds: np.ndarray
    target_passes: np.ndarray
    draft_passes: np.ndarray
    steps: np.ndarray
    accepted: np.ndarray
    verified: np.ndarray
    target_pass: np.ndarray
    draft_pass: np.ndarray
    fixed_seconds: np.ndarray

    def _median(self, a: np.ndarray) -> np.ndarray:
        return np.median(a.reshape(len(self.ks), -1), axis=1)

    def speedups(self) -> np.ndarray:
        """Plain time / speculative time for the same prompt and repetition, ``(len(ks), runs)``."""
        return (self.seconds[:1] / self.seconds).reshape(len(self.ks), -1)

    def ms_per_token(self) -> np.ndarray:
        """Milliseconds per generated token, ``(len(ks), runs)``."""
        return (1e3 * self.seconds / self.n_new).reshape(len(self.ks), -1)

    @property
    def t1(self) -> float:
        """Seconds of an ordinary (one-token) target pass inside plain decoding: the baseline."""
        return float(self._median(self.target_pass)[0])

    @property
    def c(self) -> np.ndarray:
        """One-token draft pass inside speculative decoding / ``t1``, per setting (nan for plain)."""
        return self._median(self.draft_pass) / self.t1

    @property
    def verify_ratio(self) -> np.ndarray:
        """Ordinary target pass of each setting / ``t1``: ``r(k + 1)`` (1 for plain decoding)."""
        return self._median(self.target_pass) / self.t1

    @property
    def fixed(self) -> np.ndarray:
        """Cost of a run's passes beyond its ordinary ones (prompt, window re-reads), in units of ``t1``."""
        return self._median(self.fixed_seconds) / self.t1

    @property
    def outside_per_step(self) -> np.ndarray:
        """Time per step outside both models' forward passes, in units of ``t1``."""
        outside = self.seconds - self.target_seconds - self.draft_seconds
        return self._median(outside / self.steps) / self.t1

    @property
    def tokens_per_pass(self) -> np.ndarray:
        """Generated tokens per target pass, pooled over runs."""
        return self.n_new * self.seconds[0].size / self.target_passes.reshape(len(self.ks), -1).sum(axis=1)

    @property
    def acceptance(self) -> np.ndarray:
        """Accepted / verified drafts, pooled over runs (nan for plain decoding)."""
        acc = self.accepted.reshape(len(self.ks), -1).sum(axis=1)
        ver = self.verified.reshape(len(self.ks), -1).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(ver > 0, acc / np.maximum(ver, 1), np.nan)

    def speed_table(self) -> str:
        """Markdown: per setting, ms per token, the speed-up (median, middle half), tokens per pass, acceptance."""
        from .render import markdown_table

        s, ms = self.speedups(), self.ms_per_token()
        rows = []
        for i, k in enumerate(self.ks):
            lo, hi = np.percentile(s[i], [25, 75])
            rows.append(["plain" if k == 0 else int(k), f"{np.median(ms[i]):.2f}", f"{np.median(s[i]):.2f}",
                         f"{lo:.2f} - {hi:.2f}", f"{self.tokens_per_pass[i]:.2f}",
                         "-" if k == 0 else f"{self.acceptance[i]:.3f}"])
        return markdown_table(["k", "ms per token", "speed-up", "middle half", "tokens per pass",
                               "accepted / verified"], rows)

    def cost_table(self) -> str:
        """Markdown: per setting, ``c``, ``r(k+1)``, other passes per run and time outside per step (units of ``t1``)."""
        from .render import markdown_table

        rows = [["plain" if k == 0 else int(k), "-" if k == 0 else f"{self.c[i]:.3f}",
                 f"{self.verify_ratio[i]:.2f}", f"{self.fixed[i]:.1f}", f"{self.outside_per_step[i]:.3f}"]
                for i, k in enumerate(self.ks)]
        return markdown_table(["k", "c", "r(k+1)", "other passes, per run", "outside the passes, per step"], rows)

    def best(self) -> tuple[int, float, float, float]:
        """``(k, median speed-up, lower quartile, upper quartile)`` of the fastest draft length."""
        s = self.speedups()[1:]
        med = np.median(s, axis=1)
        i = int(np.argmax(med))
        lo, hi = np.percentile(s[i], [25, 75])
        return int(self.ks[1 + i]), float(med[i]), float(lo), float(hi)

    def predicted(self, alpha: float, with_fixed: bool = True, with_outside: bool = False) -> np.ndarray:
        """The cost model's speed-up at each ``k`` from ``alpha`` and the measured costs.

        A run of ``n`` tokens costs its fixed passes plus, per step, ``k`` draft passes and
        one verification pass, in units of ``t1``; plain decoding costs its fixed passes
        plus ``n`` ordinary passes.  With ``with_outside=True`` each step (and each plain
        token) also costs the time the runs spent outside the passes.  With
        ``with_fixed=False`` (and no outside time) this is
        :func:`speclib.lm.transformer.speedup_with_costs` with the measured ``c`` and ``r(k + 1)``.
        """
        out = []
        o = self.outside_per_step if with_outside else np.zeros(len(self.ks))
        fixed = np.maximum(self.fixed, 0.0) if with_fixed else np.zeros(len(self.ks))
        for i, k in enumerate(self.ks[1:], start=1):
            # time outside the passes: per plain token, and per speculative step
            out.append(speedup_with_fixed(alpha, int(k), float(self.c[i]),
                                          float(self.verify_ratio[i] + o[i]), self.n_new,
                                          float(fixed[0] + self.n_new * o[0]), float(fixed[i])))
        return np.array(out)


def _check_prompts(prompts: object, vocab: int) -> list[np.ndarray]:
    if isinstance(prompts, np.ndarray) or not isinstance(prompts, Sequence) or not prompts:
        raise TypeError("prompts: expected a non-empty list of token arrays")
    return [as_tokens(p, f"prompts[{i}]", vocab, allow_empty=False) for i, p in enumerate(prompts)]


def wallclock_experiment(target: Callable, draft: Callable, prompts: list, n_new: int,
                         ks: Sequence[int] = tuple(range(1, 9)), reps: int = 3, seed: int = 0,
                         threads: int = 1) -> WallClock:
    """Time plain and speculative decoding on the same prompts, on ``threads`` BLAS threads.

    Each repetition runs, for every prompt, plain decoding and then each ``k`` in turn, so
    that slow spells of the machine hit every setting alike; all runs of one prompt and
    repetition use the same seed.  Nothing but the loops themselves is timed.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=6, draft_noise=0.2, seed=0)
    >>> run = wallclock_experiment(target, draft, [[0, 1]], n_new=20, ks=(2,), reps=1)
    >>> run.ks.tolist(), run.speedups().shape, bool(run.verify_ratio[0] == 1.0)
    ([0, 2], (2, 1), True)
    """
    vocab = check_model(target, "target")
    prompts = _check_prompts(prompts, vocab)
    n_new = as_int(n_new, "n_new", minimum=1, maximum=MAX_NEW_TOKENS, why="tokens one run generates")
    reps = timing_repeats(as_int(reps, "reps", minimum=1, maximum=MAX_REPEATS, why="timings settle long before"))
    ks_all = np.array([0] + as_int_list(ks, "ks", minimum=1, maximum=MAX_DRAFT_LENGTH))
    shape = (ks_all.size, len(prompts), reps)
    if math.prod(shape) > MAX_ENTRIES // 16:
        raise ValueError(f"reps: {len(ks_all)} settings x {len(prompts)} prompts x {reps} repetitions "
                         f"is more than the {MAX_ENTRIES // 16} runs one experiment may time")
    fields = {name: np.full(shape, np.nan) for name in (
        "seconds", "target_seconds", "draft_seconds", "target_passes", "draft_passes", "steps", "accepted",
        "verified", "target_pass", "draft_pass", "fixed_seconds")}
    with blas_threads(as_int(threads, "threads", minimum=1)):
        # Warm-up, untimed: the first call of a model may build tables or touch cold memory.
        try:
            autoregressive_generate(target, prompts[0], 2, rng=seed)
        except ValueError as exc:  # plain decoding calls its only model "model"
            raise ValueError(f"target: {exc}") from None
        speculative_generate(target, draft, prompts[0], 4, 2, rng=seed)
        for r in range(reps):
            for j, prompt in enumerate(prompts):
                for i, k in enumerate(ks_all):
                    timings = {"target": 0.0, "draft": 0.0, "passes": []}
                    rng = seed + 1000 * r + j
                    t0 = time.perf_counter()
                    if k == 0:
                        _, stats = autoregressive_generate(target, prompt, n_new, rng=rng, timings=timings)
                        timings["target"] = timings.pop("model", 0.0)  # its only model is the target
                    else:
                        _, stats = speculative_generate(target, draft, prompt, n_new, int(k), rng=rng,
                                                        timings=timings)
                    at = (i, j, r)
                    fields["seconds"][at] = time.perf_counter() - t0
                    if k and stats.draft_passes and not timings["draft"]:
                        raise ValueError(f"draft: made {stats.draft_passes} passes but timed none under 'draft' "
                                         f"(a proposer named {getattr(draft, 'name', '?')!r} records its time "
                                         f"under its own name; name it 'draft')")
                    fields["target_seconds"][at], fields["draft_seconds"][at] = timings["target"], timings["draft"]
                    fields["target_passes"][at] = stats.target_passes
                    fields["draft_passes"][at] = stats.draft_passes
                    fields["steps"][at] = len(stats.tokens_per_step)
                    fields["accepted"][at], fields["verified"][at] = stats.accepted, stats.draft_verified
                    fixed = 0.0
                    for model, size, key in (("target" if k else "model", int(k) + 1, "target_pass"),
                                             ("draft", 1, "draft_pass")):
                        seconds = [t for name, n, t in timings["passes"] if name == model]
                        ordinary = [t for name, n, t in timings["passes"] if name == model and n == size]
                        if ordinary:  # the median: a pass that also re-reads the window is not ordinary
                            fields[key][at] = float(np.median(ordinary))
                            fixed += sum(seconds) - len(seconds) * fields[key][at]
                    fields["fixed_seconds"][at] = fixed
    return WallClock(ks_all, n_new, **fields)


def medusa_heads() -> int:
    """How many heads the shipped Medusa drafter has: it drafts at most that many tokens a step."""
    from ..lm.drafters import DATA_DIR, DRAFTER_FILES, load_weights

    return int(load_weights(DATA_DIR / DRAFTER_FILES["medusa"])[0]["heads"])


def cost_model_rows(record, drafters: Sequence[str], ks: Sequence[int], passes: str = "numpy",
                    device: str = "cpu", temperature: float = 1.0, alpha_k: int = 4) -> list[dict]:
    """The cost model beside the measurement, per drafter and ``k``, from the book's record.

    ``record`` is a :class:`speclib.book.record.Record`.  For each drafter and ``k`` the costs
    of the record's wall-clock runs (``c`` and the loop's own time per step and per plain
    token, in one-token target passes; ``r(k+1)`` of the target's pass inside those runs), the
    acceptance rate inside the loop at ``k = alpha_k`` (the record measures it once, on
    many prompts), and two predictions of
    :func:`speclib.core.cost.speedup_with_overhead`: without the loop's own time
    (``predicted``, the formula of chapter 6 with the measured ``r``) and with it
    (``predicted_with``); beside them the measured median speed-up and its interval.
    Medusa's heads draft ``min(k, heads)`` tokens from one pass, verified by a pass over
    ``min(k, heads) + 1``.  A setting the record lacks is left out.
    """
    from ..core.cost import speedup_with_overhead
    from .record import name

    heads = medusa_heads()
    rows = []
    cond = dict(passes=passes, device=device)
    for d in drafters:
        alpha = record[name("alpha", d, k=alpha_k, T=temperature, where="loop")].value
        c = record[name("c", d, where="loop", **cond)].value
        plain = record[name("outside_plain", d, T=temperature, **cond)].value
        for k in ks:
            drafts, n_passes = (min(k, heads), 1) if d == "medusa" else (k, k)
            keys = {"r": name(f"r{drafts + 1}", d, where="loop", **cond),
                    "outside": name("outside", d, k=k, T=temperature, **cond),
                    "speedup": name("speedup", d, k=k, T=temperature, **cond)}
            if not all(key in record for key in keys.values()):
                continue
            r, o, m = record[keys["r"]].value, record[keys["outside"]].value, record[keys["speedup"]]
            rows.append({"drafter": d, "k": int(k), "alpha": alpha, "c": c, "r": r, "outside": o,
                         "outside_plain": plain, "drafts": drafts, "draft_passes": n_passes,
                         "predicted": speedup_with_overhead(alpha, k, c, r, drafts=drafts, draft_passes=n_passes),
                         "predicted_with": speedup_with_overhead(alpha, k, c, r, o, plain, drafts=drafts,
                                                                 draft_passes=n_passes),
                         "measured": m.value, "low": m.low, "high": m.high})
    return rows


def change_phrase(before: float, after: float, digits: int = 3, rel: float = 0.1) -> str:
    """``"falls from a to b"``, ``"rises from a to b"`` or, within ``rel`` of each other,
    ``"stays near a (b)"``: how a measured figure moves, generated from the two values.

    Examples
    --------
    >>> change_phrase(0.09, 0.05), change_phrase(0.09, 0.13), change_phrase(0.1, 0.104)
    ('falls from 0.090 to 0.050', 'rises from 0.090 to 0.130', 'stays near 0.100 (0.104)')
    """
    before, after = as_real(before, "before", low=0.0), as_real(after, "after", low=0.0)
    f = f"{{:.{int(digits)}f}}".format
    if abs(after - before) <= rel * max(before, after):
        return f"stays near {f(before)} ({f(after)})"
    return f"{'falls' if after < before else 'rises'} from {f(before)} to {f(after)}"


def _list(ns: Sequence[int]) -> str:
    ns = [str(int(n)) for n in ns]
    return ns[0] if len(ns) == 1 else ", ".join(ns[:-1]) + " and " + ns[-1]


def pass_cost_sentences(n: Sequence[int], r: Sequence[float], t1_ms: float, fixed_ms: float,
                        per_token_ms: float) -> dict[str, str]:
    """What a table of measured pass costs shows, in generated sentences (Markdown).

    ``n`` and ``r`` are token counts and the measured ``r(n) = t(n) / t(1)`` (``r(1) = 1``);
    ``t1_ms`` the one-token pass; ``fixed_ms + per_token_ms * n`` a line fitted to the passes
    over two tokens and more.  Returns:

    - ``"fixed"``: where the line's fixed term stands against the one-token pass, which reads
      the same weights, and so whether it can be read as the time to read them;
    - ``"separate"``: at which ``n`` a pass over ``n`` tokens cost less than ``n`` one-token passes;
    - ``"two"``: at which ``n`` it cost less than two one-token passes.

    Examples
    --------
    >>> out = pass_cost_sentences([1, 2, 4, 8], [1.0, 2.9, 3.1, 3.3], 6.0, 16.0, 0.7)
    >>> out["fixed"][:86]
    'The line starts at 16.0 ms, 2.67 times the one-token pass (6.0 ms), which reads the sa'
    >>> out["separate"], out["two"]
    ('A pass over $n$ tokens cost less than $n$ one-token passes at $n =$ 4 and 8, and more at $n =$ 2.', 'No measured pass over two tokens or more cost less than two one-token passes.')
    """
    n = [int(x) for x in n]
    r = [float(x) for x in r]
    if len(n) != len(r) or len(n) < 2:
        raise ValueError("n, r: expected as many costs as token counts, at least two")
    t1_ms, fixed_ms = as_real(t1_ms, "t1_ms", low=0.0), as_real(fixed_ms, "fixed_ms", low=0.0)
    per_token_ms = as_real(per_token_ms, "per_token_ms", low=0.0)
    ratio = fixed_ms / t1_ms
    head = (f"The line starts at {fixed_ms:.1f} ms, {ratio:.2f} times the one-token pass ({t1_ms:.1f} ms), "
            "which reads the same weights")
    if ratio > 1.15:
        fixed = (head + ": so its fixed term is not the time to read the weights. It is what the routine for "
                 "several rows costs before its first token, and that routine is another than the one-row one.")
    elif ratio < 0.85:
        fixed = (head + ": the routine for several rows reads the weights in less time than the one-row routine "
                 "takes for one token, so the line's fixed term is a lower bound on the read, not the read.")
    else:
        fixed = head + ": within 15% of it, so here the fixed term can be read as the time to read the weights."
    many = [(a, b) for a, b in zip(n, r) if a >= 2]
    below = [a for a, b in many if b < a]
    above = [a for a, b in many if b >= a]
    if not above:
        separate = "Every measured pass over $n$ tokens cost less than $n$ one-token passes."
    elif not below:
        separate = "No measured pass over $n$ tokens cost less than $n$ one-token passes."
    else:
        separate = (f"A pass over $n$ tokens cost less than $n$ one-token passes at $n =$ {_list(below)}, "
                    f"and more at $n =$ {_list(above)}.")
    two = [a for a, b in many if b < 2]
    if not two:
        two_text = "No measured pass over two tokens or more cost less than two one-token passes."
    elif len(two) == len(many):
        two_text = "Every measured pass, up to the largest, cost less than two one-token passes."
    else:
        two_text = (f"A pass cost less than two one-token passes at $n =$ {_list(two)}, and at least two at "
                    f"$n =$ {_list([a for a, b in many if b >= 2])}.")
    return {"fixed": fixed, "separate": separate, "two": two_text}


def _pct(x: float) -> str:
    return "under 1%" if 100 * x < 0.5 else f"{100 * x:.0f}%"


def _pct_range(values: list[float]) -> str:
    lo, hi = _pct(min(values)), _pct(max(values))
    return f"by {lo}" if lo == hi else f"by {lo} to {hi}"


def _settings(rows: Sequence[dict]) -> str:
    """``pair (k = 2); medusa (k = 3 to 8)``: settings grouped by drafter, runs of k joined
    (rows with a ``label`` are named by it)."""
    if any("label" in r for r in rows):
        return "; ".join(str(r.get("label", r.get("drafter"))) for r in rows)
    by: dict[str, list[int]] = {}
    for r in rows:
        by.setdefault(r["drafter"], []).append(int(r["k"]))
    parts = []
    for d, ks in by.items():
        ks, runs = sorted(ks), []
        for k in ks:
            if runs and k == runs[-1][1] + 1:
                runs[-1][1] = k
            else:
                runs.append([k, k])
        pieces = [str(a) if a == b else f"{a}, {b}" if b == a + 1 else f"{a} to {b}" for a, b in runs]
        text = pieces[0] if len(pieces) == 1 else ", ".join(pieces[:-1]) + " and " + pieces[-1]
        parts.append(f"{d} (k = {text})")
    return "; ".join(parts)


def gap_sentence(rows: Sequence[dict], key: str = "predicted", model: str = "the formula") -> str:
    """How far ``rows[i][key]`` (a prediction) lies from ``rows[i]["measured"]``, in both directions.

    One generated sentence: in how many settings the prediction is above the measured median
    and by how much (the least and the most, relative to the measurement), in how many below,
    and every setting where it calls the sign wrong (a speed-up above 1 predicted where the
    median measured below 1, or the reverse), named.  No average that would let errors of
    opposite sign cancel.

    Examples
    --------
    >>> rows = [{"drafter": "pair", "k": 2, "predicted": 1.2, "measured": 0.9},
    ...         {"drafter": "pair", "k": 4, "predicted": 1.0, "measured": 1.1}]
    >>> gap_sentence(rows)
    'Of 2 settings, the formula predicts more than was measured in 1 (by 33%) and less in 1 (by 9%); it predicts a speed-up where the median was a slow-down at pair (k = 2).'
    """
    if not rows:
        raise ValueError("rows: expected at least one setting")
    if any(r["measured"] <= 0 for r in rows):
        raise ValueError("rows: a measured speed-up must be positive")
    errors = [r[key] / r["measured"] - 1 for r in rows]
    over = [e for e in errors if e > 0]
    under = [-e for e in errors if e < 0]
    parts = []
    if over:
        parts.append(f"more than was measured in {len(over)} ({_pct_range(over)})")
    if under:
        parts.append(f"less in {len(under)} ({_pct_range(under)})")
    if len(over) + len(under) < len(rows):
        parts.append(f"exactly the measurement in {len(rows) - len(over) - len(under)}")
    out = f"Of {len(rows)} settings, {model} predicts " + " and ".join(parts)
    up = _settings([r for r in rows if r[key] > 1 > r["measured"]])
    down = _settings([r for r in rows if r[key] < 1 < r["measured"]])
    if up:
        out += f"; it predicts a speed-up where the median was a slow-down at {up}"
    if down:
        out += f"; it predicts a slow-down where the median was a speed-up at {down}"
    if not up and not down:
        out += "; it calls the side of 1 right in every one"
    return out + "."


def last_level_cache_bytes(sysfs: str = "/sys/devices/system/cpu/cpu0/cache") -> int | None:
    """Size of the processor's largest cache in bytes, from Linux's sysfs (None where unknown).

    Whether a model's weights fit in it decides whether a pass over a few tokens is bound by
    memory bandwidth (they do not fit) or by arithmetic (they do).
    """
    import os
    from pathlib import Path

    if not isinstance(sysfs, (str, os.PathLike)):
        raise TypeError(f"sysfs: expected a folder path, got {type(sysfs).__name__}")
    sizes = []
    for index in Path(sysfs).glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
        digits = text[:-1] if unit != 1 else text
        if digits.isdigit():
            sizes.append(int(digits) * unit)
    return max(sizes) if sizes else None


def _log_rows(model, ids: np.ndarray) -> np.ndarray:
    """Next-token log-probabilities (up to a constant per row) of ``model`` at every position of ``ids``."""
    if hasattr(model, "logits") and hasattr(model, "config"):  # a transformer: raw scores, window by window
        block = model.config.block_size
        return np.concatenate([model.logits(ids[s:s + block]) for s in range(0, ids.size, block)]).astype(np.float64)
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(model(ids), dtype=np.float64))


def _tempered(log_rows: np.ndarray, temperature: float) -> np.ndarray:
    if temperature == 0.0:
        out = np.zeros_like(log_rows)
        np.put_along_axis(out, log_rows.argmax(axis=1)[:, None], 1.0, axis=1)
        return out
    z = log_rows / temperature
    z -= z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    return z / z.sum(axis=1, keepdims=True)


def position_alphas(target, drafts: dict, ids: object,
                    temperatures: Sequence[float] = (1.0,)) -> dict[tuple[str, float], np.ndarray]:
    """Per-position acceptance rates ``beta_i = sum_x min(p_i(x), q_i(x))`` along a text.

    The target and each draft of ``drafts`` (a dict name -> model; any protocol model, an
    n-gram say) read ``ids`` (teacher forcing; a transformer in windows of its block size,
    the target only once), and at each temperature their rows are sharpened or flattened
    alike (temperature 0: the one-hot row of the most likely token).  The mean of
    ``beta_i`` is the acceptance rate ``alpha`` on that text.

    Returns
    -------
    dict mapping ``(draft name, temperature)`` to an array of ``len(ids)`` rates.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=6, draft_noise=0.0, seed=0)
    >>> betas = position_alphas(target, {"copy": draft}, [0, 1, 2, 3], (0.0, 1.0))
    >>> sorted(betas), bool(np.allclose(betas["copy", 1.0], 1.0))
    ([('copy', 0.0), ('copy', 1.0)], True)
    """
    vocab = check_model(target, "target")
    if not isinstance(drafts, dict) or not drafts:
        raise TypeError(f"drafts: expected a non-empty dict of name -> draft model, got {type(drafts).__name__}")
    for name, model in drafts.items():
        if check_model(model, f"drafts[{name!r}]") != vocab:
            raise ValueError(f"drafts[{name!r}]: vocabulary of {model.vocab_size} tokens differs from the target's {vocab}")
    ids = as_tokens(ids, "ids", vocab, allow_empty=False)
    temps = as_real_list(temperatures, "temperatures", low=0.0)
    with blas_threads(1):
        zq = _log_rows(target, ids)
        q = {t: _tempered(zq, t) for t in temps}
        out = {}
        for name, model in drafts.items():
            zp = _log_rows(model, ids)
            for t in temps:
                out[name, t] = np.minimum(_tempered(zp, t), q[t]).sum(axis=1)
    return out


def block_pass_differences(model, ids: object, block: int) -> dict[str, float]:
    """How a cached pass over ``block`` tokens differs from ``block`` passes over one token.

    ``ids`` is read twice through the model's cache: one token per pass, and ``block`` tokens
    per pass (what a verification pass over ``k + 1 = block`` tokens does).  Returns the
    share of positions whose logits differ at all, the largest absolute difference, and the
    share of positions where the most likely token differs.
    """
    vocab = check_model(model, "model")
    if not hasattr(model, "cache"):
        raise TypeError(f"model: expected a model with a key/value cache (model.cache()), got {type(model).__name__}")
    ids = as_tokens(ids, "ids", vocab, allow_empty=False)
    block = as_int(block, "block", minimum=1)
    one, many = model.cache(), model.cache()
    with blas_threads(1):
        single = np.concatenate([one.extend_logits(ids[i:i + 1]) for i in range(ids.size)])
        blocked = np.concatenate([many.extend_logits(ids[i:i + block]) for i in range(0, ids.size, block)])
    diff = np.abs(single.astype(np.float64) - blocked.astype(np.float64))
    return {
        "share_differing": float((diff.max(axis=1) > 0).mean()),
        "max_abs_difference": float(diff.max()),
        "share_argmax_differing": float((single.argmax(axis=1) != blocked.argmax(axis=1)).mean()),
    }


def greedy_divergence(target, draft, prompts: list, n_new: int, k: int) -> list[int]:
    """For each prompt, the first position where greedy speculative text leaves greedy text (-1: never).

    Both models are read at temperature 0 (one-hot rows), so speculative decoding keeps a
    draft exactly when it is the target's most likely token; any difference between the
    two texts comes from the floating-point difference between a pass over ``k + 1`` tokens
    and passes over one.
    """
    vocab = check_model(target, "target")
    check_model(draft, "draft")
    for name, model in (("target", target), ("draft", draft)):
        if not hasattr(model, "with_temperature"):
            raise TypeError(f"{name}: expected a model with with_temperature(), got {type(model).__name__}")
    prompts = _check_prompts(prompts, vocab)
    n_new, k = as_int(n_new, "n_new", minimum=1), as_int(k, "k", minimum=1)
    t0, d0 = target.with_temperature(0.0), draft.with_temperature(0.0)
    out = []
    with blas_threads(1):
        for prompt in prompts:
            plain, _ = autoregressive_generate(t0, prompt, n_new, rng=0)
            spec, _ = speculative_generate(t0, d0, prompt, n_new, k, rng=0)
            differ = np.flatnonzero(plain != spec)
            out.append(int(differ[0]) if differ.size else -1)
    return out



def processor_summary() -> str:
    """One line on the processor and linear-algebra library that timed a chapter's passes.

    For the short note each timing chapter carries ("how these numbers were measured"):
    the processor's model name (from ``/proc/cpuinfo`` where Linux provides it), the number
    of logical cores, the largest cache (:func:`last_level_cache_bytes`), numpy's BLAS with
    the kernel it runs and whether the environment forced it, the matrix-product strategies
    the transformer chose from (:func:`speclib.lm.products.describe`), and the one-minute
    load average when it is called: a load above the number of cores means other programs
    shared the processor while the timings were taken.

    Examples
    --------
    >>> "logical cores" in processor_summary()
    True
    """
    import os
    import platform
    from pathlib import Path

    name = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    name = name or platform.processor() or platform.machine() or "an unidentified processor"
    parts = [name, f"{os.cpu_count() or 1} logical cores"]
    cache = last_level_cache_bytes()
    if cache:
        parts.append(f"largest cache {cache / 2**20:.0f} MiB")
    blas = _blas_name()
    if blas:
        parts.append(f"numpy {np.__version__} with {blas}")
    load = _load_average()
    if load is not None:
        # Above the number of cores, other programs shared the processor during the timings.
        parts.append(f"load average {load:.1f} while measuring")
    return ", ".join(parts)


def _load_average() -> float | None:
    """The system's one-minute load average, or None where the platform has none."""
    import os

    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def _blas_name() -> str:
    """numpy's BLAS, its kernel and the product strategies (speclib.lm.products.describe), or ""."""
    from ..lm.products import describe

    try:
        return describe()
    except Exception:  # an unusual build that threadpoolctl and numpy cannot describe
        return ""


def needed_alpha(k: int, c: float, verify_ratio: float, goal: float) -> float:
    """The smallest acceptance rate at which the cost model's speed-up reaches ``goal``.

    The speed-up ``E(alpha, k) / (k c + verify_ratio)`` grows with ``alpha``; the answer is
    found by bisection to 1e-12, 0.0 when even ``alpha = 0`` reaches the goal, nan when not
    even ``alpha = 1`` does.

    Examples
    --------
    >>> round(needed_alpha(1, 0.1, 1.2, 1.5), 6)   # k = 1: goal (c + r) - 1
    0.95
    >>> import math; math.isnan(needed_alpha(4, 0.2, 3.0, 1.5))
    True
    """
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    c = as_real(c, "c", low=0.0)
    verify_ratio = as_real(verify_ratio, "verify_ratio", low=0.0)
    goal = as_real(goal, "goal", low=0.0)
    cost = k * c + verify_ratio
    if cost <= 0:
        raise ValueError("verify_ratio: a step must cost something (verify_ratio + k c > 0)")

    def speedup(a: float) -> float:
        return float(expected_tokens_per_pass(a, k)) / cost

    if speedup(1.0) < goal:
        return math.nan
    if speedup(0.0) >= goal:
        return 0.0
    lo, hi = 0.0, 1.0
    while hi - lo > 1e-12:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if speedup(mid) >= goal else (mid, hi)
    return hi


def goal_sentence(speedup: float, alpha: float, k: int, c: float, verify_ratio: float, goal: float = 1.5) -> str:
    """What a measured wall-clock speed-up says about a goal, in one or two generated sentences.

    ``speedup`` is the measured median at draft length ``k``; ``alpha``, ``c`` and
    ``verify_ratio`` (``r(k+1)``) are the costs measured there.  When the goal is missed, the
    cost model says how far each lever would have to move with the others held: the
    verification cost ``E / goal - k c`` (refused as impossible below one pass) and the
    acceptance rate (:func:`needed_alpha`).  Every case gives one consistent statement.

    Examples
    --------
    >>> goal_sentence(1.62, 0.8, 4, 0.1, 1.3)
    'The goal of 1.5x is met: 1.62x in wall-clock time at k = 4.'
    >>> print(goal_sentence(1.1, 0.7, 4, 0.12, 1.8))  # doctest: +NORMALIZE_WHITESPACE
    The goal of 1.5x is missed: 1.10x in wall-clock time at k = 4. With the same acceptance rate (0.700) and
    draft cost (c = 0.120), the cost model needs a verification pass of at most 1.37 single passes, against 1.80
    measured; with the measured costs it needs an acceptance rate of 0.809.
    """
    speedup = as_real(speedup, "speedup", low=0.0)
    alpha = as_real(alpha, "alpha", low=0.0, high=1.0)
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    c = as_real(c, "c", low=0.0)
    verify_ratio = as_real(verify_ratio, "verify_ratio", low=0.0)
    goal = as_real(goal, "goal", low=0.0)
    head = f"The goal of {goal:g}x is {{}}: {speedup:.2f}x in wall-clock time at k = {k}."
    if speedup >= goal:
        return head.format("met")
    out = [head.format("missed")]
    r_needed = float(expected_tokens_per_pass(alpha, k)) / goal - k * c
    costs = f"With the same acceptance rate ({alpha:.3f}) and draft cost (c = {c:.3f}), the cost model"
    if r_needed < 1.0:
        lever = (f"{costs} would need a verification pass cheaper than a single-token pass "
                 f"({max(r_needed, 0.0):.2f}), which no kernel gives")
    else:
        lever = (f"{costs} needs a verification pass of at most {r_needed:.2f} single passes, against "
                 f"{verify_ratio:.2f} measured")
    a_needed = needed_alpha(k, c, verify_ratio, goal)
    if math.isnan(a_needed):
        lever += ("; with the measured costs no acceptance rate reaches it at this k: even drafts that "
                  "are always kept lose to the cost of a step.")
    else:
        lever += f"; with the measured costs it needs an acceptance rate of {a_needed:.3f}."
    out.append(lever)
    return " ".join(out)

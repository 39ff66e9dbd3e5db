"""Tables and intervals for the going-further chapters 11 to 14 (real text, adaptive k, trees, variants).

:func:`below` prints an exact result as a bound that holds on any processor;
:func:`tv_table` builds the "exact rule against a faulty one" tables of chapters 13 and 14;
:func:`tokens_per_pass_interval` gives tokens per target pass with a batch-means interval;
:func:`fmt_interval` writes ``(value, low, high)`` for the prose; :func:`lookup_against_draft`
compares prompt lookup with a draft model on the same prompts.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._validate import MAX_NEW_TOKENS, as_int, as_real, as_tokens
from .render import bounded


def below(value: float, bound: float = 1e-12) -> str:
    """``"below 1e-12"``: an exact result printed as a bound that holds on any processor.

    Raises ``ValueError`` when ``value`` is not below ``bound`` (the result is not exact).

    Examples
    --------
    >>> below(3e-17)
    'below 1e-12'
    >>> below(2e-7, bound=1e-6)
    'below 1e-06'
    """
    value = as_real(value, "value")
    bound = as_real(bound, "bound", low=0.0)
    if not bound > 0:
        raise ValueError(f"bound: must be positive, got {bound!r}")
    if not abs(value) < bound:
        raise ValueError(f"value: {value!r} is not below the bound {bound:.0e}")
    return bounded(value, bound)  # the one place the book writes a bound


class TVTable(NamedTuple):
    """A Markdown table of distances from the target, and what the prose quotes from it."""

    markdown: str
    exact: str  #: the exact rule's distances as one bound, e.g. "below 1e-12"
    bug_min: float  #: the faulty rule's smallest distance
    bug_max: float  #: the faulty rule's largest distance


def tv_table(header: list, rows: list, bound: float = 1e-12, digits: int = 3) -> TVTable:
    """Build a table whose last two columns are an exact rule's and a faulty rule's distance.

    ``rows`` holds ``(cells, exact, faulty)``: the leading cells (any values, printed with
    ``str``), the exact rule's distance (printed as :func:`below` ``bound``, and checked) and
    the faulty rule's (printed with ``digits`` decimals).

    Examples
    --------
    >>> t = tv_table(["k", "exact", "faulty"], [([1], 1e-17, 0.25), ([2], 0.0, 0.5)])
    >>> print(t.markdown)
    | k | exact | faulty |
    |---|---|---|
    | 1 | below 1e-12 | 0.250 |
    | 2 | below 1e-12 | 0.500 |
    >>> t.exact, t.bug_min, t.bug_max
    ('below 1e-12', 0.25, 0.5)
    """
    if not isinstance(header, (list, tuple)) or len(header) < 2:
        raise ValueError("header: expected a list of at least two column names")
    if not isinstance(rows, (list, tuple)) or not rows:
        raise ValueError("rows: expected a non-empty list of (cells, exact, faulty)")
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    faulty = []
    for i, row in enumerate(rows):
        try:
            cells, exact, wrong = row
        except (TypeError, ValueError):
            raise ValueError(f"rows[{i}]: expected (cells, exact, faulty), got {row!r}") from None
        cells = list(cells)
        if len(cells) + 2 != len(header):
            raise ValueError(f"rows[{i}]: {len(cells) + 2} columns for a header of {len(header)}")
        text = below(exact, bound)
        wrong = as_real(wrong, f"rows[{i}] faulty distance", low=0.0)
        faulty.append(wrong)
        lines.append("| " + " | ".join([*map(str, cells), text, f"{wrong:.{digits}f}"]) + " |")
    return TVTable("\n".join(lines), below(0.0, bound), min(faulty), max(faulty))


def tokens_per_pass_interval(stats: list, n_batches: int = 20, level: float = 0.95) -> tuple[float, float, float]:
    """Tokens per target pass of several runs, with a batch-means interval over their steps.

    ``stats`` holds the runs' :class:`speclib.core.decoding.GenerationStats`; every step is
    one target pass, so the mean of the steps' token counts is the tokens per pass.  Steps
    of one run are correlated, hence batch means
    (:func:`speclib.book.render.batch_means_interval`) over the runs' steps in order.

    Returns ``(value, low, high)``.
    """
    from .render import batch_means_interval

    if not isinstance(stats, (list, tuple)) or not stats:
        raise ValueError("stats: expected a non-empty list of GenerationStats")
    steps = []
    for i, st in enumerate(stats):
        if not hasattr(st, "tokens_per_step") or not hasattr(st, "target_passes"):
            raise TypeError(f"stats[{i}]: expected GenerationStats, got {type(st).__name__}")
        if len(st.tokens_per_step) != st.target_passes:
            raise ValueError(f"stats[{i}]: {len(st.tokens_per_step)} steps for {st.target_passes} target "
                             "passes (a step that is not one target pass)")
        steps.extend(st.tokens_per_step)
    ci = batch_means_interval(np.asarray(steps, dtype=float), n_batches, level)
    return ci.mean, ci.low, ci.high


def fmt_interval(estimate, digits: int = 2) -> str:
    """``"1.50 (1.40 to 1.60)"`` from ``(value, low, high)``.

    Examples
    --------
    >>> fmt_interval((1.5, 1.4, 1.6))
    '1.50 (1.40 to 1.60)'
    """
    try:
        value, low, high = (float(v) for v in estimate)
    except (TypeError, ValueError):
        raise ValueError(f"estimate: expected (value, low, high), got {estimate!r}") from None
    f = f"{{:.{int(digits)}f}}"
    return f"{f.format(value)} ({f.format(low)} to {f.format(high)})"


def separated(a, b) -> bool:
    """Whether two ``(value, low, high)`` intervals do not overlap.

    Examples
    --------
    >>> separated((1.0, 0.9, 1.1), (1.5, 1.2, 1.8)), separated((1.0, 0.9, 1.3), (1.5, 1.2, 1.8))
    (True, False)
    """
    (_, lo_a, hi_a), (_, lo_b, hi_b) = a, b
    return hi_a < lo_b or hi_b < lo_a


class LookupComparison(NamedTuple):
    """Prompt lookup against a draft model on the same prompts."""

    lookup: tuple  #: tokens per target pass, (value, low, high)
    draft: tuple  #: tokens per target pass with the draft model, (value, low, high)
    draft_passes_per_token: float  #: draft passes the draft model made per generated token
    c_even: float  #: the draft cost c (in target passes) at which both cost the same per token


def lookup_against_draft(target, draft, prompts: list, n_new: int, k_lookup: int, k_draft: int) -> LookupComparison:
    """Run prompt lookup (``k_lookup``) and ``draft`` (``k_draft``) on every prompt, seed = prompt index.

    Per generated token, lookup costs ``1 / L`` target passes (``L`` its tokens per pass);
    the draft model costs ``(P + c D) / N`` for ``P`` target passes, ``D`` draft passes and
    ``N`` tokens.  ``c_even`` solves ``1 / L = (P + c D) / N`` for ``c``: above it, lookup is
    cheaper per token.
    """
    from ..core.decoding import speculative_generate
    from ..core.proposers import PromptLookup

    if not isinstance(prompts, (list, tuple)) or not prompts:
        raise ValueError("prompts: expected a non-empty list of token arrays")
    look = [speculative_generate(target, PromptLookup(), p, n_new, k_lookup, rng=j)[1]
            for j, p in enumerate(prompts)]
    spec = [speculative_generate(target, draft, p, n_new, k_draft, rng=j)[1] for j, p in enumerate(prompts)]
    look_ci, spec_ci = tokens_per_pass_interval(look), tokens_per_pass_interval(spec)
    tokens, passes, drafts = (sum(getattr(s, a) for s in spec)
                              for a in ("tokens_generated", "target_passes", "draft_passes"))
    look_tpp = sum(s.tokens_generated for s in look) / sum(s.target_passes for s in look)
    c_even = (tokens / look_tpp - passes) / drafts
    return LookupComparison(look_ci, spec_ci, drafts / tokens, c_even)


def steps_interval(steps, n_batches: int = 20, level: float = 0.95) -> tuple[float, float, float]:
    """Mean tokens per step (one target pass each) with a batch-means interval: ``(value, low, high)``.

    Examples
    --------
    >>> steps_interval([1, 3] * 20)
    (2.0, 2.0, 2.0)
    """
    from .render import batch_means_interval

    ci = batch_means_interval(np.asarray(steps, dtype=float), n_batches, level)
    return ci.mean, ci.low, ci.high


def pooled_acceptance_interval(target, draft, prompts: list, max_new_tokens: int, k: int, seed: int = 0,
                               level: float = 0.95) -> tuple[float, float, float]:
    """Accepted / verified drafts pooled over one generation per prompt, with a prompt-level interval.

    The estimate is :func:`speclib.book.render.pooled_acceptance` (generation ``i`` uses the
    seed ``seed + i``).  Drafts of one generation are correlated, so the interval treats each
    prompt as one cluster: the ratio estimator's linearised standard error over prompts, with
    a Student-t quantile on ``len(prompts) - 1`` degrees of freedom.  Returns ``(value, low, high)``.
    """
    from scipy import stats as _stats

    from .render import trace_generation

    if isinstance(prompts, (str, bytes, np.ndarray)) or not isinstance(prompts, (list, tuple)) or len(prompts) < 2:
        raise ValueError("prompts: expected a list of at least two prompts (sequences of token ids)")
    prompts = [as_tokens(p, f"prompts[{i}]", allow_empty=False) for i, p in enumerate(prompts)]
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", minimum=0, maximum=MAX_NEW_TOKENS)
    seed = as_int(seed, "seed", minimum=0)
    level = as_real(level, "level", low=0.0, high=1.0)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: must lie in (0, 1), got {level!r}")
    acc, ver = [], []
    for i, prompt in enumerate(prompts):
        st = trace_generation(target, draft, prompt, max_new_tokens, k, seed + i).stats
        acc.append(st.accepted)
        ver.append(st.draft_verified)
    acc, ver = np.asarray(acc, dtype=float), np.asarray(ver, dtype=float)
    if ver.sum() == 0:
        raise ValueError("prompts: no draft was verified (give max_new_tokens >= 1)")
    ratio = acc.sum() / ver.sum()
    n = acc.size
    se = np.sqrt(n / (n - 1) * np.sum((acc - ratio * ver) ** 2)) / ver.sum()
    half = _stats.t.ppf(0.5 + level / 2, n - 1) * se
    return float(ratio), float(ratio - half), float(ratio + half)

"""What happened inside a speculative generation: a trace, its statistics, and coloured text.

:func:`trace_generation` runs :func:`speclib.core.decoding.speculative_generate` unchanged, with
a verifier that records every block it judges: how many drafts were proposed and kept,
and the acceptance probability ``beta = sum_x min(p(x), q(x))`` at each position the
target verified.  From that record:

* every new token gets a *kind*: ``"accepted"`` (a draft the target kept),
  ``"corrected"`` (drawn from the residual after a rejection) or ``"bonus"`` (the free
  token after a block with no rejection);
* :func:`acceptance_by_position` gives the acceptance rate at draft position 1, 2, ..., k
  of a block.  If acceptances were independent with one rate alpha, the curve would be flat;
  a rising curve means that a block which survived its first drafts is in an easier stretch
  of text (correct runs cluster);
* :func:`to_ansi` and :func:`to_html` colour the text by kind, for a terminal and for a
  notebook.

The text-side statistics need no generation: :func:`acceptance_probabilities` computes
``beta`` at every position of a text, :func:`implied_acceptance_correlation` the
correlation between successive acceptances that those betas imply, and
:func:`expected_tokens_along_text` and :func:`expected_tokens_renewal` the tokens per pass to
expect when each block's drafts meet the betas of consecutive positions instead of one
constant alpha (a block may start anywhere, or only where the previous block stopped).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._validate import (MAX_DRAFT_LENGTH, MAX_NEW_TOKENS, as_bool, as_distribution, as_generator, as_int,
                         as_probability_array, as_real, as_real_array, as_tokens, model_rows)
from ..core.decoding import GenerationStats, _check_model, speculative_generate
from ..core.sampling import Verification, verify

ACCEPTED, CORRECTED, BONUS = "accepted", "corrected", "bonus"
KINDS = (ACCEPTED, CORRECTED, BONUS)


@dataclass
class Block:
    """One speculative step as the verifier saw it."""

    k: int  #: drafts proposed in this step
    n_accepted: int  #: drafts kept
    beta: np.ndarray  #: sum min(p, q) at each verified position (n_accepted + 1, or k if all kept)

    @property
    def outcomes(self) -> np.ndarray:
        """1 for each accepted draft, then 0 for the rejected one (if any)."""
        return (np.arange(self.beta.size) < self.n_accepted).astype(int)


@dataclass
class Trace:
    """The record of one speculative generation (see :func:`trace_generation`)."""

    prompt: np.ndarray
    tokens: np.ndarray  #: the new tokens
    kinds: list[str]  #: the kind of each new token
    blocks: list[Block]
    k: int
    stats: GenerationStats = field(repr=False)


def _check_trace(trace: object) -> Trace:
    if not isinstance(trace, Trace):
        raise TypeError(f"trace: expected a Trace from trace_generation, got {type(trace).__name__}")
    return trace


class _Recorder:
    """A verifier that calls :func:`speclib.core.sampling.verify` and remembers each block."""

    def __init__(self, progress: Callable[[int], None] | None) -> None:
        self.blocks: list[Block] = []
        self.emitted = 0
        self.progress = progress

    def __call__(self, draft_tokens, p_draft, q_target, rng, **kwargs) -> Verification:
        """As :func:`speclib.core.sampling.verify` (its inputs checked), recording the block."""
        return self._record(verify(draft_tokens, p_draft, q_target, rng, **kwargs), draft_tokens, p_draft, q_target)

    def step(self, draft_tokens, p_draft, q_target, choose, *, bonus: bool = True) -> Verification:
        """The trusted core the one loop calls (``verify.step``: its rows are checked once, by the
        loop), recording the block; the draws go through ``choose`` as the loop's own do."""
        return self._record(verify.step(draft_tokens, p_draft, q_target, choose, bonus=bonus),
                            draft_tokens, p_draft, q_target)

    def _record(self, out: Verification, draft_tokens, p_draft, q_target) -> Verification:
        k = len(draft_tokens)
        judged = min(out.n_accepted + 1, k)
        beta = np.minimum(p_draft[:judged], q_target[:judged]).sum(axis=1)
        self.blocks.append(Block(k, out.n_accepted, beta))
        self.emitted += len(out.tokens)
        if self.progress is not None:
            self.progress(self.emitted)
        return out


def trace_generation(
    target: Callable,
    draft: Callable,
    prompt: np.ndarray,
    max_new_tokens: int,
    k: int,
    rng: np.random.Generator | int,
    *,
    progress: Callable[[int], None] | None = None,
) -> Trace:
    """Speculative generation, recording what the verifier did at every block.

    The tokens are exactly those :func:`speclib.core.decoding.speculative_generate` returns for
    the same arguments and ``rng`` (it is what runs).

    Parameters
    ----------
    target, draft, prompt, max_new_tokens, k, rng :
        As in :func:`speclib.core.decoding.speculative_generate`.
    progress : callable, optional
        Called after each block with the number of tokens emitted so far (it may exceed
        ``max_new_tokens`` at the last block).

    Returns
    -------
    Trace

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=8, draft_noise=0.3, seed=0)
    >>> trace = trace_generation(target, draft, [0], 12, k=3, rng=0)
    >>> len(trace.tokens) == len(trace.kinds) == 12
    True
    >>> sorted(set(trace.kinds)) <= sorted(KINDS)
    True
    """
    vocab = _check_model(target, "target")
    prompt = as_tokens(prompt, "prompt", vocab, allow_empty=False)
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    as_int(max_new_tokens, "max_new_tokens", minimum=0, maximum=MAX_NEW_TOKENS)
    rng = as_generator(rng)
    if progress is not None and not callable(progress):
        raise TypeError(f"progress: expected a function of the number of tokens, got {type(progress).__name__}")
    recorder = _Recorder(progress)
    tokens, stats = speculative_generate(target, draft, prompt, max_new_tokens, k, rng, verifier=recorder)
    kinds: list[str] = []
    # From the loop's own per-step counts: a step without drafts (a proposer with nothing to
    # offer) never reaches the verifier, but still emits one token sampled from the target.
    for depth, n_accepted in zip(stats.k_per_step, stats.accepted_per_step):
        kinds += [ACCEPTED] * n_accepted + [BONUS if n_accepted == depth else CORRECTED]
    return Trace(prompt, tokens, kinds[: tokens.size], recorder.blocks, k, stats)


# ------------------------------------------------------------------------------ statistics
def acceptance_by_position(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Acceptance rate at each draft position of a block, and how many drafts it rests on.

    Position ``j`` (1-based) is judged only when drafts ``1 .. j-1`` were kept, so entry
    ``j - 1`` estimates ``P(accept draft j | drafts before it accepted)``.  Only blocks of
    the full length ``trace.k`` count (the last block may be shorter).

    Returns
    -------
    rate : ndarray of shape (k,)
        NaN where no draft was judged at that position.
    n_judged : ndarray of int, shape (k,)
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"trace: expected a Trace from trace_generation, got {type(trace).__name__}")
    accepted = np.zeros(trace.k)
    judged = np.zeros(trace.k, dtype=int)
    for block in trace.blocks:
        if block.k == trace.k:
            outcomes = block.outcomes
            judged[: outcomes.size] += 1
            accepted[: outcomes.size] += outcomes
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(judged > 0, accepted / np.maximum(judged, 1), np.nan)
    return rate, judged


def verified_betas(trace: Trace) -> np.ndarray:
    """``beta`` at every position the target verified, in order."""
    if not isinstance(trace, Trace):
        raise TypeError(f"trace: expected a Trace from trace_generation, got {type(trace).__name__}")
    return np.concatenate([b.beta for b in trace.blocks]) if trace.blocks else np.zeros(0)


def acceptance_probabilities(target: Callable, draft: Callable, tokens: np.ndarray) -> np.ndarray:
    """``beta_t = sum_x min(p(x | tokens[:t+1]), q(x | tokens[:t+1]))`` at every position of a text.

    ``beta_t`` is the probability that a token drafted after ``tokens[: t + 1]`` is accepted.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=4, draft_noise=0.0, seed=0)
    >>> acceptance_probabilities(target, draft, [0, 1, 2]).round(6)
    array([1., 1., 1.])
    """
    vocab = _check_model(target, "target")
    if _check_model(draft, "draft") != vocab:
        raise ValueError("draft: vocabulary differs from the target's")
    tokens = as_tokens(tokens, "tokens", vocab)
    return np.minimum(model_rows(draft, tokens, "draft"), model_rows(target, tokens, "target")).sum(axis=1)


def trace_betas(target: Callable, draft: Callable, trace: Trace) -> np.ndarray:
    """``beta`` at every new position of a trace: the acceptance probability of a draft made there.

    Entry ``t`` is computed after ``prompt + tokens[:t]``; the betas of the positions the
    target verified are among them (:func:`verified_betas`).
    """
    trace = _check_trace(trace)
    full = np.concatenate([trace.prompt, trace.tokens])
    return acceptance_probabilities(target, draft, full)[trace.prompt.size - 1: -1]


def pooled_acceptance(target: Callable, draft: Callable, prompts: list, max_new_tokens: int, k: int,
                      seed: int = 0) -> float:
    """Accepted / verified drafts, pooled over one speculative generation per prompt.

    Generation ``i`` uses the seed ``seed + i``.

    Many short generations from different prompts measure acceptance over varied contexts,
    where one long generation could drift into a single region (a greedy loop, say).
    """
    if isinstance(prompts, (str, bytes, np.ndarray)) or not isinstance(prompts, (list, tuple)):
        raise TypeError(f"prompts: expected a list of prompts (sequences of token ids), got {type(prompts).__name__}")
    for i, prompt in enumerate(prompts):
        as_tokens(prompt, f"prompts[{i}]", allow_empty=False)
    as_int(max_new_tokens, "max_new_tokens", minimum=0, maximum=MAX_NEW_TOKENS)
    seed = as_int(seed, "seed", minimum=0)
    accepted = verified = 0
    for i, prompt in enumerate(prompts):
        stats = trace_generation(target, draft, prompt, max_new_tokens, k, seed + i).stats
        accepted += stats.accepted
        verified += stats.draft_verified
    if verified == 0:
        raise ValueError("prompts: no draft was verified (give at least one prompt and max_new_tokens >= 1)")
    return accepted / verified


def implied_acceptance_correlation(beta: np.ndarray, lag: int = 1) -> float:
    """Correlation between the acceptances of drafts ``lag`` positions apart that ``beta`` implies.

    With acceptance at position ``t`` a coin of probability ``beta_t`` (coins independent
    given the betas), ``corr(a_t, a_{t+lag}) = cov(beta_t, beta_{t+lag}) / (alpha (1 - alpha))``
    with ``alpha`` the mean beta.  Zero when beta is the same everywhere (the article's
    setting); positive when easy and hard contexts come in stretches.

    Examples
    --------
    >>> implied_acceptance_correlation([0.5] * 10)
    0.0
    >>> implied_acceptance_correlation([1, 1, 0, 0] * 50) > 0
    True
    """
    beta = as_probability_array(beta, "beta")
    lag = as_int(lag, "lag", minimum=1)
    if beta.ndim != 1 or beta.size <= lag + 1:
        raise ValueError(f"beta: expected a 1-D sequence longer than lag + 1 = {lag + 1}, "
                         f"got shape {beta.shape}")
    alpha = float(beta.mean())
    if alpha in (0.0, 1.0):
        return 0.0
    a, b = beta[:-lag], beta[lag:]
    cov = float(np.mean((a - a.mean()) * (b - b.mean())))
    return cov / (alpha * (1.0 - alpha))


def expected_tokens_along_text(beta: np.ndarray, k: int) -> float:
    """Mean tokens per pass when a block starting at ``t`` meets ``beta_t, beta_{t+1}, ...``.

    A block starting at position ``t`` emits ``1 + beta_t + beta_t beta_{t+1} + ... +
    beta_t ... beta_{t+k-1}`` tokens on average.  With one constant beta this is the
    independence formula ``(1 - alpha**(k+1)) / (1 - alpha)``; with betas that vary along
    the text it is the average over every starting position.

    Examples
    --------
    >>> expected_tokens_along_text([0.5] * 20, k=2)
    1.75
    """
    beta = as_probability_array(beta, "beta")
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    if beta.ndim != 1 or beta.size < k:
        raise ValueError(f"beta: expected a 1-D sequence of at least k = {k} values, got shape {beta.shape}")
    starts = beta.size - k + 1
    total = np.ones(starts)
    run = np.ones(starts)
    for j in range(k):
        run = run * beta[j: j + starts]
        total += run
    return float(total.mean())


def expected_tokens_renewal(beta: np.ndarray, k: int) -> float:
    """Tokens per pass when blocks tile the text one after another, each meeting the local betas.

    The first block starts at position 0; a block starting at ``t`` accepts its ``j``-th
    draft with probability ``beta_{t+j}`` (coins independent given the betas), so it ends
    at the first rejection, at ``t + j``, or after its bonus token, at ``t + k``; the next
    block starts right after.  Unlike :func:`expected_tokens_along_text`, which starts a
    block at every position alike, this puts block starts where decoding puts them: just
    after the previous block's rejection.  Computed exactly by dynamic programming over
    the expected number of blocks ``B(t)`` needed from position ``t`` to the end.

    Returns
    -------
    float
        ``len(beta) / B(0)``.

    Examples
    --------
    >>> round(expected_tokens_renewal([0.5] * 10_000, k=2), 3)    # (1 - 0.5**3) / 0.5 = 1.75
    1.75
    """
    beta = as_probability_array(beta, "beta")
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    if beta.ndim != 1 or beta.size == 0:
        raise ValueError(f"beta: expected a non-empty 1-D sequence, got shape {beta.shape}")
    n = beta.size
    b = beta.tolist() + [1.0] * k  # past the end nothing is left to cover
    blocks = [0.0] * (n + k + 2)  # blocks[t]: expected blocks to cover positions t .. n-1
    for t in range(n - 1, -1, -1):  # plain floats: this loop is the whole cost
        expected, survive = 1.0, 1.0
        for j in range(k):
            expected += survive * (1.0 - b[t + j]) * blocks[min(t + j + 1, n)]  # rejected at draft j
            survive *= b[t + j]
        blocks[t] = expected + survive * blocks[min(t + k + 1, n)]  # all kept, then the bonus
    return float(n / blocks[0])


#: The highest confidence level :func:`batch_means_interval` accepts: nearer to 1, ``0.5 + level / 2``
#: rounds to 1 in double precision and the interval's bounds become infinite (or NaN).
MAX_LEVEL = 1.0 - 1e-9


def batch_means_interval(values: object, n_batches: int = 20, level: float = 0.95):
    """Confidence interval for the mean of a *correlated* sequence, by batch means.

    Successive blocks of a generation, or successive positions of a text, are not
    independent (correct runs cluster), so the Student-t interval over single values is too
    narrow.  Cut the sequence into ``n_batches`` consecutive batches; when a batch is much
    longer than the correlation, the batch means are nearly independent and the Student-t
    interval over them (:func:`speclib.core.stats.mean_confidence_interval`) has about the stated
    coverage.  The interval is centred on the mean of all the values.

    Parameters
    ----------
    values : array_like of real, shape (n,)
    n_batches : int, default 20
        At least 2 and at most ``n``.
    level : float in (0, 1), default 0.95

    Returns
    -------
    speclib.core.stats.ConfidenceInterval

    Examples
    --------
    >>> ci = batch_means_interval([1.0, 2.0] * 50, n_batches=10)
    >>> ci.mean, ci.low == ci.high == 1.5
    (1.5, True)
    """
    from ..core.stats import ConfidenceInterval, mean_confidence_interval

    arr = as_real_array(values, "values")
    n_batches = as_int(n_batches, "n_batches", minimum=2)
    if arr.ndim != 1 or arr.size < n_batches:
        raise ValueError(f"values: expected a 1-D sequence of at least n_batches = {n_batches} values, "
                         f"got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("values: contains NaN or an infinite value")
    level = as_real(level, "level", low=0.0, high=1.0)
    if not 0.0 < level <= MAX_LEVEL:
        raise ValueError(f"level: must lie in (0, {MAX_LEVEL!r}] (closer to 1 the Student-t quantile "
                         f"overflows to infinity), got {level!r}")
    means = [batch.mean() for batch in np.array_split(arr, n_batches)]
    ci = mean_confidence_interval(means, level)
    mean = float(arr.mean())
    return ConfidenceInterval(mean, mean - (ci.mean - ci.low), mean + (ci.high - ci.mean), ci.level)


def repeating_tail(tokens: object, max_period: int = 16) -> tuple[np.ndarray, int]:
    """The loop a generation ended in: the shortest unit that the end of ``tokens`` repeats.

    Returns ``(unit, length)``: the text's last ``length`` tokens are ``unit`` repeated
    (the first copy possibly cut), and ``length`` is the longest such stretch over the periods
    up to ``max_period``.  A stretch counts only if it holds at least two copies of the unit;
    when none does, ``length`` is 0 and ``unit`` is empty.

    Examples
    --------
    >>> unit, length = repeating_tail([5, 1, 2, 3, 1, 2, 3, 1, 2, 3])
    >>> unit.tolist(), length
    ([1, 2, 3], 9)
    >>> repeating_tail([1, 2, 3])[1]
    0
    """
    tokens = as_tokens(tokens, "tokens")
    if (tokens < 0).any():
        raise ValueError(f"tokens: token ids are non-negative, got {int(tokens.min())}")
    max_period = as_int(max_period, "max_period", minimum=1)
    best_unit, best_length = tokens[:0], 0
    for period in range(1, min(max_period, tokens.size // 2) + 1):
        same = tokens[period:] == tokens[:-period]  # same[i]: token i + period repeats token i
        broken = np.flatnonzero(~same)
        length = period + int(same.size - (broken[-1] + 1) if broken.size else same.size)
        if length >= 2 * period and length > best_length:
            best_unit, best_length = tokens[-period:], length
    return best_unit, best_length


def markdown_table(header: list, rows: list) -> str:
    """A Markdown table from column names and rows of cells (shown with ``IPython.display.Markdown``).

    Examples
    --------
    >>> print(markdown_table(["a", "b"], [[1, "x"]]))
    | a | b |
    | --- | --- |
    | 1 | x |
    """
    for name, value in (("header", header), ("rows", rows)):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise TypeError(f"{name}: expected a list, got {type(value).__name__}")
    header = [str(cell) for cell in header]
    rows = list(rows)
    for i, row in enumerate(rows):
        if isinstance(row, (str, bytes)) or not hasattr(row, "__len__"):
            raise TypeError(f"rows: row {i} is {row!r}, not a list of cells")
        if len(row) != len(header):
            raise ValueError(f"rows: row {i} has {len(row)} cells, the header {len(header)}")
    lines = [header, ["---"] * len(header)] + [[str(cell) for cell in row] for row in rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


# ------------------------------------------------------------------------------- rendering
#: ANSI styles: accepted drafts green, corrections white on red, bonus tokens white on blue.
ANSI_STYLES = {ACCEPTED: "\033[32m", CORRECTED: "\033[1;37;41m", BONUS: "\033[1;37;44m"}
ANSI_RESET = "\033[0m"
#: Background colours of the HTML rendering (colour-blind-safe pairs of light tints).
HTML_COLOURS = {ACCEPTED: "#c6e9c3", CORRECTED: "#f7c0b0", BONUS: "#b9d3f0"}


def _runs(trace: Trace, vocab) -> list[tuple[str, str]]:
    """``(kind, text)`` runs of the new tokens; a newline that is not accepted shows as "↵"."""
    runs: list[tuple[str, str]] = []
    for token, kind in zip(vocab.decode(trace.tokens), trace.kinds):
        text = "\u21b5\n" if token == "\n" and kind != ACCEPTED else token
        if runs and runs[-1][0] == kind:
            runs[-1] = (kind, runs[-1][1] + text)
        else:
            runs.append((kind, text))
    return runs


def _check_vocab(vocab: object) -> None:
    if not callable(getattr(vocab, "decode", None)):
        raise TypeError(f"vocab: expected a Vocabulary (speclib.lm.corpora.shared_vocabulary()), got "
                        f"{type(vocab).__name__}")


def to_ansi(trace: Trace, vocab, color: bool = True) -> str:
    """The prompt and the new text, coloured by kind with ANSI escapes (plain if ``color`` is False).

    ``vocab`` turns ids into text (:func:`speclib.lm.corpora.shared_vocabulary`).  Colours
    never span a line break, so the text pages and copies cleanly.
    """
    trace = _check_trace(trace)
    _check_vocab(vocab)
    color = as_bool(color, "color")
    prompt = vocab.decode(trace.prompt)
    if not color:
        return prompt + vocab.decode(trace.tokens)
    out = [prompt]
    for kind, text in _runs(trace, vocab):
        lines = text.split("\n")
        out.append("\n".join(f"{ANSI_STYLES[kind]}{line}{ANSI_RESET}" if line else "" for line in lines))
    return "".join(out)


def ansi_legend() -> str:
    """One line that explains the terminal colours."""
    return "  ".join(f"{ANSI_STYLES[k]}{k}{ANSI_RESET}" for k in KINDS)


#: Characters per line of generated text on a page (the book's narrowest column holds about 70 of its output font).
FOLD_WIDTH = 64


def _fold_breaks(text: str, width: int) -> dict[int, str]:
    """Where :func:`fold_lines` breaks ``text``: {index of the space it replaces: what replaces it}."""
    breaks, start = {}, 0
    for line in text.split("\n"):
        indent = line[:len(line) - len(line.lstrip(" "))]
        if len(indent) > width // 2:
            indent = ""
        col, last_space, i = 0, None, 0
        while i < len(line):
            if line[i] == " " and i >= len(indent):
                last_space = i
            col += 1
            if col > width and last_space is not None:
                breaks[start + last_space] = "\n" + indent + "  "
                col = i - last_space + len(indent) + 2
                last_space = None
            i += 1
        start += len(line) + 1
    return breaks


def fold_lines(text: str, width: int = FOLD_WIDTH) -> str:
    """``text`` with every line longer than ``width`` broken at a space, each continuation
    indented two spaces past the line's own indentation, so that printed code keeps its shape in
    a narrow column instead of wrapping to the left edge.  A line with no space to break at is
    left whole.

    >>> print(fold_lines("    return the_first_value + the_second_value", width=30))
        return the_first_value +
          the_second_value
    """
    width = as_int(width, "width", minimum=8)
    breaks = _fold_breaks(text, width)
    return "".join(breaks.get(i, ch) for i, ch in enumerate(text))


def to_html(trace: Trace, vocab, width: int = FOLD_WIDTH) -> str:
    """The prompt and the new text as an HTML ``<pre>`` block, new tokens shaded by kind.

    Display it in a notebook with ``IPython.display.HTML``.  The prompt is shown in bold.
    Lines longer than ``width`` characters are folded at a space as :func:`fold_lines` does,
    and long runs of spaces wrap like words (CSS ``break-spaces``), so a loop of spaces that
    greedy decoding falls into stays visible instead of running off the page.
    """
    trace = _check_trace(trace)
    _check_vocab(vocab)
    width = as_int(width, "width", minimum=8)
    prompt = vocab.decode(trace.prompt)
    runs = list(_runs(trace, vocab))
    breaks = _fold_breaks(prompt + "".join(text for _, text in runs), width)
    start = 0

    def folded(text):
        nonlocal start
        out = "".join(breaks.get(start + i, ch) for i, ch in enumerate(text))
        start += len(text)
        return html.escape(out)

    spans = [f"<b>{folded(prompt)}</b>"]
    for kind, text in runs:
        spans.append(f'<span class="spec-{kind}" style="background:{HTML_COLOURS[kind]}" '
                     f'title="{kind}">{folded(text)}</span>')
    legend = " ".join(f'<span style="background:{HTML_COLOURS[k]};padding:0 0.4em">{k}</span>' for k in KINDS)
    return (f'<div class="spec-trace"><div style="font-size:90%">{legend}</div>'
            f'<pre style="white-space:break-spaces;line-height:1.35">{"".join(spans)}</pre></div>')


def ranking_sentence(estimates: dict, what: str = "rate", digits: int = 2) -> str:
    """A sentence that ranks estimates only as far as their intervals allow.

    ``estimates`` maps a name to ``(value, low, high)`` (an estimate and its interval).  The
    leader is named alone only when its interval lies above every other's; otherwise the
    names whose intervals reach the leader's are reported together as within noise of each
    other.  A name below that group is said to be below exactly those members whose
    intervals lie above its own: below all of them when it is, else below the ones it is
    separated from (its interval still overlaps the others').

    Examples
    --------
    >>> ranking_sentence({"a": (0.80, 0.78, 0.82), "b": (0.70, 0.68, 0.72)})
    'a has the highest rate, 0.80 (0.78 to 0.82), above b at 0.70 (0.68 to 0.72).'
    >>> ranking_sentence({"a": (0.80, 0.74, 0.86), "b": (0.78, 0.72, 0.84), "c": (0.5, 0.45, 0.55)})
    'a (0.80, 0.74 to 0.86) and b (0.78, 0.72 to 0.84) cannot be told apart on this sample: their intervals overlap; c is below both at 0.50 (0.45 to 0.55).'
    >>> ranking_sentence({"a": (1.0, 0.9, 1.1), "b": (0.9, 0.7, 1.0), "c": (0.8, 0.75, 0.85)})
    'a (1.00, 0.90 to 1.10) and b (0.90, 0.70 to 1.00) cannot be told apart on this sample: their intervals overlap; c at 0.80 (0.75 to 0.85) is below a, and its interval overlaps that of b.'
    """
    if not isinstance(estimates, dict) or len(estimates) < 2:
        raise ValueError("estimates: expected a dict of at least two names to (value, low, high)")
    rows = []
    for name, triple in estimates.items():
        try:
            value, low, high = (float(v) for v in triple)
        except (TypeError, ValueError):
            raise ValueError(f"estimates[{name!r}]: expected (value, low, high), got {triple!r}") from None
        if not (low <= value <= high) or not np.isfinite([value, low, high]).all():
            raise ValueError(f"estimates[{name!r}]: expected low <= value <= high, finite, got {triple!r}")
        rows.append((value, low, high, str(name)))
    rows.sort(key=lambda r: -r[0])
    f = f"{{:.{int(digits)}f}}"

    def full(r):
        return f"{f.format(r[0])} ({f.format(r[1])} to {f.format(r[2])})"

    def listing(names):
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]

    leader = rows[0]
    group = [r for r in rows if r[2] >= leader[1]]
    rest = [r for r in rows if r[2] < leader[1]]
    if len(group) == 1:
        others = ", ".join(f"{r[3]} at {full(r)}" for r in rest)
        return f"{leader[3]} has the highest {what}, {full(leader)}, above {others}."
    names = [f"{r[3]} ({f.format(r[0])}, {f.format(r[1])} to {f.format(r[2])})" for r in group]
    out = f"{listing(names)} cannot be told apart on this sample: their intervals overlap"
    below_all = [r for r in rest if all(r[2] < g[1] for g in group)]
    if below_all:
        everyone = "both" if len(group) == 2 else "them"
        out += "; " + ", ".join(f"{r[3]}" for r in below_all[:-1]) + (" and " if len(below_all) > 1 else "") + \
            f"{below_all[-1][3]} {'is' if len(below_all) == 1 else 'are'} below {everyone}" + \
            (f" at {full(below_all[0])}" if len(below_all) == 1 else f" ({'; '.join(full(r) for r in below_all)})")
    for r in rest:
        if r in below_all:
            continue
        above = [g[3] for g in group if r[2] < g[1]]
        overlapping = [g[3] for g in group if r[2] >= g[1]]
        out += (f"; {r[3]} at {full(r)} is below {listing(above)}, and its interval overlaps "
                f"{'that' if len(overlapping) == 1 else 'those'} of {listing(overlapping)}")
    return out + "."


def below(value: float, bound: float = 1e-12) -> str:
    """``"below <bound>"``, the constant a page prints for a quantity that must be negligible.

    Raises ``ValueError`` unless ``|value|`` is under a tenth of ``bound``: the printed text
    never depends on the value's digits (which change from processor to processor), and the
    tenfold margin keeps it true on every one.

    Examples
    --------
    >>> below(5.4e-231)
    'below 1e-12'
    >>> below(3e-13)
    Traceback (most recent call last):
    ...
    ValueError: value: 3e-13 is not below a tenth of the bound 1e-12
    """
    if not abs(float(value)) < bound / 10:
        raise ValueError(f"value: {float(value):.3g} is not below a tenth of the bound {bound:g}")
    return f"below {bound:g}"


def bounded(value: float, bound: float = 1e-12, spec: str = ".2g") -> str:
    """``value`` as text, or ``"below <bound>"`` when it is smaller than ``bound`` in magnitude.

    For printed outputs that another processor must reproduce: an exact distance of 3.8e-17 is a
    rounding residue whose digits change with the order of floating-point sums, and a p-value of
    5e-231 says no more than "below 1e-12".  The bound is what a reader can rely on.

    Examples
    --------
    >>> bounded(3.8e-17)
    'below 1e-12'
    >>> bounded(0.031)
    '0.031'
    >>> bounded(5.4e-231, bound=1e-4)
    'below 1e-04'
    """
    value = as_real(value, "value")
    bound = as_real(bound, "bound")
    if not bound > 0:
        raise ValueError(f"bound: must be > 0, got {bound:g}")
    if not isinstance(spec, str):
        raise TypeError(f"spec: expected a format specification such as '.2g', got {type(spec).__name__}")
    if abs(value) < bound:
        return f"below {bound:.0e}"
    try:
        return format(value, spec)
    except ValueError:
        raise ValueError(f"spec: {spec!r} is not a format specification for a float") from None

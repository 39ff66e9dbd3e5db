"""Drafting with recorded distributions, and a step-by-step record of verification.

Chapters 2 and 3 take one speculative step apart:

* :func:`draft_block`: the draft proposes ``k`` tokens one at a time and keeps the
  distribution ``p`` each one was sampled from (verification needs them);
* :func:`score_block`: one target call on ``prefix + drafts`` returns the ``k + 1``
  target rows ``q`` (the drafted positions and the one after them);
* :func:`verify_trace`: runs :func:`speclib.core.sampling.verify` itself, with a random
  generator that writes down every uniform number it hands out, and lays the decisions
  out token by token (draft token, ``p(x)``, ``q(x)``, ``min(1, q(x)/p(x))``, the uniform
  ``u``, accepted or not).  Because the decisions are verify's own, the trace cannot
  drift from the algorithm it explains;
* :func:`speculative_trace`: several such blocks in a row, drawing exactly the random
  numbers that :func:`speclib.core.decoding.speculative_generate` draws, so with the same
  seed both emit the same tokens;
* :func:`trace_markdown`: the trace as a Markdown table for a notebook.
"""

from __future__ import annotations

import re
from typing import Callable, NamedTuple

import numpy as np

from .._validate import (MAX_BLOCKS, MAX_DRAFT_LENGTH, as_bool, as_distribution, as_generator, as_int,
                         as_tokens)
from ..core.decoding import _check_model, _last_rows, prepare_run
from ..core.sampling import Sampler, Verification, sample_token, verify

ACCEPTED, REJECTED, BONUS = "accepted", "rejected", "bonus"


class RecordingGenerator(np.random.Generator):
    """A ``numpy.random.Generator`` that remembers every scalar ``random()`` it returns.

    Built on the bit generator of an existing Generator, it *shares* that generator's
    state: drawing from one advances the other, so recording changes no random number.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> rec = RecordingGenerator(rng)
    >>> u = rec.random()
    >>> rec.draws == [u], u == np.random.default_rng(0).random()
    (True, True)
    """

    def __init__(self, rng: np.random.Generator | int) -> None:
        super().__init__(as_generator(rng).bit_generator)
        self.draws: list[float] = []

    def random(self, *args, **kwargs):  # noqa: D102 (numpy's docstring applies)
        out = super().random(*args, **kwargs)
        if np.ndim(out) == 0:
            self.draws.append(float(out))
        return out


class DraftBlock(NamedTuple):
    """``k`` drafted tokens and the draft distribution each was sampled from."""

    tokens: np.ndarray  #: shape (k,)
    p_rows: np.ndarray  #: shape (k, V); row i is the distribution tokens[i] was drawn from


def draft_block(draft: Callable, prefix: np.ndarray, k: int, rng: np.random.Generator | int) -> DraftBlock:
    """Let the draft propose ``k`` tokens after ``prefix``, one draft pass each.

    Each token is sampled from the draft's next-token distribution given the prefix and
    the tokens drafted so far, and that distribution is recorded: it is the ``p`` that
    verification divides by.  The random numbers are the ones
    :func:`speclib.core.decoding.speculative_generate` draws for its drafts.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> _, draft = markov_pair(vocab_size=8, seed=0)
    >>> block = draft_block(draft, [0], k=3, rng=1)
    >>> block.tokens.shape, block.p_rows.shape
    ((3,), (3, 8))
    """
    vocab = _check_model(draft, "draft")
    prefix = as_tokens(prefix, "prefix", vocab, allow_empty=False)
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    rng = as_generator(rng)
    seq, p_rows = prefix, []
    for _ in range(k):
        p = _rows(draft, seq, 1, "draft")[0]  # the distribution of the next token ...
        p_rows.append(p)
        seq = np.append(seq, sample_token(p, rng))  # ... and the token drawn from it
    return DraftBlock(seq[prefix.size:], np.array(p_rows))


def score_block(target: Callable, prefix: np.ndarray, draft_tokens: np.ndarray) -> np.ndarray:
    """The target's rows for every drafted position and the one after: one target call.

    A causal model's row ``i`` depends only on tokens ``0 .. i``, so one call on
    ``prefix + drafts`` gives ``q(. | prefix)``, ``q(. | prefix, x1)``, ...,
    ``q(. | prefix, x1 .. xk)``: ``k + 1`` rows, the last for the bonus token.

    Returns
    -------
    ndarray of shape (k + 1, V)
    """
    vocab = _check_model(target, "target")
    prefix = as_tokens(prefix, "prefix", vocab, allow_empty=False)
    draft_tokens = as_tokens(draft_tokens, "draft_tokens", vocab)
    k = draft_tokens.size
    return _rows(target, np.concatenate([prefix, draft_tokens]), k + 1, "target")


def _rows(model: Callable, tokens: np.ndarray, n: int, name: str) -> np.ndarray:
    """The model's last ``n`` rows for ``tokens``, checked: NaN or unnormalised rows name the model."""
    return as_distribution(_last_rows(model, tokens, n, name), f"{name} (the rows it returned)")


class TraceRow(NamedTuple):
    """One line of the verification trace."""

    block: int  #: which block (step) of the generation, from 0
    position: int  #: 1-based position inside the block
    outcome: str  #: "accepted", "rejected" or "bonus"
    draft_token: int | None  #: the drafted token (None for a bonus line)
    p_x: float | None  #: draft probability of the drafted token
    q_x: float | None  #: target probability of the drafted token
    accept_prob: float | None  #: min(1, q_x / p_x)
    u: float | None  #: the uniform number compared with accept_prob
    emitted: int  #: the token this line puts in the output


class BlockTrace(NamedTuple):
    """Everything about one verified block."""

    block: int
    draft_tokens: np.ndarray  #: shape (k,)
    p_rows: np.ndarray  #: shape (k, V)
    q_rows: np.ndarray  #: shape (k + 1, V)
    verification: Verification  #: what :func:`speclib.core.sampling.verify` returned
    rows: list[TraceRow]


def verify_trace(
    draft_tokens: np.ndarray,
    p_draft: np.ndarray,
    q_target: np.ndarray,
    rng: np.random.Generator | int,
    *,
    bonus: bool = True,
    block: int = 0,
) -> BlockTrace:
    """Run :func:`speclib.core.sampling.verify` and record each of its decisions.

    The arguments are verify's.  The uniform numbers verify draws are recorded: one per
    judged draft (accepted while ``u < min(1, q(x)/p(x))``), then one for the correction
    token after a rejection or for the bonus token.

    Returns
    -------
    BlockTrace
        With one :class:`TraceRow` per judged draft, plus a ``"bonus"`` row when all
        drafts were kept and ``bonus`` is on.  The ``emitted`` column, read top to bottom,
        is ``verification.tokens``.

    Examples
    --------
    >>> p = [[0.5, 0.5], [0.5, 0.5]]
    >>> q = [[0.5, 0.5], [1.0, 0.0], [0.5, 0.5]]    # the target never says 1 at position 2
    >>> t = verify_trace([0, 1], p, q, rng=3)
    >>> [(r.outcome, r.draft_token, r.emitted) for r in t.rows]
    [('accepted', 0, 0), ('rejected', 1, 0)]
    """
    bonus = as_bool(bonus, "bonus")
    block = as_int(block, "block", minimum=0)
    rec = RecordingGenerator(rng)
    out = verify(draft_tokens, p_draft, q_target, rec, bonus=bonus)
    # verify validated the inputs; these conversions cannot fail now.
    p_draft, q_target = np.asarray(p_draft, float), np.asarray(q_target, float)
    draft_tokens = as_tokens(draft_tokens, "draft_tokens")
    k = draft_tokens.size
    rows = []
    for i in range(min(out.n_accepted + 1, k)):
        x = int(draft_tokens[i])
        p_x, q_x = float(p_draft[i, x]), float(q_target[i, x])
        kept = i < out.n_accepted
        rows.append(TraceRow(block, i + 1, ACCEPTED if kept else REJECTED, x, p_x, q_x,
                             min(1.0, q_x / p_x), rec.draws[i], int(out.tokens[i])))
    if out.n_accepted == k and bonus:
        rows.append(TraceRow(block, k + 1, BONUS, None, None, None, None, None, int(out.tokens[k])))
    return BlockTrace(block, draft_tokens, p_draft, q_target, out, rows)


def speculative_trace(
    target: Callable,
    draft: Callable,
    prompt: np.ndarray,
    n_blocks: int,
    k: int,
    rng: np.random.Generator | int,
    *,
    bonus: bool = True,
) -> list[BlockTrace]:
    """``n_blocks`` speculative steps, each drafted, scored and verified with a full trace.

    Draws the same random numbers in the same order as
    :func:`speclib.core.decoding.speculative_generate`, so the tokens emitted by the blocks,
    concatenated, are the first tokens that ``speculative_generate`` returns with the same
    models, prompt, ``k`` and seed (as long as it is asked for at least ``k`` more tokens,
    so that it drafts full blocks too).

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=8, draft_noise=0.3, seed=0)
    >>> blocks = speculative_trace(target, draft, [0], n_blocks=2, k=3, rng=1)
    >>> len(blocks), blocks[1].block
    (2, 1)
    """
    vocab = _check_model(target, "target")
    if _check_model(draft, "draft") != vocab:
        raise ValueError(f"draft: vocabulary of {draft.vocab_size} tokens differs from the target's {vocab}")
    tokens = as_tokens(prompt, "prompt", vocab, allow_empty=False)
    n_blocks = as_int(n_blocks, "n_blocks", minimum=1, maximum=MAX_BLOCKS)
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    bonus = as_bool(bonus, "bonus")
    rng = as_generator(rng)
    blocks: list[BlockTrace] = []

    def tracing_verifier(draft_tokens, p_draft, q_target, rng, *, bonus=True):
        blocks.append(verify_trace(draft_tokens, p_draft, q_target, rng, bonus=bonus, block=len(blocks)))
        return blocks[-1].verification

    # The one loop, stepped n_blocks times; room for n_blocks full blocks, so every step drafts k.
    run = prepare_run(target, draft, tokens, n_blocks * (k + 1), k, bonus, tracing_verifier)
    chooser = Sampler(rng)
    for _ in range(n_blocks):
        run.step(chooser)
    return blocks


def trace_tokens(blocks: list[BlockTrace]) -> np.ndarray:
    """The tokens a list of traced blocks emitted, in order."""
    if isinstance(blocks, (str, bytes)) or not isinstance(blocks, (list, tuple)):
        raise TypeError(f"blocks: expected a list of BlockTrace (from speculative_trace), got {type(blocks).__name__}")
    for i, block in enumerate(blocks):
        if not isinstance(block, BlockTrace):
            raise TypeError(f"blocks[{i}]: expected a BlockTrace, got {type(block).__name__}")
    if not blocks:
        return np.array([], dtype=np.int64)
    return np.concatenate([b.verification.tokens for b in blocks]).astype(np.int64)


def trace_markdown(blocks: list[BlockTrace], digits: int = 3) -> str:
    """The trace as a Markdown table, one line per judged draft or bonus token.

    Columns: block, position, the draft token ``x``, ``p(x)``, ``q(x)``,
    ``min(1, q/p)``, the uniform ``u``, the decision (keep, reject, bonus) and the emitted
    token (after a rejection, the replacement drawn from the residual).
    """
    digits = as_int(digits, "digits", minimum=0)
    if not isinstance(blocks, list) or not all(isinstance(b, BlockTrace) for b in blocks):
        raise TypeError("blocks: expected a list of BlockTrace (from speculative_trace or verify_trace)")

    def num(v: float | None) -> str:
        return "" if v is None else f"{v:.{digits}f}"

    lines = ["| block | pos | x | p(x) | q(x) | min(1, q/p) | u | decision | emits |",
             "|---:|---:|---:|---:|---:|---:|---:|:---|---:|"]
    for b in blocks:
        for r in b.rows:
            decision = {ACCEPTED: "keep", REJECTED: "**reject**", BONUS: "bonus"}[r.outcome]
            x = "" if r.draft_token is None else str(r.draft_token)
            lines.append(f"| {r.block} | {r.position} | {x} | {num(r.p_x)} | {num(r.q_x)} | "
                         f"{num(r.accept_prob)} | {num(r.u)} | {decision} | {r.emitted} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- a timeline of a traced run

#: Colours of the timeline: what happened to each drafted or emitted token.
TIMELINE_COLOURS = {"accepted": "#2ca02c", "rejected": "#d62728", "unjudged": "#c7c7c7",
                    "corrected": "#ff7f0e", "bonus": "#1f77b4", "target": "#9467bd", "plain": "#7f7f7f",
                    "loop": "#e0d4ea"}
_LANES = {"plain": 0, "output": 1, "target": 2, "draft": 3}
#: The timeline's size in inches: 675 pixels at 100 dpi, the book's column, so that its
#: 9-point labels show at 9 pixels or more (tests/test_figures.py).
TIMELINE_SIZE = (6.75, 3.0)


def _printable(text: str) -> str:
    return {"\n": "\u23ce", " ": "\u2423"}.get(text, text)


def timeline_boxes(blocks: list[BlockTrace], c: float = 0.1, r: float | Callable[[int], float] = 1.0,
                   outside: float = 0.0, outside_plain: float = 0.0
                   ) -> list[tuple[str, float, float, str, int | None]]:
    """The boxes of a timeline of ``blocks``: ``(lane, start, width, kind, token)`` each.

    Time is in units of one target pass over one token; a draft pass costs ``c``, and a
    verification pass over ``n`` tokens costs ``r(n)`` (a function) or ``r`` (a number, the
    same for every step).  ``r = 1`` is the idealised memory-bound accelerator, where checking
    ``k + 1`` tokens costs one pass; on a CPU it is measured (``speclib.lm.transformer.time_pass``).
    Block after block: ``k`` draft passes (each box a drafted token, of kind ``"accepted"``,
    ``"rejected"`` or ``"unjudged"``, the drafts after a rejection), then one target pass over
    ``k + 1`` tokens (lane ``"target"``), whose end emits the block's tokens (lane ``"output"``:
    ``"accepted"``, ``"corrected"`` or ``"bonus"``).  ``outside`` is the loop's own work per
    step between the passes (drawing, the verification rule, rolling the caches back), drawn
    after the target pass (lane ``"target"``, kind ``"loop"``).  Lane ``"plain"`` shows plain
    decoding making the same tokens, one one-token target pass each plus ``outside_plain``.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=8, draft_noise=0.3, seed=0)
    >>> boxes = timeline_boxes(speculative_trace(target, draft, [0], n_blocks=2, k=3, rng=1))
    >>> sorted({lane for lane, *_ in boxes})
    ['draft', 'output', 'plain', 'target']
    """
    from .._validate import as_real

    c = as_real(c, "c", low=0.0)
    outside = as_real(outside, "outside", low=0.0)
    outside_plain = as_real(outside_plain, "outside_plain", low=0.0)
    cost = _pass_cost(r)
    trace_tokens(blocks)  # checks the list
    boxes, t, n_out = [], 0.0, 0
    for b in blocks:
        k = b.draft_tokens.size
        n_acc = b.verification.n_accepted
        for i, x in enumerate(b.draft_tokens):
            kind = "accepted" if i < n_acc else "rejected" if i == n_acc else "unjudged"
            boxes.append(("draft", t + i * c, c, kind, int(x)))
        t += k * c
        verify = cost(k + 1)
        boxes.append(("target", t, verify, "target", None))
        emitted = b.verification.tokens
        width = verify / max(1, emitted.size)
        for j, y in enumerate(emitted):
            kind = "accepted" if j < n_acc else "bonus" if j == k else "corrected"
            boxes.append(("output", t + j * width, width, kind, int(y)))
        t += verify
        if outside:
            boxes.append(("target", t, outside, "loop", None))
            t += outside
        n_out += emitted.size
    per = 1.0 + outside_plain
    boxes += [("plain", j * per, per, "plain", None) for j in range(n_out)]
    return boxes


def _pass_cost(r) -> Callable[[int], float]:
    """``r`` of :func:`timeline_boxes` as a function of the tokens in the pass, checked."""
    from .._validate import as_real

    if callable(r):
        return lambda n: as_real(r(n), f"r({n})", low=0.0)
    value = as_real(r, "r", low=0.0)
    return lambda n: value


def _tokens(n: int) -> str:
    return f"{n} token" if n == 1 else f"{n} tokens"


def plot_timeline(blocks: list[BlockTrace], c: float = 0.1, decode: Callable[[int], str] | None = None,
                  ax=None, upto: int | None = None, title: str | None = None,
                  r: float | Callable[[int], float] = 1.0, outside: float = 0.0, outside_plain: float = 0.0):
    """Draw a traced generation as a timeline: draft passes, target passes, emitted tokens.

    ``blocks`` come from :func:`speculative_trace`; ``c`` is a draft pass and ``r`` a
    verification pass (a number, or a function of the tokens in the pass) in units of one
    one-token target pass, and ``outside`` / ``outside_plain`` the loop's own time per step and
    per plain token, as in :func:`timeline_boxes`; ``decode`` turns a token id into the text
    printed in its box.  Every label stays inside the axes.  ``upto`` draws only the first ``upto`` blocks on the axes of the
    whole run (the frames of :func:`timeline_animation`).  Returns the axes.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    boxes = timeline_boxes(blocks, c, r, outside, outside_plain)
    cost = _pass_cost(r)
    decode = (lambda t: str(t)) if decode is None else decode
    if not callable(decode):
        raise TypeError(f"decode: expected a function from a token id to text, got {type(decode).__name__}")
    if ax is None:
        _, ax = plt.subplots(figsize=TIMELINE_SIZE)
    upto = len(blocks) if upto is None else as_int(upto, "upto", minimum=0, maximum=len(blocks))
    end = sum(b.draft_tokens.size * c + cost(b.draft_tokens.size + 1) + outside for b in blocks)
    shown_end = sum(b.draft_tokens.size * c + cost(b.draft_tokens.size + 1) + outside for b in blocks[:upto])
    n_shown = sum(b.verification.tokens.size for b in blocks[:upto])
    for lane, start, width, kind, token in boxes:
        if start >= shown_end - 1e-12:
            continue  # not reached yet
        y = _LANES[lane]
        width = min(width, shown_end - start)  # plain decoding, cut where the run has got to
        ax.add_patch(Rectangle((start, y - 0.38), width, 0.76, facecolor=TIMELINE_COLOURS[kind],
                               edgecolor="white", linewidth=0.8))
        if lane == "output":  # the text, where it is emitted
            ax.text(start + width / 2, y, _printable(decode(token)), ha="center", va="center",
                    fontsize=9, family="monospace", color="white")
        elif lane == "draft" and kind == "rejected":  # the draft the target turned down, above its box
            x = max(start + width / 2, 0.012 * end)  # never across the left edge
            ax.text(x, y + 0.62, _printable(decode(token)), ha="center", va="center",
                    fontsize=9, family="monospace", color=TIMELINE_COLOURS[kind])
    plain_done = min(int(shown_end / (1.0 + outside_plain) + 1e-9), sum(b.verification.tokens.size for b in blocks))
    for lane, count in (("output", n_shown), ("plain", plain_done)):
        ax.text(end * 1.01, _LANES[lane], _tokens(count), va="center", fontsize=9)
    ax.set_xlim(0, end * 1.2)
    ax.set_ylim(-0.6, 4.2)
    ax.set_yticks(list(_LANES.values()), ["plain", "output", "target", "draft"])
    ax.set_xlabel("time, in one-token target passes")
    ax.set_title(title or (f"{len(blocks)} speculative steps, k = {blocks[0].draft_tokens.size}"
                           if blocks else "no steps"))
    kinds = ("accepted", "rejected", "unjudged", "corrected", "bonus") + (("loop",) if outside else ())
    legend = [Patch(color=TIMELINE_COLOURS[k], label="loop's own work" if k == "loop" else k) for k in kinds]
    ax.legend(handles=legend, fontsize=9, ncol=len(kinds), loc="upper center", bbox_to_anchor=(0.45, -0.3),
              frameon=False, handlelength=1.0, columnspacing=0.8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return ax


def typical_trace(target: Callable, draft: Callable, prompt, tokens_per_step: float, n_blocks: int = 6,
                  k: int = 4, seeds: range = range(40)) -> tuple[list[BlockTrace], int]:
    """A trace of ``n_blocks`` steps whose tokens per step are the typical ones, and its seed.

    Of the traces :func:`speculative_trace` draws with each seed in ``seeds``, the first whose
    mean tokens per step lies nearest ``tokens_per_step`` (a measured mean, e.g. the book's
    record at this ``k``): a figure of a few steps then shows what a typical stretch does, not
    a lucky one.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=8, draft_noise=0.3, seed=0)
    >>> blocks, seed = typical_trace(target, draft, [0], tokens_per_step=2.0, n_blocks=4, k=3)
    >>> sum(b.verification.tokens.size for b in blocks) / len(blocks)
    2.0
    """
    from .._validate import as_real

    tokens_per_step = as_real(tokens_per_step, "tokens_per_step", low=1.0)
    if len(seeds) == 0:
        raise ValueError("seeds: expected at least one seed")
    best = None
    for seed in seeds:
        blocks = speculative_trace(target, draft, prompt, n_blocks=n_blocks, k=k, rng=seed)
        gap = abs(sum(b.verification.tokens.size for b in blocks) / len(blocks) - tokens_per_step)
        if best is None or gap < best[0] - 1e-12:
            best = (gap, blocks, int(seed))
    return best[1], best[2]


def animation_html(anim) -> str:
    """A matplotlib animation as self-contained HTML that loads nothing from another site.

    ``to_jshtml`` embeds every frame but links its buttons' icon font (Font Awesome 4) from a
    CDN; the link is dropped, so the page works offline (the book's theme ships Font Awesome,
    which draws the same icons).
    """
    from matplotlib.animation import Animation

    if not isinstance(anim, Animation):
        raise TypeError(f"anim: expected a matplotlib animation, got {type(anim).__name__}")
    return re.sub(r"<link[^>]*font-awesome[^>]*>", "", anim.to_jshtml())


def timeline_animation(blocks: list[BlockTrace], c: float = 0.1, decode: Callable[[int], str] | None = None,
                       interval: int = 900, r: float | Callable[[int], float] = 1.0, title: str | None = None,
                       outside: float = 0.0, outside_plain: float = 0.0):
    """:func:`plot_timeline` one block at a time, as a ``matplotlib.animation.FuncAnimation``.

    Frame ``i`` shows the first ``i`` blocks.  ``anim.to_jshtml()`` renders it as
    self-contained HTML (the frames are embedded images, no network needed).
    """
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation

    trace_tokens(blocks)
    interval = as_int(interval, "interval", minimum=1)
    _pass_cost(r)  # checks it before any frame is drawn
    fig, ax = plt.subplots(figsize=TIMELINE_SIZE)
    fig.subplots_adjust(bottom=0.3, left=0.11, right=0.98)

    def frame(i: int):
        ax.clear()
        plot_timeline(blocks, c, decode, ax=ax, upto=i, r=r, title=title, outside=outside,
                      outside_plain=outside_plain)
        return []

    # frame i shows the first i steps; the first frame already shows one (an empty one says nothing)
    anim = FuncAnimation(fig, frame, frames=range(1, len(blocks) + 1), interval=interval, blit=False)
    plt.close(fig)  # the animation is shown as HTML, not as a static figure
    return anim

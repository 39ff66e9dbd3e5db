"""Interactive explorers for the chapters (ipywidgets).

Each explorer is split in two: a pure function that computes what the explorer shows for
given slider values (tested in tests/), and a ``*_explorer()`` function that wires it to
``ipywidgets.interact``.  The rendered book cannot run widgets, so every chapter shows a
static figure made by the same pure function next to the explorer.

An explorer shows its sliders and returns None: a notebook cell that ends with the call then
prints nothing under them (``interact`` itself returns the redraw function, which a cell
would print as ``<function ...show(...)>``).

The explorers do not use ``ipywidgets.interact`` (see :func:`explorer_box`): what they draw
is the value of an Image (or HTML) widget, which only travels from the kernel to the front
end, so a headless run of a chapter (nbclient, which executes the notebooks, the grader and
the tests use) has no widget state to send back to the kernel while the cell runs.
"""

from __future__ import annotations


# --- Chapters 4-6: correction, bonus token, theory

from typing import NamedTuple as _NamedTuple

import numpy as _np

from .._validate import MAX_DRAFT_LENGTH as _MAX_K
from .._validate import as_generator as _as_generator
from .._validate import as_int as _as_int
from .._validate import as_probability_array as _as_probability_array
from .._validate import as_real as _as_real

#: Limits on the explorers' sizes: beyond them a redraw would take minutes, not a moment.
_MAX_VOCAB = 4096
_MAX_BLOCKS = 10_000
_MAX_TOKENS = 100_000
_MAX_BATCH = 4096


def _figure_png(fig, dpi: int = 100) -> bytes:
    """``fig`` as PNG bytes; the figure is closed, so the notebook's inline backend does not show it
    a second time under the explorer."""
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    return buffer.getvalue()


def explorer_box(draw, **controls):
    """The controls, and under them what ``draw(**values)`` returns for their values, drawn
    again whenever a control moves: an ``ipywidgets.VBox`` of the controls and one view widget.

    ``draw`` returns a matplotlib figure (shown as a PNG in an ``ipywidgets.Image``) or a
    string of HTML (shown in an ``ipywidgets.HTML``); the first call decides which.

    This replaces ``ipywidgets.interact``, which draws into an ``Output`` widget.  A front end
    without a browser mirrors an Output widget: nbclient (which executes the notebooks, the
    grader and the tests use) sends the widget's outputs back to the kernel as a comm message
    each time the cell draws into it, while the kernel is still running that cell.  One run of
    chapter 2 in thirteen hung there, kernel and client both idle.  An Image or HTML widget's
    value only travels from the kernel to the front end, so a headless run receives it and
    sends nothing.
    """
    import ipywidgets

    if not controls:
        raise ValueError("controls: an explorer needs at least one control")
    for name, control in controls.items():
        if not isinstance(control, ipywidgets.ValueWidget):
            raise TypeError(f"{name}: expected an ipywidgets control with a value, got {type(control).__name__}")
    first = draw(**{name: c.value for name, c in controls.items()})
    html = isinstance(first, str)
    if html:
        view = ipywidgets.HTML(value=first)
    else:
        view = ipywidgets.Image(value=_figure_png(first), format="png")

    def redraw(_change=None) -> None:
        drawn = draw(**{name: c.value for name, c in controls.items()})
        view.value = drawn if html else _figure_png(drawn)

    for control in controls.values():
        control.observe(redraw, names="value")
    return ipywidgets.VBox([*controls.values(), view])


def _display(box) -> None:
    from IPython.display import display

    display(box)


def _explore(draw, **controls) -> None:
    """Show :func:`explorer_box` ``(draw, **controls)``; returns None (a cell prints nothing more)."""
    _display(explorer_box(draw, **controls))


def _check_seed(seed: object) -> None:
    _as_generator(seed, "seed")


class CorrectionView(_NamedTuple):
    """What the correction explorer (chapter 4) shows for one draft-noise setting."""

    p: _np.ndarray  #: draft distribution
    q: _np.ndarray  #: target distribution
    overlap: _np.ndarray  #: min(p, q), delivered by accepted drafts
    missing: _np.ndarray  #: max(0, q - p), delivered by corrections
    emitted_resample_q: _np.ndarray  #: what a step emits if the correction draws from q
    alpha: float  #: acceptance rate sum(min(p, q))
    tv_resample_q: float  #: total-variation distance of that mistake from q
    draft_noise: float


def correction_view(draft_noise: float, vocab_size: int = 8, seed: int = 0) -> CorrectionView:
    """The split of ``q`` into ``min(p, q)`` and ``max(0, q - p)``, and the resample-from-q error.

    The pair is :func:`speclib.lm.models.fixed_pair` ``(vocab_size, draft_noise, seed)``: a
    peaked Dirichlet target and a draft blurred towards uniform by ``draft_noise``.

    Examples
    --------
    >>> view = correction_view(0.0)                  # a perfect draft: nothing to correct
    >>> round(view.alpha, 12), round(view.tv_resample_q, 12)
    (1.0, 0.0)
    """
    from .broken import RESAMPLE_FROM_TARGET
    from .correction import emitted_distribution, split_target
    from ..lm.models import fixed_pair
    from ..core.stats import total_variation_distance

    draft_noise = _as_real(draft_noise, "draft_noise", low=0.0, high=1.0)
    vocab_size = _as_int(vocab_size, "vocab_size", minimum=2, maximum=_MAX_VOCAB)
    _check_seed(seed)
    target, draft = fixed_pair(vocab_size=vocab_size, draft_noise=draft_noise, seed=seed)
    p, q = draft.dist, target.dist
    split = split_target(p, q)
    wrong = emitted_distribution(p, q, correct=RESAMPLE_FROM_TARGET.correct)
    return CorrectionView(p, q, split.overlap, split.missing, wrong, split.alpha,
                          float(total_variation_distance(wrong, q)), draft_noise)


def correction_explorer(vocab_size: int = 8, seed: int = 0) -> None:
    """Slider over the draft noise; redraws :func:`speclib.book.plots.plot_correction`."""
    import ipywidgets
    import matplotlib.pyplot as plt

    from .plots import plot_correction

    _as_int(vocab_size, "vocab_size", minimum=2, maximum=_MAX_VOCAB)
    _check_seed(seed)

    def show(draft_noise: float = 0.5):
        plot_correction(correction_view(draft_noise, vocab_size, seed))
        return plt.gcf()

    slider = ipywidgets.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.05, description="draft noise")
    _explore(show, draft_noise=slider)


class BonusView(_NamedTuple):
    """What the bonus explorer (chapter 5) shows for one (alpha, k)."""

    alpha: float
    k: int
    pmf_with: _np.ndarray  #: P(n tokens), n = 1 .. k+1, bonus on
    pmf_without: _np.ndarray  #: P(n tokens), n = 1 .. k, bonus off
    mean_with: float  #: expected tokens per target pass, bonus on
    mean_without: float  #: the same, bonus off (exactly alpha**k less)
    bonus_share: float  #: fraction of emitted tokens that are bonus tokens


def bonus_view(alpha: float, k: int) -> BonusView:
    """Tokens-per-step distributions with and without the bonus token.

    Examples
    --------
    >>> view = bonus_view(0.5, 2)
    >>> view.mean_with, view.mean_without
    (1.75, 1.5)
    """
    from .bonus import bonus_share, expected_tokens_per_pass_without_bonus, tokens_per_step_pmf_without_bonus
    from ..core.theory import expected_tokens_per_pass, tokens_per_step_pmf

    alpha = float(_as_probability_array(alpha, "alpha"))
    k = _as_int(k, "k", minimum=1, maximum=_MAX_K)
    return BonusView(alpha, k, tokens_per_step_pmf(alpha, k), tokens_per_step_pmf_without_bonus(alpha, k),
                     float(expected_tokens_per_pass(alpha, k)), float(expected_tokens_per_pass_without_bonus(alpha, k)),
                     float(bonus_share(alpha, k)))


def bonus_explorer() -> None:
    """Sliders for alpha and k; redraws :func:`speclib.book.plots.plot_bonus`."""
    import ipywidgets
    import matplotlib.pyplot as plt

    from .plots import plot_bonus

    def show(alpha: float = 0.8, k: int = 4):
        plot_bonus(bonus_view(alpha, k))
        return plt.gcf()

    _explore(
        show,
        alpha=ipywidgets.FloatSlider(value=0.8, min=0.0, max=1.0, step=0.01, description="alpha"),
        k=ipywidgets.IntSlider(value=4, min=1, max=12, description="k"),
    )


class SpeedupView(_NamedTuple):
    """What the speed-up explorer (chapter 6) shows for one (alpha, c, k)."""

    alpha: float
    c: float
    k: int  #: the draft length chosen on the slider
    ks: _np.ndarray  #: 0 .. k_max (0 is plain decoding)
    speedups: _np.ndarray  #: wall-clock speed-up for each entry of ks
    speedup_at_k: float
    best_k: int  #: optimal_k(alpha, c, k_max); 0 when no draft length pays
    best_speedup: float
    pays: bool  #: alpha > c: some draft length beats plain decoding
    break_even_alpha_at_k: float  #: smallest alpha at which the chosen k breaks even


def speedup_view(alpha: float, c: float, k: int, k_max: int = 16) -> SpeedupView:
    """The speed-up curve over draft lengths, the best one, and the chosen one.

    Examples
    --------
    >>> view = speedup_view(0.8, 0.05, 4)
    >>> view.best_k, round(view.best_speedup, 2), view.pays
    (8, 3.09, True)
    >>> speedup_view(0.2, 0.3, 4).best_k
    0
    """
    from ..core.theory import optimal_k
    from ..core.tradeoff import break_even_alpha, speedup_curve

    k_max = _as_int(k_max, "k_max", minimum=1, maximum=_MAX_K)
    k = _as_int(k, "k", minimum=1)
    if k > k_max:
        raise ValueError(f"k: must be <= k_max = {k_max}, got {k}")
    speedups = speedup_curve(alpha, c, k_max)
    alpha, c = float(alpha), float(c)
    best = optimal_k(alpha, c, k_max)
    return SpeedupView(alpha, c, k, _np.arange(k_max + 1), speedups, float(speedups[k]), best,
                       float(speedups[best]), alpha > c, break_even_alpha(k, c))


def speedup_explorer(k_max: int = 16) -> None:
    """Sliders for alpha, c and k; redraws :func:`speclib.book.plots.plot_speedup`."""
    import ipywidgets
    import matplotlib.pyplot as plt

    from .plots import plot_speedup

    k_max = _as_int(k_max, "k_max", minimum=1, maximum=_MAX_K)

    def show(alpha: float = 0.8, c: float = 0.05, k: int = 4):
        plot_speedup(speedup_view(alpha, c, k, k_max))
        return plt.gcf()

    _explore(
        show,
        alpha=ipywidgets.FloatSlider(value=0.8, min=0.0, max=1.0, step=0.01, description="alpha"),
        c=ipywidgets.FloatSlider(value=0.05, min=0.0, max=1.0, step=0.01, description="c"),
        k=ipywidgets.IntSlider(value=4, min=1, max=k_max, description="k"),
    )


# --- Chapters 1-3: why decoding is slow, drafting, verification

class PassCostView(_NamedTuple):
    """What the pass-cost explorer (chapter 1) shows for one machine and model size."""

    n_tokens: _np.ndarray  #: tokens processed at once, 1 .. max_tokens
    seconds: _np.ndarray  #: predicted seconds per pass for each
    relative: _np.ndarray  #: cost relative to a pass over one token
    crossover: float  #: tokens at which the arithmetic costs as much as reading the weights
    k: int  #: draft length: a verification pass processes k + 1 tokens
    verify_relative: float  #: cost of a pass over k + 1 tokens, relative to one token


def pass_cost_view(n_params: float, bytes_per_param: float, bandwidth: float, flops: float,
                   k: int = 4, max_tokens: int = 256) -> PassCostView:
    """Predicted pass cost against tokens processed at once (:func:`speclib.core.cost.predicted_pass_time`).

    ``bandwidth`` in bytes/s and ``flops`` in operations/s.

    Examples
    --------
    >>> view = pass_cost_view(1e9, 2, bandwidth=1e12, flops=1e14, k=4)
    >>> view.crossover, round(view.verify_relative, 3)
    (100.0, 1.04)
    """
    from ..core.cost import predicted_pass_time

    k = _as_int(k, "k", minimum=1, maximum=_MAX_K)
    max_tokens = _as_int(max_tokens, "max_tokens", minimum=k + 1)
    n_params = _as_real(n_params, "n_params", low=0.0)
    if n_params == 0:
        raise ValueError("n_params: must be > 0 (the view compares pass costs relative to a one-token pass, "
                         "which costs nothing without parameters)")
    bytes_per_param = _as_real(bytes_per_param, "bytes_per_param", low=0.0)
    bandwidth = _as_real(bandwidth, "bandwidth", low=1e-300)
    flops = _as_real(flops, "flops", low=1e-300)
    n = _np.unique(_np.round(_np.geomspace(1, max_tokens, 64)).astype(int))
    seconds = predicted_pass_time(n, n_params, bytes_per_param, bandwidth, flops)
    one = predicted_pass_time(1, n_params, bytes_per_param, bandwidth, flops)
    crossover = float(bytes_per_param) * float(flops) / (2.0 * float(bandwidth))
    verify = predicted_pass_time(k + 1, n_params, bytes_per_param, bandwidth, flops)
    return PassCostView(n, seconds, seconds / one, crossover, k, float(verify / one))


def pass_cost_explorer(n_params: float = 1e8, bytes_per_param: float = 4.0,
                       bandwidth: float = 1e10, flops: float = 1e11) -> None:
    """Log sliders for memory bandwidth, arithmetic throughput and model size, and k.

    The defaults are placeholders; chapter 1 passes the values it fitted on this machine.
    Redraws :func:`speclib.book.plots.plot_pass_cost`.
    """
    import ipywidgets
    import matplotlib.pyplot as plt

    from .plots import plot_pass_cost

    n_params = _as_real(n_params, "n_params", low=1e6, high=1e11)  # the slider's range
    bytes_per_param = _as_real(bytes_per_param, "bytes_per_param")
    if bytes_per_param not in (8.0, 4.0, 2.0, 1.0):
        raise ValueError(f"bytes_per_param: expected 8, 4, 2 or 1, got {bytes_per_param:g}")
    bandwidth = _as_real(bandwidth, "bandwidth", low=1e9, high=1e13)
    flops = _as_real(flops, "flops", low=1e9, high=1e15)

    def show(bandwidth_gb_s: float, gflop_s: float, params_millions: float, bytes_per_param: float, k: int):
        plot_pass_cost(pass_cost_view(params_millions * 1e6, bytes_per_param, bandwidth_gb_s * 1e9,
                                      gflop_s * 1e9, k))
        return plt.gcf()

    log = ipywidgets.FloatLogSlider
    _explore(
        show,
        bandwidth_gb_s=log(value=bandwidth / 1e9, base=10, min=0, max=4, step=0.05, description="GB/s"),
        gflop_s=log(value=flops / 1e9, base=10, min=0, max=6, step=0.05, description="GFLOP/s"),
        params_millions=log(value=n_params / 1e6, base=10, min=0, max=5, step=0.1, description="params (M)"),
        bytes_per_param=ipywidgets.Dropdown(options=[8.0, 4.0, 2.0, 1.0], value=float(bytes_per_param),
                                            description="bytes/param"),
        k=ipywidgets.IntSlider(value=4, min=1, max=16, description="k"),
    )


class DraftingView(_NamedTuple):
    """What the drafting explorer (chapter 2) shows for one draft-noise setting."""

    q: _np.ndarray  #: target distribution, tokens sorted by decreasing q
    p: _np.ndarray  #: draft distribution, same order
    overlap: _np.ndarray  #: min(p, q), same order
    alpha: float  #: sum of the overlap
    draft_noise: float
    noise_grid: _np.ndarray  #: draft noises from 0 to 1
    alpha_grid: _np.ndarray  #: alpha at each


def drafting_view(draft_noise: float, vocab_size: int = 64, seed: int = 0, context_id: int = 42) -> DraftingView:
    """The article's pair at one draft noise: target, draft, their overlap and alpha.

    The pair is :func:`speclib.lm.models.fixed_pair` ``(vocab_size, draft_noise, seed,
    context_id)``.  Tokens are sorted by decreasing target probability so the overlap reads
    as an area; ``alpha_grid`` is alpha over draft noises from 0 to 1.

    Examples
    --------
    >>> view = drafting_view(0.0)
    >>> round(view.alpha, 12), view.q.shape
    (1.0, (64,))
    """
    from ..lm.models import fixed_pair, noisy_draft
    from ..core.sampling import acceptance_rate

    draft_noise = _as_real(draft_noise, "draft_noise", low=0.0, high=1.0)
    vocab_size = _as_int(vocab_size, "vocab_size", minimum=2, maximum=_MAX_VOCAB)
    _check_seed(seed)
    target, draft = fixed_pair(vocab_size=vocab_size, draft_noise=draft_noise, seed=seed, context_id=context_id)
    order = _np.argsort(-target.dist, kind="stable")
    q, p = target.dist[order], draft.dist[order]
    grid = _np.linspace(0.0, 1.0, 21)
    alphas = _np.array([acceptance_rate(noisy_draft(target.dist, e), target.dist) for e in grid])
    return DraftingView(q, p, _np.minimum(p, q), float(acceptance_rate(p, q)), draft_noise, grid, alphas)


def drafting_explorer(vocab_size: int = 64, seed: int = 0) -> None:
    """Sliders for the draft noise and the context; redraws :func:`speclib.book.plots.plot_drafting`."""
    import ipywidgets
    import matplotlib.pyplot as plt

    from .plots import plot_drafting

    _as_int(vocab_size, "vocab_size", minimum=2, maximum=_MAX_VOCAB)
    _check_seed(seed)

    def show(draft_noise: float = 0.3, context_id: int = 42):
        plot_drafting(drafting_view(draft_noise, vocab_size, seed, context_id))
        return plt.gcf()

    _explore(
        show,
        draft_noise=ipywidgets.FloatSlider(value=0.3, min=0.0, max=1.0, step=0.05, description="draft noise"),
        context_id=ipywidgets.IntSlider(value=42, min=0, max=255, description="context"),
    )


class VerificationView(_NamedTuple):
    """What the verification explorer (chapter 3) shows for one block of a seeded run."""

    block: object  #: the speclib.book.trace.BlockTrace of this block
    accept_prob: _np.ndarray  #: min(1, q/p) of each judged draft
    u: _np.ndarray  #: the uniform drawn for each judged draft
    accepted: _np.ndarray  #: bool, u < accept_prob
    emitted: _np.ndarray  #: the tokens this block emits
    n_blocks: int
    draft_noise: float
    tokens_so_far: int  #: tokens emitted by this block and the ones before it


def verification_view(block: int, draft_noise: float = 0.3, k: int = 4, n_blocks: int = 12,
                      seed: int = 0, vocab_size: int = 64) -> VerificationView:
    """One block of :func:`speclib.book.trace.speculative_trace` on the article's pair.

    The run is ``n_blocks`` blocks of ``k`` drafts with :func:`speclib.lm.models.fixed_pair`
    ``(vocab_size, draft_noise)`` and random seed ``seed``; ``block`` picks one (from 0).

    Examples
    --------
    >>> view = verification_view(0, draft_noise=0.0)   # p == q: every draft is kept
    >>> view.accepted.tolist(), len(view.emitted)
    ([True, True, True, True], 5)
    """
    from ..lm.models import fixed_pair
    from .trace import speculative_trace

    n_blocks = _as_int(n_blocks, "n_blocks", minimum=1, maximum=_MAX_BLOCKS)
    k = _as_int(k, "k", minimum=1, maximum=_MAX_K)
    vocab_size = _as_int(vocab_size, "vocab_size", minimum=2, maximum=_MAX_VOCAB)
    _check_seed(seed)
    block = _as_int(block, "block", minimum=0)
    if block >= n_blocks:
        raise ValueError(f"block: must be < n_blocks = {n_blocks}, got {block}")
    draft_noise = _as_real(draft_noise, "draft_noise", low=0.0, high=1.0)
    target, draft = fixed_pair(vocab_size=vocab_size, draft_noise=draft_noise)
    blocks = speculative_trace(target, draft, [0], n_blocks, k, seed)
    judged = [r for r in blocks[block].rows if r.u is not None]
    a = _np.array([r.accept_prob for r in judged])
    u = _np.array([r.u for r in judged])
    so_far = sum(len(b.verification.tokens) for b in blocks[: block + 1])
    return VerificationView(blocks[block], a, u, u < a, blocks[block].verification.tokens,
                            n_blocks, draft_noise, so_far)


def verification_explorer(k: int = 4, n_blocks: int = 12, seed: int = 0) -> None:
    """Step through the blocks of a seeded run; redraws :func:`speclib.book.plots.plot_verification_block`."""
    import ipywidgets
    import matplotlib.pyplot as plt

    from .plots import plot_verification_block

    k = _as_int(k, "k", minimum=1, maximum=_MAX_K)
    n_blocks = _as_int(n_blocks, "n_blocks", minimum=1, maximum=_MAX_BLOCKS)
    _check_seed(seed)

    def show(block: int = 0, draft_noise: float = 0.5):
        plot_verification_block(verification_view(block, draft_noise, k, n_blocks, seed))
        return plt.gcf()

    _explore(
        show,
        block=ipywidgets.IntSlider(value=0, min=0, max=n_blocks - 1, description="block"),
        draft_noise=ipywidgets.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.05, description="draft noise"),
    )


# --- Chapter 8: real text

class GenerationView(_NamedTuple):
    """What the real-text explorer (chapter 8) shows for one setting."""

    html: str  #: the coloured text (accepted / corrected / bonus), from speclib.book.render.to_html
    summary: str  #: one line of statistics
    tokens_per_pass: float
    acceptance: float  #: accepted / verified drafts


def generation_view(domain: str = "prose", k: int = 4, temperature: float = 1.0, seed: int = 0,
                    new_tokens: int = 300) -> GenerationView:
    """Speculative generation with the n-gram pair of ``domain``, rendered as coloured HTML.

    ``temperature`` 0 is greedy decoding (both models warped to their argmax).
    """
    from ..lm.corpora import shared_vocabulary
    from ..lm.ngram import ngram_pair
    from .render import to_html, trace_generation
    from ..core.warping import warp

    if domain not in ("prose", "code"):
        raise ValueError(f"domain: expected 'prose' or 'code', got {domain!r}")
    k = _as_int(k, "k", minimum=1, maximum=_MAX_K)
    temperature = _as_real(temperature, "temperature", low=0.0)
    new_tokens = _as_int(new_tokens, "new_tokens", minimum=1, maximum=_MAX_TOKENS)
    _check_seed(seed)
    target, draft = ngram_pair(domain)
    if temperature != 1.0:
        target, draft = warp(target, temperature=temperature), warp(draft, temperature=temperature)
    vocab = shared_vocabulary()
    prompt = vocab.encode({"prose": "The ", "code": "def "}[domain])
    trace = trace_generation(target, draft, prompt, new_tokens, k, seed)
    stats = trace.stats
    return GenerationView(to_html(trace, vocab), stats.summary(), stats.tokens_per_target_pass,
                          stats.acceptance_rate)


def generation_explorer() -> None:
    """Domain, k, temperature and seed sliders over :func:`generation_view`."""
    import html

    import ipywidgets

    def show(domain: str = "prose", k: int = 4, temperature: float = 1.0, seed: int = 0) -> str:
        view = generation_view(domain, k, temperature, seed)
        return f"{view.html}<pre>{html.escape(view.summary)}</pre>"

    _explore(
        show,
        domain=ipywidgets.Dropdown(options=["prose", "code"], value="prose", description="domain"),
        k=ipywidgets.IntSlider(value=4, min=1, max=12, description="k"),
        temperature=ipywidgets.FloatSlider(value=1.0, min=0.0, max=2.0, step=0.1, description="temperature"),
        seed=ipywidgets.IntSlider(value=0, min=0, max=20, description="seed"),
    )


# --- Chapter 10: sampling controls

class SamplingControlsView(_NamedTuple):
    """What the sampling-controls explorer (chapter 10) shows for one setting."""

    q: _np.ndarray  #: the target's raw row
    p: _np.ndarray  #: the draft's raw row
    q_warped: _np.ndarray  #: the target's row after the controls: what the output must follow
    p_warped: _np.ndarray  #: the draft's row after the same controls
    alpha_raw: float  #: acceptance rate sum(min(p, q)) without controls
    alpha: float  #: acceptance rate of the warped pair
    label: str  #: the setting, e.g. "temperature 0.5, top-k 3"


def sampling_controls_view(temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                           vocab_size: int = 8, draft_noise: float = 0.5, seed: int = 0) -> SamplingControlsView:
    """One target row and its draft row, before and after temperature, top-k and top-p.

    The pair is :func:`speclib.lm.models.fixed_pair` ``(vocab_size, draft_noise, seed)``.

    Examples
    --------
    >>> view = sampling_controls_view(temperature=0.0)
    >>> int(view.q_warped.max()), view.label
    (1, 'temperature 0 (greedy)')
    """
    from ..lm.models import fixed_pair
    from ..core.sampling import acceptance_rate
    from ..core.warping import warp_distribution

    vocab_size = _as_int(vocab_size, "vocab_size", minimum=2, maximum=_MAX_VOCAB)
    temperature = _as_real(temperature, "temperature", low=0.0)
    _check_seed(seed)
    target, draft = fixed_pair(vocab_size=vocab_size, draft_noise=draft_noise, seed=seed)
    q, p = target.dist, draft.dist
    q_warped = warp_distribution(q, temperature, top_k, top_p)
    p_warped = warp_distribution(p, temperature, top_k, top_p)
    parts = ["temperature 0 (greedy)" if temperature == 0 else f"temperature {temperature:g}"]
    parts += [f"top-k {top_k}"] if top_k is not None else []
    parts += [f"top-p {top_p:g}"] if top_p is not None else []
    return SamplingControlsView(q, p, q_warped, p_warped, float(acceptance_rate(p, q)),
                                float(acceptance_rate(p_warped, q_warped)), ", ".join(parts))


def sampling_controls_explorer(vocab_size: int = 8, seed: int = 0) -> None:
    """Sliders for temperature, top-k (0 = off) and top-p (1 = off) over :func:`sampling_controls_view`."""
    import ipywidgets
    import matplotlib.pyplot as plt

    from .plots import plot_sampling_controls

    vocab_size = _as_int(vocab_size, "vocab_size", minimum=2, maximum=_MAX_VOCAB)
    _check_seed(seed)

    def show(temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, draft_noise: float = 0.5):
        view = sampling_controls_view(temperature, top_k or None, None if top_p >= 1.0 else top_p,
                                      vocab_size, draft_noise, seed)
        plot_sampling_controls(view)
        return plt.gcf()

    _explore(
        show,
        temperature=ipywidgets.FloatSlider(value=1.0, min=0.0, max=2.0, step=0.05, description="temperature"),
        top_k=ipywidgets.IntSlider(value=0, min=0, max=vocab_size, description="top-k (0 off)"),
        top_p=ipywidgets.FloatSlider(value=1.0, min=0.05, max=1.0, step=0.05, description="top-p (1 off)"),
        draft_noise=ipywidgets.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.05, description="draft noise"),
    )


# --- Chapters 12-13: adaptive draft length, production variants

class ControllerView(_NamedTuple):
    """What the controller explorer (chapter 12) shows for one draft quality and cost ratio."""

    names: tuple  #: controller names, the hindsight oracle last
    speedup: _np.ndarray  #: tokens per unit of cost (plain decoding: 1)
    tokens_per_pass: _np.ndarray
    alpha: float  #: measured acceptance rate of the fixed-K run
    draft_noise: float
    c: float


def controller_view(draft_noise: float = 0.5, c: float = 0.2, n_tokens: int = 400, seed: int = 0,
                    vocab_size: int = 32, concentration: float = 0.1, p_min: float = 0.3) -> ControllerView:
    """Speed of every controller of :func:`speclib.core.adaptive.compare_controllers` on a Markov pair.

    The pair is :func:`speclib.lm.models.markov_pair` ``(vocab_size, draft_noise, seed,
    concentration)``; ``c`` is the draft/target cost ratio.

    Examples
    --------
    >>> view = controller_view(draft_noise=0.0, c=0.0, n_tokens=60)   # a perfect, free draft
    >>> view.names[-1], bool(view.speedup.min() >= 1.0)
    ('oracle (hindsight)', True)
    """
    from ..core.adaptive import compare_controllers
    from ..lm.models import markov_pair

    draft_noise = _as_real(draft_noise, "draft_noise", low=0.0, high=1.0)
    c = _as_real(c, "c", low=0.0)
    n_tokens = _as_int(n_tokens, "n_tokens", minimum=1, maximum=_MAX_TOKENS)
    vocab_size = _as_int(vocab_size, "vocab_size", minimum=2, maximum=_MAX_VOCAB)
    p_min = _as_real(p_min, "p_min", low=0.0, high=1.0)
    _check_seed(seed)
    target, draft = markov_pair(vocab_size, draft_noise, seed, concentration)
    cmp = compare_controllers(target, draft, [[0]], n_tokens, [c], seed, p_min=p_min)
    names = tuple(cmp.speedup)
    return ControllerView(names, _np.array([cmp.speedup[n][0] for n in names]),
                          _np.array([cmp.tokens_per_pass[n][0] for n in names]),
                          float(cmp.acceptance[names[0]][0]), draft_noise, c)


def controller_explorer(n_tokens: int = 400, seed: int = 0) -> None:
    """Sliders for the draft noise and the cost ratio over :func:`controller_view`."""
    import ipywidgets
    import matplotlib.pyplot as plt

    from .plots import plot_controller_bars

    _as_int(n_tokens, "n_tokens", minimum=1, maximum=_MAX_TOKENS)
    _check_seed(seed)

    def show(draft_noise: float = 0.5, c: float = 0.2):
        plot_controller_bars(controller_view(draft_noise, c, n_tokens, seed))
        return plt.gcf()

    _explore(
        show,
        draft_noise=ipywidgets.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.05, description="draft noise"),
        c=ipywidgets.FloatSlider(value=0.2, min=0.0, max=1.0, step=0.05, description="cost ratio c"),
    )


class BatchWasteView(_NamedTuple):
    """Expected block lengths in a batch of ``B`` sequences (chapter 13), for ``B = 1 .. max``."""

    batch_sizes: _np.ndarray
    mean: float  #: E[n], tokens one sequence's block holds
    shortest: _np.ndarray  #: E[min of B]: what each sequence keeps when the batch truncates
    longest: _np.ndarray  #: E[max of B]: what each sequence pays for when the batch pads
    pad_waste: _np.ndarray  #: 1 - E[n] / E[max]: share of paid-for slots that are padding
    truncate_keep: _np.ndarray  #: E[min] / E[n]: share of one's own tokens a truncating batch keeps
    alpha: float
    k: int


def batch_waste_view(alpha: float = 0.7, k: int = 4, max_batch: int = 32) -> BatchWasteView:
    """Padding and truncation losses of batched verification under independent acceptance.

    Examples
    --------
    >>> view = batch_waste_view(alpha=0.7, k=4, max_batch=4)
    >>> float(view.pad_waste[0]), bool(view.pad_waste[-1] > 0)
    (0.0, True)
    """
    from ..core.variants import expected_block_extremes

    alpha = float(_as_probability_array(alpha, "alpha"))
    k = _as_int(k, "k", minimum=1, maximum=_MAX_K)
    sizes = _np.arange(1, _as_int(max_batch, "max_batch", minimum=1, maximum=_MAX_BATCH) + 1)
    rows = _np.array([expected_block_extremes(alpha, k, int(b)) for b in sizes])
    mean = float(rows[0, 0])
    return BatchWasteView(sizes, mean, rows[:, 1], rows[:, 2], 1.0 - mean / rows[:, 2],
                          rows[:, 1] / mean, alpha, k)


def batch_waste_explorer(max_batch: int = 32) -> None:
    """Sliders for the acceptance rate and the draft length over :func:`batch_waste_view`."""
    import ipywidgets
    import matplotlib.pyplot as plt

    from .plots import plot_batch_waste

    _as_int(max_batch, "max_batch", minimum=1, maximum=_MAX_BATCH)

    def show(alpha: float = 0.7, k: int = 4):
        plot_batch_waste(batch_waste_view(alpha, k, max_batch))
        return plt.gcf()

    _explore(
        show,
        alpha=ipywidgets.FloatSlider(value=0.7, min=0.05, max=0.99, step=0.01, description="alpha"),
        k=ipywidgets.IntSlider(value=4, min=1, max=12, description="k"),
    )

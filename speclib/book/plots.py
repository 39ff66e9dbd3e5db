"""Figures shared by several chapters (matplotlib).

Functions take data computed elsewhere in speclib and an optional ``ax``; they draw, label
and return the axes, and never call ``plt.show()`` (the notebook does).
"""

from __future__ import annotations


# --- Chapters 4-6: correction, bonus token, theory

def _axes(ax, figsize=(7, 3.5), name="ax"):
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    elif not isinstance(ax, Axes):
        raise TypeError(f"{name}: expected a matplotlib Axes (or None for a new figure), got {type(ax).__name__}")
    return ax


def _view(view, kind: str, maker: str):
    """Refuse a ``view`` that is not what ``widgets.<maker>`` returns (its class is named ``kind``)."""
    if type(view).__name__ != kind or not hasattr(view, "_fields"):
        raise TypeError(f"view: expected a {kind}, what speclib.book.widgets.{maker}(...) returns; "
                        f"got {type(view).__name__}")
    return view


def _instance(value, cls, name, what):
    """Refuse ``value`` unless it is a ``cls``; ``what`` says where such an object comes from."""
    if not isinstance(value, cls):
        raise TypeError(f"{name}: expected {what}, got {value!r:.60} ({type(value).__name__})")
    return value


def _finite(values, name):
    """``values`` as a float array of finite numbers (no strings, complex numbers or NaN)."""
    import numpy as np

    from .._validate import as_real_array

    arr = as_real_array(values, name)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or an infinite value")
    return arr


def _text(value, name, optional=False):
    if not (optional and value is None) and not isinstance(value, str):
        raise TypeError(f"{name}: expected a string, got {value!r} ({type(value).__name__})")
    return value


def _flag(value, name):
    from .._validate import as_bool

    return as_bool(value, name)


def _pair_of_axes(axes, figsize, stacked=False):
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes

    if axes is None:
        return plt.subplots(*((2, 1) if stacked else (1, 2)), figsize=figsize)[1]
    import numpy as np

    axes = np.atleast_1d(np.asarray(axes, dtype=object))
    if axes.size != 2 or not all(isinstance(a, Axes) for a in axes):
        raise TypeError(f"axes: expected two matplotlib Axes (or None for a new figure), got {axes!r}")
    return axes


def plot_correction(view, axes=None):
    """Two panels from :func:`speclib.book.widgets.correction_view`.

    Top (first axes): the target ``q`` as stacked bars, ``min(p, q)`` (what accepted drafts
    deliver) under ``max(0, q - p)`` (what corrections must deliver), with the draft ``p`` as
    dots.  Bottom: ``q`` beside what a step emits when the correction wrongly draws from ``q``
    again.  Returns the two axes.
    """
    view = _view(view, "CorrectionView", "correction_view")
    import matplotlib.pyplot as plt
    import numpy as np

    axes = _pair_of_axes(axes, (7, 6), stacked=True)  # one above the other: the column is 7 inches
    left, right = axes
    x = np.arange(len(view.q))
    left.bar(x, view.overlap, color="tab:blue", label="min(p, q): accepted drafts")
    left.bar(x, view.missing, bottom=view.overlap, color="tab:orange", label="max(0, q - p): residual")
    left.plot(x, view.p, "ko", markersize=4, label="draft p")
    left.set(xlabel="token id", ylabel="probability", xticks=x,
             title=f"q split by the draft (noise {view.draft_noise:.2f}, alpha = {view.alpha:.2f})")
    left.set_ylim(0, 1.45 * max(view.q.max(), view.p.max()))  # headroom for the legend
    left.legend(fontsize=9, loc="upper left")
    width = 0.4
    right.bar(x - width / 2, view.q, width, color="tab:green", label="target q (correct rule)")
    right.bar(x + width / 2, view.emitted_resample_q, width, color="tab:red", label="resample from q")
    right.set(xlabel="token id", ylabel="probability of the emitted token", xticks=x,
              title=f"Emitted token, TV from q = {view.tv_resample_q:.3f}")
    right.set_ylim(0, 1.3 * max(view.q.max(), view.emitted_resample_q.max()))
    right.legend(fontsize=9, loc="upper left")
    left.figure.tight_layout()
    return axes


def plot_tokens_per_step(tokens_per_step, pmf, ax=None, title="Tokens emitted per step", legend=True):
    """Observed fraction of steps emitting ``n`` tokens (bars) against a predicted ``pmf`` (dots).

    ``tokens_per_step`` is a sequence of per-step counts (e.g. ``GenerationStats.tokens_per_step``)
    and ``pmf[n - 1]`` the predicted probability of ``n`` tokens.  ``legend=False`` leaves the
    legend out (for a row of panels that shares one figure legend).  Returns the axes.
    """
    _text(title, "title")
    legend = _flag(legend, "legend")
    import numpy as np

    from .._validate import as_distribution, as_tokens

    pmf = as_distribution(pmf, "pmf", ndim=1)
    steps = as_tokens(tokens_per_step, "tokens_per_step")
    if not isinstance(title, str):
        raise TypeError(f"title: expected a string, got {type(title).__name__}")
    if steps.size == 0:
        raise ValueError("tokens_per_step: no steps to plot")
    if steps.min() < 1 or steps.max() > pmf.size:
        raise ValueError(f"tokens_per_step: counts must lie in 1 .. {pmf.size} (the length of pmf), "
                         f"got {steps.min()} .. {steps.max()}")
    ax = _axes(ax)
    n = np.arange(1, pmf.size + 1)
    observed = np.bincount(steps, minlength=pmf.size + 1)[1:] / steps.size
    ax.bar(n, observed, color="tab:blue", alpha=0.7, label=f"simulated ({steps.size:,} steps)")
    ax.plot(n, pmf, "o", color="black", label="theory")
    ax.set(xlabel="tokens emitted in one step", ylabel="fraction of steps", xticks=n)
    ax.set_title(title, fontsize=10)
    if legend:
        ax.legend(fontsize=9)
    return ax


def plot_bonus(view, ax=None):
    """Tokens-per-step distributions with and without the bonus, from :func:`speclib.book.widgets.bonus_view`."""
    view = _view(view, "BonusView", "bonus_view")
    import numpy as np

    ax = _axes(ax)
    width = 0.4
    n_with = np.arange(1, view.k + 2)
    n_without = np.arange(1, view.k + 1)
    ax.bar(n_with - width / 2, view.pmf_with, width, color="tab:blue",
           label=f"bonus on: {view.mean_with:.2f} tokens/pass")
    ax.bar(n_without + width / 2, view.pmf_without, width, color="tab:gray",
           label=f"bonus off: {view.mean_without:.2f} tokens/pass")
    ax.set(xlabel="tokens emitted in one step", ylabel="probability", xticks=n_with,
           title=f"alpha = {view.alpha:.2f}, k = {view.k}: the bonus moves mass from k to k + 1")
    ax.legend(fontsize=9)
    return ax


def plot_speedup(view, ax=None):
    """Speed-up in target passes against draft length, from :func:`speclib.book.widgets.speedup_view`.

    The speed-up is the model's ``speedup_in_passes``: tokens per step over the step's cost in
    target passes, ``1 + k c`` (a pass over ``k + 1`` tokens taken to cost one pass).
    """
    view = _view(view, "SpeedupView", "speedup_view")
    ax = _axes(ax)
    ax.plot(view.ks, view.speedups, "o-", color="tab:blue", markersize=3,
            label=f"alpha = {view.alpha:.2f}, c = {view.c:.2f}")
    ax.axhline(1.0, color="gray", linestyle="--", label="plain decoding")
    ax.plot([view.k], [view.speedup_at_k], "s", color="tab:orange", markersize=8,
            label=f"chosen k = {view.k}: {view.speedup_at_k:.2f}x")
    if view.best_k > 0:
        ax.plot([view.best_k], [view.best_speedup], "*", color="tab:red", markersize=14,
                label=f"best k = {view.best_k}: {view.best_speedup:.2f}x")
    verdict = "speculation pays (alpha > c)" if view.pays else "no k pays (alpha <= c)"
    ax.set(xlabel="draft length k (k = 0: plain decoding)", ylabel="speed-up in target passes (x)",
           title=f"Speed-up against draft length: {verdict}")
    ax.legend(fontsize=9)
    return ax


# --- Chapters 1-3: why decoding is slow, drafting, verification

def plot_pass_times(times, fit=None, ax=None, label="measured median", relative=False, color="tab:blue"):
    """Measured pass times (medians, with the middle half of the repeats as error bars).

    ``times`` is a :class:`speclib.core.cost.PassTimes`; ``fit`` an optional
    :class:`speclib.core.cost.PassCostFit` drawn as a line.  With ``relative=True`` everything
    is divided by the median at the smallest token count.  Returns the axes.
    """
    import numpy as np

    from ..core.cost import PassCostFit, PassTimes

    _instance(times, PassTimes, "times", "a PassTimes (speclib.lm.transformer.pass_times returns one)")
    if fit is not None:
        _instance(fit, PassCostFit, "fit", "a PassCostFit (from speclib.core.cost.fit_pass_cost) or None")
    _text(label, "label")
    relative = _flag(relative, "relative")
    ax = _axes(ax)
    scale = times.median[0] if relative else 1e-3
    lo, hi = np.percentile(times.seconds, [25, 75], axis=0)
    med = times.median
    ax.errorbar(times.n_tokens, med / scale, yerr=[(med - lo) / scale, (hi - med) / scale], fmt="o",
                color=color, capsize=3, label=label)
    if fit is not None:
        n = np.geomspace(times.n_tokens[0], times.n_tokens[-1], 100)
        ax.plot(n, fit.predict(n) / scale, "-", color=color, alpha=0.6,
                label=f"fit: {fit.fixed * 1e3:.1f} ms + {fit.per_token * 1e3:.2f} ms x tokens")
    ax.set_xscale("log", base=2)
    ax.set_xticks(times.n_tokens, [str(n) for n in times.n_tokens])
    ax.set(xlabel="tokens processed in one pass",
           ylabel="cost relative to one pass" if relative else "time per pass (ms)")
    ax.legend(fontsize=9)
    return ax


def plot_pass_cost(view, measured=(), ax=None):
    """Time per pass against tokens processed at once, from :func:`speclib.book.widgets.pass_cost_view`.

    The model line, the cost of one pass per token, the verification pass over ``k + 1``
    tokens (a star) and the crossover.  ``measured`` is an optional sequence of
    ``(label, n_tokens, seconds)`` series drawn as points.  Returns the axes.
    """
    view = _view(view, "PassCostView", "pass_cost_view")
    if isinstance(measured, (str, bytes)) or not hasattr(measured, "__iter__"):
        raise TypeError(f"measured: expected a sequence of (label, n_tokens, seconds), got {type(measured).__name__}")
    measured = list(measured)
    for i, point in enumerate(measured):
        if not isinstance(point, (tuple, list)) or len(point) != 3:
            raise TypeError(f"measured[{i}]: expected (label, n_tokens, seconds), got {point!r}")
    import numpy as np

    ax = _axes(ax)
    ms = view.seconds * 1e3
    ax.plot(view.n_tokens, ms, "-", color="tab:blue", label="model: read weights + arithmetic")
    ax.plot(view.n_tokens, view.n_tokens * ms[0], "--", color="gray", label="one pass per token")
    markers = iter(["o", "s", "^", "D"])
    for label, n, seconds in measured:
        ax.plot(n, 1e3 * np.asarray(seconds), next(markers, "o"), color="black", label=label)
    kp1 = view.k + 1
    ax.plot([kp1], [view.verify_relative * ms[0]], "*", color="tab:red", markersize=14,
            label=f"model, k + 1 = {kp1} tokens: {view.verify_relative:.2f}x the model's one-token pass")
    if view.crossover <= view.n_tokens[-1]:
        ax.axvline(view.crossover, color="tab:orange", linestyle=":",
                   label=f"crossover: {view.crossover:.0f} tokens")
    from matplotlib.ticker import ScalarFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_yscale("log")
    ax.set(xlabel="tokens processed in one pass", ylabel="time per pass (ms)",
           title="A pass over k + 1 tokens against k + 1 passes")
    ax.legend(fontsize=9)
    return ax


def plot_drafting(view, axes=None):
    """Two panels from :func:`speclib.book.widgets.drafting_view`.

    Left: target ``q`` and draft ``p`` over the tokens (sorted by decreasing ``q``), with
    their overlap ``min(p, q)`` shaded; its area is alpha.  Right: alpha against the draft
    noise, with the current setting marked.  Returns the two axes.
    """
    view = _view(view, "DraftingView", "drafting_view")
    import matplotlib.pyplot as plt
    import numpy as np

    if axes is None:
        # 7.5 inches: the page column's width, so the legends keep their size on the page.
        _, axes = plt.subplots(1, 2, figsize=(7.5, 3.6), gridspec_kw={"width_ratios": [1.6, 1]})
    axes = _pair_of_axes(axes, (7.5, 3.6))
    left, right = axes
    x = np.arange(len(view.q))
    left.fill_between(x, view.overlap, step="mid", color="tab:green", alpha=0.35,
                      label=f"min(p, q): area alpha = {view.alpha:.3f}")
    left.step(x, view.q, where="mid", color="black", label="target q")
    left.step(x, view.p, where="mid", color="tab:blue", linestyle="--", label="draft p")
    left.set(xlabel="token rank under the target (0 = most likely)", ylabel="probability")
    left.set_title(f"Draft noise {view.draft_noise:.2f}: overlap of draft and target", fontsize=10)
    left.legend(fontsize=9)
    right.plot(view.noise_grid, view.alpha_grid, "-", color="tab:green", label="alpha = sum min(p, q)")
    right.plot([view.draft_noise], [view.alpha], "o", color="tab:red", markersize=8, label="this setting")
    right.set(xlabel="draft noise", ylabel="alpha", ylim=(0, 1.02))
    right.set_title("Acceptance rate against noise", fontsize=10)
    right.legend(fontsize=9)
    left.figure.tight_layout()
    return axes


def plot_verification_block(view, ax=None, legend=True):
    """One verified block from :func:`speclib.book.widgets.verification_view`.

    Bars: the acceptance probability ``min(1, q/p)`` of each judged draft; markers: the
    uniform ``u`` drawn for it (a green dot under the bar top is an acceptance, a red cross
    above it the rejection).  A star marks a bonus token.  ``legend=False`` leaves the legend
    out (for a grid of blocks sharing one).  Returns the axes.
    """
    view = _view(view, "VerificationView", "verification_view")
    legend = _flag(legend, "legend")
    import numpy as np

    ax = _axes(ax, figsize=(6.5, 3.2))
    rows = view.block.rows
    pos = np.arange(1, len(view.u) + 1)
    ax.bar(pos, view.accept_prob, color="tab:blue", alpha=0.3, label="min(1, q/p)")
    ok = view.accepted
    ax.plot(pos[ok], view.u[ok], "o", color="tab:green", label="u: accepted")
    ax.plot(pos[~ok], view.u[~ok], "x", color="tab:red", markersize=10, mew=2, label="u: rejected")
    for r in rows:
        if r.outcome == "bonus":
            ax.plot([r.position], [0.5], "*", color="tab:orange", markersize=14, label="bonus token")
            ax.annotate(f"+{r.emitted}", (r.position, 0.5), textcoords="offset points", xytext=(0, 10),
                        ha="center", fontsize=9)
        else:
            text = f"x={r.draft_token}" if r.outcome == "accepted" else f"x={r.draft_token}\u2192{r.emitted}"
            ax.annotate(text, (r.position, 1.02), ha="center", fontsize=9)
    k = len(view.block.draft_tokens)
    n_acc = view.block.verification.n_accepted
    n_out = len(view.emitted)
    ax.set(xlim=(0.4, k + 1.6), ylim=(0, 1.18), xticks=np.arange(1, k + 2),
           xlabel="position in the block", ylabel="probability / uniform draw",
           title=f"Block {view.block.block}: {n_acc} of {k} drafts kept, {n_out} token{'s' * (n_out != 1)} out")
    if legend:
        ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.figure.tight_layout()
    return ax


# --- Chapter 8: real text

def plot_acceptance_by_position(rate, n_judged, ax=None, label=None, color=None, alpha=None):
    """Acceptance rate at each draft position of a block, with 95% binomial error bars.

    ``rate`` and ``n_judged`` come from :func:`speclib.book.render.acceptance_by_position`.  If
    ``alpha`` is given, a dashed line marks it: the flat curve independent acceptances give.
    Returns the axes.
    """
    import numpy as np

    from .._validate import as_real, as_real_array

    rate = as_real_array(rate, "rate", "acceptance rates (NaN where no draft was judged)")
    if ((rate < 0) | (rate > 1)).any():
        raise ValueError("rate: acceptance rates lie in [0, 1]")
    n_judged = as_real_array(n_judged, "n_judged", "counts of judged drafts")
    if not np.all(np.isfinite(n_judged)) or (n_judged < 0).any() or np.any(n_judged != np.round(n_judged)):
        raise ValueError("n_judged: must be non-negative whole numbers")
    if alpha is not None:
        alpha = as_real(alpha, "alpha", low=0.0, high=1.0)
    if rate.shape != n_judged.shape or rate.ndim != 1:
        raise ValueError(f"rate and n_judged: expected two 1-D arrays of one shape, got {rate.shape} and {n_judged.shape}")
    ax = _axes(ax)
    position = np.arange(1, rate.size + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = 1.96 * np.sqrt(rate * (1 - rate) / n_judged)
    line = ax.errorbar(position, rate, yerr=half, marker="o", capsize=3, color=color, label=label)
    if alpha is not None:
        ax.axhline(alpha, color=line[0].get_color(), linestyle="--", linewidth=1)
    ax.set(xlabel="draft position in the block", ylabel="P(accept | earlier drafts accepted)", xticks=position)
    return ax


# --- Chapters 10-11: sampling controls, the bug zoo

def plot_sampling_controls(view, ax=None, legend=True):
    """Target and draft rows after the sampling controls, with the raw target row outlined.

    ``view`` is a :class:`speclib.book.widgets.SamplingControlsView`; ``legend=False`` leaves the
    legend out (for all but one panel of a row of them).
    """
    view = _view(view, "SamplingControlsView", "sampling_controls_view")
    legend = _flag(legend, "legend")
    import numpy as np

    ax = _axes(ax)
    x = np.arange(view.q.size)
    ax.bar(x - 0.2, view.q_warped, width=0.4, color="tab:blue", label="target after controls")
    ax.bar(x + 0.2, view.p_warped, width=0.4, color="tab:orange", label="draft after controls")
    ax.step(x, view.q, where="mid", color="black", linestyle=":", label="target, raw")
    ax.set_xticks(x)
    ax.set_xlabel("token id")
    ax.set_ylabel("probability")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"{view.label}\nalpha {view.alpha:.2f} (raw rows: {view.alpha_raw:.2f})", fontsize=9)
    if legend:
        ax.legend(fontsize=9, loc="upper left")
    return ax


def plot_sequence_frequencies(reference, samples, top=8, ax=None, title="Frequencies of the first tokens"):
    """Observed frequencies of short sequences beside their exact probabilities.

    Parameters
    ----------
    reference : ndarray of shape (V,) * length
        Exact probabilities; the ``top`` most likely sequences are shown.
    samples : dict mapping a label to counts of the same shape
    """
    _text(title, "title")
    import numpy as np

    from .._validate import as_distribution, as_int

    ref = as_distribution(np.reshape(_finite(reference, "reference"), -1), "reference", ndim=1)
    top = as_int(top, "top", minimum=1)
    if not isinstance(samples, dict) or not samples:
        raise TypeError(f"samples: expected a non-empty dict label -> counts, got {type(samples).__name__}")
    for label, counts in samples.items():
        if np.shape(counts) != np.shape(reference):
            raise ValueError(f"samples[{label!r}]: counts of shape {np.shape(counts)}, the reference has "
                             f"{np.shape(reference)}")
        counts = _finite(counts, f"samples[{label!r}]")
        if (counts < 0).any() or counts.sum() <= 0:
            raise ValueError(f"samples[{label!r}]: counts must be non-negative, not all zero")
    ax = _axes(ax)
    shown = np.argsort(-ref, kind="stable")[:top]
    width = 0.8 / len(samples)
    x = np.arange(shown.size)
    for i, (label, counts) in enumerate(samples.items()):
        counts = np.asarray(counts).ravel()
        ax.bar(x - 0.4 + width * (i + 0.5), counts[shown] / counts.sum(), width=width, label=label)
    ax.scatter(x, ref[shown], color="black", marker="_", s=300, zorder=3, label="exact probability")
    names = [" ".join(map(str, np.unravel_index(i, np.shape(reference)))) for i in shown]
    ax.set_xticks(x, names)
    ax.set_xlabel("sequence of token ids")
    ax.set_ylabel("frequency")
    ax.set_title(title)
    ax.legend(fontsize=9)
    return ax


def plot_zoo_distances(names, distances, ax=None, title="Exact distance of each bug from the target"):
    """Horizontal bars: the exact total-variation distance of each faulty decoder.

    ``distances`` maps a setting's label to one distance per name.
    """
    _text(title, "title")
    import numpy as np

    if isinstance(names, (str, bytes)) or not hasattr(names, "__len__"):
        raise TypeError(f"names: expected a list of names, got {type(names).__name__}")
    if not isinstance(distances, dict) or not distances:
        raise TypeError(f"distances: expected a non-empty dict label -> one distance per name, got "
                        f"{type(distances).__name__}")
    for label, values in distances.items():
        values = _finite(values, f"distances[{label!r}]")
        if values.shape != (len(names),):
            raise ValueError(f"distances[{label!r}]: expected {len(names)} distances (one per name), "
                             f"got shape {values.shape}")
    ax = _axes(ax)
    y = np.arange(len(names))
    height = 0.8 / len(distances)
    for i, (label, values) in enumerate(distances.items()):
        ax.barh(y - 0.4 + height * (i + 0.5), values, height=height, label=label)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlabel("total-variation distance from the target (0 = exact)")
    ax.set_title(title)
    ax.legend(fontsize=9)
    return ax


# --- Chapters 12-13: adaptive draft length, production variants

def plot_controller_bars(view, ax=None):
    """Bars: each controller's speed-up at one cost ratio, plain decoding at 1.

    ``view`` is a :class:`speclib.book.widgets.ControllerView`.
    """
    view = _view(view, "ControllerView", "controller_view")
    import numpy as np

    ax = _axes(ax)
    y = np.arange(len(view.names))
    colors = ["tab:gray" if n.startswith("oracle") else "tab:blue" for n in view.names]
    ax.barh(y, view.speedup, color=colors)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1, label="plain decoding")
    ax.set_yticks(y, view.names)
    ax.invert_yaxis()
    ax.set_xlabel("speed-up over plain decoding (tokens per unit of cost)")
    ax.set_title(f"draft noise {view.draft_noise:g} (acceptance {view.alpha:.2f}), cost ratio c = {view.c:g}",
                 fontsize=10)
    ax.legend(fontsize=9, loc="lower right")
    return ax


def plot_controller_comparison(comparison, ax=None, title="Speed-up of each controller", legend=True):
    """Lines: speed-up against the cost ratio ``c``, one per controller; the oracle dashed.

    ``comparison`` is a :class:`speclib.core.adaptive.Comparison`; with several runs, a shaded band
    of two standard errors shows the run-to-run noise.
    """
    _text(title, "title")
    legend = _flag(legend, "legend")
    import numpy as np

    from ..core.adaptive import Comparison

    _instance(comparison, Comparison, "comparison", "a Comparison (speclib.core.adaptive.compare_controllers returns one)")
    ax = _axes(ax)
    for name, values in comparison.speedup.items():
        style = dict(linestyle="--", color="tab:gray") if name.startswith("oracle") else dict(marker="o", markersize=3)
        line, = ax.plot(comparison.c_values, values, label=name, **style)
        err = comparison.stderr[name]
        if np.isfinite(err).all():  # a band of two standard errors of the per-run speed-ups
            ax.fill_between(comparison.c_values, values - 2 * err, values + 2 * err, color=line.get_color(), alpha=0.12)
    ax.axhline(1.0, color="black", linewidth=1, linestyle=":", label="plain decoding")
    ax.set_xlabel("cost ratio c (draft pass / target pass)")
    ax.set_ylabel("speed-up over plain decoding")
    ax.set_title(title, fontsize=10)
    if legend:
        ax.legend(fontsize=9)
    return ax


def plot_fallback_trace(estimates, history, c, tokens_per_step, boundaries=(), ax=None,
                        title="Rolling acceptance and the fallback decision"):
    """The monitor's rolling acceptance estimate against tokens generated, fallback stretches shaded.

    ``estimates`` and ``history`` are a :class:`speclib.core.adaptive.FallbackMonitor`'s, one entry
    per step; ``tokens_per_step`` places the steps on the token axis; ``boundaries`` marks
    where segments change (in tokens).
    """
    _text(title, "title")
    import numpy as np

    from .._validate import as_bool, as_real, as_real_array

    # NaN is allowed: the monitor has no estimate before its first verified draft.
    estimates = as_real_array(estimates, "estimates", "acceptance rates in [0, 1]")
    if estimates.ndim != 1:
        raise ValueError(f"estimates: expected one estimate per step (1-D), got shape {estimates.shape}")
    known = estimates[~np.isnan(estimates)]
    if ((known < 0) | (known > 1)).any():
        raise ValueError(f"estimates: acceptance rates must lie in [0, 1], got values from "
                         f"{known.min():g} to {known.max():g}")
    if isinstance(history, (str, bytes)) or not hasattr(history, "__iter__"):
        raise TypeError(f"history: expected one True/False per step, got {type(history).__name__}")
    history = [as_bool(h, "history") for h in history]
    c = as_real(c, "c", low=0.0)
    steps = _finite(tokens_per_step, "tokens_per_step")
    if steps.ndim != 1 or (steps < 0).any():
        raise ValueError("tokens_per_step: expected one non-negative token count per step")
    if not len(estimates) == len(history) == len(steps):
        raise ValueError(f"estimates, history, tokens_per_step: expected one entry per step each, got "
                         f"{len(estimates)}, {len(history)} and {len(steps)}")
    bounds = _finite(boundaries, "boundaries")
    ax = _axes(ax)
    ends = np.cumsum(steps)
    ax.plot(ends, estimates, color="tab:blue", label="rolling acceptance estimate")
    ax.axhline(c, color="tab:red", linestyle="--", label=f"break-even: alpha = c = {c:g}")
    plain = ~np.asarray(history, dtype=bool)
    ax.fill_between(ends, 0, 1, where=plain, step="pre", color="tab:orange", alpha=0.25, label="plain decoding")
    for b in bounds.ravel():
        ax.axvline(b, color="black", linewidth=1, linestyle=":")
    ax.set_ylim(0, 1)
    ax.set_xlabel("tokens generated")
    ax.set_ylabel("acceptance rate")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=9, loc="lower left")
    return ax


def plot_batch_waste(view, ax=None):
    """Padding waste and truncation loss against the batch size.

    ``view`` is a :class:`speclib.book.widgets.BatchWasteView`.
    """
    view = _view(view, "BatchWasteView", "batch_waste_view")
    ax = _axes(ax)
    ax.plot(view.batch_sizes, view.pad_waste, marker="o", markersize=3,
            label="pad: share of paid-for slots that are padding")
    ax.plot(view.batch_sizes, 1.0 - view.truncate_keep, marker="s", markersize=3,
            label="truncate: share of verified tokens thrown away")
    ax.set_xlabel("batch size B (sequences verified together)")
    ax.set_ylabel("fraction")
    ax.set_ylim(0, 1)
    ax.set_title(f"Batched verification, alpha = {view.alpha:.2f}, k = {view.k}", fontsize=10)
    ax.legend(fontsize=9)
    return ax


# --- Chapter 9: a real model pair

def plot_measured_speedup(ks, speedups, predictions=None, ax=None,
                          title="Speculative against plain decoding, measured"):
    """Measured wall-clock speed-ups against the draft length, with predictions beside them.

    ``speedups`` has one row per entry of ``ks`` (every run's plain time / speculative time);
    each is drawn as its median with the middle half of the runs as an error bar.
    ``predictions`` maps a label to one predicted speed-up per ``k``.  Returns the axes.
    """
    _text(title, "title")
    import numpy as np

    from .._validate import as_int_list

    ks = np.asarray(as_int_list(ks, "ks", minimum=1))
    speedups = _finite(speedups, "speedups")
    if speedups.ndim != 2 or speedups.shape[0] != ks.size:
        raise ValueError(f"speedups: expected one row of runs per k, shape ({ks.size}, runs), got {speedups.shape}")
    if predictions is not None and not isinstance(predictions, dict):
        raise TypeError(f"predictions: expected a dict label -> one speed-up per k, got {type(predictions).__name__}")
    ax = _axes(ax)
    med = np.median(speedups, axis=1)
    lo, hi = np.percentile(speedups, [25, 75], axis=1)
    ax.errorbar(ks, med, yerr=[med - lo, hi - med], fmt="o", color="black", capsize=3,
                label="measured (median, middle half of runs)")
    styles = ["--", ":", "-."]
    for i, (label, values) in enumerate((predictions or {}).items()):
        ax.plot(ks, values, styles[i % len(styles)], marker=".", label=label)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(ks)
    ax.set(xlabel="draft length k", ylabel="speed-up over plain decoding (x)", title=title)
    ax.legend(fontsize=9)
    return ax


# --- Chapter 6: the best draft length over the (alpha, c) plane

#: Bins of the best draft length in :func:`plot_best_k_map`: short drafts get a colour each,
#: long ones share one per range, so that both stay legible.
BEST_K_BINS = ((0, 0), (1, 1), (2, 2), (3, 3), (4, 5), (6, 8), (9, 16), (17, 32), (33, None))


def plot_best_k_map(alphas, costs, best_k, ax=None, title="Best draft length over the (alpha, c) plane"):
    """Colour map of the best draft length, from :func:`speclib.core.tradeoff.optimal_k_grid`.

    ``best_k[i, j]`` is the best ``k`` at ``costs[i]`` and ``alphas[j]`` (0: do not
    speculate).  Colours are binned by :data:`BEST_K_BINS`; the dashed diagonal is the
    break-even line ``alpha = c``.  Returns the axes.
    """
    import numpy as np
    from matplotlib.colors import BoundaryNorm

    alphas, costs, best_k = np.asarray(alphas, float), np.asarray(costs, float), np.asarray(best_k)
    if best_k.shape != (costs.size, alphas.size):
        raise ValueError(f"best_k: expected shape (len(costs), len(alphas)) = {(costs.size, alphas.size)}, "
                         f"got {best_k.shape}")
    bins = [b for b in BEST_K_BINS if b[0] <= max(best_k.max(), 3)]
    last = bins[-1][1] if bins[-1][1] is not None else best_k.max()
    edges = [lo - 0.5 for lo, _ in bins] + [last + 0.5]
    norm = BoundaryNorm(edges, ncolors=256)
    ax = _axes(ax, figsize=(7, 3.8))
    mesh = ax.pcolormesh(alphas, costs, best_k, cmap="viridis", norm=norm, shading="nearest")
    bar = ax.figure.colorbar(mesh, ax=ax, label="best draft length k (0 = do not speculate)")
    bar.set_ticks([(a + b) / 2 for a, b in zip(edges, edges[1:])])
    bar.set_ticklabels([str(lo) if lo == hi else f"{lo}-{hi}" if hi else f"{lo}+" for lo, hi in bins])
    top = min(alphas.max(), costs.max())
    ax.plot([0, top], [0, top], "w--", label="alpha = c: break-even")
    ax.set(xlabel="acceptance rate alpha", ylabel="cost ratio c (draft pass / target pass)", title=title)
    ax.legend(loc="upper left", fontsize=9)
    return ax


# --- Chapter 3: several verified blocks at once (review of chapters 0-3) -----------------

def plot_verification_blocks(views, ncols=2, title=None):
    """A grid of :func:`plot_verification_block` panels sharing one legend.

    ``views`` is a sequence of :func:`speclib.book.widgets.verification_view` results, one per
    panel.  Axis labels are written once per row and column, not on every panel.  Returns
    the figure.
    """
    _text(title, "title", optional=True)
    import matplotlib.pyplot as plt

    if isinstance(views, (str, bytes)) or not hasattr(views, "__iter__"):
        raise TypeError(f"views: expected a sequence of verification views, got {type(views).__name__}")
    views = list(views)
    if not views:
        raise ValueError("views: expected at least one verification view")
    for i, view in enumerate(views):
        if type(view).__name__ != "VerificationView":
            raise TypeError(f"views[{i}]: expected a VerificationView (speclib.book.widgets.verification_view), "
                            f"got {type(view).__name__}")
    from .._validate import as_int

    ncols = min(as_int(ncols, "ncols", minimum=1), len(views))
    nrows = -(-len(views) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.5 * ncols, 2.4 * nrows + 0.8),
                             sharey=True, squeeze=False)
    handles = {}
    for i, ax in enumerate(axes.flat):
        if i >= len(views):
            ax.set_visible(False)
            continue
        plot_verification_block(views[i], ax=ax, legend=False)
        handles.update(zip(*reversed(ax.get_legend_handles_labels())))
        if i % ncols:
            ax.set_ylabel("")
        if i + ncols < len(views):
            ax.set_xlabel("")
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=len(handles), fontsize=9)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


# --- The book's record (speclib.book.record): chapters 1, 7, 13, 17

def record_curve(record, pattern: str, max_tokens: int = 512):
    """``(n, r(n), q25, q75)`` arrays of the record's ``r<n>`` quantities named by ``pattern``.

    ``pattern`` is a name with ``{n}`` for the token count (``"r{n}/target/isolated/numpy/cpu"``);
    ``r(1) = 1`` by definition.  The quartiles are the value itself where the record has none.
    ValueError when the record holds none of them.
    """
    import numpy as np

    _text(pattern, "pattern")
    if "{n}" not in pattern:
        raise ValueError(f"pattern: expected a name with {{n}} for the token count, got {pattern!r}")
    n, r, lo, hi = [1], [1.0], [1.0], [1.0]
    for m in range(2, max_tokens + 1):
        key = pattern.format(n=m)
        if key in record:
            q = record[key]
            n.append(m)
            r.append(q.value)
            lo.append(q.value if q.q25 is None else q.q25)
            hi.append(q.value if q.q75 is None else q.q75)
    if len(n) == 1:
        raise ValueError(f"pattern: the record has no quantity named {pattern.format(n='<n>')!r}")
    return tuple(np.array(a) for a in (n, r, lo, hi))


def plot_record_costs(record, curves: dict, ax=None, separate: bool = True, log: bool = False,
                      title: str = "Cost of one pass over n tokens", max_tokens: int = 512):
    """``r(n)`` from a record, one curve per entry of ``curves`` (label -> name pattern, see
    :func:`record_curve`), with the middle half of the repeats as error bars, and (``separate``)
    the line of ``n`` separate one-token passes.  A second model joins the figure by a second
    entry; ``max_tokens`` cuts the curves there.  Returns the axes."""
    import numpy as np

    if not isinstance(curves, dict) or not curves:
        raise TypeError("curves: expected a dict of label -> name pattern with {n}")
    ax = _axes(ax, figsize=(6.5, 3.4))
    top = 1
    for label, pattern in curves.items():
        n, r, lo, hi = record_curve(record, pattern, max_tokens)
        ax.errorbar(n, r, yerr=[r - lo, hi - r], marker="o", capsize=3, label=_text(label, "label"))
        top = max(top, int(n.max()))
    if separate:
        n = np.arange(1, top + 1)
        ax.plot(n, n, "--", color="gray", lw=1, label="n separate one-token passes")
    if log:
        ax.set(xscale="log", yscale="log")
        ticks = [t for t in (1, 2, 4, 8, 16, 32, 64, 128, 256) if t <= top]
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_yticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
    ax.axhline(1, color="grey", lw=0.8)
    ax.set(xlabel="new tokens in the pass", ylabel="cost / one-token pass", title=title)
    ax.legend(fontsize=9, loc="upper left")
    return ax


def plot_record_speedups(record, drafters, passes=("numpy", "compiled"), temperature: float = 1.0,
                         device: str = "cpu", axes=None, title: str | None = None):
    """The record's median wall-clock speed-up at every ``k``, with its 95% interval, one panel per
    kind of pass and one line per drafter, the legend below the panels; the grey line is plain
    decoding.  Returns the axes."""
    import matplotlib.pyplot as plt
    import numpy as np

    from .record import name

    drafters, passes = list(drafters), list(passes)
    if not drafters or not passes:
        raise ValueError("drafters, passes: expected at least one of each")
    if axes is None:
        _, axes = plt.subplots(1, len(passes), figsize=(6.75, 3.3), sharey=True, squeeze=False)
        axes = axes[0]
    for ax, p in zip(axes, passes):
        for i, d in enumerate(drafters):
            ks, med, lo, hi = [], [], [], []
            for k in range(1, 33):
                key = name("speedup", d, k=k, T=temperature, passes=p, device=device)
                if key in record:
                    q = record[key]
                    ks.append(k), med.append(q.value), lo.append(q.low), hi.append(q.high)
            if not ks:
                raise ValueError(f"drafters: the record has no speed-up of {d!r} with {p} passes")
            med, lo, hi = map(np.array, (med, lo, hi))
            shift = (i - (len(drafters) - 1) / 2) * 0.12
            ax.errorbar(np.array(ks) + shift, med, yerr=[med - lo, hi - med], marker="o", ms=4, capsize=2,
                        label=d)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set(xlabel="draft length k", title=f"{p} passes")
    axes[0].set_ylabel("wall-clock speed-up")
    handles, labels = axes[0].get_legend_handles_labels()
    fig = axes[0].figure
    fig.legend(handles, labels, fontsize=9, loc="lower center", ncol=len(labels), frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.subplots_adjust(bottom=0.27, top=0.8 if title else 0.9)
    return axes

"""Explorers and figures of chapters 1-3: the pure views are right, the builders and plots run."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from speclib.book import widgets as widgets_module  # noqa: E402

from speclib.core.cost import PassTimes, fit_pass_cost, predicted_pass_time  # noqa: E402
from speclib.lm.models import fixed_pair  # noqa: E402
from speclib.book.plots import (  # noqa: E402
    plot_drafting,
    plot_pass_cost,
    plot_pass_times,
    plot_verification_block,
    plot_verification_blocks,
)
from speclib.core.sampling import acceptance_rate  # noqa: E402
from speclib.book.trace import speculative_trace  # noqa: E402
from speclib.book.widgets import (  # noqa: E402
    drafting_explorer,
    drafting_view,
    pass_cost_explorer,
    pass_cost_view,
    verification_explorer,
    verification_view,
)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_pass_cost_view_matches_the_model():
    view = pass_cost_view(5e8, 4, bandwidth=2e10, flops=4e11, k=3, max_tokens=128)
    assert view.n_tokens[0] == 1 and view.n_tokens[-1] == 128
    assert np.all(np.diff(view.n_tokens) > 0) and np.all(np.diff(view.relative) > 0)
    assert view.relative[0] == 1.0
    assert view.crossover == pytest.approx(4 * 4e11 / (2 * 2e10))
    one = predicted_pass_time(1, 5e8, 4, 2e10, 4e11)
    assert view.verify_relative == pytest.approx(predicted_pass_time(4, 5e8, 4, 2e10, 4e11) / one)
    # Memory-bound hardware: k + 1 tokens cost barely more than one.
    assert pass_cost_view(1e9, 2, 1e12, 1e15, k=4).verify_relative < 1.01


def test_pass_cost_view_rejects_bad_input():
    with pytest.raises(ValueError, match="k: must be >= 1"):
        pass_cost_view(1e6, 4, 1e9, 1e9, k=0)
    with pytest.raises(ValueError, match="max_tokens: must be >= 5"):
        pass_cost_view(1e6, 4, 1e9, 1e9, k=4, max_tokens=3)


def test_drafting_view_alpha_is_the_overlap_and_falls_linearly_with_noise():
    view = drafting_view(0.3)
    target, draft = fixed_pair(draft_noise=0.3)
    assert view.alpha == pytest.approx(acceptance_rate(draft.dist, target.dist))
    assert view.overlap.sum() == pytest.approx(view.alpha)
    assert np.all(np.diff(view.q) <= 0)  # sorted by decreasing target probability
    # Chapter 2's derivation: alpha(noise) = 1 - noise * TV(q, uniform).
    tv = 0.5 * np.abs(target.dist - 1 / 64).sum()
    np.testing.assert_allclose(view.alpha_grid, 1 - view.noise_grid * tv, atol=1e-12)


def test_drafting_view_other_context_and_bad_noise():
    assert drafting_view(0.3, context_id=7).alpha != pytest.approx(drafting_view(0.3).alpha)
    with pytest.raises(ValueError, match="draft_noise: must be <= 1"):
        drafting_view(1.5)


def test_verification_view_is_the_trace_of_that_block():
    view = verification_view(3, draft_noise=0.5, k=4, n_blocks=6, seed=2)
    target, draft = fixed_pair(draft_noise=0.5)
    blocks = speculative_trace(target, draft, [0], 6, 4, 2)
    np.testing.assert_array_equal(view.emitted, blocks[3].verification.tokens)
    judged = [r for r in blocks[3].rows if r.u is not None]
    np.testing.assert_array_equal(view.accepted, [r.outcome == "accepted" for r in judged])
    assert view.tokens_so_far == sum(len(b.verification.tokens) for b in blocks[:4])
    with pytest.raises(ValueError, match="block: must be < n_blocks = 6"):
        verification_view(6, n_blocks=6)


def test_plots_label_their_axes():
    times = PassTimes(np.array([1, 2, 4]), np.array([[1.0, 1.1, 1.3], [1.2, 1.1, 1.4]]) * 1e-2, 0, 0)
    fit = fit_pass_cost(times.n_tokens, times.median)
    ax = plot_pass_times(times, fit)
    assert ax.get_xlabel() and ax.get_ylabel() == "time per pass (ms)"
    ax = plot_pass_times(times, relative=True)
    assert ax.get_ylabel() == "cost relative to one pass"
    ax = plot_pass_cost(pass_cost_view(1e8, 4, 1e10, 1e11), measured=[("here", times.n_tokens, times.median)])
    assert ax.get_ylabel() == "time per pass (ms)"
    assert ax.get_title() and len(ax.get_legend().get_texts()) >= 4
    left, right = plot_drafting(drafting_view(0.5))
    assert "alpha" in left.get_legend().get_texts()[0].get_text() and right.get_xlabel() == "draft noise"
    for b in range(4):  # blocks with rejections and with bonus tokens
        ax = plot_verification_block(verification_view(b, draft_noise=0.5))
        assert ax.get_title().startswith(f"Block {b}:")


def test_explorers_build(monkeypatch):
    """Each explorer builds its sliders and hands the explorer a function that draws at their defaults
    (the explorers return None, so a notebook prints no stray <function ...>)."""
    import matplotlib.pyplot as plt

    pytest.importorskip("ipywidgets")
    calls = []
    monkeypatch.setattr(widgets_module, "_explore", lambda f, **widgets: calls.append((f, widgets)))
    for build in (pass_cost_explorer, drafting_explorer, verification_explorer):
        assert build() is None
    assert len(calls) == 3
    for show, widgets in calls:
        plt.close("all")
        show(**{name: w.value for name, w in widgets.items()})
        assert plt.get_fignums() and plt.gcf().axes
    plt.close("all")


def test_verification_grid_labels_each_row_and_column_once():
    views = [verification_view(b, draft_noise=0.5, k=4, n_blocks=6, seed=0) for b in range(6)]
    fig = plot_verification_blocks(views, ncols=2, title="six blocks")
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 6
    assert [ax.get_title().split(":")[0] for ax in axes] == [f"Block {b}" for b in range(6)]
    assert [bool(ax.get_ylabel()) for ax in axes] == [True, False] * 3  # left column only
    assert [bool(ax.get_xlabel()) for ax in axes] == [False] * 4 + [True] * 2  # bottom row only
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert set(labels) == {"min(1, q/p)", "u: accepted", "u: rejected", "bonus token"}
    assert fig._suptitle.get_text() == "six blocks"


def test_verification_grid_odd_count_and_bad_input():
    views = [verification_view(b, draft_noise=0.5, n_blocks=3) for b in range(3)]
    fig = plot_verification_blocks(views, ncols=2)
    assert sum(ax.get_visible() for ax in fig.axes) == 3  # the fourth slot is hidden
    # The panel above the hidden slot is the last of its column: it keeps its x label.
    assert fig.axes[1].get_xlabel()
    with pytest.raises(ValueError, match="views: expected at least one"):
        plot_verification_blocks([])
    with pytest.raises(ValueError, match="ncols: must be >= 1"):
        plot_verification_blocks(views, ncols=0)

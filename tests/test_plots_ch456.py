"""Figures of chapters 4-6 (speclib.book.plots): they draw the data they are given, labelled."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from speclib import tokens_per_step_pmf  # noqa: E402
from speclib.book.plots import plot_bonus, plot_correction, plot_speedup, plot_tokens_per_step  # noqa: E402
from speclib.book.widgets import bonus_view, correction_view, speedup_view  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def bar_heights(ax):
    return np.array([patch.get_height() for patch in ax.patches])


def labelled(ax):
    return bool(ax.get_title() and ax.get_xlabel() and ax.get_ylabel())


def test_plot_correction_draws_the_split_and_the_mistake():
    view = correction_view(0.5, vocab_size=6)
    left, right = plot_correction(view)
    assert labelled(left) and labelled(right)
    np.testing.assert_allclose(bar_heights(left), np.concatenate([view.overlap, view.missing]))
    np.testing.assert_allclose(bar_heights(right), np.concatenate([view.q, view.emitted_resample_q]))
    assert len(left.get_legend().get_texts()) == 3 and len(right.get_legend().get_texts()) == 2


def test_plot_correction_uses_given_axes():
    fig, axes = plt.subplots(1, 2)
    assert list(plot_correction(correction_view(0.2), axes)) == list(axes)


def test_plot_tokens_per_step_shows_fractions_and_theory():
    steps = [1, 1, 2, 3, 3, 3, 3, 2]
    pmf = tokens_per_step_pmf(0.5, 2)
    ax = plot_tokens_per_step(steps, pmf)
    assert labelled(ax)
    np.testing.assert_allclose(bar_heights(ax), [2 / 8, 2 / 8, 4 / 8])
    np.testing.assert_allclose(ax.lines[0].get_ydata(), pmf)


def test_plot_tokens_per_step_rejects_counts_outside_the_pmf():
    with pytest.raises(ValueError, match=r"counts must lie in 1 \.\. 3"):
        plot_tokens_per_step([1, 4], tokens_per_step_pmf(0.5, 2))
    with pytest.raises(ValueError, match="no steps"):
        plot_tokens_per_step([], tokens_per_step_pmf(0.5, 2))


def test_plot_bonus():
    view = bonus_view(0.7, 3)
    ax = plot_bonus(view)
    assert labelled(ax)
    np.testing.assert_allclose(bar_heights(ax), np.concatenate([view.pmf_with, view.pmf_without]))
    assert len(ax.get_legend().get_texts()) == 2


@pytest.mark.parametrize("alpha, c, marks_best", [(0.8, 0.05, True), (0.2, 0.4, False)])
def test_plot_speedup(alpha, c, marks_best):
    view = speedup_view(alpha, c, 2, k_max=10)
    ax = plot_speedup(view)
    assert labelled(ax)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), view.speedups)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(label.startswith("best k") for label in labels) == marks_best
    assert ("no k pays" in ax.get_title()) != marks_best


def test_plot_best_k_map_bins_the_grid_and_marks_break_even():
    from speclib.book.plots import plot_best_k_map
    from speclib.core.tradeoff import optimal_k_grid

    alphas, costs = np.linspace(0.0, 0.95, 20), np.linspace(0.0, 0.5, 11)
    best = optimal_k_grid(alphas, costs, k_max=32)
    ax = plot_best_k_map(alphas, costs, best)
    assert labelled(ax)
    mesh = ax.collections[0]
    np.testing.assert_array_equal(np.asarray(mesh.get_array()).reshape(best.shape), best)
    bar_labels = [t.get_text() for t in ax.figure.axes[-1].get_yticklabels()]
    assert bar_labels[:4] == ["0", "1", "2", "3"] and bar_labels[-1] == "17-32"
    assert ax.get_legend().get_texts()[0].get_text().startswith("alpha = c")


def test_plot_best_k_map_rejects_a_grid_of_the_wrong_shape():
    from speclib.book.plots import plot_best_k_map

    with pytest.raises(ValueError, match="best_k: expected shape"):
        plot_best_k_map([0.1, 0.2], [0.0, 0.1, 0.2], np.zeros((2, 3), dtype=int))

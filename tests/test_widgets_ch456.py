"""Explorer logic of chapters 4-6 (speclib.book.widgets): the pure view functions and their builders."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from speclib.book import widgets as widgets_module  # noqa: E402

from speclib import expected_tokens_per_pass, optimal_k, speedup_in_passes  # noqa: E402
from speclib.core.stats import total_variation_distance  # noqa: E402
from speclib.book.widgets import (  # noqa: E402
    bonus_explorer,
    bonus_view,
    correction_explorer,
    correction_view,
    speedup_explorer,
    speedup_view,
)


@pytest.mark.parametrize("noise", [0.0, 0.2, 0.5, 1.0])
def test_correction_view_splits_q_and_measures_the_mistake(noise):
    v = correction_view(noise, vocab_size=8, seed=0)
    np.testing.assert_allclose(v.overlap + v.missing, v.q, atol=1e-15)
    assert v.alpha == pytest.approx(1 - v.missing.sum())
    np.testing.assert_allclose(v.emitted_resample_q, v.overlap + (1 - v.alpha) * v.q, atol=1e-12)
    assert v.tv_resample_q == pytest.approx(total_variation_distance(v.emitted_resample_q, v.q))


def test_correction_view_alpha_falls_linearly_with_noise():
    # p = (1 - e) q + e u, so 1 - alpha = TV(p, q) = e TV(u, q): a straight line in e.
    gaps = np.array([1 - correction_view(e).alpha for e in (0.25, 0.5, 1.0)])
    np.testing.assert_allclose(gaps / gaps[-1], [0.25, 0.5, 1.0], atol=1e-12)
    assert correction_view(0.6).tv_resample_q > correction_view(0.2).tv_resample_q > 0


def test_correction_view_bad_input():
    with pytest.raises(ValueError, match="draft_noise: must be <= 1"):
        correction_view(1.5)
    with pytest.raises(ValueError, match="vocab_size: must be >= 2"):
        correction_view(0.3, vocab_size=1)


@pytest.mark.parametrize("alpha, k", [(0.0, 1), (0.5, 2), (0.8, 4), (1.0, 6)])
def test_bonus_view(alpha, k):
    v = bonus_view(alpha, k)
    assert v.pmf_with.shape == (k + 1,) and v.pmf_without.shape == (k,)
    assert v.pmf_with @ np.arange(1, k + 2) == pytest.approx(v.mean_with)
    assert v.pmf_without @ np.arange(1, k + 1) == pytest.approx(v.mean_without)
    assert v.mean_with - v.mean_without == pytest.approx(alpha**k)
    assert v.mean_with == pytest.approx(expected_tokens_per_pass(alpha, k))
    assert v.bonus_share == pytest.approx(alpha**k / v.mean_with)


def test_bonus_view_bad_input():
    with pytest.raises(ValueError, match="alpha"):
        bonus_view(-0.1, 3)
    with pytest.raises(ValueError, match="k: must be >= 1"):
        bonus_view(0.5, 0)


@pytest.mark.parametrize("alpha, c", [(0.8, 0.05), (0.6, 0.3), (0.3, 0.3), (0.2, 0.5), (0.95, 0.0)])
def test_speedup_view(alpha, c):
    v = speedup_view(alpha, c, 3, k_max=12)
    assert v.speedups[0] == 1.0 and v.speedups.shape == (13,)
    assert v.speedup_at_k == pytest.approx(speedup_in_passes(alpha, 3, c))
    assert v.best_k == optimal_k(alpha, c, 12)
    assert v.best_speedup == pytest.approx(v.speedups.max())
    assert v.pays == (alpha > c) == (v.best_k > 0)
    assert speedup_in_passes(v.break_even_alpha_at_k, 3, c) == pytest.approx(1.0, abs=1e-9)


def test_speedup_view_bad_input():
    with pytest.raises(ValueError, match="k: must be <= k_max"):
        speedup_view(0.5, 0.1, 20, k_max=16)
    with pytest.raises(ValueError, match="c: must be >= 0"):
        speedup_view(0.5, -0.1, 2)


@pytest.fixture
def captured_interact(monkeypatch):
    """The explorers' display replaced by a recorder: the explorers return None (so a notebook prints no
    stray <function ...>), and this is how a test reaches the function each slider redraws."""
    pytest.importorskip("ipywidgets")
    calls = []

    def interact(f, **widgets):
        calls.append((f, widgets))
        return f

    monkeypatch.setattr(widgets_module, "_explore", interact)
    return calls


@pytest.mark.parametrize("builder", [correction_explorer, bonus_explorer, speedup_explorer])
def test_explorers_build_and_draw(builder, captured_interact):
    plt.close("all")
    assert builder() is None
    ((show, widgets),) = captured_interact
    assert widgets, "every explorer has at least one slider"
    plt.close("all")
    show(**{name: w.value for name, w in widgets.items()})  # one redraw at the default slider values
    fig = plt.gcf()
    assert plt.get_fignums() and fig.axes and all(ax.get_title() for ax in fig.axes)
    plt.close("all")

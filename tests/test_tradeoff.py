"""speclib.core.tradeoff: speed-up curves and the break-even lines of chapter 6."""

import math

import numpy as np
import pytest

from speclib import optimal_k, speedup_in_passes
from speclib.core.tradeoff import break_even_alpha, break_even_c, optimal_k_grid, speedup_curve


def test_speedup_curve_matches_speedup_in_passes():
    curve = speedup_curve(0.7, 0.08, 10)
    assert curve.shape == (11,) and curve[0] == 1.0
    for k in range(1, 11):
        assert curve[k] == pytest.approx(speedup_in_passes(0.7, k, 0.08))
    assert np.argmax(curve) == optimal_k(0.7, 0.08, 10)


@pytest.mark.parametrize("alpha", [0.1, 0.3, 0.6, 0.9])
@pytest.mark.parametrize("k", [1, 2, 4, 9])
def test_break_even_c_is_where_speedup_is_one(alpha, k):
    c = break_even_c(alpha, k)
    assert speedup_in_passes(alpha, k, c) == pytest.approx(1.0)
    assert speedup_in_passes(alpha, k, c * 0.99) > 1 > speedup_in_passes(alpha, k, c * 1.01)


@pytest.mark.parametrize("c", [0.01, 0.05, 0.2, 0.5, 0.9])
@pytest.mark.parametrize("k", [1, 2, 4, 9])
def test_break_even_alpha_is_where_speedup_is_one(c, k):
    a = break_even_alpha(k, c)
    assert speedup_in_passes(a, k, c) == pytest.approx(1.0, abs=1e-10)
    assert break_even_c(a, k) == pytest.approx(c)


def test_k_equal_one_breaks_even_at_alpha_equal_c_and_longer_drafts_need_more():
    """The theorem of chapter 6: some k pays exactly when alpha > c, and k = 1 is the easiest."""
    for c in [0.02, 0.1, 0.3, 0.7]:
        assert break_even_alpha(1, c) == pytest.approx(c)
        thresholds = [break_even_alpha(k, c) for k in range(1, 12)]
        assert all(a < b for a, b in zip(thresholds, thresholds[1:]))


def test_break_even_edges():
    assert break_even_alpha(4, 0.0) == 0.0
    assert break_even_alpha(4, 1.0) == 1.0
    assert break_even_alpha(4, 1.5) == math.inf
    assert break_even_c(0.0, 3) == 0.0
    assert break_even_c(1.0, 3) == 1.0


def test_bad_input():
    with pytest.raises(ValueError, match="c: must be >= 0"):
        break_even_alpha(2, -0.1)
    with pytest.raises(ValueError, match="k: must be >= 1"):
        break_even_alpha(0, 0.1)
    with pytest.raises(ValueError, match=r"alpha: must lie in \[0, 1\]"):
        break_even_c(1.1, 2)
    with pytest.raises(ValueError, match="k_max: must be >= 1"):
        speedup_curve(0.5, 0.1, 0)


def test_optimal_k_grid_matches_optimal_k():
    alphas = np.linspace(0.0, 1.0, 21)
    costs = np.array([0.0, 0.013, 0.052, 0.107, 0.33, 0.51, 1.0])  # off the alpha grid: no exact ties
    grid = optimal_k_grid(alphas, costs, k_max=24)
    assert grid.shape == (7, 21)
    for i, c in enumerate(costs):
        for j, a in enumerate(alphas):
            assert grid[i, j] == optimal_k(float(a), float(c), k_max=24), (a, c)
    # and the break-even theorem, on the grid: some k pays exactly when alpha > c
    np.testing.assert_array_equal(grid > 0, alphas[None, :] > costs[:, None])


def test_optimal_k_grid_bad_input():
    with pytest.raises(ValueError, match="alphas"):
        optimal_k_grid([0.5, 1.5], [0.1])
    with pytest.raises(ValueError, match="costs: must be finite and >= 0"):
        optimal_k_grid([0.5], [-0.1])
    with pytest.raises(ValueError, match="1-D"):
        optimal_k_grid([[0.5]], [0.1])

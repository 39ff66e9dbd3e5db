"""Chapter 8's explorer, figure helper and exercise self-checks."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from speclib.book import checks  # noqa: E402
from speclib.book.plots import plot_acceptance_by_position  # noqa: E402
from speclib.book.widgets import generation_view  # noqa: E402


def test_generation_view_renders_and_counts():
    view = generation_view("code", k=3, temperature=1.0, seed=2, new_tokens=120)
    assert view.html.startswith('<div class="spec-trace">') and "<b>def </b>" in view.html
    assert "tokens=120" in view.summary
    assert 1.0 <= view.tokens_per_pass <= 4.0 and 0.0 <= view.acceptance <= 1.0
    assert generation_view("code", k=3, seed=2, new_tokens=120) == view  # deterministic


def test_generation_view_greedy_is_seed_free():
    a = generation_view("prose", temperature=0.0, seed=0, new_tokens=80)
    b = generation_view("prose", temperature=0.0, seed=9, new_tokens=80)
    assert a.html == b.html


@pytest.mark.parametrize("kwargs", [dict(k=0), dict(temperature=-1.0), dict(domain="poetry"),
                                    dict(new_tokens=0)])
def test_generation_view_validates(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        generation_view(**kwargs)


def test_plot_acceptance_by_position_draws_bars_and_alpha():
    ax = plot_acceptance_by_position([0.5, 0.6, 0.7], [100, 50, 25], label="x", alpha=0.55)
    assert ax.get_xlabel() and ax.get_ylabel()
    assert len(ax.lines) >= 2  # the curve and the dashed alpha line
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="rate and n_judged"):
        plot_acceptance_by_position([0.5, 0.6], [10])


def right_by_position(outcomes, k):
    accepted, judged = np.zeros(k), np.zeros(k)
    for block in outcomes:
        accepted[: len(block)] += block
        judged[: len(block)] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return accepted / judged


def per_block_denominator(outcomes, k):  # the classic mistake: divide by every block
    accepted = np.zeros(k)
    for block in outcomes:
        accepted[: len(block)] += block
    return accepted / len(outcomes)


def stub(*args):
    raise NotImplementedError("complete me")


def test_check_acceptance_by_position(capsys):
    checks.check_acceptance_by_position(right_by_position)
    assert "\u2714" in capsys.readouterr().out
    with pytest.raises(checks.ExerciseError, match="denominator"):
        checks.check_acceptance_by_position(per_block_denominator)
    with pytest.raises(checks.ExerciseError, match="NotImplementedError"):
        checks.check_acceptance_by_position(stub)
    with pytest.raises(checks.ExerciseError, match="shape"):
        checks.check_acceptance_by_position(lambda outcomes, k: [0.5])


def right_row(counts, lower, discount):
    total = counts.sum()
    if total == 0:
        return lower
    return (np.maximum(counts - discount, 0) + discount * np.count_nonzero(counts) * lower) / total


def test_check_interpolated_row(capsys):
    checks.check_interpolated_row(right_row)
    assert "\u2714" in capsys.readouterr().out
    def no_interpolation(c, low, d):
        return np.maximum(c - d, 0) / c.sum() if c.sum() else low

    with pytest.raises(checks.ExerciseError, match="sums to"):
        checks.check_interpolated_row(no_interpolation)
    unscaled = lambda c, low, d: (np.maximum(c - d, 0) + d * low) / c.sum()  # noqa: E731
    with pytest.raises(checks.ExerciseError):
        checks.check_interpolated_row(unscaled)
    zero_for_unseen = lambda c, low, d: c / c.sum()  # noqa: E731
    with pytest.raises(checks.ExerciseError, match="0 to a token"):
        checks.check_interpolated_row(zero_for_unseen)


def test_a_failing_check_does_not_show_the_answer():
    """A failed check prints a traceback with the lines around the call: no reference formula there."""
    import inspect

    by_position = inspect.getsource(checks.check_acceptance_by_position)
    row = inspect.getsource(checks.check_interpolated_row)
    assert "len(block)" not in by_position and "count_nonzero" not in row
    # Negative control: the reference answers do contain them (so the test looks for the right thing).
    assert "len(block)" in inspect.getsource(checks._by_position_reference)
    assert "count_nonzero" in inspect.getsource(checks._interpolated_row_reference)

"""Figures drawn from the book's record (speclib.book.plots): what they draw is the record's."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from speclib.book.plots import plot_record_costs, plot_record_speedups, record_curve  # noqa: E402
from speclib.book.record import Quantity, Record  # noqa: E402


@pytest.fixture
def rec():
    q = {f"r{n}/stack/isolated/blocks/cpu": Quantity("", 1 + 0.1 * n, q25=1 + 0.09 * n, q75=1 + 0.12 * n)
         for n in (2, 4, 8)}
    q |= {f"r{n}/other/isolated/numpy/cpu": Quantity("", 1.0 * n) for n in (2, 3)}
    for k in (1, 2, 3):
        q[f"speedup/pair/k{k}/T1/numpy/cpu"] = Quantity("", 1 + k / 10, 0.9 + k / 10, 1.1 + k / 10)
    return Record({k: v._replace(name=k) for k, v in q.items()})


def test_a_curve_is_the_records_quantities_with_r1_equal_to_one(rec):
    n, r, lo, hi = record_curve(rec, "r{n}/stack/isolated/blocks/cpu")
    assert n.tolist() == [1, 2, 4, 8] and r[0] == lo[0] == hi[0] == 1.0
    np.testing.assert_allclose(r[1:], [1.2, 1.4, 1.8])
    n, r, lo, hi = record_curve(rec, "r{n}/other/isolated/numpy/cpu")
    assert (lo == r).all() and (hi == r).all()  # no quartiles: the value itself
    assert record_curve(rec, "r{n}/stack/isolated/blocks/cpu", max_tokens=4)[0].tolist() == [1, 2, 4]
    with pytest.raises(ValueError, match="no quantity"):
        record_curve(rec, "r{n}/nothing/isolated/numpy/cpu")
    with pytest.raises(ValueError, match="{n}"):
        record_curve(rec, "r5/stack/isolated/blocks/cpu")


def test_a_second_model_joins_the_figure_as_a_second_entry(rec):
    import matplotlib.pyplot as plt

    ax = plot_record_costs(rec, {"stack": "r{n}/stack/isolated/blocks/cpu"}, log=True)
    one = len(ax.get_legend().get_texts())
    ax2 = plot_record_costs(rec, {"stack": "r{n}/stack/isolated/blocks/cpu",
                                  "another model": "r{n}/other/isolated/numpy/cpu"}, log=True)
    labels = [t.get_text() for t in ax2.get_legend().get_texts()]
    assert len(labels) == one + 1 and "another model" in labels
    plt.close("all")


def test_the_speed_up_panels_draw_the_records_intervals(rec):
    import matplotlib.pyplot as plt

    axes = plot_record_speedups(rec, ["pair"], passes=["numpy"])
    assert [t.get_text() for t in axes[0].figure.legends[0].get_texts()] == ["pair"]
    line = axes[0].lines[0]
    np.testing.assert_allclose(line.get_ydata(), [1.1, 1.2, 1.3])
    with pytest.raises(ValueError, match="no speed-up of 'eagle'"):
        plot_record_speedups(rec, ["eagle"], passes=["numpy"])
    plt.close("all")

"""Self-checks of chapter 9's exercises accept a right answer and explain a wrong one."""

import numpy as np
import pytest

from speclib.book.checks import ExerciseError, check_costs_from_passes


def costs(plain, spec, k):
    t1 = np.median([t for name, n, t in plain if name == "model" and n == 1])
    c = np.median([t for name, n, t in spec if name == "draft" and n == 1]) / t1
    r = np.median([t for name, n, t in spec if name == "target" and n == k + 1]) / t1
    return c, r


def test_costs_accepts_the_medians(capsys):
    check_costs_from_passes(costs)
    assert "\u2714" in capsys.readouterr().out


def _mean_unit(plain, spec, k):
    t1 = np.mean([t for name, n, t in plain if name == "model" and n == 1])
    c = np.median([t for name, n, t in spec if name == "draft" and n == 1]) / t1
    r = np.median([t for name, n, t in spec if name == "target" and n == k + 1]) / t1
    return c, r


def _all_target_passes(plain, spec, k):
    c, _ = costs(plain, spec, k)
    t1 = np.median([t for name, n, t in plain if name == "model" and n == 1])
    return c, np.median([t for name, n, t in spec if name == "target"]) / t1


@pytest.mark.parametrize("wrong, hint", [
    (_mean_unit, "median of the one-token passes"),
    (_all_target_passes, "leave out the passes of other sizes"),
    (lambda plain, spec, k: (1.0, 1.0), "the unit is t1"),
    (lambda plain, spec, k: 0.5, "expected a pair"),
])
def test_costs_explains_mistakes(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_costs_from_passes(wrong)

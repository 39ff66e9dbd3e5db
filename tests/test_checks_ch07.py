"""The self-check of ex-07-3 (lag-1 autocorrelation) accepts both usual definitions and explains mistakes."""

import numpy as np
import pytest

from speclib.book.checks import ExerciseError, check_lag1_autocorrelation


def pairs(x):
    return float(np.corrcoef(x[:-1], x[1:])[0, 1])


def acf(x):
    d = np.asarray(x) - np.mean(x)
    return float((d[:-1] * d[1:]).sum() / (d * d).sum())


@pytest.mark.parametrize("right", [pairs, acf])
def test_accepts_either_definition(right, capsys):
    check_lag1_autocorrelation(right)
    assert "\u2714" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (lambda x: 1.0, "lies in \\[-1, 1\\]"),                 # x compared with itself
    (lambda x: -pairs(x) if abs(pairs(x)) > 0.1 else pairs(x), "the sign is wrong"),
    (lambda x: pairs(x[::-1][::2]) * 0.3, "compare each entry"),
])
def test_explains_mistakes(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_lag1_autocorrelation(wrong)


def test_stub():
    def stub(x):
        raise NotImplementedError
    with pytest.raises(ExerciseError, match="still raises NotImplementedError"):
        check_lag1_autocorrelation(stub)

"""The self-check of ex-07-1 (the limit of the accepted / proposed counter) accepts a right answer and
names the usual mistakes."""

import numpy as np
import pytest

from speclib.book.checks import ExerciseError, check_counter_limit


def kept(alpha, k):
    return sum(alpha**j for j in range(1, k + 1))


@pytest.mark.parametrize("right", [lambda a, k: kept(a, k) / k,
                                   lambda a, k: float(np.mean(np.float64(a) ** np.arange(1, k + 1)))])
def test_accepts_a_right_answer(right, capsys):
    check_counter_limit(right)
    assert "\u2714" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (lambda a, k: a, "that is alpha itself, what accepted / verified tends to"),
    (kept, "the expected number of drafts a step keeps"),
    (lambda a, k: a * (1 - a**k) / ((1 - a) * k), "divided by zero"),
    (lambda a, k: a**k, "too low"),
    (lambda a, k: None, "not a number"),
])
def test_names_the_mistake(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_counter_limit(wrong)


def test_stub():
    def stub(alpha, k):
        raise NotImplementedError
    with pytest.raises(ExerciseError, match="still raises NotImplementedError"):
        check_counter_limit(stub)

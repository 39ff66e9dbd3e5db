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


@pytest.mark.parametrize("close", [
    lambda a, k: round(kept(a, k) / k, 2),  # rounded to two decimals
    lambda a, k: kept(a, k) / k + 1e-6,  # off by a millionth
    lambda a, k: sum(a**j for j in range(1, k + 1)) / (k + 1e-5),  # a slightly wrong denominator
])
def test_an_approximate_answer_is_not_accepted(close):
    """The limit has a closed form, so the check holds answers to 1e-9: an answer that is only
    close (rounded, or off in its sixth digit) is refused, while the sum written another way
    (np.mean of the powers, above) passes."""
    with pytest.raises(ExerciseError, match="too (high|low)"):
        check_counter_limit(close)

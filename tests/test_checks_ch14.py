"""Self-checks of chapter 14 accept a right answer and explain a wrong one, without the answer."""

import pytest

from speclib.book.checks import ExerciseError, check_outside_ms


def stub(*args):
    raise NotImplementedError("complete me")


# --- ex-14-1: where a run's time goes ------------------------------------------------------

def test_outside_ms_accepts_the_decomposition(capsys):
    check_outside_ms(lambda ms, tpp, dpt, t, r, d: ms - t * r / tpp - d * dpt)
    assert "\u2714" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (lambda ms, tpp, dpt, t, r, d: ms - t * r - d * dpt, "how many tokens share one pass"),
    (lambda ms, tpp, dpt, t, r, d: ms - t / tpp - d * dpt, "verify_ratio one-token passes"),
    (lambda ms, tpp, dpt, t, r, d: ms - t * r / tpp, "Subtract both"),
])
def test_outside_ms_explains_a_wrong_decomposition(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_outside_ms(wrong)


def test_outside_ms_on_a_stub():
    with pytest.raises(ExerciseError, match="still raises NotImplementedError"):
        check_outside_ms(stub)

"""Self-checks of chapters 4-6 accept a right answer and explain a wrong one."""

import numpy as np
import pytest

from speclib.book.checks import ExerciseError, check_expected_tokens_without_bonus, check_residual, check_speedup


def stub(*args):
    raise NotImplementedError("complete me")


# --- ex-04-1: the residual -----------------------------------------------------------------

def good_residual(p, q):
    excess = np.maximum(q - p, 0)
    return excess / excess.sum()


def test_residual_accepts_correct_answer(capsys):
    check_residual(good_residual)
    assert "\u2714" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda p, q: np.maximum(q - p, 0), "not 1. Did you normalise"),
        (lambda p, q: q, "mass on a token where p >= q"),
        (lambda p, q: np.abs(q - p) / np.abs(q - p).sum(), "mass on a token where p >= q"),
        (lambda p, q: q - p, "negative entry"),
        (lambda p, q: np.maximum(q - p, 0)[:-1], "shape"),
        (lambda p, q: "residual", "not an array of numbers"),
        (lambda p, q: (np.maximum(q - p, 0) > 0) / (np.maximum(q - p, 0) > 0).sum(), "proportions"),
    ],
)
def test_residual_rejects_wrong_answers(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_residual(wrong)


def test_residual_stub_message():
    with pytest.raises(ExerciseError, match="still raises NotImplementedError"):
        check_residual(stub)


# --- ex-05-1: tokens per pass without the bonus -----------------------------------------------

def test_expected_tokens_without_bonus_accepts_correct_answer(capsys):
    check_expected_tokens_without_bonus(lambda alpha, k: sum(alpha**i for i in range(k)))
    assert "\u2714" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda alpha, k: sum(alpha**i for i in range(k + 1)), "with\\* the bonus"),
        (lambda alpha, k: (1 - alpha**k) / (1 - alpha), "divided by zero"),
        (lambda alpha, k: (1 - np.float64(alpha) ** k) / (1 - np.float64(alpha)), "division by zero"),
        (lambda alpha, k: float(k), "at alpha = 0 every draft is rejected"),
        (lambda alpha, k: sum(alpha**i for i in range(1, k + 1)), "at alpha = 0 every draft"),
        (lambda alpha, k: 1.0 + (k - 1) * alpha, "too high. Position i \\+ 1"),
        (lambda alpha, k: 1.0 + (k - 1) * alpha**k, "too low"),
        (lambda alpha, k: None, "not a number"),
    ],
)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_expected_tokens_without_bonus_rejects_wrong_answers(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_expected_tokens_without_bonus(wrong)


def test_expected_tokens_without_bonus_stub_message():
    with pytest.raises(ExerciseError, match="still raises NotImplementedError"):
        check_expected_tokens_without_bonus(stub)


# --- ex-06-1: the speed-up in target passes -------------------------------------------------

def test_speedup_accepts_correct_answer(capsys):
    check_speedup(lambda alpha, k, c: sum(alpha**i for i in range(k + 1)) / (k * c + 1))
    assert "\u2714" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda alpha, k, c: sum(alpha**i for i in range(k + 1)), "tokens per pass"),
        (lambda alpha, k, c: (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * c + 1)), "divided by zero"),
        (lambda alpha, k, c: sum(alpha**i for i in range(k + 1)) / (c + 1), "off"),
        (lambda alpha, k, c: sum(alpha**i for i in range(k)) / (k * c + 1), "off"),
    ],
)
def test_speedup_rejects_wrong_answers(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_speedup(wrong)


def test_speedup_stub_message():
    with pytest.raises(ExerciseError, match="still raises NotImplementedError"):
        check_speedup(stub)


# --- what the student sees when a check fails ---------------------------------------------------

def test_exercise_error_shows_the_hint_without_the_check_s_code():
    """IPython renders _render_traceback_ instead of a traceback: one line, the hint only, so
    the check's test cases and reference function stay hidden."""
    with pytest.raises(ExerciseError) as info:
        check_speedup(lambda alpha, k, c: sum(alpha**i for i in range(k + 1)))
    lines = info.value._render_traceback_()
    assert len(lines) == 1 and lines[0].startswith("\x1b[0;31mExerciseError\x1b[0m: ")
    assert " ".join(lines[0].split()).endswith(" ".join(str(info.value).split()))
    assert max(len(line) for line in lines[0].split("\n")[1:]) <= 88  # wrapped for the book
    assert "speedup_in_passes" not in lines[0]


def test_exercise_error_in_a_kernel_is_one_line():
    """The same, end to end: run a failing check in an IPython shell and read what it prints."""
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()
    captured = []
    ip._showtraceback = lambda etype, evalue, stb: captured.append(stb)
    ip.run_cell("from speclib.book.checks import check_speedup\n"
                "def speedup(alpha, k, c):\n    raise NotImplementedError\n"
                "check_speedup(speedup)")
    (stb,) = captured
    assert len(stb) == 1 and "still raises NotImplementedError" in " ".join(stb[0].split())
    assert "checks.py" not in "".join(stb)

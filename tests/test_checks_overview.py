"""Self-checks of the overview chapter accept a right answer and explain a wrong one."""

import pytest

from speclib.book.checks import ExerciseError, check_tokens_per_pass


def test_accepts_correct_answer(capsys):
    check_tokens_per_pass(lambda steps: sum(steps) / len(steps))
    assert "\u2714" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda steps: len(steps), "how many passes"),  # counts passes, not tokens per pass
        (lambda steps: sum(steps), "how many passes"),  # forgets to divide
        (lambda steps: None, "not a number"),
    ],
)
def test_rejects_wrong_answers_with_a_hint(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_tokens_per_pass(wrong)


def test_unfinished_stub_gets_a_friendly_message():
    def tokens_per_pass(steps):
        raise NotImplementedError

    with pytest.raises(ExerciseError, match="still raises NotImplementedError"):
        check_tokens_per_pass(tokens_per_pass)


# --- ex-00-1: which random number feeds which step ------------------------------------------

from speclib.book.checks import check_random_draws  # noqa: E402


def _random_draws(k_per_step, accepted_per_step):
    return sum(k + a + (a < k) + 1 for k, a in zip(k_per_step, accepted_per_step))


def test_random_draws_accepts_the_count(capsys):
    check_random_draws(_random_draws)
    assert "\u2714" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", [
    lambda ks, accs: sum(k + k + 1 for k in ks),            # tests every draft, even after a rejection
    lambda ks, accs: sum(k + a + 1 for k, a in zip(ks, accs)),  # forgets the failed test
    lambda ks, accs: sum(k + a + (a < k) for k, a in zip(ks, accs)),  # forgets the last token
])
def test_random_draws_rejects_wrong_counts(wrong):
    with pytest.raises(ExerciseError, match="uniform numbers"):
        check_random_draws(wrong)

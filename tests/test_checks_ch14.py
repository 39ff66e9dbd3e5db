"""Self-checks of chapter 14 accept a right answer and explain a wrong one, without the answer."""

import numpy as np
import pytest

from speclib.book.checks import ExerciseError, check_rows_over_vocabulary


def stub(*args):
    raise NotImplementedError("complete me")


# --- ex-14-2: rows over a padded vocabulary ------------------------------------------------

def good_rows(logits, V):
    z = np.asarray(logits, dtype=np.float64)[:, :V]
    z = np.exp(z - z.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def softmax_all(logits):
    z = np.exp(logits - logits.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def test_rows_accept_correct_answers(capsys):
    check_rows_over_vocabulary(good_rows)
    check_rows_over_vocabulary(lambda z, V: softmax_all(z)[:, :V] / softmax_all(z)[:, :V].sum(axis=1, keepdims=True))
    assert capsys.readouterr().out.count("\u2714") == 2


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda z, V: softmax_all(z)[:, :V], "not 1. Where did the missing mass go"),  # the chapter's bug
        (lambda z, V: softmax_all(z), "rows over all 105 columns"),
        (lambda z, V: np.exp(z[:, :V]) / np.exp(z[:, :V]).sum(axis=1, keepdims=True), "overflows"),
        (lambda z, V: good_rows(z[:, -V:], V), "not the softmax of the real ids"),
        (lambda z, V: good_rows(z, V)[:-1], "expected rows of shape"),
        (lambda z, V: good_rows(z, V) - 0.5, "negative entry"),
        (lambda z, V: good_rows(z, V).astype(str), "not an array of probabilities"),
        (lambda z, V: good_rows(z, V).tolist()[0], "expected rows of shape"),
    ],
)
# The naive softmax among the wrong answers is meant to overflow.
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")
def test_rows_reject_wrong_answers(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_rows_over_vocabulary(wrong)


def test_rows_stub_message():
    with pytest.raises(ExerciseError, match="still raises NotImplementedError"):
        check_rows_over_vocabulary(stub)


# --- ex-14-1 (new): where a run's time goes ------------------------------------------------

from speclib.book.checks import check_outside_ms  # noqa: E402


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

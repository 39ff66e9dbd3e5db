"""Self-checks of chapters 1-3: each passes a correct answer and catches the typical wrong ones."""

import numpy as np
import pytest

from speclib.book.checks import ExerciseError, check_accepted_prefix, check_autoregressive_loop, check_draft_proposal
from speclib.core.sampling import sample_token


# --- ex-01-1: the autoregressive loop ---------------------------------------------------

def generate_right(model, prompt, n_new, rng):
    tokens = np.asarray(prompt)
    for _ in range(n_new):
        tokens = np.append(tokens, sample_token(model(tokens)[-1], rng))
    return tokens[len(prompt):]


def generate_first_row(model, prompt, n_new, rng):  # the bug of ex-01-3
    tokens = np.asarray(prompt)
    for _ in range(n_new):
        tokens = np.append(tokens, sample_token(model(tokens)[0], rng))
    return tokens[len(prompt):]


def generate_with_prompt(model, prompt, n_new, rng):
    return np.concatenate([prompt, generate_right(model, prompt, n_new, rng)])


def generate_two_calls(model, prompt, n_new, rng):
    tokens = np.asarray(prompt)
    for _ in range(n_new):
        model(tokens)  # a wasted pass
        tokens = np.append(tokens, sample_token(model(tokens)[-1], rng))
    return tokens[len(prompt):]


def generate_stale_prefix(model, prompt, n_new, rng):
    out = [sample_token(model(np.asarray(prompt))[-1], rng) for _ in range(n_new)]
    return np.array(out, dtype=int)


def test_autoregressive_check_passes_the_right_loop(capsys):
    check_autoregressive_loop(generate_right)
    assert "\u2714" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (generate_first_row, "differs from the target's own sampling"),
    (generate_stale_prefix, "differs from the target's own sampling"),
    (generate_with_prompt, "only the new tokens"),
    (generate_two_calls, "called 16 times for 8 tokens"),
])
def test_autoregressive_check_catches(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_autoregressive_loop(wrong)


def test_a_stub_gets_a_friendly_message():
    def stub(*args):
        raise NotImplementedError("complete me")

    for check in (check_autoregressive_loop, check_draft_proposal, check_accepted_prefix):
        with pytest.raises(ExerciseError, match="still raises NotImplementedError"):
            check(stub)


# --- ex-02-1: drafting with recorded rows ------------------------------------------------

def propose_right(draft, prefix, k, rng):
    seq, rows = np.asarray(prefix), []
    for _ in range(k):
        p = draft(seq)[-1]
        rows.append(p)
        seq = np.append(seq, sample_token(p, rng))
    return seq[len(prefix):], np.array(rows)


def propose_with_choice(draft, prefix, k, rng):  # another sampler is fine
    seq, rows = np.asarray(prefix), []
    for _ in range(k):
        p = draft(seq)[-1]
        rows.append(p)
        seq = np.append(seq, rng.choice(len(p), p=p))
    return seq[len(prefix):], np.array(rows)


def propose_greedy(draft, prefix, k, rng):  # argmax drafts, softmax rows recorded
    seq, rows = np.asarray(prefix), []
    for _ in range(k):
        p = draft(seq)[-1]
        rows.append(p)
        seq = np.append(seq, int(np.argmax(p)))
    return seq[len(prefix):], np.array(rows)


def propose_row_after(draft, prefix, k, rng):  # records the row *after* appending the token
    seq, rows = np.asarray(prefix), []
    for _ in range(k):
        seq = np.append(seq, sample_token(draft(seq)[-1], rng))
        rows.append(draft(seq)[-1])
    return seq[len(prefix):], np.array(rows)


def propose_scalars(draft, prefix, k, rng):  # records only p(x), not the row
    tokens, rows = propose_right(draft, prefix, k, rng)
    return tokens, rows[np.arange(k), tokens]


@pytest.mark.parametrize("right", [propose_right, propose_with_choice])
def test_draft_check_passes_correct_samplers(right, capsys):
    check_draft_proposal(right)
    assert "\u2714" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (propose_greedy, "do not follow the recorded rows"),
    (propose_row_after, "Record the row"),
    (propose_scalars, "one row per drafted token"),
    (lambda d, p, k, r: propose_right(d, p, k, r)[0], "return a pair"),
])
def test_draft_check_catches(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_draft_proposal(wrong)


# --- ex-03-1: the accepted prefix ---------------------------------------------------------

def prefix_right(p_x, q_x, u):
    for i in range(len(p_x)):
        if u[i] >= min(1.0, q_x[i] / p_x[i]):
            return i
    return len(p_x)


def prefix_counts_all(p_x, q_x, u):
    return int(np.sum(u < np.minimum(1.0, q_x / p_x)))


def prefix_inverted(p_x, q_x, u):
    return prefix_right(q_x, p_x, u)


def prefix_less_equal(p_x, q_x, u):  # u == ratio accepted
    for i in range(len(p_x)):
        if u[i] > min(1.0, q_x[i] / p_x[i]):
            return i
    return len(p_x)


def test_prefix_check_passes_the_rule(capsys):
    check_accepted_prefix(prefix_right)
    assert "\u2714" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (prefix_counts_all, "after the first rejection"),
    (prefix_inverted, "which probability goes on top"),
    (prefix_less_equal, "verification keeps"),
    (lambda p, q, u: float(prefix_right(p, q, u)), "as an int"),
])
def test_prefix_check_catches(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_accepted_prefix(wrong)

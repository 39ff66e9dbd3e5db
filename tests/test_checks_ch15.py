"""Self-checks of chapter 15 (serving): a right answer passes, the broken pass and each recognised
mistake are caught with their hint, and no hint gives the answer away."""

import numpy as np
import pytest

from speclib.book import broken, checks
from speclib.book.checks import ExerciseError, check_batched_pass, check_turn_down_policy
from speclib.book.serving import PassGrid, k_for_batch
from speclib.core.theory import expected_tokens_per_pass
from speclib.lm.batched import batched_extend_logits


def stub(*args):
    raise NotImplementedError("complete me")


# --- ex-15-1: the turn-down policy from a table of pass times --------------------------------

def good_policy(alpha, B, pass_seconds, draft_seconds, ks):
    speedup = {k: expected_tokens_per_pass(alpha, k) * pass_seconds[(B, 1)]
               / (k * B * draft_seconds + pass_seconds[(B, k + 1)]) for k in ks}
    best = max(speedup, key=speedup.get)
    return best if speedup[best] > 1 else 0


def test_policy_accepts_the_cost_model(capsys):
    check_turn_down_policy(good_policy)
    check_turn_down_policy(lambda a, b, t, d, ks: np.int64(good_policy(a, b, t, d, ks)))  # a numpy int
    assert capsys.readouterr().out.count("\u2714") == 2


def test_policy_reference_is_the_librarys():
    # the check's own cost model is speclib.book.serving.k_for_batch, on every case it tries
    for alpha, b, table, t_draft, ks in checks._policy_cases():
        bs, ns = sorted({x for x, _ in table}), sorted({n for _, n in table})
        grid = PassGrid(np.array(bs), np.array(ns), np.array([[table[(x, n)] for n in ns] for x in bs]))
        assert checks._policy_choice(alpha, b, table, t_draft, ks) == k_for_batch(alpha, b, grid, t_draft, ks)


def test_policy_cases_need_every_branch():
    # the cases tried include speculation off, and every draft length offered somewhere
    choices = {checks._policy_choice(*case) for case in checks._policy_cases()}
    assert {0, 1, 2, 3, 4, 6} <= choices


@pytest.mark.parametrize("mistake", list(checks._POLICY_MISTAKES))
def test_policy_names_each_recognised_mistake(mistake):
    def policy(alpha, B, pass_seconds, draft_seconds, ks):
        return checks._policy_choice(alpha, B, pass_seconds, draft_seconds, ks, mistake=mistake)

    with pytest.raises(ExerciseError) as caught:
        check_turn_down_policy(policy)
    assert checks._POLICY_MISTAKES[mistake][1:60] in str(caught.value)


@pytest.mark.parametrize("wrong, hint", [
    (lambda a, b, t, d, ks: max(ks), "not the choice with the largest predicted speed-up"),  # the longest
    (lambda a, b, t, d, ks: 0, "not the choice with the largest predicted speed-up"),  # never speculates
    (lambda a, b, t, d, ks: 5, "neither 0 .* nor one of the draft lengths"),
    (lambda a, b, t, d, ks: True, "a truth value"),
    (lambda a, b, t, d, ks: None, "return statement missing"),
    (lambda a, b, t, d, ks: float("nan"), "finite number"),
    (lambda a, b, t, d, ks: list(ks), "not a number"),
])
def test_policy_rejects_wrong_answers(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_turn_down_policy(wrong)


def test_policy_hint_does_not_give_the_right_choice():
    with pytest.raises(ExerciseError) as caught:
        check_turn_down_policy(lambda a, b, t, d, ks: max(ks))
    text = str(caught.value)
    first = checks._policy_cases()[0]  # the case the hint names; its right choice is not printed
    assert "case 1 of" in text and f"k = {checks._policy_choice(*first)}" not in text


def test_policy_student_cannot_spoil_the_table():
    def greedy(alpha, B, pass_seconds, draft_seconds, ks):
        out = good_policy(alpha, B, pass_seconds, draft_seconds, ks)
        pass_seconds.clear()
        return out

    check_turn_down_policy(greedy)


def test_policy_stub_message():
    with pytest.raises(ExerciseError, match="still raises NotImplementedError"):
        check_turn_down_policy(stub)


# --- ex-15-2: the batched pass that hands rows to the wrong requests --------------------------

def test_the_librarys_batched_pass_passes(capsys):
    check_batched_pass(batched_extend_logits)
    assert "\u2714" in capsys.readouterr().out


def test_one_request_at_a_time_passes_too():
    # unbatched, but every request gets its own rows: the check is about rows, not speed
    check_batched_pass(lambda caches, feeds: [c.extend_logits(f) for c, f in zip(caches, feeds)])


def test_the_shipped_pass_is_caught():
    with pytest.raises(ExerciseError, match=r"rows\[0\] are the rows of request 1, not of request 0"):
        check_batched_pass(broken.shipped_batched_extend_logits)


def _filled_caches(model, prefixes):
    caches = [model.cache() for _ in prefixes]
    for c, p in zip(caches, prefixes):
        c.extend(p)
    return caches


def test_the_shipped_pass_is_right_while_every_request_joins():
    # why the chapter's own check (short texts, no window moves) could not see the bug
    model, rounds = checks._batched_pass_rounds()
    prefixes, feeds = rounds[0]
    for pass_ in (batched_extend_logits, broken.shipped_batched_extend_logits):
        rows = pass_(_filled_caches(model, prefixes), feeds)
        for p, f, r in zip(prefixes, feeds, rows):
            full = model.logits(np.concatenate([p, f]))
            np.testing.assert_allclose(r, full[-f.size:], atol=2e-5, rtol=1e-4)


def test_the_shipped_pass_feeds_every_cache_correctly():
    # the caches are right, only the rows are handed out in another order
    model, rounds = checks._batched_pass_rounds()
    prefixes, feeds = rounds[1]
    caches = _filled_caches(model, prefixes)
    rows = broken.shipped_batched_extend_logits(caches, feeds)
    for c, p, f in zip(caches, prefixes, feeds):
        np.testing.assert_array_equal(c.tokens, np.concatenate([p, f]))
    assert sorted(r.shape[0] for r in rows) == sorted(f.size for f in feeds)
    assert [r.shape[0] for r in rows] != [f.size for f in feeds]


def _noisy(caches, feeds):
    return [r + 1e-2 for r in batched_extend_logits(caches, feeds)]


def _double_fed(caches, feeds):
    rows = batched_extend_logits(caches, feeds)
    caches[0].extend(feeds[0][:1])
    return rows


@pytest.mark.parametrize("wrong, hint", [
    (_noisy, "differ from request 0's own pass"),
    (_double_fed, "after the pass cache 0 holds"),
    (lambda caches, feeds: batched_extend_logits(caches, feeds)[::-1], "are the rows of request"),
    (lambda caches, feeds: batched_extend_logits(caches, feeds)[:-1], "expected a list of 4 row arrays"),
    (lambda caches, feeds: [np.zeros((f.size + 1, 11)) for f in feeds], "so its rows have shape"),
    (lambda caches, feeds: None, "return statement missing"),
    (lambda caches, feeds: [None] * len(caches), "not an array of scores"),
])
def test_batched_pass_rejects_wrong_answers(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_batched_pass(wrong)


def test_batched_pass_stub_message():
    with pytest.raises(ExerciseError, match="still raises NotImplementedError"):
        check_batched_pass(stub)


def test_the_shipped_pass_as_distributions():
    # what batch_generate takes as target_pass: the shipped rows, softmaxed
    model, rounds = checks._batched_pass_rounds()
    prefixes, feeds = rounds[0]
    caches = _filled_caches(model, prefixes)
    rows = broken.shipped_batched_extend(caches, feeds)
    assert [r.shape for r in rows] == [(f.size, 11) for f in feeds]
    for r in rows:
        np.testing.assert_allclose(r.sum(axis=1), 1.0, atol=1e-6)

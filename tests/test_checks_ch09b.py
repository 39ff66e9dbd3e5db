"""Exercise ex-09b-3: the top-k heads block that reports the wrong rows, and its self-check."""

import numpy as np
import pytest

from speclib.book import broken, checks
from speclib.core.warping import warp_distribution


def _fixed(head_rows, choose, top_k):
    rows = warp_distribution(np.asarray(head_rows, float), top_k=top_k)
    return np.array([choose.token(r) for r in rows], dtype=np.int64), rows


def _untruncated(head_rows, choose, top_k):
    rows = np.asarray(head_rows, float)
    return np.array([choose.token(r) for r in rows], dtype=np.int64), rows


def test_the_repaired_block_passes():
    checks.check_fixed_topk_block(_fixed)


def test_the_shipped_block_is_caught_by_the_exact_law():
    with pytest.raises(checks.ExerciseError, match="exact law .* differs"):
        checks.check_fixed_topk_block(broken.shipped_topk_block)


def test_dropping_the_truncation_is_not_the_fix():
    # exact, but it no longer drafts what the contributor wanted: the check says so
    with pytest.raises(checks.ExerciseError, match="most likely token"):
        checks.check_fixed_topk_block(_untruncated)


@pytest.mark.parametrize("answer, match", [
    (np.zeros(3), "expected a function"),
    (lambda head_rows, choose: None, "Give it the parameters"),
    (lambda head_rows, choose, top_k: None, "return a pair"),
])
def test_non_answers_are_told_what_was_expected(answer, match):
    with pytest.raises(checks.ExerciseError, match=match):
        checks.check_fixed_topk_block(answer)


def test_stub_gets_the_friendly_message():
    def stub(head_rows, choose, top_k):
        raise NotImplementedError

    with pytest.raises(checks.ExerciseError, match="still raises NotImplementedError"):
        checks.check_fixed_topk_block(stub)


def test_the_proposer_refuses_a_non_function():
    with pytest.raises(TypeError, match="block: expected a function"):
        broken.HeadsBlockProposer("not a function", checks.HEAD_ROWS_09B)

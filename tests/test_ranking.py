"""ranking_sentence names a winner only when the intervals separate (issue 38, item 5).

The data the chapters pass it rarely tell a fault from the rule: an other estimate that lies
below the leader's interval while its own interval still reaches it is the case to test.
"""

import re

import pytest

from speclib.book.render import ranking_sentence


def named_leader(sentence: str) -> str | None:
    m = re.match(r"(\S+) has the highest ", sentence)
    return m.group(1) if m else None


def test_an_interval_that_reaches_the_leader_keeps_it_from_being_named():
    # b's estimate (0.74) is below a's interval (0.76 to 0.84), but b's interval reaches 0.78
    est = {"a": (0.80, 0.76, 0.84), "b": (0.74, 0.70, 0.78), "c": (0.50, 0.45, 0.55)}
    sentence = ranking_sentence(est, what="rate")
    assert named_leader(sentence) is None, sentence
    assert "cannot be told apart" in sentence
    for label in est:  # nobody drops out of the sentence
        assert re.search(rf"\b{label}\b", sentence), (label, sentence)
    assert not re.search(r"above\s*\.", sentence)


def test_separated_intervals_name_the_leader_and_everyone_else():
    est = {"a": (0.80, 0.78, 0.82), "b": (0.70, 0.68, 0.72), "c": (0.74, 0.71, 0.77)}
    sentence = ranking_sentence(est)
    assert named_leader(sentence) == "a"
    assert "b at 0.70" in sentence and "c at 0.74" in sentence


@pytest.mark.parametrize("gap", [0.001, 0.01, 0.05])
def test_a_leader_is_named_exactly_when_every_other_interval_ends_below_its_own(gap):
    est = {"a": (0.80, 0.75, 0.85), "b": (0.70 - gap, 0.65 - gap, 0.75 - gap), "c": (0.70, 0.60, 0.75 + gap)}
    assert named_leader(ranking_sentence(est)) is None  # c's interval reaches a's
    est["c"] = (0.70 - gap, 0.60, 0.75 - gap)
    assert named_leader(ranking_sentence(est)) == "a"

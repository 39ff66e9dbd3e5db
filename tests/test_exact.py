"""The theorem, checked exactly: the shipped loop run along every branch of its random choices.

speclib.core.exact.output_distribution drives speculative_generate (and so verify itself)
with a Replay chooser.  For context-dependent models (the distribution depends on earlier
tokens), the distribution of the first generated tokens must equal the target's own to
1e-12, and each faulty verifier in speclib.book.broken must be caught by the same check.
"""

import numpy as np
import pytest

from speclib import markov_pair
from speclib.book import broken
from speclib.core import sampling
from speclib.core.exact import (
    MAX_PATHS,
    Replay,
    max_abs_error,
    output_distribution,
    target_sequence_distribution,
)

TOLERANCE = 1e-12  # exact arithmetic up to rounding
DETECTABLE = 1e-3  # a faulty verifier must be at least this far (total variation) from the target


def markov(vocab, seed, noise=0.6):
    return markov_pair(vocab_size=vocab, draft_noise=noise, seed=seed)


@pytest.mark.parametrize("vocab, k", [(2, 1), (2, 3), (3, 2), (4, 1), (4, 2), (4, 3)])
@pytest.mark.parametrize("bonus", [True, False])
def test_speculative_equals_target_markov(vocab, k, bonus):
    target, draft = markov(vocab, seed=vocab * 10 + k)
    for prefix in ([0], [vocab - 1], [1, 0]):
        assert max_abs_error(target, draft, prefix, k, bonus=bonus) < TOLERANCE


@pytest.mark.parametrize("k", [1, 2, 3])
def test_speculative_equals_target_second_order(second_order_pair, k):
    target, draft = second_order_pair
    for prefix in ([0], [2, 1], [1, 2, 2]):
        assert max_abs_error(target, draft, prefix, k) < TOLERANCE


def test_unrelated_draft_still_exact():
    # A draft that knows nothing (uniform) and one that is confidently wrong.
    target, _ = markov(3, seed=1)
    _, uniform = markov_pair(vocab_size=3, draft_noise=1.0, seed=1)
    assert max_abs_error(target, uniform, [0], 3) < TOLERANCE
    wrong, _ = markov(3, seed=99, noise=0.0)
    assert max_abs_error(target, wrong, [2], 3) < TOLERANCE


def test_law_sums_to_one():
    target, draft = markov(3, seed=4)
    assert output_distribution(target, draft, [0], 4, 3).sum() == pytest.approx(1.0, abs=1e-12)


def test_the_enumeration_runs_the_shipped_verify(monkeypatch):
    """Break verify's own step (the residual) and the exact check must see it."""
    target, draft = markov(3, seed=5)
    assert max_abs_error(target, draft, [0], 2) < TOLERANCE
    def resample_from_q(draft_tokens, p_draft, q_target, choose, *, bonus=True, **_):
        return sampling._ratio_step(draft_tokens, p_draft, q_target, choose, bonus=bonus, correct=lambda p, q: q)

    monkeypatch.setattr(sampling.verify, "step", resample_from_q)
    assert max_abs_error(target, draft, [0], 2) > DETECTABLE


def test_replay_walks_every_branch_with_its_probability():
    paths, scripts = [], [[]]
    while scripts:
        choose = Replay(scripts.pop())
        first = choose.token(np.array([0.5, 0.0, 0.5]))
        heads = choose.coin(0.25)
        paths.append((first, heads, choose.prob))
        scripts.extend(choose.branches())
    assert sorted(paths) == [(0, False, 0.375), (0, True, 0.125), (2, False, 0.375), (2, True, 0.125)]


def test_target_sequence_distribution_sums_to_one():
    target, _ = markov(4, seed=0)
    assert target_sequence_distribution(target, [1], 3).sum() == pytest.approx(1.0)


def test_first_token_marginal_is_q():
    target, draft = markov(4, seed=8)
    spec = output_distribution(target, draft, [2], 3, 2)
    np.testing.assert_allclose(spec.sum(axis=(1, 2)), target([2])[0], atol=TOLERANCE)


@pytest.mark.parametrize("variant", broken.FAULTY, ids=lambda v: v.name)
def test_faulty_verifiers_fail_the_exact_check(variant):
    target, draft = markov(3, seed=5)
    errors = [max_abs_error(target, draft, prefix, 2, verifier=variant.verifier) for prefix in ([0], [1], [2])]
    assert max(errors) > DETECTABLE, f"{variant.name} slipped through the exact check"


def test_ratio_without_min_is_ill_formed():
    """Uncapped q/p is not a probability; the enumerator refuses it (sampling cannot tell:
    see test_statistical.py)."""
    target, draft = markov(3, seed=5)
    with pytest.raises(ValueError, match=r"accept: returned .* must lie in \[0, 1\]"):
        max_abs_error(target, draft, [0], 2, verifier=broken.RATIO_WITHOUT_MIN.verifier)


def test_correct_variant_is_verify_itself():
    target, draft = markov(3, seed=5)
    assert broken.CORRECT.verifier is sampling.verify
    assert max_abs_error(target, draft, [0], 2, verifier=broken.CORRECT.verifier) < TOLERANCE


def test_enumeration_refuses_huge_problems():
    target, draft = markov_pair(vocab_size=64, seed=0)
    with pytest.raises(ValueError, match="too many"):
        output_distribution(target, draft, [0], 4, 3)
    with pytest.raises(ValueError, match="limit 200,000"):
        output_distribution(target, draft, [0], 10**9, 3)  # refused at once: no 64 ** 1e9 is computed
    with pytest.raises(ValueError, match="too many"):
        target_sequence_distribution(target, [0], 10**9)


def test_enumeration_refuses_too_many_paths(monkeypatch):
    from speclib.core import exact

    monkeypatch.setattr(exact, "MAX_PATHS", 10)
    target, draft = markov(3, seed=5)
    with pytest.raises(ValueError, match="more than 10 paths"):
        output_distribution(target, draft, [0], 3, 2)
    assert MAX_PATHS > 10


@pytest.mark.parametrize("proposer", ["model", "lookup", "multi"])
@pytest.mark.parametrize("policy", ["fixed", "heuristic", "fallback"])
def test_every_proposer_with_every_policy_stays_exact(proposer, policy):
    """The parts combine freely: the loop's law is the target's for each pairing."""
    from speclib.core.policies import FallbackMonitor, FixedK, HeuristicK
    from speclib.core.proposers import MultiDraft, PromptLookup

    target, draft = markov(3, seed=6)
    make = {"model": lambda: draft, "lookup": lambda: PromptLookup(n_max=2), "multi": lambda: MultiDraft(draft, 2)}
    k = {"fixed": FixedK(2), "heuristic": HeuristicK(k_init=1, k_max=3),
         "fallback": FallbackMonitor(FixedK(2), c=0.7, window=2, probe_every=1, min_samples=1)}[policy]
    prompt = [0, 1, 0]
    law = output_distribution(target, make[proposer](), prompt, 3, k)
    assert np.abs(law - target_sequence_distribution(target, prompt, 3)).max() < TOLERANCE

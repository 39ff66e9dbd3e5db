"""Greedy decoding (temperature 0): speculative output equals the target's own greedy output.

Token for token, over many prompts and several draft lengths, for three model pairs: the
Markov pair, the bug zoo's second-order pair and the character n-gram pair trained on real
text.  Two speculative implementations are checked: the exact-match rule written out
(greedy_speculative_generate) and the ordinary sampler run on temperature-0 models, whatever
its seed.  The negative controls: faulty decoders from the bug zoo, run at temperature 0,
fail the same equality test.
"""

import numpy as np
import pytest

from speclib import markov_pair, speculative_generate
from speclib.book import broken
from speclib.lm.corpora import load_corpus, shared_vocabulary
from speclib.lm.models import MarkovModel
from speclib.lm.ngram import ngram_pair
from speclib.core.warping import greedy_generate, greedy_speculative_generate, warp

KS = (1, 2, 3, 5, 8)
N_NEW = 40


def prompts_from_text(domain: str, n: int = 12, length: int = 24) -> list[np.ndarray]:
    """``n`` prompts cut from evenly spaced places of the held-out text."""
    text = load_corpus(domain).heldout
    vocab = shared_vocabulary()
    starts = np.linspace(0, len(text) - length - 1, n).astype(int)
    return [vocab.encode(text[s : s + length]) for s in starts]


def mixed_markov_pair(vocab_size: int = 32, seed: int = 3, weight: float = 0.6):
    """A Markov target and a draft that mixes it with an unrelated table.

    A draft made by blurring the target towards uniform (markov_pair's) has the same argmax
    in every context, so at temperature 0 it would never be rejected and the test would
    never exercise the correction.  Mixing in an unrelated table makes the argmaxes disagree
    in some contexts.
    """
    target, _ = markov_pair(vocab_size=vocab_size, seed=seed)
    unrelated, _ = markov_pair(vocab_size=vocab_size, seed=seed + 100)
    return target, MarkovModel(weight * target.transition + (1 - weight) * unrelated.transition)


def mixed_second_order_pair(vocab_size: int = 5, seed: int = 1, weight: float = 0.6):
    """The same construction with a two-token memory."""
    target, _ = broken.second_order_pair(vocab_size=vocab_size, seed=seed)
    unrelated, _ = broken.second_order_pair(vocab_size=vocab_size, seed=seed + 100)
    return target, broken.SecondOrderModel(weight * target.table + (1 - weight) * unrelated.table)


def argmax_agreement(target_rows, draft_rows) -> float:
    return float(np.mean(np.argmax(target_rows, -1) == np.argmax(draft_rows, -1)))


def test_the_test_pairs_disagree_somewhere():
    """Otherwise every draft is accepted at temperature 0 and the tests below prove little."""
    target, draft = mixed_markov_pair()
    assert 0.3 < argmax_agreement(target.transition, draft.transition) < 0.95
    target, draft = mixed_second_order_pair()
    assert 0.3 < argmax_agreement(target.table, draft.table) < 0.95


def pairs_and_prompts():
    yield "markov", mixed_markov_pair(), [np.array([i]) for i in range(0, 32, 2)]
    yield "second-order", mixed_second_order_pair(), [np.array([a, b]) for a in range(5) for b in range(0, 5, 2)]
    for domain in ("prose", "code"):
        yield f"ngram-{domain}", ngram_pair(domain), prompts_from_text(domain)


@pytest.mark.parametrize("name, pair, prompts", list(pairs_and_prompts()), ids=lambda x: x if isinstance(x, str) else "")
def test_speculative_greedy_equals_target_greedy(name, pair, prompts):
    target, draft = pair
    rejected = 0
    for prompt in prompts:
        want, _ = greedy_generate(target, prompt, N_NEW)
        for k in KS:
            got, stats = greedy_speculative_generate(target, draft, prompt, N_NEW, k)
            np.testing.assert_array_equal(got, want, err_msg=f"{name}, prompt {prompt.tolist()}, k={k}")
            assert stats.tokens_generated == N_NEW
            assert stats.target_passes <= N_NEW
            rejected += stats.draft_verified - stats.accepted
    assert rejected > 0, f"{name}: no draft was ever rejected, so the correction went untested"


@pytest.mark.parametrize("name, pair, prompts", list(pairs_and_prompts()), ids=lambda x: x if isinstance(x, str) else "")
def test_sampler_at_temperature_zero_is_greedy_whatever_the_seed(name, pair, prompts):
    target, draft = pair
    cold_target, cold_draft = warp(target, temperature=0), warp(draft, temperature=0)
    for i, prompt in enumerate(prompts[:6]):
        want, _ = greedy_generate(target, prompt, N_NEW)
        for k in (2, 4):
            got, _ = speculative_generate(cold_target, cold_draft, prompt, N_NEW, k, rng=1000 + i)
            np.testing.assert_array_equal(got, want, err_msg=f"{name}, prompt {prompt.tolist()}, k={k}")


def test_greedy_generate_takes_the_argmax_with_lowest_id_on_ties():
    model = MarkovModel([[0.1, 0.45, 0.45], [0.5, 0.2, 0.3], [0.2, 0.2, 0.6]])
    tokens, stats = greedy_generate(model, [0], 4)
    np.testing.assert_array_equal(tokens, [1, 0, 1, 0])
    assert stats.target_passes == 4


def test_a_perfect_draft_is_always_accepted():
    target, _ = markov_pair(vocab_size=16, seed=2)
    for k in (1, 3, 6):
        _, stats = greedy_speculative_generate(target, target, [5], 7 * (k + 1), k)
        assert stats.acceptance_rate == 1.0
        assert stats.target_passes == 7
        assert stats.tokens_per_step == [k + 1] * 7


def test_greedy_acceptance_counts_argmax_agreement():
    """At temperature 0 a draft is accepted exactly when the two argmaxes agree."""
    target = MarkovModel([[0.1, 0.9], [0.8, 0.2]])
    draft = MarkovModel([[0.6, 0.4], [0.3, 0.7]])  # disagrees after both tokens
    tokens, stats = greedy_speculative_generate(target, draft, [0], 10, 3)
    np.testing.assert_array_equal(tokens, greedy_generate(target, [0], 10)[0])
    assert stats.accepted == 0
    assert stats.target_passes == 10


@pytest.mark.parametrize("variant", [broken.WRONG_BONUS_ROW, broken.STALE_CACHE], ids=lambda v: v.name)
def test_equality_test_catches_faulty_decoders(variant):
    """Negative controls: the greedy-equality check fails on decoders from the bug zoo.

    (Resampling from q instead of the residual is no mistake at temperature 0: after a
    mismatch both are the target's one-hot row.)
    """
    target, draft = mixed_second_order_pair()
    failures = 0
    for a in range(5):
        for b in range(5):
            want, _ = greedy_generate(target, [a, b], N_NEW)
            got, _ = broken.generate(target, draft, [a, b], N_NEW, 3, rng=a * 5 + b, variant=variant, temperature=0)
            failures += int((got != want).any())
    assert failures > 0, f"{variant.name} passed the greedy-equality test"


def test_correct_zoo_decoder_at_temperature_zero_is_greedy():
    target, draft = mixed_second_order_pair()
    for a in range(5):
        want, _ = greedy_generate(target, [a, 4 - a], N_NEW)
        got, _ = broken.generate(target, draft, [a, 4 - a], N_NEW, 3, rng=a, temperature=0)
        np.testing.assert_array_equal(got, want)


def test_bad_arguments_are_named():
    target, draft = markov_pair(vocab_size=4)
    other, _ = markov_pair(vocab_size=5)
    with pytest.raises(ValueError, match="k: must be >= 1"):
        greedy_speculative_generate(target, draft, [0], 5, 0)
    with pytest.raises(ValueError, match="prompt: must contain at least one token"):
        greedy_generate(target, [], 5)
    with pytest.raises(ValueError, match="draft: vocabulary"):
        greedy_speculative_generate(target, other, [0], 5, 2)
    with pytest.raises(ValueError, match="max_new_tokens: must be >= 0"):
        greedy_generate(target, [0], -1)
    assert greedy_speculative_generate(target, draft, [0], 0, 3)[0].size == 0


def test_greedy_agreement_runs_both_speculative_decoders_against_greedy():
    """The chapter's summary function: every run identical, and the counts add up."""
    from speclib.core.warping import greedy_agreement

    target, draft = mixed_markov_pair(vocab_size=8)
    prompts = [[0], [3], [1, 2]]
    result = greedy_agreement(target, draft, prompts, 25, ks=(1, 3))
    assert result.runs == 2 * len(prompts) * 2 and result.identical == result.runs
    passes = sum(greedy_speculative_generate(target, draft, p, 25, k)[1].target_passes
                 for p in prompts for k in (1, 3))
    assert result.tokens_per_pass == pytest.approx(len(prompts) * 2 * 25 / passes)
    assert 1.0 < result.tokens_per_pass < 4.0
    other, _ = markov_pair(vocab_size=5)
    with pytest.raises(ValueError, match="draft: vocabulary"):
        greedy_agreement(target, other, prompts, 5)
    with pytest.raises(ValueError, match="ks: must be >= 1"):
        greedy_agreement(target, draft, prompts, 5, ks=(0,))

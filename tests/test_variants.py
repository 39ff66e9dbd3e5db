"""Production variants (speclib.core.variants): exact where claimed, measured where lossy.

Each exact variant is checked against the target by enumeration (to 1e-12) and its sampler
by a seeded chi-square test; each comes with a faulty version that the same checks catch.
Typical acceptance is lossy: its sampler is checked against its own enumerated distribution,
and that distribution is shown to differ from the target.
"""

import functools

import numpy as np
import pytest
from scipy import stats

from speclib.book import broken
from speclib.core.audit import audit
from speclib.core.decoding import speculative_generate
from speclib.core.exact import output_distribution, step_distribution, target_sequence_distribution
from speclib.core.cache import Uncached
from speclib.core.proposers import MultiDraft, PromptLookup
from speclib.lm.models import MarkovModel, fixed_pair, markov_pair
from speclib.core.sampling import acceptance_rate, verify
from speclib.core.theory import expected_tokens_per_pass
from speclib.core.variants import (
    ArgmaxDraft,
    OffByOneRollback,
    RecurrentCache,
    RecurrentModel,
    accepted_length,
    batch_generate,
    entropy,
    exact_match_fresh_draw,
    exact_match_verify,
    expected_block_extremes,
    greedy_match_verify,
    lookup_draft,
    match_acceptance,
    multi_draft_acceptance,
    multi_draft_verify,
    recurrent_pair,
    recursive_rejection_rates,
    total_variation,
    typical_acceptance,
    typical_first_token,
    typical_threshold,
    typical_verify,
)

TOLERANCE = 1e-12
DETECTABLE = 1e-3  # total variation a faulty rule must reach
ALPHA_LEVEL = 1e-3  # chi-square rejection level
N_SAMPLES = 3000
LENGTH = 3


def small_pair(seed=3):
    return markov_pair(vocab_size=3, draft_noise=0.7, seed=seed)


def wrong_draft_pair():
    """A draft that knows a different chain, confidently: faulty rules show up strongly here."""
    target, _ = markov_pair(vocab_size=3, draft_noise=0.7, seed=4)
    draft, _ = markov_pair(vocab_size=3, draft_noise=0.0, seed=104)
    return target, draft


def tv_from_target(target, draft, prefix, k, length=LENGTH, **options):
    """Total variation between the loop's exact law (this draft or proposer, this k) and the target's."""
    return total_variation(output_distribution(target, draft, prefix, length, k, **options),
                           target_sequence_distribution(target, prefix, length))


def multi_draft(recursive=True):
    return functools.partial(multi_draft_verify, recursive=recursive)


def chi_square_pvalue(sample, expected_probs, seed):
    """sample(rng) -> LENGTH tokens; expected_probs: array of shape (V,) * LENGTH."""
    rng = np.random.default_rng(seed)
    vocab = expected_probs.shape[0]
    counts = np.zeros(vocab**LENGTH)
    for _ in range(N_SAMPLES):
        counts[np.ravel_multi_index(tuple(sample(rng)), (vocab,) * LENGTH)] += 1
    expected = expected_probs.ravel() * N_SAMPLES
    keep = expected > 0
    assert counts[~keep].sum() == 0, "sampled a sequence of probability 0"
    return stats.chisquare(counts[keep], expected[keep]).pvalue


# --- prompt lookup --------------------------------------------------------------------------


def test_lookup_draft_prefers_long_and_recent_matches():
    np.testing.assert_array_equal(lookup_draft([1, 2, 9, 1, 2, 3, 4, 1, 2], k=2), [3, 4])  # most recent
    np.testing.assert_array_equal(lookup_draft([7, 1, 2, 5, 3, 1, 2, 6, 8, 7, 1, 2], k=3, n_max=3), [5, 3, 1])
    np.testing.assert_array_equal(lookup_draft([4, 4, 4], k=5), [4])  # overlapping match
    assert lookup_draft([1, 2, 3], k=3).size == 0
    assert lookup_draft([1, 2, 3, 1], k=3, n_min=2).size == 0
    with pytest.raises(ValueError, match="n_min"):
        lookup_draft([1, 2], k=1, n_max=1, n_min=2)


def test_prompt_lookup_needs_no_draft_and_accepts_copies():
    # A target that repeats a cycle deterministically: lookup proposals are always right.
    target = MarkovModel(np.roll(np.eye(5), 1, axis=1))
    tokens, st = speculative_generate(target, PromptLookup(), [0, 1, 2, 3, 4, 0], 40, k=4, rng=0)
    np.testing.assert_array_equal(tokens, np.arange(1, 41) % 5)
    assert st.draft_passes == 0 and st.tokens_per_target_pass == pytest.approx(5.0)


@pytest.mark.parametrize("prefix", [[0, 1, 2, 0, 1], [2, 2, 1, 2], [1, 0, 1]])
def test_lookup_is_exact_by_enumeration(prefix):
    target, _ = small_pair()
    assert tv_from_target(target, PromptLookup(), prefix, 2) < TOLERANCE


def test_greedy_match_verification_is_caught():
    target, _ = small_pair(5)
    prefixes = [[0, 1, 2, 0, 1], [2, 2, 1, 2], [1, 0, 1], [0, 0], [2, 1, 2, 1]]
    tvs = [tv_from_target(target, PromptLookup(), pr, 2, verifier=greedy_match_verify) for pr in prefixes]
    assert max(tvs) > DETECTABLE


def lookup_sampler(target, prompt, verifier):
    return lambda rng: speculative_generate(target, PromptLookup(), prompt, LENGTH, k=2, rng=rng, verifier=verifier)[0]


def test_lookup_sampler_chi_square_and_negative_control():
    target, _ = small_pair(5)
    prompt = [1, 0, 1, 2, 1, 0]
    want = target_sequence_distribution(target, prompt, LENGTH)
    assert chi_square_pvalue(lookup_sampler(target, prompt, verify), want, seed=1) > ALPHA_LEVEL
    assert chi_square_pvalue(lookup_sampler(target, prompt, greedy_match_verify), want, seed=2) < ALPHA_LEVEL


# --- several drafts -------------------------------------------------------------------------


def test_multi_draft_acceptance_formula():
    p, q = np.array([0.6, 0.3, 0.1]), np.array([0.2, 0.3, 0.5])
    assert multi_draft_acceptance(p, q, 1) == pytest.approx(acceptance_rate(p, q))
    # By hand: a1 = 0.6; r2 = (0, 0, 1) after removing min(p, q); a2 = p(2) = 0.1.
    assert multi_draft_acceptance(p, q, 2) == pytest.approx(1 - 0.4 * 0.9)
    rates = [multi_draft_acceptance(p, q, m) for m in range(1, 8)]
    assert all(a <= b + 1e-15 for a, b in zip(rates, rates[1:]))
    with pytest.raises(ValueError, match="p and q"):
        multi_draft_acceptance([0.5, 0.5], [1.0, 0.0, 0.0], 2)
    with pytest.raises(ValueError, match="m: must be >= 1"):
        multi_draft_acceptance(p, q, 0)


def test_multi_draft_acceptance_matches_sampling():
    target, draft = markov_pair(vocab_size=6, draft_noise=0.8, seed=1)
    p, q = draft([2])[0], target([2])[0]
    rng = np.random.default_rng(0)
    m, n = 3, 6000
    hits = 0
    for _ in range(n):
        drafts = np.array([[int(rng.choice(6, p=p))] for _ in range(m)])
        out = multi_draft_verify(
            drafts, np.tile(p, (m, 1, 1)), np.tile(np.vstack([q, q]), (m, 1, 1)), rng)
        hits += out.n_accepted
    want = multi_draft_acceptance(p, q, m)
    assert abs(hits / n - want) < 4 * np.sqrt(want * (1 - want) / n)


@pytest.mark.parametrize("k, m", [(1, 2), (1, 3), (2, 2), (2, 3)])
def test_multi_draft_is_exact_by_enumeration(k, m):
    target, draft = small_pair()
    for prefix in ([0], [2]):
        assert tv_from_target(target, MultiDraft(draft, m), prefix, k, k + 1) < TOLERANCE


def test_non_recursive_multi_draft_is_caught():
    target, draft = wrong_draft_pair()
    tvs = [tv_from_target(target, MultiDraft(draft, 3), pr, 1, 2, verifier=multi_draft(recursive=False))
           for pr in ([0], [1], [2])]
    assert max(tvs) > DETECTABLE


def test_multi_draft_sampler_chi_square_and_negative_control():
    target, draft = wrong_draft_pair()
    want = target_sequence_distribution(target, [0], LENGTH)

    def sampler(recursive):
        return lambda rng: speculative_generate(target, MultiDraft(draft, 3), [0], LENGTH, 1, rng,
                                                verifier=multi_draft(recursive))[0]

    assert chi_square_pvalue(sampler(True), want, seed=3) > ALPHA_LEVEL
    assert chi_square_pvalue(sampler(False), want, seed=4) < ALPHA_LEVEL


def test_one_draft_reproduces_speculative_generate():
    target, draft = markov_pair(vocab_size=12, draft_noise=0.5, seed=4)
    for seed in range(4):
        a, sa = speculative_generate(target, MultiDraft(draft, 1), [3], 41, k=3, rng=seed)
        b, sb = speculative_generate(target, draft, [3], 41, k=3, rng=seed)
        np.testing.assert_array_equal(a, b)
        assert sa.draft_passes == sb.draft_passes


# --- typical acceptance ---------------------------------------------------------------------


def test_typical_threshold_and_entropy():
    q = np.array([0.5, 0.25, 0.25])
    assert entropy(q) == pytest.approx(1.5 * np.log(2))
    assert entropy([1.0, 0.0]) == 0.0
    assert typical_threshold(q, 0.09, 0.3) == pytest.approx(min(0.09, 0.3 * np.exp(-entropy(q))))


def test_targets_favourite_always_passes():
    """max q >= exp(-H(q)), so with delta < 1 the target's argmax clears any threshold."""
    rng = np.random.default_rng(0)
    for _ in range(500):
        q = rng.dirichlet(np.full(6, rng.uniform(0.05, 3)))
        assert q.max() > typical_threshold(q, 1.0, 0.999)


def test_typical_first_token_closed_form():
    target, draft = markov_pair(vocab_size=5, draft_noise=0.6, seed=2)
    p, q = draft([1])[0], target([1])[0]
    ver = functools.partial(typical_verify, epsilon=0.2, delta=0.45)
    first = output_distribution(target, draft, [1], 1, 1, verifier=ver)
    np.testing.assert_allclose(first, typical_first_token(p, q, 0.2, 0.45), atol=TOLERANCE)
    assert typical_first_token(p, q, 0.2, 0.45).sum() == pytest.approx(1.0)


def test_typical_acceptance_is_lossy_and_its_sampler_matches_its_enumeration():
    target, draft = small_pair()
    ver = functools.partial(typical_verify, epsilon=0.3, delta=0.55)
    lossy = output_distribution(target, draft, [0], LENGTH, 2, verifier=ver)  # the loop's own law
    assert lossy.sum() == pytest.approx(1.0)
    assert total_variation(lossy, target_sequence_distribution(target, [0], LENGTH)) > DETECTABLE

    def decode(n, rng):
        return speculative_generate(target, draft, [0], n, k=2, rng=rng, verifier=ver)[0]

    # The enumeration is of the very loop that samples: compare whole sequences (rare ones pooled).
    assert audit(decode, lossy, n_samples=N_SAMPLES, rng=5).pvalue > ALPHA_LEVEL
    assert audit(decode, target_sequence_distribution(target, [0], LENGTH), n_samples=N_SAMPLES, rng=5).pvalue < ALPHA_LEVEL


def test_typical_validation():
    with pytest.raises(ValueError, match="epsilon"):
        typical_verify([0], [[1.0, 0.0]], [[0.5, 0.5], [0.5, 0.5]], 0, epsilon=1.5, delta=0.3)
    with pytest.raises(ValueError, match="delta"):
        typical_first_token([0.5, 0.5], [0.5, 0.5], 0.1, -1.0)


def test_argmax_draft_is_a_point_mass_at_the_draft_favourite():
    _, draft = markov_pair(vocab_size=7, draft_noise=0.3, seed=0)
    rows = ArgmaxDraft(draft)(np.arange(7))
    np.testing.assert_array_equal(rows.argmax(axis=1), draft.transition.argmax(axis=1))
    assert (rows.sum(axis=1) == 1).all() and set(np.unique(rows)) == {0.0, 1.0}


# --- exact-match verification ---------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2])
def test_exact_match_is_exact_by_enumeration(k):
    target, draft = small_pair()
    for prefix in ([0], [1]):
        assert tv_from_target(target, draft, prefix, k, k + 1, verifier=exact_match_verify) < TOLERANCE


def test_fresh_draw_on_mismatch_is_caught():
    target, draft = wrong_draft_pair()
    assert tv_from_target(target, draft, [0], 2, verifier=exact_match_fresh_draw) > DETECTABLE


def test_exact_match_sampler_chi_square_and_negative_control():
    target, draft = wrong_draft_pair()
    want = target_sequence_distribution(target, [0], LENGTH)

    def sampler(verifier):
        return lambda rng: speculative_generate(target, draft, [0], LENGTH, k=2, rng=rng, verifier=verifier)[0]

    assert chi_square_pvalue(sampler(exact_match_verify), want, seed=6) > ALPHA_LEVEL
    assert chi_square_pvalue(sampler(exact_match_fresh_draw), want, seed=7) < ALPHA_LEVEL


def test_match_acceptance_never_beats_the_ratio_rule():
    rng = np.random.default_rng(1)
    for _ in range(300):
        v = int(rng.integers(2, 10))
        p, q = rng.dirichlet(np.ones(v) * 0.5), rng.dirichlet(np.ones(v) * 0.5)
        assert match_acceptance(p, q) <= acceptance_rate(p, q) + 1e-15
    one_hot = np.eye(4)[2]
    assert match_acceptance(one_hot, one_hot) == acceptance_rate(one_hot, one_hot) == 1.0


def test_exact_match_acceptance_rate_is_sum_p_q():
    target, draft = fixed_pair(vocab_size=8, draft_noise=0.5, seed=0)
    _, st = speculative_generate(target, draft, [0], 4000, k=1, rng=0, verifier=exact_match_verify)
    want = match_acceptance(draft.dist, target.dist)
    n = st.draft_verified
    assert abs(st.acceptance_rate - want) < 4 * np.sqrt(want * (1 - want) / n)


# --- batches --------------------------------------------------------------------------------


def test_block_extremes_formulae():
    mean, low, high = expected_block_extremes(0.7, 3, 1)
    assert mean == low == high == pytest.approx(expected_tokens_per_pass(0.7, 3))
    m4 = expected_block_extremes(0.7, 3, 4)
    assert m4[1] < m4[0] < m4[2] <= 4
    assert expected_block_extremes(1.0, 3, 8) == (4.0, 4.0, 4.0)
    assert expected_block_extremes(0.0, 3, 8) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize("policy", ["pad", "truncate"])
def test_batch_generate_matches_the_formulae_under_independent_acceptance(policy):
    target, draft = fixed_pair(vocab_size=16, draft_noise=0.4, seed=0)
    alpha = acceptance_rate(draft.dist, target.dist)
    batch = 6
    outs, st = batch_generate(target, draft, [[0]] * batch, 300, k=4, rng=1, policy=policy)
    assert [o.size for o in outs] == [300] * batch
    full = [row for row in st.block_lengths if len(row) == batch and max(row) <= 5]
    lengths = np.array(full[:-1])  # drop the last step, which may be capped
    mean, low, high = expected_block_extremes(alpha, 4, batch)
    n = len(lengths)
    assert abs(lengths.max(axis=1).mean() - high) < 4 * lengths.max(axis=1).std() / np.sqrt(n) + 0.02
    assert abs(lengths.min(axis=1).mean() - low) < 4 * lengths.min(axis=1).std() / np.sqrt(n) + 0.02
    if policy == "pad":
        assert st.padding > 0 and st.discarded == 0 and 0 < st.waste < 1
    else:
        assert st.padding == 0 and st.discarded > 0


@pytest.mark.parametrize("policy", ["pad", "truncate"])
def test_batched_sequences_stay_exact(policy):
    target, draft = small_pair()
    want = target_sequence_distribution(target, [0], LENGTH)

    def sampler(verifier):
        return lambda rng: batch_generate(target, draft, [[0], [2]], LENGTH, k=2, rng=rng,
                                          policy=policy, verifier=verifier)[0][0]

    assert chi_square_pvalue(sampler(verify), want, seed=8) > ALPHA_LEVEL
    assert chi_square_pvalue(sampler(broken.RESAMPLE_FROM_TARGET.verifier), want, seed=9) < ALPHA_LEVEL


def test_batch_validation():
    target, draft = small_pair()
    with pytest.raises(ValueError, match="policy"):
        batch_generate(target, draft, [[0]], 3, 2, rng=0, policy="ragged")
    with pytest.raises(TypeError, match="prompts"):
        batch_generate(target, draft, np.array([0, 1]), 3, 2, rng=0)
    with pytest.raises(ValueError, match=r"prompts\[1\]"):
        batch_generate(target, draft, [[0], [5]], 3, 2, rng=0)


# --- the cached model ----------------------------------------------------------------------


def test_cache_after_rollback_equals_a_fresh_computation():
    model = RecurrentModel(vocab_size=6, hidden_size=8, seed=1)
    rng = np.random.default_rng(0)
    text = rng.integers(0, 6, size=30)
    cache = model.cache()
    assert isinstance(cache, RecurrentCache)
    rows = cache.extend(text[:20])
    np.testing.assert_array_equal(rows, model(text[:20]))
    cache.rollback(12)
    np.testing.assert_array_equal(cache.states, model.states(text[:12]))
    np.testing.assert_array_equal(cache.tokens, text[:12])
    rows = cache.extend(text[12:30])  # read a different continuation after the cut
    np.testing.assert_array_equal(cache.states, model.states(text))
    np.testing.assert_array_equal(rows, model(text)[12:])
    assert model.positions_computed == 38
    cache.rollback(0)
    assert len(cache) == 0
    with pytest.raises(ValueError, match="cannot roll forward"):
        cache.rollback(1)


def test_stale_cache_differs_from_a_fresh_computation():
    model = RecurrentModel(vocab_size=6, hidden_size=8, seed=1)
    cache = model.cache()
    cache.extend([1, 2, 3, 4])  # 3 and 4 were drafted; 3 is rejected and replaced by 5
    cache.rollback(3)  # off by one: the rejected token's state stays
    rows = cache.extend([5])
    assert not np.allclose(rows, model([1, 2, 5])[-1:])


def test_cached_decoder_equals_the_uncached_one_and_reads_each_position_about_once():
    target, draft = recurrent_pair(vocab_size=8, hidden_size=12, seed=2)
    for seed in range(4):
        a, sa = speculative_generate(Uncached(target), Uncached(draft), [0, 1], 37, k=3, rng=seed)
        before = target.positions_computed
        b, sb = speculative_generate(target, draft, [0, 1], 37, k=3, rng=seed)
        np.testing.assert_array_equal(a, b)
        assert sa.target_passes == sb.target_passes
        # every position read about once per model, not once per pass
        assert target.positions_computed - before < 39 + sb.draft_passes + sb.target_passes


def test_keeping_a_stale_position_is_caught():
    target, draft = recurrent_pair(vocab_size=8, hidden_size=12, seed=2)
    differ = sum(not np.array_equal(speculative_generate(OffByOneRollback(target), draft, [0, 1], 37, 3, seed)[0],
                                    speculative_generate(target, draft, [0, 1], 37, 3, seed)[0]) for seed in range(4))
    assert differ > 0


def test_cached_decoder_chi_square_and_negative_control():
    # A poor draft (high temperature) rejects often, so a stale state has many chances to matter.
    target, draft = recurrent_pair(vocab_size=3, hidden_size=6, seed=4, draft_temperature=3.0)
    want = target_sequence_distribution(target, [0], LENGTH)

    def sampler(model):
        return lambda rng: speculative_generate(model, draft, [0], LENGTH, k=2, rng=rng)[0]

    assert chi_square_pvalue(sampler(target), want, seed=10) > ALPHA_LEVEL
    assert chi_square_pvalue(sampler(OffByOneRollback(target)), want, seed=11) < ALPHA_LEVEL
    assert tv_from_target(target, draft, [0], 2) < TOLERANCE
    assert tv_from_target(OffByOneRollback(target), draft, [0], 2) > DETECTABLE
    assert accepted_length(5, 2) == 7


def test_cache_validation():
    with pytest.raises(TypeError, match="RecurrentModel"):
        RecurrentCache(object())
    with pytest.raises(ValueError, match="temperature"):
        RecurrentModel(4, temperature=0.0)


# --- explorer, figure, exercise checks -------------------------------------------------------


def test_batch_waste_view_and_figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from speclib.book.plots import plot_batch_waste
    from speclib.book.widgets import batch_waste_view

    view = batch_waste_view(alpha=0.7, k=4, max_batch=16)
    assert view.batch_sizes.tolist() == list(range(1, 17))
    assert view.pad_waste[0] == 0.0 and view.truncate_keep[0] == 1.0
    assert (np.diff(view.pad_waste) >= 0).all() and (np.diff(view.truncate_keep) <= 0).all()
    assert view.mean == pytest.approx(expected_tokens_per_pass(0.7, 4))
    assert batch_waste_view(alpha=1.0, k=4, max_batch=8).pad_waste.max() == 0.0
    with pytest.raises(ValueError, match="alpha"):
        batch_waste_view(alpha=1.5)
    ax = plot_batch_waste(view)
    assert ax.get_xlabel().startswith("batch size") and len(ax.get_lines()) == 2
    plt.close("all")


def test_check_multi_draft_acceptance(capsys):
    from speclib.book.checks import ExerciseError, check_multi_draft_acceptance

    def recursive(p, q, m):  # written out independently of speclib
        r, reject = np.asarray(q, float), 1.0
        for _ in range(m):
            reject *= 1 - np.minimum(p, r).sum()
            excess = np.maximum(r - p, 0)
            if excess.sum() == 0:
                break
            r = excess / excess.sum()
        return 1 - reject

    check_multi_draft_acceptance(recursive)
    assert "\u2714" in capsys.readouterr().out
    independent = lambda p, q, m: 1 - (1 - np.minimum(p, q).sum()) ** m  # noqa: E731
    with pytest.raises(ExerciseError, match="independent tries"):
        check_multi_draft_acceptance(independent)
    with pytest.raises(ExerciseError, match="ordinary acceptance rate"):
        check_multi_draft_acceptance(lambda p, q, m: float((p * q).sum()))
    with pytest.raises(ExerciseError, match="not a number"):
        check_multi_draft_acceptance(lambda p, q, m: None)


def test_check_lookup_proposal(capsys):
    from speclib.book.checks import ExerciseError, check_lookup_proposal
    from speclib.core.proposers import lookup_draft

    check_lookup_proposal(lambda tokens, k: lookup_draft(tokens, k))
    assert "\u2714" in capsys.readouterr().out

    def first_occurrence(tokens, k):
        tokens = list(tokens)
        for n in (3, 2, 1):
            tail = tokens[-n:]
            for i in range(len(tokens) - n):
                if tokens[i:i + n] == tail:
                    return np.array(tokens[i + n:i + n + k])
        return np.zeros(0, dtype=int)

    with pytest.raises(ExerciseError, match="first earlier occurrence"):
        check_lookup_proposal(first_occurrence)
    with pytest.raises(ExerciseError, match="at most k"):
        check_lookup_proposal(lambda tokens, k: lookup_draft(tokens, k + 2))
    with pytest.raises(ExerciseError, match="propose nothing"):
        check_lookup_proposal(lambda tokens, k: lookup_draft(tokens, k) if len(tokens) > 3 else np.array([1]))
    with pytest.raises(ExerciseError, match="integer token ids"):
        check_lookup_proposal(lambda tokens, k: "abc")


# --- recursive rejection against the paper's algorithm (review of chapter 13) ----------------


def _specinfer_one_position(p, q, m, recursive=True):
    """Written from SpecInfer's multi-step speculative sampling, independently of speclib.core.variants.

    m candidates drawn i.i.d. from p; candidate s is kept with probability
    min(1, r(x_s) / p(x_s)); after a rejection r <- norm(max(0, r - p)); if all fail, the
    token is drawn from the final r.  Returns the exact distribution of the emitted token.
    """
    vocab = len(p)
    out = np.zeros(vocab)
    for cands in np.ndindex(*(vocab,) * m):
        mass = np.prod([p[x] for x in cands])
        r = q.copy()
        for x in cands:
            if mass == 0:
                break
            keep = min(1.0, r[x] / p[x])
            out[x] += mass * keep
            mass *= 1 - keep
            if recursive:
                excess = np.maximum(r - p, 0)
                r = excess / excess.sum() if excess.sum() > 0 else r
        final = r if recursive else np.maximum(q - p, 0) / np.maximum(q - p, 0).sum()
        out += mass * final
    return out


def test_specinfer_one_position_by_hand_and_the_implementation_agree():
    rng = np.random.default_rng(21)
    for _ in range(5):
        p, q = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4) * 0.5)
        for m in (1, 2, 3):
            emitted = _specinfer_one_position(p, q, m)
            np.testing.assert_allclose(emitted, q, atol=TOLERANCE)
            # the implementation's enumeration: first token of a k = 1 step
            model_q, model_p = MarkovModel(np.tile(q, (4, 1))), MarkovModel(np.tile(p, (4, 1)))
            steps = step_distribution(model_q, MultiDraft(model_p, m), [0], 1)
            first = np.zeros(4)
            for (block, _), prob in steps.items():
                first[block[0]] += prob
            np.testing.assert_allclose(first, q, atol=TOLERANCE)
            # acceptance: the chance that the step kept a draft
            kept = sum(prob for (_, n_accepted), prob in steps.items() if n_accepted == 1)
            assert kept == pytest.approx(multi_draft_acceptance(p, q, m), abs=1e-12)
    # negative control: every candidate against q itself is caught by the same enumeration
    p, q = np.array([0.7, 0.2, 0.1]), np.array([0.2, 0.3, 0.5])
    assert np.abs(_specinfer_one_position(p, q, 3, recursive=False) - q).max() > DETECTABLE


def test_recursive_rejection_never_beats_independent_tries():
    rng = np.random.default_rng(22)
    for _ in range(50):
        p, q = rng.dirichlet(np.ones(6) * 0.7), rng.dirichlet(np.ones(6) * 0.7)
        alpha, rates = acceptance_rate(p, q), recursive_rejection_rates(p, q, 5)
        p_s = p[q > p].sum()  # the draft's mass where the residuals live
        assert rates[0] == pytest.approx(alpha)
        assert (rates[1:] <= p_s + 1e-12).all() and p_s <= alpha + 1e-12
        for m in (2, 3, 5):
            assert multi_draft_acceptance(p, q, m) <= 1 - (1 - alpha) ** m + 1e-12
    # the faulty rule (every candidate against q) does reach 1 - (1 - alpha)^m, by being biased
    target, draft = wrong_draft_pair()
    steps = step_distribution(target, MultiDraft(draft, 3), [0], 1, verifier=multi_draft(recursive=False))
    kept = sum(prob for (_, n_accepted), prob in steps.items() if n_accepted == 1)
    alpha = acceptance_rate(draft([0])[0], target([0])[0])
    assert kept == pytest.approx(1 - (1 - alpha) ** 3)
    assert kept > multi_draft_acceptance(draft([0])[0], target([0])[0], 3) + DETECTABLE


def test_multi_draft_two_positions_chi_square():
    target, draft = wrong_draft_pair()
    want = target_sequence_distribution(target, [0], LENGTH)

    def sampler(recursive):
        return lambda rng: speculative_generate(target, MultiDraft(draft, 3), [0], LENGTH, 2, rng,
                                                verifier=multi_draft(recursive))[0]

    assert chi_square_pvalue(sampler(True), want, seed=5) > ALPHA_LEVEL
    assert chi_square_pvalue(sampler(False), want, seed=6) < ALPHA_LEVEL


def test_typical_acceptance_split():
    target, draft = markov_pair(vocab_size=8, draft_noise=0.6, seed=2, concentration=0.2)
    p, q = draft.transition, target.transition
    for eps in (0.01, 0.09, 0.4):
        split = typical_acceptance(p, q, eps, np.sqrt(eps))
        np.testing.assert_allclose(split.typical, split.ratio + split.gained - split.lost, atol=1e-12)
        np.testing.assert_allclose(split.ratio, acceptance_rate(p, q))
        kept_mass = np.where(q > typical_threshold(q, eps, np.sqrt(eps))[:, None], p, 0).sum(axis=1)
        np.testing.assert_allclose(split.typical, kept_mass)
    # sampled: typical_verify keeps a one-token draft as often as `typical` says (4 standard errors)
    row, eps, n = 3, 0.4, 4000
    split = typical_acceptance(p[row], q[row], eps, np.sqrt(eps))
    rng = np.random.default_rng(7)
    kept = np.mean([typical_verify([sample_x], p[row][None], q[[row, row]], rng, epsilon=eps,
                                   delta=np.sqrt(eps)).n_accepted
                    for sample_x in rng.choice(8, size=n, p=p[row])])
    bound = 4 * np.sqrt(split.typical * (1 - split.typical) / n)
    assert abs(kept - split.typical) < bound
    assert abs(kept - split.ratio) > bound  # negative control: the ratio rule's rate is told apart
    with pytest.raises(ValueError, match="same shape"):
        typical_acceptance([0.5, 0.5], [1.0, 0.0, 0.0], 0.1, 0.3)


def test_text_acceptance():
    from speclib.core.variants import text_acceptance

    target, draft = markov_pair(vocab_size=6, draft_noise=0.5, seed=3)
    tokens = np.array([0, 3, 1, 5, 5, 2])
    want = np.mean([acceptance_rate(draft.transition[a], target.transition[a]) for a in tokens[1:-1]])
    assert text_acceptance(target, draft, tokens, start=2) == pytest.approx(want)
    # a text that stays in the contexts where the draft is good scores higher than one that avoids them
    rates = acceptance_rate(draft.transition, target.transition)
    easy, hard = int(np.argmax(rates)), int(np.argmin(rates))
    assert text_acceptance(target, draft, [easy] * 6, 1) > text_acceptance(target, draft, [hard] * 6, 1)
    with pytest.raises(ValueError, match="start"):
        text_acceptance(target, draft, tokens, start=6)


# --- the survivors of the mutation run (issue 14): each killed by one of these ----------------


def test_multi_draft_recursion_is_exact_where_two_tokens_are_under_proposed():
    """{x : q(x) > p(x)} = {1, 2}: a non-recursive residual after the second rejection shows."""
    from speclib.lm.models import FixedContextModel

    p, q = np.array([0.7, 0.2, 0.1]), np.array([0.2, 0.4, 0.4])
    assert (q > p).sum() >= 2
    target, draft = FixedContextModel(q), FixedContextModel(p)
    for m in (2, 3):
        law = output_distribution(target, MultiDraft(draft, m), [0], 2, 1)
        np.testing.assert_allclose(law, np.outer(q, q), atol=TOLERANCE)
    # and on a context-dependent pair, with the loop as it ships
    t, dr = wrong_draft_pair()
    for prefix in ([0], [1], [2]):
        assert tv_from_target(t, MultiDraft(dr, 3), prefix, 2, 3) < TOLERANCE


def test_typical_bonus_comes_from_the_row_after_the_last_draft():
    """epsilon = 0: every draft passes, so x1 ~ p and the bonus x2 ~ q( . | x1)."""
    target, draft = markov_pair(vocab_size=3, draft_noise=0.7, seed=3)
    ver = functools.partial(typical_verify, epsilon=0.0, delta=1.0)
    law = output_distribution(target, draft, [0], 2, 1, verifier=ver)
    p = draft([0])[0]
    want = p[:, None] * target.transition
    np.testing.assert_allclose(law, want, atol=TOLERANCE)


def test_the_variants_public_functions_refuse_bad_rows_and_flags_by_name():
    from speclib.core.variants import (accepted_length, entropy, exact_match_fresh_draw, exact_match_verify,
                                       greedy_match_verify, total_variation, typical_threshold, typical_verify)

    q = np.array([0.5, 0.25, 0.25])
    joint = np.full((3, 3), 1 / 9)  # a law of two tokens: sums to 1 over all its entries, not per row
    assert total_variation(joint, joint) == 0.0
    for a, match in [(np.array([np.nan, 0.5, 0.5]), "a: row 0 contains NaN"), (q * 0.5, "a: row 0 sums to 0.5"),
                     (q.astype(str), "a: expected an array of probabilities"), (0.5, "a: expected an array")]:
        with pytest.raises((TypeError, ValueError), match=match):
            total_variation(a, q)
    with pytest.raises(ValueError, match="q: negative probability"):
        entropy([-0.5, 1.5])
    with pytest.raises(ValueError, match="delta: must be <= 1.0"):
        typical_threshold(q, 0.1, 1.5)
    with pytest.raises(ValueError, match="epsilon: must be finite"):
        typical_threshold(q, float("nan"), 0.3)
    p_rows, q_rows = np.full((1, 3), 1 / 3), np.full((2, 3), 1 / 3)
    for verifier in (exact_match_verify, exact_match_fresh_draw, greedy_match_verify,
                     functools.partial(typical_verify, epsilon=0.1, delta=0.3)):
        with pytest.raises(TypeError, match="bonus: expected True or False"):
            verifier([0], p_rows, q_rows, 0, bonus="False")
        with pytest.raises(ValueError, match="draft_tokens: token 7"):
            verifier([7], p_rows, q_rows, 0)
    with pytest.raises(ValueError, match="n_accepted: must be >= 0"):
        accepted_length(3, -1)

"""The bug zoo: every faulty decoder is caught, and the machinery that catches them is sound.

1. The zoo's decoder, switched to CORRECT, is speculative_generate (same tokens, same seed)
   and its exact enumeration equals the warped target.
2. The enumeration describes each *faulty* decoder too: samples from it pass a chi-square
   test against its own enumerated distribution.
3. Every variant of ZOO is far from the target by exact enumeration and is rejected by the
   chi-square audit, under the zoo's sampling settings; the correct decoder is not.
4. Every faulty variant defined in speclib.book.broken is covered by one of the detection tests.
"""

import numpy as np
import pytest

from speclib import markov_pair, speculative_generate, verify
from speclib.book import broken, checks
from speclib.core.audit import AUDIT_LEVEL, audit
from speclib.core.exact import output_distribution, target_sequence_distribution
from speclib.lm.models import FixedContextModel
from speclib.core.warping import warp

TOLERANCE = 1e-12
DETECTABLE = 0.02  # a bug must move at least this much probability (total variation)
LENGTH, K = 3, 2
N_SAMPLES = 1500
SETTINGS = dict(broken.ZOO_SETTINGS)


@pytest.fixture(scope="module")
def pair():
    return broken.zoo_pair()


def ids(variant):
    return variant.name


# --- 1. the correct decoder -------------------------------------------------------------------

@pytest.mark.parametrize("controls", [{}, SETTINGS, dict(temperature=1.4, top_p=0.8), dict(temperature=0)], ids=str)
def test_correct_zoo_decoder_is_speculative_generate(pair, controls):
    target, draft = pair
    for seed in range(15):
        mine, mine_stats = broken.generate(target, draft, [0], 20, 3, seed, **controls)
        ref, ref_stats = speculative_generate(warp(target, **controls), warp(draft, **controls), [0], 20, 3, seed)
        np.testing.assert_array_equal(mine, ref)
        assert mine_stats == ref_stats


@pytest.mark.parametrize("controls", [{}, SETTINGS, dict(temperature=1.4, top_p=0.8)], ids=str)
@pytest.mark.parametrize("length, k", [(1, 1), (2, 1), (3, 2), (4, 2), (3, 3)])
def test_correct_zoo_decoder_is_exact(pair, controls, length, k):
    target, draft = pair
    for prompt in ([0], [2, 1]):
        assert broken.distance_from_target(target, draft, prompt, length, k, **controls) < TOLERANCE


def test_correct_zoo_decoder_is_exact_for_a_markov_pair():
    target, draft = markov_pair(vocab_size=4, draft_noise=0.5, seed=2)
    assert broken.distance_from_target(target, draft, [1], 3, 2, temperature=0.6, top_k=3) < TOLERANCE


def test_distribution_sums_to_one_for_every_variant(pair):
    target, draft = pair
    for variant in broken.ZOO:
        assert broken.distribution(target, draft, [0], LENGTH, K, variant, **SETTINGS).sum() == pytest.approx(1.0)


# --- 2. the enumeration describes the faulty decoders as well ---------------------------------

@pytest.mark.parametrize("variant", broken.FAULTY, ids=ids)
def test_verifier_variants_plug_into_the_loop_as_a_verifier(pair, variant):
    """A verifier variant is exactly the loop with ``variant.verifier``: same law, same tokens."""
    target, draft = pair
    for prompt in ([0], [1, 2]):
        mine = broken.distribution(target, draft, prompt, 2, 2, variant)
        theirs = output_distribution(target, draft, prompt, 2, 2, verifier=variant.verifier)
        np.testing.assert_allclose(mine, theirs, atol=TOLERANCE)
    a, _ = broken.generate(target, draft, [0], 20, 2, 3, variant)
    b, _ = speculative_generate(target, draft, [0], 20, 2, 3, verifier=variant.verifier)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("variant", broken.ZOO, ids=ids)
def test_faulty_samples_follow_their_enumerated_distribution(pair, variant):
    target, draft = pair
    own = broken.distribution(target, draft, [0], LENGTH, K, variant, **SETTINGS)
    result = audit(lambda n, rng: broken.generate(target, draft, [0], n, K, rng, variant, **SETTINGS),
                   own, n_samples=1000, rng=77)
    assert result.pvalue > AUDIT_LEVEL, f"{variant.name}: the enumeration does not describe the sampler"


# --- 3. every bug is caught ---------------------------------------------------------------------

@pytest.mark.parametrize("variant", broken.ZOO, ids=ids)
def test_every_zoo_variant_is_caught_by_exact_enumeration(pair, variant):
    target, draft = pair
    assert broken.distance_from_target(target, draft, [0], LENGTH, K, variant, **SETTINGS) > DETECTABLE


def _audit(pair, variant, seed=5):
    target, draft = pair
    reference = target_sequence_distribution(warp(target, **SETTINGS), [0], LENGTH)
    return audit(lambda n, rng: broken.generate(target, draft, [0], n, K, rng, variant, **SETTINGS),
                 reference, N_SAMPLES, rng=seed)


def test_correct_decoder_passes_the_audit(pair):
    assert _audit(pair, broken.CORRECT).pvalue > AUDIT_LEVEL


@pytest.mark.parametrize("variant", broken.ZOO, ids=ids)
def test_every_zoo_variant_is_caught_by_the_chi_square_audit(pair, variant):
    assert _audit(pair, variant).pvalue < AUDIT_LEVEL, f"{variant.name} slipped through the audit"


def test_every_faulty_variant_is_covered_by_a_detection_test():
    """A new Variant must join ZOO (tested here) or FAULTY (test_exact, test_statistical)."""
    defined = {v for v in vars(broken).values() if isinstance(v, broken.Variant)}
    harmless = {broken.CORRECT, broken.RATIO_WITHOUT_MIN}
    assert defined - harmless <= set(broken.ZOO) | set(broken.FAULTY)
    assert len(broken.ZOO) == 6


# --- what the chapter claims about individual bugs ------------------------------------------

def test_two_bugs_exist_only_when_sampling_controls_are_on(pair):
    target, draft = pair
    for variant in (broken.RAW_DRAFT_REPORTED, broken.DRAFT_ONLY_WARP):
        assert broken.distance_from_target(target, draft, [0], LENGTH, K, variant) < TOLERANCE
        assert broken.distance_from_target(target, draft, [0], LENGTH, K, variant, **SETTINGS) > DETECTABLE


def test_stale_cache_is_invisible_to_a_first_order_target():
    target, draft = markov_pair(vocab_size=3, draft_noise=0.9, seed=9)
    assert broken.distance_from_target(target, draft, [0], LENGTH, K, broken.STALE_CACHE) < TOLERANCE


def test_wrong_bonus_row_needs_a_bonus_inside_the_window(pair):
    target, draft = pair
    assert broken.distance_from_target(target, draft, [0], K, K, broken.WRONG_BONUS_ROW) < TOLERANCE
    assert broken.distance_from_target(target, draft, [0], K + 1, K, broken.WRONG_BONUS_ROW) > DETECTABLE


def test_stale_cache_keeps_the_rejected_drafts(pair):
    target, draft = pair
    cache = broken.StaleCache(target)
    cache.extend(np.array([0, 1, 2, 0]))
    cache.rollback(3)  # the loop thinks the rejected 0 is gone ...
    assert len(cache) == 3
    rows = cache.extend(np.array([1]))  # ... but the next row still reads it
    np.testing.assert_allclose(rows, target(np.array([0, 1, 2, 0, 1]))[-1:])
    np.testing.assert_array_equal(cache.tokens, [0, 1, 2, 0, 1])


# --- the Variant API ----------------------------------------------------------------------------

def test_which_variants_live_in_the_verifier():
    for variant in (broken.ARGMAX_DRAFT, broken.RAW_DRAFT_REPORTED, broken.DRAFT_ONLY_WARP, broken.STALE_CACHE):
        assert not variant.in_verifier
    for variant in broken.FAULTY + (broken.CORRECT, broken.RATIO_WITHOUT_MIN, broken.WRONG_BONUS_ROW):
        assert variant.in_verifier
        assert hasattr(variant.verifier, "step")


def test_ratio_without_min_is_refused_by_the_enumeration(pair):
    target, draft = pair
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\]"):
        broken.distribution(target, draft, [0], 2, 2, broken.RATIO_WITHOUT_MIN)


def test_bad_arguments_are_named(pair):
    target, draft = pair
    with pytest.raises(TypeError, match="variant: expected a speclib.book.broken.Variant"):
        broken.generate(target, draft, [0], 3, 2, 0, variant="argmax")
    with pytest.raises(ValueError, match="too many"):
        broken.distribution(target, draft, [0], 12, 2)
    with pytest.raises(ValueError, match="temperature: must be >= 0"):
        broken.distribution(target, draft, [0], 2, 2, temperature=-1)
    other, _ = markov_pair(vocab_size=4)
    with pytest.raises(ValueError, match="draft: vocabulary"):
        broken.generate(target, other, [0], 3, 2, 0)
    with pytest.raises(ValueError, match="table: expected shape"):
        broken.SecondOrderModel(np.full((2, 3, 3), 1 / 3))


def test_second_order_model_reads_two_tokens():
    target, _ = broken.second_order_pair(vocab_size=3, seed=0)
    rows = target(np.array([2, 1, 0]))
    np.testing.assert_array_equal(rows, target.table[[0, 2, 1], [2, 1, 0]])


# --- the shipped verifiers and the exercises ----------------------------------------------------

def _audit_verifier(pair, verifier, k):
    target, draft = pair
    reference = target_sequence_distribution(target, [0], LENGTH)
    return audit(lambda n, rng: speculative_generate(target, draft, [0], n, k, rng, verifier=verifier),
                 reference, 1500, rng=2024)


def test_shipped_verifiers_fail_the_audit_or_are_refused_and_verify_passes(pair):
    assert _audit_verifier(pair, verify, 3).passed
    assert not _audit_verifier(pair, broken.shipped_verify_a, 2).passed
    # b emits drafts after a rejection: the loop refuses what it returns (issue 24)
    with pytest.raises(ValueError, match=r"verifier shipped_verify_b: returned \d+ tokens with n_accepted = \d+"):
        _audit_verifier(pair, broken.shipped_verify_b, 3)


def test_the_loop_refuses_every_mistake_the_zoo_lists_as_caught():
    refusals = broken.loop_refusals()
    assert set(refusals) == set(broken.CAUGHT_BY_THE_LOOP)
    assert "exactly one row per token; it returned 5 rows for 4 tokens" in refusals["model returns one row too many"]
    target, draft = broken.zoo_pair()
    assert set(broken.loop_refusals(*markov_pair(vocab_size=5, seed=2))) == set(refusals)
    # the negative control: the correct parts run to the end
    tokens, _ = speculative_generate(target, draft, [0], 20, 3, 0)
    assert tokens.size == 20


def _fixed_verify(draft_tokens, p_draft, q_target, rng, *, bonus=True):
    return verify(draft_tokens, p_draft, q_target, rng, bonus=bonus)


def test_check_fixed_verifier():
    checks.check_fixed_verifier(_fixed_verify)
    # the loop itself refuses the unrepaired verifier (it emits drafts after a rejection); the
    # student is told so as an exercise message, not with the loop's traceback
    with pytest.raises(checks.ExerciseError, match="loop refused what your verifier returned"):
        checks.check_fixed_verifier(broken.shipped_verify_b)
    with pytest.raises(checks.ExerciseError, match="every draft must be kept"):
        checks.check_fixed_verifier(broken.shipped_verify_a)


def _argmax_first_token(p, q):
    x = int(np.argmax(p))
    a = min(1.0, q[x] / p[x])
    missing = np.maximum(q - p, 0.0)
    out = (1 - a) * missing / missing.sum() if missing.sum() > 0 else (1 - a) * q
    out[x] += a
    return out


def test_argmax_formula_matches_the_fixed_context_enumeration():
    p, q = np.array([0.6, 0.3, 0.1]), np.array([0.2, 0.3, 0.5])
    got = broken.distribution(FixedContextModel(q), FixedContextModel(p), [0], 1, 1, broken.ARGMAX_DRAFT)
    np.testing.assert_allclose(got, _argmax_first_token(p, q), atol=TOLERANCE)


def test_plot_zoo_distances():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from speclib.book.plots import plot_zoo_distances

    ax = plot_zoo_distances(["a", "b"], {"one": [0.1, 0.2], "two": [0.0, 0.3]})
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert len(ax.patches) == 4 and "total-variation" in ax.get_xlabel()
    plt.close("all")


def test_reported_mistakes_and_steps_describe_the_zoo():
    """The chapter's table: every zoo variant has a step, and all but the off-by-one bonus
    row are among the mistakes users have reported."""
    assert set(broken.ZOO) - set(broken.REPORTED) == {broken.WRONG_BONUS_ROW}
    assert set(broken.REPORTED) <= set(broken.ZOO)
    assert set(broken.ZOO_STEP) == {v.name for v in broken.ZOO}
    assert all(step[0] in "12345" for step in broken.ZOO_STEP.values())


def test_the_zoo_verifiers_take_bonus_only_as_a_bool():
    # The zoo's verifiers (built from switches, and the two reviewed ones) check what verify checks.
    p, q = np.full((1, 2), 0.5), np.full((2, 2), 0.5)
    faulty = [bug.verifier for bug in broken.ZOO if bug.verifier is not broken.verify]
    assert faulty  # at least one zoo entry has a verifier of its own
    for verifier in faulty + [broken.shipped_verify_a, broken.shipped_verify_b]:
        with pytest.raises(TypeError, match="bonus: expected True or False"):
            verifier([0], p, q, 0, bonus="False")
        with pytest.raises(ValueError, match="q_target: row 1 contains NaN"):
            verifier([0], p, np.array([[0.5, 0.5], [np.nan, 0.5]]), 0)

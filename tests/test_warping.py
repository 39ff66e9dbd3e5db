"""Sampling controls: the warp itself, and speculative decoding of warped models.

The claim of chapter 10: with temperature, top-k and top-p applied to both draft and target,
speculative decoding follows the *warped* target exactly.  Checked by exact enumeration
(to 1e-12) and by a seeded chi-square audit, each with a negative control that the same
check catches: the controls applied to the draft only.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from speclib import markov_pair, speculative_generate
from speclib.book import broken, checks
from speclib.core.audit import AUDIT_LEVEL, audit
from speclib.core.exact import max_abs_error, output_distribution, target_sequence_distribution
from speclib.lm.models import MarkovModel
from speclib.core.warping import WarpedModel, warp, warp_distribution
from speclib.book.widgets import sampling_controls_view

TOLERANCE = 1e-12
DETECTABLE = 1e-3

SETTINGS = [
    dict(temperature=0.5),
    dict(temperature=1.7),
    dict(top_k=2),
    dict(top_p=0.7),
    dict(temperature=0.8, top_k=2, top_p=0.9),
    dict(temperature=0.0),
    dict(top_k=1),
]


# --- the warp of one row ----------------------------------------------------------------------

def test_defaults_leave_rows_alone():
    q = np.array([[0.5, 0.3, 0.2], [0.1, 0.0, 0.9]])
    np.testing.assert_array_equal(warp_distribution(q), q)


def test_temperature_is_a_power_of_the_row():
    q = np.array([0.5, 0.3, 0.2])
    for t in (0.25, 0.5, 2.0, 3.0):
        want = q ** (1 / t) / (q ** (1 / t)).sum()
        np.testing.assert_allclose(warp_distribution(q, temperature=t), want, rtol=1e-12)


def test_temperature_zero_is_argmax_with_lowest_id_on_ties():
    np.testing.assert_array_equal(warp_distribution([0.2, 0.4, 0.4], temperature=0), [0, 1, 0])
    np.testing.assert_array_equal(warp_distribution([[0.6, 0.4], [0.1, 0.9]], temperature=0), [[1, 0], [0, 1]])


def test_tiny_temperature_approaches_argmax_without_overflow():
    with np.errstate(all="raise"):
        row = warp_distribution([0.3, 0.45, 0.25], temperature=1e-9)
    np.testing.assert_allclose(row, [0, 1, 0], atol=1e-12)


def test_huge_temperature_flattens_the_support_but_keeps_zeros():
    row = warp_distribution([0.7, 0.0, 0.2, 0.1], temperature=1e6)
    np.testing.assert_allclose(row, [1 / 3, 0, 1 / 3, 1 / 3], atol=1e-5)
    assert row[1] == 0.0


def test_top_k_keeps_exactly_k_lowest_id_on_ties():
    np.testing.assert_allclose(warp_distribution([0.3, 0.3, 0.3, 0.1], top_k=2), [0.5, 0.5, 0, 0])
    np.testing.assert_allclose(warp_distribution([0.1, 0.2, 0.7], top_k=1), [0, 0, 1])
    q = np.array([0.1, 0.2, 0.7])
    np.testing.assert_array_equal(warp_distribution(q, top_k=3), q)
    np.testing.assert_array_equal(warp_distribution(q, top_k=50), q)


@pytest.mark.parametrize("top_p, kept", [(0.5, 1), (0.8, 2), (0.81, 3), (1.0, 3), (1e-9, 1)])
def test_top_p_keeps_the_smallest_nucleus(top_p, kept):
    row = warp_distribution([0.3, 0.5, 0.2], top_p=top_p)
    assert np.count_nonzero(row) == kept
    assert row[1] > 0  # the most likely token is always kept
    assert row.sum() == pytest.approx(1.0)


def test_top_p_acts_after_temperature():
    # At temperature 0.5 the row [0.5, 0.3, 0.2] becomes [0.658, 0.237, 0.105]: the top
    # token alone no longer falls short of 0.6.
    assert np.count_nonzero(warp_distribution([0.5, 0.3, 0.2], top_p=0.6)) == 2
    assert np.count_nonzero(warp_distribution([0.5, 0.3, 0.2], temperature=0.5, top_p=0.6)) == 1


def test_input_is_not_modified():
    q = np.array([0.5, 0.3, 0.2])
    warp_distribution(q, temperature=0.3, top_k=2, top_p=0.5)
    np.testing.assert_array_equal(q, [0.5, 0.3, 0.2])


@settings(max_examples=200, deadline=None)
@given(
    raw=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=8).filter(lambda r: sum(r) > 1e-3),
    temperature=st.one_of(st.just(0.0), st.floats(0.05, 5.0)),
    top_k=st.one_of(st.none(), st.integers(1, 9)),
    top_p=st.one_of(st.none(), st.floats(0.01, 1.0)),
)
def test_warp_properties(raw, temperature, top_k, top_p):
    q = np.array(raw) / sum(raw)
    row = warp_distribution(q, temperature, top_k, top_p)
    assert row.shape == q.shape
    assert row.sum() == pytest.approx(1.0, abs=1e-9)
    assert (row >= 0).all()
    assert (row[q == 0] == 0).all()  # no mass appears where there was none
    # Order is kept: a more likely token never ends up less likely (ties aside).
    order = np.argsort(-q, kind="stable")
    assert (np.diff(row[order]) <= 1e-12).all()
    if top_k is not None:
        assert np.count_nonzero(row) <= top_k


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(temperature=-0.1), ValueError, "temperature: must be >= 0"),
        (dict(temperature=float("nan")), ValueError, "temperature: must be finite"),
        (dict(temperature="hot"), TypeError, "temperature: expected a real number"),
        (dict(top_k=0), ValueError, "top_k: must be >= 1"),
        (dict(top_k=2.0), TypeError, "top_k: expected an integer"),
        (dict(top_k=True), TypeError, "top_k: expected an integer"),
        (dict(top_p=0.0), ValueError, "top_p: must be > 0"),
        (dict(top_p=1.2), ValueError, "top_p: must be <= 1"),
        (dict(top_p=float("nan")), ValueError, "top_p: must be finite"),
    ],
)
def test_bad_settings_are_named(kwargs, error, message):
    with pytest.raises(error, match=message):
        warp_distribution([0.5, 0.5], **kwargs)
    target, _ = markov_pair(vocab_size=3)
    with pytest.raises(error, match=message):
        warp(target, **kwargs)


def test_bad_rows_are_named():
    with pytest.raises(ValueError, match="probs: row 0 sums to 0.9"):
        warp_distribution([0.5, 0.4])
    with pytest.raises(ValueError, match="probs: .*NaN"):
        warp_distribution([np.nan, 1.0])


# --- warped models ------------------------------------------------------------------------------

def test_warped_model_follows_the_protocol():
    target, _ = markov_pair(vocab_size=5, seed=2)
    hot = warp(target, temperature=0.5, top_k=3)
    assert isinstance(hot, WarpedModel)
    assert hot.vocab_size == 5 and hot.context_length == target.context_length
    rows = hot(np.array([0, 4, 2]))
    assert rows.shape == (3, 5)
    np.testing.assert_allclose(rows, warp_distribution(target(np.array([0, 4, 2])), 0.5, 3))
    assert "temperature=0.5" in repr(hot)


def test_warp_rejects_what_is_not_a_model():
    with pytest.raises(TypeError, match="model: expected a model"):
        warp(np.eye(3))


# --- exactness for the warped target ----------------------------------------------------------

@pytest.mark.parametrize("controls", SETTINGS, ids=str)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_warped_speculative_decoding_is_exact(controls, k):
    target, draft = markov_pair(vocab_size=3, draft_noise=0.6, seed=k)
    for prefix in ([0], [2], [1, 0]):
        assert max_abs_error(warp(target, **controls), warp(draft, **controls), prefix, k) < TOLERANCE


@pytest.mark.parametrize("controls", SETTINGS, ids=str)
def test_warped_exactness_with_a_two_token_memory(second_order_pair, controls):
    target, draft = second_order_pair
    assert max_abs_error(warp(target, **controls), warp(draft, **controls), [1, 2], 2) < TOLERANCE


def _error_against(reference, target, draft, k=2, prefix=(0,)):
    """Largest gap between speculative decoding of (target, draft) and the ``reference`` model."""
    spec = output_distribution(target, draft, list(prefix), k + 1, k)
    want = target_sequence_distribution(reference, list(prefix), k + 1)
    return float(np.abs(spec - want).max())


@pytest.mark.parametrize("controls", SETTINGS, ids=str)
def test_any_draft_is_exact_but_an_unwarped_target_is_not(controls):
    """The negative control: the same enumeration catches controls applied to the draft only."""
    target, draft = markov_pair(vocab_size=3, draft_noise=0.6, seed=5)
    hot = warp(target, **controls)
    assert _error_against(hot, hot, draft) < TOLERANCE
    assert _error_against(hot, hot, warp(draft, temperature=0)) < TOLERANCE
    assert _error_against(hot, target, warp(draft, **controls)) > DETECTABLE


N_SAMPLES = 2000
CHI_CONTROLS = dict(temperature=0.6, top_p=0.9)


def _audit_warped(target_model, draft_model, reference_target, seed):
    reference = target_sequence_distribution(reference_target, [0], 3)
    return audit(lambda n, rng: speculative_generate(target_model, draft_model, [0], n, 2, rng),
                 reference, N_SAMPLES, rng=seed)


def test_warped_speculative_decoding_passes_the_chi_square_audit():
    target, draft = markov_pair(vocab_size=3, draft_noise=0.7, seed=5)
    hot = warp(target, **CHI_CONTROLS)
    result = _audit_warped(hot, warp(draft, **CHI_CONTROLS), hot, seed=31)
    assert result.pvalue > AUDIT_LEVEL


def test_chi_square_audit_catches_controls_on_the_draft_only():
    target, draft = markov_pair(vocab_size=3, draft_noise=0.7, seed=5)
    result = _audit_warped(target, warp(draft, **CHI_CONTROLS), warp(target, **CHI_CONTROLS), seed=31)
    assert result.pvalue < AUDIT_LEVEL


# --- the chapter's explorer and exercises -----------------------------------------------------

def test_sampling_controls_view():
    view = sampling_controls_view(temperature=0.5, top_k=3, vocab_size=6, draft_noise=0.4, seed=1)
    np.testing.assert_allclose(view.q_warped, warp_distribution(view.q, 0.5, 3))
    np.testing.assert_allclose(view.p_warped, warp_distribution(view.p, 0.5, 3))
    assert view.alpha == pytest.approx(np.minimum(view.p_warped, view.q_warped).sum())
    assert view.label == "temperature 0.5, top-k 3"
    with pytest.raises(ValueError, match="top_p"):
        sampling_controls_view(top_p=2.0)


def _good_top_p_row(q, top_p):
    return warp_distribution(q, top_p=top_p)


def _top_p_row_keeping_one_too_many(q, top_p):
    order = np.argsort(-q, kind="stable")
    keep = order[: int(np.searchsorted(np.cumsum(q[order]), top_p)) + 2]
    out = np.zeros_like(q)
    out[keep] = q[keep]
    return out / out.sum()


def _top_p_row_not_renormalised(q, top_p):
    return warp_distribution(q, top_p=top_p) * q[q > 0].max()


def test_check_top_p_row():
    checks.check_top_p_row(_good_top_p_row)
    for wrong in (_top_p_row_keeping_one_too_many, _top_p_row_not_renormalised):
        with pytest.raises(checks.ExerciseError):
            checks.check_top_p_row(wrong)

    def stub(q, top_p):
        raise NotImplementedError

    with pytest.raises(checks.ExerciseError, match="NotImplementedError"):
        checks.check_top_p_row(stub)


def test_check_exact_calls():
    checks.check_exact_calls({"a", "b", "d"})
    for wrong in ({"a"}, {"a", "b", "c", "d"}, {"a", "c"}, set()):
        with pytest.raises(checks.ExerciseError):
            checks.check_exact_calls(wrong)
    with pytest.raises(checks.ExerciseError, match="not among the calls"):
        checks.check_exact_calls({"a", "z"})


def test_zoo_variant_for_controls_on_the_draft_only_matches_the_manual_control():
    """broken.DRAFT_ONLY_WARP is the same mistake as passing an unwarped target."""
    target, draft = markov_pair(vocab_size=3, draft_noise=0.7, seed=5)
    for seed in range(10):
        a, _ = broken.generate(target, draft, [0], 12, 2, seed, broken.DRAFT_ONLY_WARP, **CHI_CONTROLS)
        b, _ = speculative_generate(target, warp(draft, **CHI_CONTROLS), [0], 12, 2, seed)
        np.testing.assert_array_equal(a, b)


def test_identity_target_and_warp():
    model = MarkovModel(np.full((3, 3), 1 / 3))
    np.testing.assert_allclose(warp(model, temperature=0.1)([0, 1]), np.full((2, 3), 1 / 3))


def test_plots_and_explorer_of_the_chapter():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from speclib.book.plots import plot_sampling_controls, plot_sequence_frequencies
    from speclib.book.widgets import sampling_controls_explorer

    ax = plot_sampling_controls(sampling_controls_view(temperature=0.5, top_p=0.8))
    assert ax.get_xlabel() == "token id" and ax.get_ylabel() == "probability"
    assert "temperature 0.5, top-p 0.8" in ax.get_title() and ax.get_legend() is not None
    assert plot_sampling_controls(sampling_controls_view(), legend=False).get_legend() is None
    reference = np.full((2, 2), 0.25)
    ax = plot_sequence_frequencies(reference, {"a": np.array([[3, 1], [0, 4]]), "b": np.ones((2, 2))}, top=3)
    assert len(ax.get_xticklabels()) == 3 and ax.get_ylabel() == "frequency"
    assert sampling_controls_explorer(vocab_size=6) is None  # it shows its sliders; nothing to print
    plt.close("all")


# --- chapter 10's measurements: where the controls go, acceptance on fixed contexts ------------

def test_control_placement_errors_match_the_direct_enumeration():
    """Exact with the controls on both models or the target only; the draft-only placement is
    the negative control that the same function must flag."""
    from speclib.core.warping import PLACEMENTS, control_placement_errors

    target, draft = markov_pair(vocab_size=3, draft_noise=0.6, seed=5)
    for controls in SETTINGS:
        errors = control_placement_errors(target, draft, [0], 2, **controls)
        assert tuple(errors) == PLACEMENTS
        hot = warp(target, **controls)
        assert errors["both models"] == _error_against(hot, hot, warp(draft, **controls))
        assert errors["draft only"] == _error_against(hot, target, warp(draft, **controls))
        assert errors["both models"] < TOLERANCE and errors["target only"] < TOLERANCE
        assert errors["draft only"] > DETECTABLE
    with pytest.raises(ValueError, match="top_p"):
        control_placement_errors(target, draft, [0], 2, top_p=0.0)


def _rows(model, tokens):
    """The model's next-token row after every prefix of ``tokens``, one call per prefix."""
    return np.array([model(tokens[: i + 1])[-1] for i in range(len(tokens))])


@pytest.mark.parametrize("controls", SETTINGS + [{}], ids=str)
def test_mean_acceptance_rate_averages_the_exact_rate_over_prefixes(second_order_pair, controls):
    from speclib.core.sampling import acceptance_rate
    from speclib.core.warping import mean_acceptance_rate

    target, draft = second_order_pair
    tokens = np.array([0, 2, 1, 1, 2, 0, 0, 1])
    q = warp_distribution(_rows(target, tokens), **controls)
    p_raw = _rows(draft, tokens)
    want = acceptance_rate(warp_distribution(p_raw, **controls), q).mean()
    assert mean_acceptance_rate(target, draft, tokens, **controls) == pytest.approx(want, abs=1e-12)
    want_raw = acceptance_rate(p_raw, q).mean()
    got_raw = mean_acceptance_rate(target, draft, tokens, warp_draft=False, **controls)
    assert got_raw == pytest.approx(want_raw, abs=1e-12)


def test_mean_acceptance_rate_at_temperature_zero_counts_agreeing_argmaxes():
    from speclib.core.warping import mean_acceptance_rate

    target, draft = markov_pair(vocab_size=6, draft_noise=0.9, seed=4)
    tokens = np.arange(6)
    agree = np.mean(np.argmax(target.transition, 1) == np.argmax(draft.transition, 1))
    assert mean_acceptance_rate(target, draft, tokens, temperature=0) == pytest.approx(agree)
    assert mean_acceptance_rate(target, target, tokens, temperature=0.3) == pytest.approx(1.0)


def test_mean_acceptance_rate_bad_arguments():
    from speclib.core.warping import mean_acceptance_rate

    target, draft = markov_pair(vocab_size=3)
    other, _ = markov_pair(vocab_size=4)
    with pytest.raises(ValueError, match="tokens: must contain at least one token"):
        mean_acceptance_rate(target, draft, [])
    with pytest.raises(ValueError, match="draft: vocabulary"):
        mean_acceptance_rate(target, other, [0, 1])
    with pytest.raises(ValueError, match="temperature: must be >= 0"):
        mean_acceptance_rate(target, draft, [0, 1], temperature=-1)


def test_check_exact_calls_says_when_the_answer_is_missing():
    with pytest.raises(checks.ExerciseError, match="still None"):
        checks.check_exact_calls(None)

"""Draft-length controllers, the fallback monitor and the hindsight oracle (speclib.core.adaptive).

Exactness is checked twice: by enumerating every branch of the first few steps
(output_distribution, to 1e-12), and by a seeded chi-square test on sampled
output.  PeekingStop, which decides from the drawn token itself, is the negative control
both checks must catch.
"""

import numpy as np
import pytest
from scipy import stats

from speclib.core.adaptive import (
    ConfidenceStop,
    FallbackMonitor,
    FixedK,
    HeuristicK,
    PeekingStop,
    Segment,
    hindsight_oracle,
    run_segments,
    speculation_pays,
)
from speclib.core.decoding import GenerationStats, speculative_generate
from speclib.core.exact import output_distribution, target_sequence_distribution
from speclib.lm.models import markov_pair
from speclib.core.theory import optimal_k

TOLERANCE = 1e-12  # exact arithmetic up to rounding
DETECTABLE = 1e-3  # a faulty rule must be at least this far (max abs error) from the target
ALPHA_LEVEL = 1e-3  # chi-square: reject "follows the target" below this p-value
N_SAMPLES = 3000
LENGTH = 3


def small_pair(seed=3):
    """V = 3, a poor draft: acceptance and the draft's confidence vary by context."""
    return markov_pair(vocab_size=3, draft_noise=0.7, seed=seed)


def confident_pair():
    """A draft that is confident about a different chain: the peeking rule does visible damage here."""
    target, _ = markov_pair(vocab_size=3, draft_noise=0.7, seed=5)
    draft, _ = markov_pair(vocab_size=3, draft_noise=0.3, seed=105)
    return target, draft


def p_min_between_rows(draft):
    """A p_min with some draft rows above it and some below, so both branches are taken."""
    tops = np.sort(draft.transition.max(axis=1))
    assert tops[0] < tops[-1]
    return float((tops[0] + tops[-1]) / 2)


def exact_controllers(draft):
    return [
        FixedK(2),
        HeuristicK(k_init=1),
        ConfidenceStop(p_min_between_rows(draft), k_max=3),
        FallbackMonitor(HeuristicK(k_init=1), c=0.6, window=2, probe_every=1, min_samples=1),
    ]


# --- controllers ----------------------------------------------------------------------------


def test_fixed_k():
    ctrl = FixedK(3)
    ctrl.update(3, 0)
    assert ctrl.draft_length() == 3 and ctrl.keep_drafting(np.array([0.1, 0.9]), 0)


def test_heuristic_schedule_matches_plus_two_minus_one():
    ctrl = HeuristicK(k_init=2)
    seen = []
    for drafted_all in [True, True, False, False, False, False, True]:
        k = ctrl.draft_length()
        ctrl.update(k, k if drafted_all else 0)
        seen.append(ctrl.draft_length())
    assert seen == [4, 6, 5, 4, 3, 2, 4]
    low = HeuristicK(k_init=1)
    low.update(1, 0)
    assert low.draft_length() == 1  # never below 1
    capped = HeuristicK(k_init=3, k_max=4)
    capped.update(3, 3)
    assert capped.draft_length() == 4
    low.update(0, 0)  # a step that drafted nothing changes nothing
    assert low.draft_length() == 1


def test_confidence_stop_reads_the_row_not_the_token():
    ctrl = ConfidenceStop(p_min=0.6, k_max=5)
    row = np.array([0.7, 0.2, 0.1])
    assert ctrl.keep_drafting(row, 2) and ctrl.keep_drafting(row, 0)
    assert not ctrl.keep_drafting(np.array([0.5, 0.5, 0.0]), 0)
    peek = PeekingStop(p_min=0.6, k_max=5)
    assert peek.keep_drafting(row, 0) and not peek.keep_drafting(row, 2)


def test_speculation_pays_is_the_break_even_of_optimal_k():
    for alpha in np.linspace(0.003, 0.997, 37):  # off the c grid: ties are a matter of rounding
        for c in [0.0, 0.05, 0.2, 0.35, 0.5, 0.8, 1.0, 1.5]:
            assert speculation_pays(float(alpha), c) == (optimal_k(float(alpha), c) > 0), (alpha, c)


def test_monitor_falls_back_probes_and_returns():
    mon = FallbackMonitor(FixedK(4), c=0.5, window=8, probe_every=3, min_samples=4)
    assert mon.draft_length() == 4
    mon.update(4, 0)  # 1 verified, rejected
    mon.update(4, 0)
    mon.update(4, 1)  # 2 verified: 1 accepted
    mon.update(4, 0)  # 5 verified, 1 accepted: 0.2 <= 0.5
    assert not mon.speculating
    ks = []
    for _ in range(4):
        ks.append(mon.draft_length())
        mon.update(ks[-1], 0)
    assert ks == [0, 0, 0, 1]  # three plain steps, then a one-token probe
    while not mon.speculating:  # accepted probes lift the window's rate above c
        k = mon.draft_length()
        mon.update(k, k)
    assert mon.draft_length() == 4 and mon.alpha_estimate > 0.5
    assert False in mon.history and mon.history[-1]


def test_monitor_validation():
    with pytest.raises(TypeError, match="controller"):
        FallbackMonitor(object(), c=0.1)
    with pytest.raises(ValueError, match="min_samples"):
        FallbackMonitor(FixedK(2), c=0.1, window=5, min_samples=6)
    with pytest.raises(ValueError, match="c: must be >= 0"):
        FallbackMonitor(FixedK(2), c=-0.1)
    with pytest.raises(TypeError, match="k: expected an integer"):
        FixedK(2.5)
    with pytest.raises(ValueError, match="p_min"):
        ConfidenceStop(1.5, 4)


# --- the decoder ----------------------------------------------------------------------------


def test_fixed_k_reproduces_speculative_generate():
    target, draft = markov_pair(vocab_size=16, draft_noise=0.4, seed=2)
    for seed in range(5):
        a, sa = speculative_generate(target, draft, [1], 57, FixedK(3), rng=seed)
        b, sb = speculative_generate(target, draft, [1], 57, k=3, rng=seed)
        np.testing.assert_array_equal(a, b)
        assert (sa.target_passes, sa.draft_passes, sa.accepted) == (sb.target_passes, sb.draft_passes, sb.accepted)


def test_stats_count_every_draft_pass():
    target, draft = markov_pair(vocab_size=16, draft_noise=0.4, seed=2, concentration=0.1)
    ctrl = ConfidenceStop(p_min=0.3, k_max=6)
    tokens, st = speculative_generate(target, draft, [0], 300, ctrl, rng=4)
    assert tokens.shape == (300,) and st.tokens_generated == 300 == sum(st.tokens_per_step)
    stopped_early = sum(k < 6 for k in st.k_per_step[:-1])  # the last step may be capped instead
    assert st.draft_passes >= sum(st.k_per_step) + stopped_early - 1
    assert st.draft_passes <= sum(st.k_per_step) + len(st.k_per_step)
    assert st.walltime(0.5) == st.target_passes + 0.5 * st.draft_passes
    assert st.speedup(0.0) == pytest.approx(st.tokens_per_target_pass)


def test_monitor_falls_back_on_a_useless_draft_and_keeps_a_good_one():
    target, bad = markov_pair(vocab_size=16, draft_noise=1.0, seed=0, concentration=0.05)
    _, good = markov_pair(vocab_size=16, draft_noise=0.05, seed=0, concentration=0.05)
    mon_bad = FallbackMonitor(FixedK(4), c=0.5)
    _, st_bad = speculative_generate(target, bad, [0], 400, mon_bad, rng=1)
    mon_good = FallbackMonitor(FixedK(4), c=0.5)
    _, st_good = speculative_generate(target, good, [0], 400, mon_good, rng=1)
    assert np.mean(mon_bad.history) < 0.5 < np.mean(mon_good.history)
    assert st_bad.speedup(0.5) > speculative_generate(target, bad, [0], 400, FixedK(4), rng=1)[1].speedup(0.5)


def test_run_segments_carries_state_and_splits_by_label():
    target, draft = markov_pair(vocab_size=8, draft_noise=0.3, seed=1)
    segs = [Segment(target, draft, np.array([0]), 50, "a"), Segment(target, draft, np.array([1]), 30, "b")]
    total, per = run_segments(segs, HeuristicK(2), rng=0)
    assert total.tokens_generated == 80 and per["a"].tokens_generated == 50 and per["b"].tokens_generated == 30
    assert total.target_passes == per["a"].target_passes + per["b"].target_passes
    mons = {"a": FixedK(1), "b": FixedK(3)}
    _, per = run_segments(segs, mons, rng=0)
    assert max(per["a"].k_per_step) == 1 and max(per["b"].k_per_step) == 3
    with pytest.raises(ValueError, match="no controller for label 'b'"):
        run_segments(segs, {"a": FixedK(1)}, rng=0)
    with pytest.raises(TypeError, match="segments\\[0\\]"):
        run_segments([(target, draft)], FixedK(1), rng=0)


def test_decoder_validation():
    target, draft = small_pair()
    with pytest.raises(TypeError, match="controller"):
        speculative_generate(target, draft, [0], 5, "four", rng=0)
    with pytest.raises(ValueError, match="prompt"):
        speculative_generate(target, draft, [7], 5, FixedK(2), rng=0)
    other, _ = markov_pair(vocab_size=4, seed=0)
    with pytest.raises(ValueError, match="vocabulary"):
        speculative_generate(other, draft, [0], 5, FixedK(2), rng=0)


# --- exactness ------------------------------------------------------------------------------


@pytest.mark.parametrize("pair", [lambda: small_pair(3), lambda: small_pair(8), confident_pair],
                         ids=["poor draft", "poor draft 2", "confident draft"])
def test_every_controller_is_exact_by_enumeration(pair):
    target, draft = pair()
    for prefix in ([0], [2]):
        want = target_sequence_distribution(target, prefix, 4)
        for ctrl in exact_controllers(draft):
            got = output_distribution(target, draft, prefix, 4, ctrl)
            assert np.abs(got - want).max() < TOLERANCE, ctrl.name


def test_controllers_exact_on_a_second_order_pair(second_order_pair):
    target, draft = second_order_pair
    want = target_sequence_distribution(target, [1, 2], 3)
    ctrls = [HeuristicK(1), ConfidenceStop(0.5, 2), FallbackMonitor(FixedK(2), c=0.7, window=1, min_samples=1, probe_every=1)]
    for ctrl in ctrls:
        got = output_distribution(target, draft, [1, 2], 3, ctrl)
        assert np.abs(got - want).max() < TOLERANCE, ctrl.name


@pytest.mark.parametrize("pair", [small_pair, confident_pair], ids=["poor draft", "confident draft"])
def test_peeking_stop_fails_the_exact_check(pair):
    target, draft = pair()
    peek = PeekingStop(p_min_between_rows(draft), k_max=3)
    errors = [np.abs(output_distribution(target, draft, prefix, 3, peek)
                     - target_sequence_distribution(target, prefix, 3)).max() for prefix in ([0], [1], [2])]
    assert max(errors) > DETECTABLE


def test_the_enumerated_branches_take_every_decision():
    """The exactness checks above mean something only if the rules actually fire."""
    target, draft = small_pair()
    p_min = p_min_between_rows(draft)
    decisions = {ConfidenceStop(p_min, 3).keep_drafting(row, 0) for row in draft.transition}
    assert decisions == {True, False}
    mon = FallbackMonitor(HeuristicK(1), c=0.6, window=2, probe_every=1, min_samples=1)
    mon.update(1, 0)  # one rejection in the first step is enough to fall back
    assert not mon.speculating and mon.draft_length() == 0


def chi_square_pvalue(make_controller, seed):
    target, draft = confident_pair()
    rng = np.random.default_rng(seed)
    vocab = target.vocab_size
    counts = np.zeros(vocab**LENGTH)
    for _ in range(N_SAMPLES):
        tokens, _ = speculative_generate(target, draft, [0], LENGTH, make_controller(draft), rng)
        counts[np.ravel_multi_index(tuple(tokens), (vocab,) * LENGTH)] += 1
    expected = target_sequence_distribution(target, [0], LENGTH).ravel() * N_SAMPLES
    keep = expected > 0
    assert counts[~keep].sum() == 0
    return stats.chisquare(counts[keep], expected[keep]).pvalue


@pytest.mark.parametrize("index", [1, 2, 3], ids=["heuristic", "p_min", "monitor"])
def test_controllers_pass_chi_square(index):
    assert chi_square_pvalue(lambda d: exact_controllers(d)[index], seed=100 + index) > ALPHA_LEVEL


def test_peeking_stop_fails_chi_square():
    assert chi_square_pvalue(lambda d: PeekingStop(p_min_between_rows(d), 3), seed=7) < ALPHA_LEVEL


# --- the oracle -----------------------------------------------------------------------------


def test_oracle_picks_the_accepted_count_when_drafts_are_cheap():
    res = hindsight_oracle([0, 3, 4, 1], k_max=4, c=0.2)
    np.testing.assert_array_equal(res.k_per_step, [0, 3, 4, 1])
    assert (res.tokens, res.target_passes, res.draft_passes) == (12, 4, 8)
    assert res.speedup(0.2) == pytest.approx(12 / (4 + 0.2 * 8))
    expensive = hindsight_oracle([0, 3, 4, 1], k_max=4, c=1.5)
    assert expensive.draft_passes == 0 and expensive.tokens == 4  # drafting never pays


def test_oracle_is_a_ceiling_for_any_choice_on_the_same_pattern():
    rng = np.random.default_rng(0)
    for _ in range(200):
        k_max, c = int(rng.integers(1, 9)), float(rng.uniform(0, 1.2))
        n = rng.integers(0, k_max + 1, size=int(rng.integers(1, 30)))
        ks = rng.integers(0, k_max + 1, size=n.size)  # any controller's choices
        tokens = (np.minimum(n, ks) + 1).sum()
        assert tokens / (n.size + c * ks.sum()) <= hindsight_oracle(n, k_max, c).speedup(c) + 1e-12


def test_oracle_tops_the_controllers_on_a_run():
    target, draft = markov_pair(vocab_size=32, draft_noise=0.5, seed=0, concentration=0.1)
    _, fixed = speculative_generate(target, draft, [0], 500, FixedK(8), rng=3)
    oracle = hindsight_oracle(fixed.accepted_per_step, 8, c=0.1)
    assert oracle.tokens == fixed.tokens_generated or oracle.tokens >= fixed.tokens_generated - 8
    assert oracle.speedup(0.1) > fixed.speedup(0.1)


def test_oracle_validation():
    with pytest.raises(ValueError, match="accepted_per_step"):
        hindsight_oracle([0, 5], k_max=4, c=0.1)
    with pytest.raises(ValueError, match="accepted_per_step"):
        hindsight_oracle([0.5], k_max=4, c=0.1)
    with pytest.raises(ValueError, match="c: must be >= 0"):
        hindsight_oracle([0], k_max=4, c=-1)


def test_adaptive_stats_is_generation_stats():
    st = GenerationStats(tokens_generated=10, target_passes=4, draft_passes=8)
    assert st.walltime(0.25) == 6.0 and st.speedup(0.25) == pytest.approx(10 / 6)
    assert "tokens=10" in st.summary()



# --- comparison, explorer, figures, exercise checks ------------------------------------------


def test_compare_controllers():
    from speclib.core.adaptive import ORACLE, compare_controllers

    target, draft = markov_pair(vocab_size=16, draft_noise=0.4, seed=0, concentration=0.1)
    cmp = compare_controllers(target, draft, [[0], [3]], 200, [0.0, 0.2, 0.6], seed=0, p_min=0.3)
    assert set(cmp.speedup) == {"fixed K=4", "heuristic +2/-1", "p_min=0.3", "fixed K=4 + fallback", ORACLE}
    for name, values in cmp.speedup.items():
        assert values.shape == (3,) and (values > 0).all()
        if name != ORACLE:  # at c = 0 the cost is the target passes alone
            assert values[0] == pytest.approx(cmp.tokens_per_pass[name][0])
    fixed = cmp.speedup["fixed K=4"]
    assert fixed[0] > fixed[1] > fixed[2]  # the same run, costed at a higher c
    assert cmp.best(0) in cmp.speedup and cmp.best(0, include_oracle=True) == ORACLE
    assert (cmp.stderr["fixed K=4"] > 0).all() and np.isnan(cmp.acceptance[ORACLE]).all()
    # common random numbers: where the monitor never falls back it reproduces fixed K exactly
    assert cmp.speedup["fixed K=4 + fallback"][0] == cmp.speedup["fixed K=4"][0]
    with pytest.raises(ValueError, match="c_values"):
        compare_controllers(target, draft, [[0]], 10, [-0.1], seed=0)
    with pytest.raises(TypeError, match="prompts"):
        compare_controllers(target, draft, np.array([0]), 10, [0.1], seed=0)


def test_controller_view_and_figures():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from speclib.book.plots import plot_controller_bars, plot_controller_comparison, plot_fallback_trace
    from speclib.book.widgets import controller_view

    view = controller_view(draft_noise=0.0, c=0.0, n_tokens=60)
    assert view.names[-1].startswith("oracle") and len(view.speedup) == len(view.names) == 5
    assert (view.speedup >= 1.0).all() and view.alpha == pytest.approx(1.0)
    slow = controller_view(draft_noise=1.0, c=0.9, n_tokens=120)
    assert slow.speedup[0] < 1.0  # fixed K with a useless, expensive draft loses to plain decoding
    ax = plot_controller_bars(view)
    assert ax.get_xlabel() and ax.get_title()
    from speclib.core.adaptive import compare_controllers

    target, draft = markov_pair(vocab_size=8, draft_noise=0.4, seed=0)
    ax = plot_controller_comparison(compare_controllers(target, draft, [[0]], 60, [0.0, 0.5], seed=0))
    assert ax.get_xlabel().startswith("cost ratio") and len(ax.get_lines()) == 6
    mon = FallbackMonitor(FixedK(3), c=0.5, window=4, min_samples=2)
    _, st = speculative_generate(target, draft, [0], 80, mon, rng=0)
    ax = plot_fallback_trace(mon.estimates, mon.history, 0.5, st.tokens_per_step, boundaries=[40])
    assert ax.get_ylabel() == "acceptance rate"
    plt.close("all")


def test_check_oracle_speedup(capsys):
    from speclib.book.checks import ExerciseError, check_oracle_speedup

    check_oracle_speedup(lambda n, c: (sum(n) + len(n)) / (len(n) + c * sum(n)))
    assert "\u2714" in capsys.readouterr().out
    for wrong, hint in [
        (lambda n, c: (sum(n) + len(n)) / len(n), "pays c"),
        (lambda n, c: sum(n) / (len(n) + c * sum(n)), "one token more"),
        (lambda n, c: 1.0, "which k"),
        (lambda n, c: "fast", "not a number"),
    ]:
        with pytest.raises(ExerciseError, match=hint):
            check_oracle_speedup(wrong)

    def stub(n, c):
        raise NotImplementedError

    with pytest.raises(ExerciseError, match="NotImplementedError"):
        check_oracle_speedup(stub)


# --- the monitor around a controller that may choose k = 0 (review of chapter 12) ------------


class _ZeroAfterRejection:
    """Drafts 2 tokens until a draft is rejected, then asks for k = 0 until one is accepted."""

    name = "zero after a rejection"

    def __init__(self):
        self.last_ok = True

    def draft_length(self):
        return 2 if self.last_ok else 0

    def keep_drafting(self, p, x):
        return True

    def update(self, n_drafted, n_accepted):
        if n_drafted:
            self.last_ok = n_accepted > 0


def test_monitor_probes_when_the_wrapped_controller_chooses_zero():
    mon = FallbackMonitor(_ZeroAfterRejection(), c=0.1, window=10, probe_every=3, min_samples=10)
    assert mon.draft_length() == 2
    mon.update(2, 0)  # rejected: the wrapped controller now asks for k = 0; too few samples to fall back
    assert mon.speculating
    ks = []
    for _ in range(4):
        ks.append(mon.draft_length())
        mon.update(ks[-1], 0)
    assert ks == [0, 0, 0, 1]  # plain steps chosen by the controller are counted, then a probe
    assert mon.history[-4:] == [False, False, False, True]
    assert mon.draft_length() == 0  # the probe was rejected: the controller still says 0
    mon.update(0, 0)
    for _ in range(2):
        mon.draft_length()
        mon.update(0, 0)
    assert mon.draft_length() == 1
    mon.update(1, 1)  # an accepted probe reaches the wrapped controller
    assert mon.controller.last_ok and mon.draft_length() == 2
    # Negative control: the bare controller, once at k = 0, never drafts again.
    bare = _ZeroAfterRejection()
    bare.update(2, 0)
    target, draft = small_pair()
    _, st = speculative_generate(target, draft, [0], 40, bare, rng=0)
    assert max(st.k_per_step) == 0
    _, st = speculative_generate(target, draft, [0], 40, FallbackMonitor(_ZeroAfterRejection(), c=0.1, probe_every=3), rng=0)
    assert max(st.k_per_step) > 0


def test_monitor_around_a_zero_choosing_controller_is_exact():
    target, draft = small_pair()
    mon = FallbackMonitor(_ZeroAfterRejection(), c=0.1, window=3, probe_every=1, min_samples=3)
    dist = output_distribution(target, draft, [0], 4, mon)
    assert np.abs(dist - target_sequence_distribution(target, [0], 4)).max() < TOLERANCE


def test_compare_controllers_shortcut_equals_running_the_monitor():
    from speclib.core.adaptive import compare_controllers

    target, draft = markov_pair(vocab_size=16, draft_noise=0.6, seed=2, concentration=0.1)
    prompts, c_values = [[0], [5], [9]], [0.0, 0.3, 0.45, 0.7]
    cmp = compare_controllers(target, draft, prompts, 150, c_values, seed=3)
    fell_back = []
    for i, c in enumerate(c_values):
        runs = []
        for j, prompt in enumerate(prompts):
            mon = FallbackMonitor(FixedK(4), c)
            runs.append(speculative_generate(target, draft, prompt, 150, mon, rng=3 + j)[1])
            fell_back.append(not all(mon.history))
        want = sum(r.tokens_generated for r in runs) / sum(r.walltime(c) for r in runs)
        assert cmp.speedup["fixed K=4 + fallback"][i] == pytest.approx(want, rel=1e-12)
    assert any(fell_back) and not all(fell_back)  # both branches of the shortcut were exercised


def test_compare_controllers_says_when_it_cannot_measure_noise_and_refuses_no_tokens():
    from speclib.core.adaptive import compare_controllers

    target, draft = markov_pair(vocab_size=8, draft_noise=0.4, seed=0)
    one = compare_controllers(target, draft, [[0]], 20, [0.1], seed=0)
    assert one.n_runs == 1 and np.isnan(one.stderr["fixed K=4"]).all()  # documented: one run has no spread
    two = compare_controllers(target, draft, [[0], [1]], 20, [0.1], seed=0)
    assert two.n_runs == 2 and np.isfinite(two.stderr["fixed K=4"]).all()
    with pytest.raises(ValueError, match="n_tokens: must be >= 1"):
        compare_controllers(target, draft, [[0]], 0, [0.1], seed=0)
    with pytest.raises(ValueError, match="prompts \\(prompt 1\\): token 9"):
        compare_controllers(target, draft, [[0], [9]], 5, [0.1], seed=0)

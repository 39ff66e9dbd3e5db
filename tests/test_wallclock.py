"""speclib.book.wallclock: the chapter-9 measurements, on tiny random transformers (fast)."""

import numpy as np
import math

import pytest

from speclib.book.wallclock import (block_pass_differences, greedy_divergence, position_alphas,
                                    speedup_with_fixed, wallclock_experiment)
from speclib.lm.transformer import speedup_with_costs as predicted_speedup
from speclib.core.sampling import acceptance_rate
from speclib.core.theory import speedup_in_passes
from speclib.lm.models import markov_pair
from speclib.lm.transformer import TransformerConfig, random_transformer, softmax_rows

CFG = TransformerConfig(vocab_size=7, block_size=16, d_model=8, n_layers=1, n_heads=2)


@pytest.fixture(scope="module")
def pair():
    return random_transformer(CFG, seed=0), random_transformer(CFG, seed=1)


def test_the_run_cost_model_is_the_textbook_formula_without_fixed_passes():
    for alpha, k, c in ((0.8, 3, 0.05), (0.5, 1, 0.2), (0.95, 8, 0.01)):
        assert speedup_with_fixed(alpha, k, c, 1.0, n=50) == pytest.approx(speedup_in_passes(alpha, k, c))
    # a verification pass over k+1 tokens costing r passes divides the speed-up accordingly
    assert speedup_with_fixed(0.8, 3, 0.0, 2.0, n=50) == pytest.approx(speedup_in_passes(0.8, 3, 0.0) / 2)
    # fixed passes: (F0 + n) / (F + n / E (k c + r))
    e = (1 - 0.8 ** 4) / 0.2
    assert speedup_with_fixed(0.8, 3, 0.1, 1.5, n=100, fixed_plain=10, fixed_spec=30) == pytest.approx(
        110 / (30 + 100 / e * 1.8))


def test_wallclock_experiment_measures_in_the_loops_own_units(pair):
    target, draft = pair
    run = wallclock_experiment(target, draft, [[0, 1, 2], [3, 4]], n_new=12, ks=(1, 3), reps=2, seed=0)
    assert run.ks.tolist() == [0, 1, 3]
    assert run.seconds.shape == (3, 2, 2)
    np.testing.assert_allclose(run.speedups()[0], 1.0)
    assert run.verify_ratio[0] == 1.0 and run.tokens_per_pass[0] == 1.0
    assert np.isnan(run.c[0]) and np.isnan(run.acceptance[0])
    assert (run.c[1:] > 0).all() and (run.verify_ratio[1:] > 0).all()
    assert (run.tokens_per_pass[1:] >= 1).all() and (run.tokens_per_pass[1:] <= run.ks[1:] + 1).all()
    assert (run.outside_per_step >= 0).all()
    assert (run.target_seconds <= run.seconds).all() and (run.draft_seconds[0] == 0).all()
    assert run.predicted(0.5).shape == (2,)


def test_a_draft_identical_to_the_target_is_always_accepted(pair):
    target, _ = pair
    run = wallclock_experiment(target, target, [[0, 1, 2]], n_new=16, ks=(3,), reps=1)
    assert run.acceptance[1] == pytest.approx(1.0)
    assert run.tokens_per_pass[1] == pytest.approx(16 / 4)  # k + 1 = 4 tokens per pass


def test_position_alphas_agree_with_the_acceptance_rate_of_the_rows(pair):
    target, draft = pair
    ids = np.arange(30) % CFG.vocab_size
    betas = position_alphas(target, {"d": draft, "same": target}, ids, (0.0, 0.7, 1.0))
    for t in (0.7, 1.0):
        q, p = softmax_rows(target.logits(ids[:16]), t), softmax_rows(draft.logits(ids[:16]), t)
        np.testing.assert_allclose(betas["d", t][:16], acceptance_rate(p, q), atol=1e-9)
        np.testing.assert_allclose(betas["same", t], 1.0)
    greedy = betas["d", 0.0]
    assert set(np.unique(greedy)) <= {0.0, 1.0}


def test_position_alphas_take_a_draft_without_logits():
    target, draft = markov_pair(vocab_size=5, draft_noise=0.4, seed=0)
    ids = np.array([0, 1, 2, 3, 4, 0])
    beta = position_alphas(target, {"markov": draft}, ids)["markov", 1.0]
    np.testing.assert_allclose(beta, acceptance_rate(draft(ids), target(ids)), atol=1e-12)


def test_block_passes_differ_only_by_rounding(pair):
    target, _ = pair
    d = block_pass_differences(target, np.arange(40) % CFG.vocab_size, block=5)
    assert 0.0 <= d["share_differing"] <= 1.0
    assert d["max_abs_difference"] < 1e-4
    assert d["share_argmax_differing"] == 0.0


def test_greedy_speculative_text_equals_greedy_text_on_a_tiny_pair(pair):
    target, draft = pair
    assert greedy_divergence(target, draft, [[0, 1], [2, 3, 4]], n_new=20, k=3) == [-1, -1]


@pytest.mark.parametrize("call, name", [
    (lambda t, d: wallclock_experiment(t, d, [], 5), "prompts"),
    (lambda t, d: wallclock_experiment(t, d, [[0]], 0), "n_new"),
    (lambda t, d: wallclock_experiment(t, d, [[0]], 5, ks=(0,)), "ks"),
    (lambda t, d: wallclock_experiment("model", d, [[0]], 5), "target"),
    (lambda t, d: position_alphas(t, d, [0, 1]), "drafts"),
    (lambda t, d: position_alphas(t, {"x": d}, [0, 99]), "ids"),
    (lambda t, d: position_alphas(t, {"x": d}, [0, 1], (-1.0,)), "temperatures"),
    (lambda t, d: block_pass_differences(t, [0, 1], block=0), "block"),
    (lambda t, d: greedy_divergence(t, d, [[0]], 5, k=0), "k"),
    (lambda t, d: speedup_with_fixed(0.5, 2, -0.1, 1.0, 10), "c"),
    (lambda t, d: speedup_with_fixed(0.5, 2, 0.0, 0.0, 10), "verify_ratio"),
    (lambda t, d: speedup_with_fixed(0.5, 2, 0.1, 1.0, 0), "n"),
    (lambda t, d: speedup_with_fixed(0.5, 2, 0.1, 1.0, 10, fixed_spec=-1), "fixed_spec"),
])
def test_bad_input_names_the_argument(pair, call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call(*pair)


def test_last_level_cache_reads_the_largest_sysfs_cache(tmp_path):
    from speclib.book.wallclock import last_level_cache_bytes

    for name, size in (("index0", "48K"), ("index2", "2048K"), ("index3", "105M")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "size").write_text(size + "\n")
    assert last_level_cache_bytes(str(tmp_path)) == 105 * 2**20
    assert last_level_cache_bytes(str(tmp_path / "missing")) is None


def _synthetic_run():
    """A WallClock with known costs: t1 = 1 ms, c = 0.1, r(3) = 1.5, fixed passes 10 and 20 t1."""
    from speclib.book.wallclock import WallClock

    ks, shape = np.array([0, 2]), (2, 1, 1)
    full = lambda a, b: np.array([a, b], dtype=float).reshape(shape)  # noqa: E731
    return WallClock(ks=ks, n_new=100, seconds=full(0.12, 0.08), target_seconds=full(0.11, 0.05),
                     draft_seconds=full(0.0, 0.006), target_passes=full(100, 40), draft_passes=full(0, 80),
                     steps=full(100, 40), accepted=full(0, 60), verified=full(0, 70),
                     target_pass=full(1e-3, 1.5e-3), draft_pass=full(np.nan, 1e-4),
                     fixed_seconds=full(0.010, 0.020))


def test_the_cost_model_counts_fixed_passes_and_outside_time():
    run = _synthetic_run()
    assert run.t1 == pytest.approx(1e-3)
    assert run.c[1] == pytest.approx(0.1) and run.verify_ratio[1] == pytest.approx(1.5)
    np.testing.assert_allclose(run.fixed, [10, 20])
    alpha, k = 0.6, 2
    steps = 100 / ((1 - alpha ** 3) / (1 - alpha))
    assert run.predicted(alpha)[0] == pytest.approx((10 + 100) / (20 + steps * (k * 0.1 + 1.5)))
    assert run.predicted(alpha, with_fixed=False)[0] == pytest.approx(predicted_speedup(alpha, k, 0.1, 1.5))
    # outside time: (0.12 - 0.11) / 100 steps = 0.01 t1 for plain, (0.08 - 0.056) / 40 = 0.6 t1 per step
    np.testing.assert_allclose(run.outside_per_step, [0.01 / 100 / 1e-3, 0.024 / 40 / 1e-3])
    o0, o1 = run.outside_per_step
    assert run.predicted(alpha, with_outside=True)[0] == pytest.approx(
        (10 + 100 * (1 + o0)) / (20 + steps * (k * 0.1 + 1.5 + o1)))


def test_tables_and_best_setting_read_the_measurements():
    run = _synthetic_run()
    speed = run.speed_table().splitlines()
    assert speed[0].startswith("| k | ms per token | speed-up")
    assert speed[2].startswith("| plain | 1.20 | 1.00 |") and speed[3].startswith("| 2 | 0.80 | 1.50 |")
    costs = run.cost_table().splitlines()
    assert costs[3] == "| 2 | 0.100 | 1.50 | 20.0 | 0.600 |"
    assert run.best() == (2, 1.5, 1.5, 1.5)


def test_check_speedup_with_fixed_accepts_the_model_and_explains_mistakes():
    from speclib.book import checks

    def right(alpha, k, c, r, n, f0, f1):
        e = sum(alpha ** j for j in range(k + 1))
        return (f0 + n) / (f1 + n / e * (k * c + r))

    checks.check_speedup_with_fixed(right)
    with pytest.raises(checks.ExerciseError, match="leaves the fixed passes out"):
        checks.check_speedup_with_fixed(lambda a, k, c, r, n, f0, f1: predicted_speedup(a, k, c, r))
    with pytest.raises(checks.ExerciseError, match="fewer than n steps"):
        checks.check_speedup_with_fixed(lambda a, k, c, r, n, f0, f1: (f0 + n) / (f1 + n * (k * c + r)))
    with pytest.raises(checks.ExerciseError, match="off"):
        checks.check_speedup_with_fixed(lambda a, k, c, r, n, f0, f1: right(a, k, c, r, n, f1, f0))


def test_needed_alpha_is_the_k1_closed_form_and_the_root_of_the_cost_model():
    from speclib.book.wallclock import needed_alpha
    from speclib.core.theory import expected_tokens_per_pass

    for c, r in ((0.1, 1.2), (0.05, 1.0), (0.2, 1.1)):
        assert abs(needed_alpha(1, c, r, 1.5) - max(0.0, 1.5 * (c + r) - 1)) < 1e-9
    a = needed_alpha(5, 0.1, 1.6, 1.5)
    assert abs(expected_tokens_per_pass(a, 5) / (0.5 + 1.6) - 1.5) < 1e-9
    assert math.isnan(needed_alpha(4, 0.3, 3.0, 1.5)) and needed_alpha(2, 0.0, 0.5, 1.5) == 0.0


def test_goal_sentence_is_consistent_in_every_case():
    from speclib.book.wallclock import goal_sentence

    met = goal_sentence(1.6, 0.8, 4, 0.1, 1.3)
    assert "is met" in met and "missed" not in met and "needs" not in met
    missed = goal_sentence(1.1, 0.7, 4, 0.12, 1.8)
    assert "is missed" in missed and "at most 1.37" in missed and "acceptance rate of 0." in missed
    # a verification pass that would have to cost less than one pass is called impossible
    hopeless = goal_sentence(0.6, 0.3, 2, 0.3, 2.5)
    assert "cheaper than a single-token pass" in hopeless and "no acceptance rate reaches it" in hopeless
    with pytest.raises(ValueError, match="alpha"):
        goal_sentence(1.0, 1.5, 4, 0.1, 1.3)


def test_a_draft_timed_under_another_name_is_refused():
    """A proposer that records its passes under another name than "draft" would give c = 0."""
    from speclib.lm.drafters import ModelDrafter
    from speclib.lm.transformer import TransformerConfig, random_transformer

    cfg = TransformerConfig(vocab_size=7, block_size=16, d_model=8, n_layers=1, n_heads=2)
    target, draft = random_transformer(cfg, seed=0), random_transformer(cfg, seed=1)
    with pytest.raises(ValueError, match="draft: made .* passes but timed none under 'draft'"):
        wallclock_experiment(target, ModelDrafter(draft, target, name="pair"), [np.arange(5)], n_new=6, ks=[1],
                             reps=1)
    run = wallclock_experiment(target, ModelDrafter(draft, target), [np.arange(5)], n_new=6, ks=[1], reps=1)
    assert run.c[1] > 0


# --- the cost model beside the record (issue 38, item 2) ----------------------------------------

def _record(quantities):
    from speclib.book.record import Quantity, Record

    return Record({k: Quantity(k, *v) if isinstance(v, tuple) else Quantity(k, v) for k, v in quantities.items()})


def test_cost_model_rows_price_every_setting_with_and_without_the_loops_time():
    from speclib.book.wallclock import cost_model_rows
    from speclib.core.cost import speedup_with_overhead

    q = {"alpha/pair/k4/T1/loop": 0.7, "c/pair/loop/numpy/cpu": 0.1, "outside_plain/pair/T1/numpy/cpu": 0.05,
         "alpha/medusa/k4/T1/loop": 0.4, "c/medusa/loop/numpy/cpu": 0.2, "outside_plain/medusa/T1/numpy/cpu": 0.05,
         "r5/medusa/loop/numpy/cpu": 1.3}
    for k in (2, 6):
        q |= {f"r{k + 1}/pair/loop/numpy/cpu": 1.0 + 0.1 * k, f"outside/pair/k{k}/T1/numpy/cpu": 0.3,
              f"speedup/pair/k{k}/T1/numpy/cpu": (1.1, 1.0, 1.2), f"outside/medusa/k{k}/T1/numpy/cpu": 0.25,
              f"speedup/medusa/k{k}/T1/numpy/cpu": (0.9, 0.8, 1.0)}
    rows = cost_model_rows(_record(q), ["pair", "medusa"], [2, 6])
    assert [(r["drafter"], r["k"]) for r in rows] == [("pair", 2), ("pair", 6), ("medusa", 6)]  # medusa k = 2: no r3
    pair6, medusa6 = rows[1], rows[2]
    assert pair6["predicted_with"] == pytest.approx(speedup_with_overhead(0.7, 6, 0.1, 1.6, 0.3, 0.05))
    assert pair6["predicted"] > pair6["predicted_with"]  # the loop's own time lowers the prediction
    # Medusa past its 4 heads: one draft pass, four drafts, verified over five tokens
    assert medusa6["r"] == 1.3 and medusa6["drafts"] == 4 and medusa6["draft_passes"] == 1
    assert medusa6["predicted"] == pytest.approx(speedup_with_overhead(0.4, 6, 0.2, 1.3, drafts=4, draft_passes=1))
    assert (medusa6["measured"], medusa6["low"], medusa6["high"]) == (0.9, 0.8, 1.0)


def test_the_gap_sentence_states_both_directions_and_names_every_sign_error():
    from speclib.book.wallclock import gap_sentence

    rows = [dict(drafter="pair", k=k, predicted=p, measured=m)
            for k, p, m in ((1, 1.30, 1.00), (2, 1.20, 0.90), (3, 0.95, 1.05), (4, 1.10, 1.20), (5, 1.40, 0.80))]
    text = gap_sentence(rows)
    assert "more than was measured in 3 (by 30% to 75%)" in text and "less in 2 (by 8% to 10%)" in text
    assert "slow-down at pair (k = 2 and 5)" in text and "speed-up at pair (k = 3)" in text
    # an average of the relative errors would hide the sign errors; the sentence does not average
    assert "average" not in text and "within" not in text
    right = [dict(drafter="eagle", k=1, predicted=1.2, measured=1.1)]
    assert "right in every one" in gap_sentence(right)
    with pytest.raises(ValueError, match="rows"):
        gap_sentence([])


def test_what_a_table_of_pass_costs_shows_is_said_from_its_numbers():
    from speclib.book.wallclock import change_phrase, pass_cost_sentences

    # chapter 1's old table: a fixed term three times the one-token pass, r(2) near 3
    old = pass_cost_sentences([1, 2, 4, 8, 16], [1.0, 2.96, 3.16, 3.28, 4.78], 6.0, 16.0, 0.67)
    assert "not the time to read the weights" in old["fixed"]
    assert "more at $n =$ 2" in old["separate"] and old["two"].startswith("No measured pass")
    read = pass_cost_sentences([1, 2, 4], [1.0, 1.05, 1.1], 10.0, 10.5, 0.2)
    assert "can be read as the time to read the weights" in read["fixed"]
    assert read["separate"].startswith("Every") and read["two"].startswith("Every")
    assert change_phrase(0.2, 0.1).startswith("falls") and change_phrase(0.1, 0.2).startswith("rises")
    assert change_phrase(0.1, 0.105).startswith("stays")

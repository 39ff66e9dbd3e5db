"""Speculation under batching: the measurement harness and the batch cost model."""

import numpy as np
import pytest

from speclib.book import serving
from speclib.book.serving import (PassGrid, ServingRun, batch_speedup, batched_pass_times, k_for_batch,
                                  ragged_waste, serve, serving_grid, speedups)
from speclib.core.theory import speedup_in_passes
from speclib.core.variants import batch_generate
from speclib.lm.transformer import TransformerConfig, random_transformer

CFG = TransformerConfig(vocab_size=97, block_size=32, d_model=16, n_layers=1, n_heads=2)


def _pair():
    return random_transformer(CFG, seed=0), random_transformer(CFG, seed=0, scale=0.45)


def test_serve_counts_what_the_batch_did():
    target, draft = _pair()
    prompts = [[1, 2], [3], [4, 5, 6]]
    run = serve(target, draft, prompts, 12, k=3, seed=7)
    # The same batch, untimed, through the driver: same passes, same acceptance.
    _, st = batch_generate(target, draft, prompts, 12, 3, rng=[7, 8, 9])
    assert run.target_passes == st.target_passes
    assert run.acceptance == st.acceptance_rate and run.waste == st.waste
    assert run.throughput == pytest.approx(3 * 12 / run.seconds)
    assert run.time_per_token == pytest.approx(run.seconds / 12)
    assert run.tokens_per_pass == pytest.approx(12 / st.target_passes)
    assert 0.0 <= run.rejected_share <= 1.0
    plain = serve(target, draft, prompts, 12, k=0)
    assert plain.target_passes == 12 and np.isnan(plain.acceptance) and plain.waste == 0.0


def test_grid_keeps_every_run_and_bigger_batches_read_more_tokens():
    target, draft = _pair()
    runs = serving_grid(target, draft, [1, 4], [0, 2], n_new=6, prompt_length=8, repeats=3)
    assert [(r.batch_size, r.k, r.repeat) for r in runs] == [
        (b, k, i) for b in (1, 4) for k in (0, 2) for i in range(3)]
    tokens = {(r.batch_size, r.k): r.pass_tokens for r in runs}
    assert tokens[(4, 0)] == 4 * tokens[(1, 0)] == 4 * (8 + 5)  # prompt once, then one token a pass
    assert set(speedups(runs)) == {(1, 2), (4, 2)}
    typical = serving.typical_runs(runs)
    assert len(typical) == 4 and all(sorted(r.seconds for r in runs if (r.batch_size, r.k) == (t.batch_size, t.k))[1]
                                     == t.seconds for t in typical)


def test_speed_ups_pair_each_run_with_the_plain_run_of_its_repeat():
    # repeat 1 was slow for both settings alike: paired, its ratio is the same as the others'
    def run(k, seconds, repeat):
        return ServingRun(2, k, 10, seconds, 10, 20, 0.7, 0.0, 0.0, repeat=repeat)
    runs = [run(0, 1.0, 0), run(3, 0.5, 0), run(0, 3.0, 1), run(3, 1.5, 1), run(0, 1.0, 2), run(3, 0.5, 2)]
    assert serving.speedup_intervals(runs) == {(2, 3): (2.0, 2.0, 2.0)}
    # unpaired medians (1.0 against 0.5... or 3.0 against 0.5) would not say 2.0 for every run
    shuffled = [run(0, 1.0, 0), run(3, 1.5, 0), run(0, 3.0, 1), run(3, 0.5, 1), run(0, 1.0, 2), run(3, 0.5, 2)]
    assert serving.speedup_intervals(shuffled)[(2, 3)] == (2.0, 1 / 1.5, 6.0)


def test_batch_cost_model_reduces_to_the_books_formula_at_batch_one():
    # One sequence, a verification pass costing what a single-token pass costs: speedup_in_passes.
    grid = PassGrid(np.array([1]), np.array([1, 2, 3, 4, 5]), np.full((1, 5), 2.0))
    for alpha, k, c in [(0.7, 3, 0.1), (0.9, 4, 0.05), (0.5, 1, 0.0)]:
        assert batch_speedup(alpha, k, 1, grid, draft_seconds=2.0 * c) == pytest.approx(
            speedup_in_passes(alpha, k, c))


def test_the_policy_turns_speculation_down_as_passes_stop_being_flat():
    # B = 1: a pass costs the same for any number of tokens; B = 64: it costs by the token.
    ns = np.arange(1, 8)
    grid = PassGrid(np.array([1, 8, 64]), ns,
                    np.vstack([np.ones(7), 1 + 0.25 * (ns - 1), ns.astype(float)]))
    ks = [1, 2, 4, 6]
    chosen = [k_for_batch(0.8, b, grid, 0.01, ks) for b in (1, 8, 64)]
    assert chosen[0] == 6 and 0 < chosen[1] < 6 and chosen[2] == 0
    # With a batched draft the draft's cost does not grow with B.
    draft = PassGrid(np.array([1, 8, 64]), np.array([1]), np.full((3, 1), 0.01))
    assert batch_speedup(0.8, 4, 64, grid, 0.01, batched_draft=True, draft_times=draft) > \
        batch_speedup(0.8, 4, 64, grid, 0.01)


def test_ragged_waste_is_what_padded_batches_waste():
    assert ragged_waste(0.7, 4, 1) == 0.0
    assert ragged_waste(0.7, 4, 2) < ragged_waste(0.7, 4, 8) < ragged_waste(0.7, 4, 32) < 1
    assert ragged_waste(1.0, 4, 16) == 0.0


def test_pass_grid_times_every_cell_and_reads_back():
    model, _ = _pair()
    grid = batched_pass_times(model, [1, 2, 4], [1, 3], prefix_length=4, repeats=2)
    assert grid.seconds.shape == (3, 2) and (grid.seconds > 0).all()
    assert grid.ratio(2, 3) == grid.at(2, 3) / grid.at(2, 1)
    with pytest.raises(ValueError, match="batch_size"):
        grid.at(3, 1)
    with pytest.raises(ValueError, match="n_tokens"):
        grid.at(1, 2)


def test_bad_arguments_are_named():
    target, draft = _pair()
    with pytest.raises(TypeError, match="target"):
        serve("model", draft, [[1]], 3, 1)
    with pytest.raises(ValueError, match="prefix_length"):
        batched_pass_times(target, [1], [30], prefix_length=4)
    with pytest.raises(ValueError, match="draft_times"):
        batch_speedup(0.5, 2, 1, PassGrid(np.array([1]), np.array([1, 3]), np.ones((1, 2))), 0.1,
                      batched_draft=True)
    with pytest.raises(TypeError, match="runs"):
        serving.speedups([1, 2])
    with pytest.raises(ValueError, match="ks"):
        k_for_batch(0.5, 1, PassGrid(np.array([1]), np.array([1]), np.ones((1, 1))), 0.1, ks=[])
    assert isinstance(ServingRun(1, 0, 1, 1.0, 1, 1, 0.0, 0.0, 0.0).throughput, float)


# --- engines: a greedy draft verified against its one-hot row ----------------------------------

from speclib.book.engines import one_hot_acceptance  # noqa: E402
from speclib.core.decoding import speculative_generate  # noqa: E402


def test_one_hot_acceptance_is_what_the_loop_accepts_with_a_greedy_draft():
    # A draft at temperature 0 proposes its argmax with a one-hot row.  At every position the
    # loop drafts, it must accept with probability q(argmax p) (here max q: the draft is the
    # target's own argmax), not with sum min(p, q), which is 1 for these two.
    cfg = TransformerConfig(vocab_size=8, block_size=64, d_model=16, n_layers=1, n_heads=2)
    target = random_transformer(cfg, seed=2)
    greedy = target.with_temperature(0.0)
    prompt = np.array([1, 2, 3])
    accepted = judged = 0
    expected = []
    for seed in range(20):
        tokens, stats = speculative_generate(target, greedy, prompt, 60, k=1, rng=seed)
        text = np.concatenate([prompt, tokens])
        starts = prompt.size + np.concatenate([[0], np.cumsum(stats.tokens_per_step)[:-1]])
        q = target(text)
        expected.extend(q[starts - 1].max(axis=1)[: stats.draft_verified])
        accepted, judged = accepted + stats.accepted, judged + stats.draft_verified
        rates = one_hot_acceptance(target, target, text)
        assert rates["sampled"] == pytest.approx(1.0)
        assert rates["one_hot"] == rates["identical_one_hot"] == pytest.approx(q.max(axis=1).mean())
    expected = np.array(expected)
    sigma = np.sqrt((expected * (1 - expected)).sum()) / judged
    assert abs(accepted / judged - expected.mean()) < 4 * sigma
    assert expected.mean() < 0.9  # far from what the book's rule accepts here (1.0)
    # Negative control: the target sampling its own drafts accepts everything.
    _, same = speculative_generate(target, target, prompt, 60, k=1, rng=0)
    assert same.acceptance_rate == 1.0


def test_one_hot_acceptance_refuses_a_foreign_pair():
    a = random_transformer(CFG, seed=0)
    b = random_transformer(TransformerConfig(vocab_size=5, block_size=8, d_model=8, n_layers=1, n_heads=2))
    with pytest.raises(ValueError, match="draft"):
        one_hot_acceptance(a, b, [1, 2])
    with pytest.raises(TypeError, match="target"):
        one_hot_acceptance("a", a, [1])

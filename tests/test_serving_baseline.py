"""The plain batched baseline of chapter 15: a batch of B requests never costs more than B single
requests, counted deterministically (weight-matrix reads and row products, not wall time).

Chapter 15 once measured plain decoding at 516 tokens per second for one request and 356 for a
batch of two: batching two requests was slower than running them one after the other.  A batch
of B plain requests reads each weight matrix once per pass for all B tokens, so per generated
token it must read the weights at most as often as one request does, and do the same arithmetic.
The product plan (speclib.lm.products) must then never choose, for n rows, a strategy measured
slower than n one-row products.
"""

import numpy as np
import pytest

from speclib.book import serving
from speclib.core.variants import batch_generate
from speclib.lm import products
from speclib.lm.batched import batched_extend
from speclib.lm.transformer import Transformer, TransformerConfig, random_transformer


def counted_plain_run(model, prompts, n_new, monkeypatch):
    """Plain batched decoding of ``prompts``; returns (generated tokens, target passes,
    weight-matrix reads, row-products) of the target."""
    counts = {"reads": 0, "rows": 0}
    original = Transformer._mm

    def counting(self, x, w):
        if self is model:
            # 'rows' reads the matrix once per row; every other strategy once per call
            plan = self._strategy
            counts["reads"] += x.shape[0] if plan == "rows" else 1
            counts["rows"] += x.shape[0]
        return original(self, x, w)

    monkeypatch.setattr(Transformer, "_mm", counting)
    draft = random_transformer(model.config, seed=9)
    out, stats = batch_generate(model, draft, prompts, n_new, 0, rng=list(range(len(prompts))),
                                target_pass=batched_extend)
    monkeypatch.setattr(Transformer, "_mm", original)
    generated = sum(o.size for o in out)  # the new tokens of every request
    return generated, stats.target_passes, counts["reads"], counts["rows"]


@pytest.fixture()
def model():
    cfg = TransformerConfig(vocab_size=11, block_size=32, d_model=16, n_layers=2, n_heads=2)
    return random_transformer(cfg, seed=3)


def test_a_plain_batch_of_two_costs_at_most_two_single_requests(model, monkeypatch):
    prompts = [np.array([1, 2, 3]), np.array([4, 5, 6])]
    one = counted_plain_run(model, prompts[:1], 8, monkeypatch)
    two = counted_plain_run(model, prompts, 8, monkeypatch)
    gen1, passes1, reads1, rows1 = one
    gen2, passes2, reads2, rows2 = two
    assert (gen1, gen2) == (8, 16)
    assert passes2 == passes1  # one pass per step serves both requests
    # per step, the batch of two costs at most twice one request; per token, at most one's
    assert reads2 / passes2 <= 2 * reads1 / passes1
    assert reads2 / gen2 <= reads1 / gen1
    assert rows2 / gen2 == rows1 / gen1  # the same arithmetic per generated token
    # and here it reads each weight matrix once per pass whatever the batch size
    assert reads2 == reads1


def test_the_count_catches_a_batch_that_falls_back_to_separate_passes(model, monkeypatch):
    """Negative control: requests forced out of the stacked pass read the weights once each."""
    from speclib.lm import batched

    monkeypatch.setattr(batched, "_joins_batch", lambda cache, n: False)
    prompts = [np.array([1, 2, 3]), np.array([4, 5, 6])]
    gen1, passes1, reads1, _ = counted_plain_run(model, prompts[:1], 8, monkeypatch)
    gen2, passes2, reads2, _ = counted_plain_run(model, prompts, 8, monkeypatch)
    assert reads2 == 2 * reads1  # no saving: the check above would fail on such a batch


def test_a_plan_never_takes_a_strategy_slower_than_one_row_at_a_time():
    names = ("full", "blocks", "rows", "transposed")
    counts = tuple(range(1, 9))
    rng = np.random.default_rng(0)
    for _ in range(200):
        one = rng.uniform(1.0, 2.0)
        seconds = rng.uniform(0.5, 12.0, size=(len(counts), len(names))) * np.array(counts)[:, None] * one / 2
        seconds[0] = rng.uniform(one, 1.5 * one, size=len(names))
        seconds[0, 0] = one  # the fastest one-row product
        plan = products.choose_plan(seconds, names, counts)
        for i, n in enumerate(counts):
            chosen = seconds[i, names.index(plan[i])]
            assert chosen <= n * one + 1e-12 or plan[i] == "rows", (n, plan[i], chosen, n * one)


def test_the_bound_decides_a_noisy_table():
    """A general product measured at 3x one row for two rows, 'rows' measured (noisily) at 3.2x:
    without the bound the plan would take the general product, and a batch of two would cost
    more than two single requests."""
    names = ("full", "rows")
    seconds = np.array([[1.0, 1.0], [3.0, 3.2]])
    assert products.choose_plan(seconds, names, (1, 2)) == ("full", "rows")
    with pytest.raises(ValueError, match="seconds"):
        products.choose_plan(np.ones((3, 2)), names, (1, 2))


def test_the_served_baseline_gives_each_request_its_tokens(model):
    draft = random_transformer(model.config, seed=9)
    run = serving.serve(model, draft, [np.array([1, 2]), np.array([3, 4])], 6, k=0)
    assert run.target_passes == 6 and run.batch_size == 2


# --- the sentences chapter 15 generates from its numbers ------------------------------------

def test_the_batching_sentence_follows_the_numbers():
    up = serving.batching_sentence({1: (500.0, 2.0), 4: (900.0, 4.0), 32: (1300.0, 25.0)})
    assert "rose from 500" in up and "to 1300" in up and "not at every step" not in up
    dip = serving.batching_sentence({1: (516.0, 1.9), 2: (356.0, 5.6), 32: (1279.0, 25.0)})
    assert "not at every step" in dip and "*B* = 2 it was below *B* = 1's" in dip
    down = serving.batching_sentence({1: (900.0, 1.0), 32: (600.0, 50.0)})
    assert "fell from 900" in down and "rose" not in down.split("while")[0]
    with pytest.raises(ValueError, match="plain"):
        serving.batching_sentence({1: (1.0, 1.0)})


@pytest.mark.parametrize("seed", range(30))
def test_the_speedup_sentence_never_contradicts_its_intervals(seed):
    rng = np.random.default_rng(seed)
    bs, ks = [1, 2, 4, 8, 16, 32], [1, 3, 6]
    measured = {}
    for b in bs:
        for k in ks:
            m = float(rng.uniform(0.5, 1.6))
            measured[(b, k)] = (m, m - float(rng.uniform(0, 0.3)), m + float(rng.uniform(0, 0.3)))
    text = serving.speedup_sentence(measured)
    first, last = text.split("At *B* = 32")
    for part, b in ((first, 1), (last, 32)):
        k0 = max(ks, key=lambda k: measured[(b, k)][0])
        m, lo, hi = measured[(b, k0)]
        assert f"*k* = {k0}" in part and f"{m:.2f}x" in part
        close = [k for k in ks if k != k0 and measured[(b, k)][2] >= lo]
        assert ("leads alone" in part) == (not close)  # a single best k only when the intervals separate
        for k in close:
            assert f"*k* = {k}" in part
        assert ("faster beyond" in part) == (lo > 1) and ("slower beyond" in part) == (hi < 1)

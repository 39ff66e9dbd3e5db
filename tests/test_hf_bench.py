"""speclib.book.hf_bench: chapter 14's harness for greedy equality, the sampling law and speed.

Models are tiny random GPT-2s built from configs (nothing is downloaded), as in tests/test_hf.py.
The statistical test draws N_SAMPLES two-token continuations with fixed seeds and rejects
"follows the target's exact law" when Pearson's p-value is below ALPHA_LEVEL; the draft alone,
a model of another law, must be rejected by the same test (negative control).
"""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from speclib.book import hf_bench  # noqa: E402
from speclib.core.decoding import GenerationStats, autoregressive_generate, speculative_generate  # noqa: E402
from speclib.lm import hf  # noqa: E402

N_SAMPLES = 400
ALPHA_LEVEL = 1e-3
PROMPT = np.array([1, 2])

torch.set_num_threads(1)


def tiny_gpt2(seed, vocab_size=8, n_positions=24, init=0.2):
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=vocab_size, n_positions=n_positions, n_embd=16, n_layer=2,
                                     n_head=2, initializer_range=init, bos_token_id=None, eos_token_id=None)
    return transformers.GPT2LMHeadModel(config).eval()


def noisy_copy(model, noise, seed=1):
    import copy

    out = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in out.parameters():
            param.add_(noise * torch.randn(param.shape, generator=generator))
    return out


@pytest.fixture(scope="module")
def pair():
    net = tiny_gpt2(0)
    return hf.pair(net, noisy_copy(net, 0.1))


@pytest.fixture(scope="module")
def far_draft(pair):
    """A draft whose law is far from the target's: the negative control of the sampling test."""
    return hf.pair(pair[0].hf_model, tiny_gpt2(7, init=1.0))[1]


# --------------------------------------------------------------------------- greedy

def test_both_decoders_write_the_targets_greedy_text(pair):
    target, draft = pair
    prompts = [np.array([1, 2, 3]), np.array([4, 0]), np.array([7])]
    assert hf_bench.greedy_agreement(target, draft, prompts, 8, 3) == {"speclib": 3, "transformers": 3}


def test_greedy_agreement_counts_a_decoder_that_writes_another_text(pair, monkeypatch):
    import speclib.core.decoding as decoding

    real = decoding.speculative_generate

    def off_by_one(*args, **kwargs):
        tokens, stats = real(*args, **kwargs)
        return (tokens + 1) % 8, stats

    monkeypatch.setattr(decoding, "speculative_generate", off_by_one)
    same = hf_bench.greedy_agreement(*pair, [np.array([1, 2, 3]), np.array([5])], 6, 2)
    assert same == {"speclib": 0, "transformers": 2}


def test_greedy_agreement_refuses_models_that_are_not_adapters(pair):
    from speclib.lm.models import markov_pair

    numpy_target, _ = markov_pair(vocab_size=8, seed=0)
    with pytest.raises(TypeError, match="target: expected a speclib.lm.hf.HFModel"):
        hf_bench.greedy_agreement(numpy_target, pair[1], [[1]], 4, 2)
    with pytest.raises(ValueError, match=r"prompts\[1\]: must contain at least one token"):
        hf_bench.greedy_agreement(*pair, [[1], []], 4, 2)
    with pytest.raises(ValueError, match="k: must be >= 1"):
        hf_bench.greedy_agreement(*pair, [[1]], 4, 0)


# --------------------------------------------------------------------------- the law

def test_pooled_cells_keep_likely_pairs_and_merge_the_rest_per_first_token():
    law = np.array([[0.5, 0.3], [0.15, 0.05]])
    counts = np.array([[9, 7], [3, 1]])  # 20 draws: expected 10, 6, 3, 1
    cells, probs = hf_bench.pooled_pair_cells(counts, law)
    np.testing.assert_array_equal(cells, [9, 7, 0, 4])  # (0, 0), (0, 1), then row 0's rest, row 1's rest
    np.testing.assert_allclose(probs, [0.5, 0.3, 0.0, 0.2])
    cells, probs = hf_bench.pooled_pair_cells(counts, law, pool_below=0.0)
    np.testing.assert_array_equal(cells, [9, 7, 3, 1, 0, 0])
    with pytest.raises(ValueError, match="law: expected the shape of counts"):
        hf_bench.pooled_pair_cells(counts, law[:1])
    with pytest.raises(ValueError, match="law: expected non-negative probabilities summing to 1"):
        hf_bench.pooled_pair_cells(counts, law / 2)
    with pytest.raises(ValueError, match="counts: expected non-negative whole numbers"):
        hf_bench.pooled_pair_cells(counts - 5, law)


def test_first_two_counts_tallies_each_pair_and_refuses_other_lengths():
    draws = [(0, 1), (0, 1), (2, 0)]
    counts = hf_bench.first_two_counts(lambda i: draws[i], 3, 3)
    assert counts[0, 1] == 2 and counts[2, 0] == 1 and counts.sum() == 3
    with pytest.raises(ValueError, match=r"sample\(0\): expected the first two tokens, got 3"):
        hf_bench.first_two_counts(lambda i: [0, 1, 2], 1, 3)
    with pytest.raises(ValueError, match=r"sample\(0\): token 5"):
        hf_bench.first_two_counts(lambda i: [0, 5], 1, 3)


def test_speclib_and_the_library_follow_the_targets_law_and_the_draft_alone_does_not(pair, far_draft):
    target, draft = pair
    law = hf.first_tokens_law(target, PROMPT)
    rng = np.random.default_rng(0)
    runs = {
        "speclib": lambda i: speculative_generate(target, draft, PROMPT, 2, k=1, rng=rng)[0],
        "transformers": lambda i: hf.library_generate(target, draft, PROMPT, 2, k=1, seed=i)[0],
    }
    for name, run in runs.items():
        result = hf_bench.first_two_test(run, law, N_SAMPLES)
        assert result.pvalue > ALPHA_LEVEL, f"{name}: {result}"
        assert result.dof >= 3  # the pooling leaves cells to test
    control = hf_bench.first_two_test(lambda i: autoregressive_generate(far_draft, PROMPT, 2, rng=rng)[0],
                                      law, N_SAMPLES)
    assert control.pvalue < ALPHA_LEVEL, control


# --------------------------------------------------------------------------- speed

class CountingModel:
    """A model whose cache counts the passes it is asked for."""

    def __init__(self, model):
        self.model, self.vocab_size, self.extends = model, model.vocab_size, []

    def __call__(self, tokens):
        return self.model(tokens)

    def cache(self):
        inner, extends = self.model.cache(), self.extends

        class Cache:
            def __len__(self):
                return len(inner)

            @property
            def tokens(self):
                return inner.tokens

            def extend(self, tokens):
                extends.append(len(tokens))
                return inner.extend(tokens)

            def rollback(self, length):
                inner.rollback(length)

        return Cache()


def test_pass_ms_times_reps_passes_over_the_tokens_after_the_prefix(pair):
    model = CountingModel(pair[0])
    ms = hf_bench.pass_ms(model, [1, 2, 3, 4], [5, 6, 7], reps=5)
    assert math.isfinite(ms) and ms > 0
    assert model.extends == [4] + [3] * 6  # the prefix once, one checked pass, five timed ones


def test_pass_costs_interleave_the_rounds_and_keep_each_passs_fastest(pair, monkeypatch):
    target, draft = pair
    calls, slow = [], iter([5.0, 1.0, 2.0, 9.0, 3.0, 1.5])  # round 1: target, draft; round 2; round 3
    monkeypatch.setattr(hf_bench, "pass_ms", lambda model, prefix, tokens, reps: (
        calls.append((model, len(tokens), reps)), next(slow))[1])
    costs = hf_bench.pass_costs({"target": (target, 1), "draft": (draft, 3)}, [1], [2, 3, 4], reps=7, rounds=3)
    assert costs == {"target": 2.0, "draft": 1.0}
    assert calls == [(target, 1, 7), (draft, 3, 7)] * 3
    with pytest.raises(ValueError, match=r"passes\['draft'\]: the number of tokens: must be <= 3"):
        hf_bench.pass_costs({"draft": (draft, 4)}, [1], [2, 3, 4])


def test_pass_ms_refuses_rows_that_are_not_distributions():
    from speclib.lm.models import markov_pair

    target, _ = markov_pair(vocab_size=4, seed=0)

    class Broken:
        vocab_size = 4

        def __call__(self, tokens):
            return np.full((len(tokens), 4), np.nan)

    with pytest.raises(ValueError, match="model"):
        hf_bench.pass_ms(Broken(), [0], [1])
    with pytest.raises(ValueError, match="reps: must be >= 1"):
        hf_bench.pass_ms(target, [0], [1], reps=0)


def fake_run(steps, log):
    """A setting whose every run makes the given steps (proposed, accepted, emitted, draft passes)."""
    def run(prompt, seed):
        log.append(seed)
        stats = GenerationStats()
        for step in steps:
            stats.record_step(*step)
        return np.zeros(stats.tokens_generated, dtype=np.int64), stats
    return run


def test_time_settings_sums_the_counts_of_every_run_and_gives_each_its_seed():
    log = []
    settings = {"plain": fake_run([(0, 0, 1, 0)] * 4, log),
                "spec": fake_run([(3, 3, 4, 3), (3, 0, 1, 3)], log)}  # 5 tokens, 2 passes, 3 of 4 verified kept
    speed = hf_bench.time_settings(settings, [[0], [1, 2], [3]], reps=2)
    assert log == [0, 0, 1, 1, 2, 2, 100, 100, 101, 101, 102, 102]
    plain, spec = speed["plain"], speed["spec"]
    assert (plain.tokens_per_pass, plain.draft_passes_per_token, plain.n_runs) == (1.0, 0.0, 6)
    assert math.isnan(plain.acceptance)
    assert (spec.tokens_per_pass, spec.acceptance, spec.draft_passes_per_token) == (2.5, 0.75, 1.2)
    assert spec.ms_per_token > 0
    table = hf_bench.speed_table(speed)
    assert "| plain |" in table and "| n/a |" in table and "| 2.50 (" in table and "| 0.75 | 1.20 |" in table
    with pytest.raises(ValueError, match=r"settings\['bad'\]: expected \(tokens, GenerationStats\)"):
        hf_bench.time_settings({"bad": lambda p, s: p}, [[0]])


def test_the_books_settings_run_on_a_tiny_pair(pair):
    settings = hf_bench.book_settings(*pair, 6, 3)
    assert list(settings) == ["speclib, target alone", "transformers, target alone", "speclib, k = 3",
                              "transformers, k = 3", "transformers, its defaults"]
    speed = hf_bench.time_settings(settings, [[1, 2, 3]], reps=1)
    for name in ("speclib, target alone", "transformers, target alone"):
        assert speed[name].tokens_per_pass == 1.0 and speed[name].draft_passes_per_token == 0.0
        assert math.isnan(speed[name].acceptance)
    for name in ("speclib, k = 3", "transformers, k = 3"):
        assert 1.0 <= speed[name].tokens_per_pass <= 4.0 and 0.0 <= speed[name].acceptance <= 1.0
        assert speed[name].draft_passes_per_token > 0

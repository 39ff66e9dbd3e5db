"""speclib.lm.hf: Hugging Face transformers models driven by speclib's loops.

Models are tiny random-init GPT-2s built from configs (nothing is downloaded) and the book's
numpy pair exported to GPT2LMHeadModel.  The statistical test draws N_SAMPLES two-token
continuations with a fixed seed and rejects "follows the target's exact law" when Pearson's
p-value is below ALPHA_LEVEL; a faulty verifier on the same models must be rejected by it.
Everything that needs PyTorch skips where it is absent (pip install -r requirements-hf.txt).
"""

import subprocess
import sys

import numpy as np
import pytest

from speclib._validate import SUM_TOLERANCE, as_distribution
from speclib.book import broken
from speclib.core.decoding import autoregressive_generate, speculative_generate
from speclib.core.exact import target_sequence_distribution, total_variation
from speclib.core.sampling import verify
from speclib.core.stats import chi_square_test, sequence_counts

try:
    import torch
    import transformers
    from speclib.lm import hf
except ImportError:  # the whole module but the first test is skipped below
    torch = transformers = hf = None

needs_hf = pytest.mark.skipif(hf is None, reason="needs PyTorch and transformers: pip install -r requirements-hf.txt")

N_SAMPLES = 500
ALPHA_LEVEL = 1e-3  # reject "the first two tokens follow the target" when the chi-square p-value is below this
PROMPT = [1, 2]
LOGITS_ATOL = 1e-4  # float32 logits of the numpy model and of GPT-2 (values of order 10) agree to this
CACHE_ATOL = 1e-5  # probabilities from the cache and from a fresh pass over the same tokens


def test_speclib_imports_without_torch_and_the_adapter_says_what_to_install():
    code = (
        "import sys\n"
        "sys.modules['torch'] = None\n"  # makes `import torch` fail, as where it is not installed
        "sys.modules['transformers'] = None\n"
        "import speclib, speclib.lm.transformer, speclib.core.decoding\n"
        "try:\n"
        "    import speclib.lm.hf\n"
        "except ImportError as exc:\n"
        "    print('ImportError:', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ImportError:" in out.stdout and "pip install -r requirements-hf.txt" in out.stdout


if hf is not None:
    torch.set_num_threads(1)  # tiny models: one thread is faster and steadier on a shared machine


def tiny_gpt2(seed, vocab_size=8, n_layer=2, n_positions=16, n_embd=16, init=0.2):
    """A random GPT-2; init 0.2 gives peaked rows (a top token of ~0.25 at V = 8), not near-uniform ones."""
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=vocab_size, n_positions=n_positions, n_embd=n_embd, n_layer=n_layer,
                                     n_head=2, initializer_range=init, bos_token_id=None, eos_token_id=None)
    return transformers.GPT2LMHeadModel(config).eval()


def noisy_copy(model, noise=0.1, seed=1):
    """A draft that agrees with the target often but not always: its weights plus Gaussian noise."""
    import copy

    draft = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in draft.parameters():
            param.add_(noise * torch.randn(param.shape, generator=generator))
    return draft


def tiny_pair(**kwargs):
    target = tiny_gpt2(0)
    return hf.pair(target, noisy_copy(target), **kwargs)


def char_tokenizer(chars):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({c: i for i, c in enumerate(chars)}, unk_token=chars[0]))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok)


# --------------------------------------------------------------------------- the tolerance


@needs_hf
def test_float32_softmax_rows_at_a_real_vocabulary_size_are_accepted():
    torch.manual_seed(0)
    rows = torch.softmax(3.0 * torch.randn(40, 50_257), dim=-1).numpy()  # float32, as a model computes them
    off = np.abs(rows.astype(np.float64).sum(axis=1) - 1.0)
    assert (off > 1e-6).sum() > 5, "these rows should be beyond a float64-style tolerance"
    assert off.max() < SUM_TOLERANCE / 10
    as_distribution(rows, "rows")
    p, q = rows[:4], rows[4:9]
    tokens = p.argmax(axis=1)
    out = verify(tokens, p, q, rng=0)
    assert 1 <= len(out.tokens) <= 5


def test_rows_that_are_really_wrong_are_still_refused():
    rng = np.random.default_rng(0)
    q = rng.dirichlet(np.ones(1000), size=3)
    lost = q.copy()
    lost[1, np.argmax(lost[1])] = 0.0  # a lost token: the row sums to 1 - max, far beyond rounding
    with pytest.raises(ValueError, match=r"q_target: row 1 sums to .*tolerance"):
        verify([0, 1], q[:2], lost, rng=0)
    negative = q.copy()
    negative[0, 0] = -1e-3
    with pytest.raises(ValueError, match="negative probability"):
        verify([0, 1], negative[:2], q, rng=0)
    unnormalised = np.exp(rng.standard_normal((3, 1000)))
    with pytest.raises(ValueError, match="sums to"):
        as_distribution(unnormalised, "rows")
    slightly = q.copy()
    slightly[2] *= 1 + 10 * SUM_TOLERANCE
    with pytest.raises(ValueError, match="row 2 sums to"):
        as_distribution(slightly, "rows")


# --------------------------------------------------------------------------- the model protocol


@needs_hf
def test_probabilities_are_the_float64_softmax_of_the_logits_at_the_temperature():
    net = tiny_gpt2(0)
    ids = np.array([3, 1, 4, 1, 5])
    with torch.no_grad():
        logits = net(torch.as_tensor(ids)[None]).logits[0].double()
    for temperature in (1.0, 0.5, 2.0):
        probs = hf.HFModel(net, temperature=temperature)(ids)
        assert probs.dtype == np.float64 and probs.shape == (5, 8)
        np.testing.assert_allclose(probs, torch.softmax(logits / temperature, dim=-1).numpy(), atol=1e-6)
        np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
    greedy = hf.HFModel(net, temperature=0)(ids)
    np.testing.assert_array_equal(greedy.argmax(axis=1), logits.argmax(dim=-1).numpy())
    assert set(np.unique(greedy)) == {0.0, 1.0}


@needs_hf
def test_no_gradients_are_kept_and_the_model_is_put_in_eval_mode():
    net = tiny_gpt2(0).train()
    model = hf.HFModel(net)
    assert not net.training
    probs = model(np.array([1, 2, 3]))
    assert type(probs) is np.ndarray
    assert torch.is_grad_enabled()  # the caller's setting is left alone
    cache = model.cache()
    cache.extend(np.array([1, 2, 3]))
    assert all(not t.requires_grad for layer in cache.past_key_values.layers for t in (layer.keys, layer.values))


@needs_hf
def test_cache_rollback_equals_recomputation():
    model = hf.HFModel(tiny_gpt2(0, n_positions=64))
    rng = np.random.default_rng(3)
    cache, text = model.cache(), np.zeros(0, dtype=np.int64)
    for _ in range(25):
        if len(cache) > 0 and rng.random() < 0.4:
            length = int(rng.integers(0, len(cache) + 1))
            cache.rollback(length)
            text = text[:length]
            continue
        new = rng.integers(0, model.vocab_size, int(rng.integers(1, 5)))
        if text.size + new.size > 64:
            continue
        rows = cache.extend(new)
        text = np.concatenate([text, new])
        np.testing.assert_allclose(rows, model(text)[-new.size:], atol=CACHE_ATOL)
        assert len(cache) == text.size and np.array_equal(cache.tokens, text)
        assert cache.past_key_values.get_seq_length() == text.size
    cache.rollback(0)
    assert len(cache) == 0 and cache.past_key_values.get_seq_length() == 0
    np.testing.assert_allclose(cache.extend([5, 6]), model(np.array([5, 6])), atol=CACHE_ATOL)
    with pytest.raises(ValueError, match="cannot roll forward"):
        cache.rollback(3)


@needs_hf
def test_a_cache_rolled_back_without_cropping_is_caught_by_the_same_comparison():
    """The comparison above with a fresh pass is what catches a cache that keeps rejected tokens."""
    model = hf.HFModel(tiny_gpt2(0))
    stale = model.cache()
    stale.extend([1, 2, 3, 4])
    stale._tokens = stale._tokens[:3]  # forget token 4 without cropping: its keys stay in the library's cache
    assert not np.allclose(stale.extend([7]), model(np.array([1, 2, 3, 7]))[-1:], atol=CACHE_ATOL)


# --------------------------------------------------------------------------- clear errors


@needs_hf
def test_positions_past_the_model_limit_raise_a_clear_error():
    target, draft = tiny_pair()
    assert target.max_positions == 16
    with pytest.raises(ValueError, match="past the model's limit of 16 positions"):
        target(np.zeros(17, dtype=np.int64))
    cache = target.cache()
    cache.extend(np.zeros(15, dtype=np.int64))
    with pytest.raises(ValueError, match="position 16 is past the model's limit of 16"):
        cache.extend([1, 2])
    assert len(cache) == 15  # nothing was fed
    with pytest.raises(ValueError, match="limit of 16 positions"):
        speculative_generate(target, draft, PROMPT, 20, k=3, rng=0)


@needs_hf
def test_vocabulary_mismatch_between_draft_and_target_is_refused():
    with pytest.raises(ValueError, match="draft: vocabulary of 12 ids differs from the target's 8"):
        hf.pair(tiny_gpt2(0), tiny_gpt2(1, vocab_size=12))
    with pytest.raises(ValueError, match="vocabulary of 12 tokens differs"):
        speculative_generate(hf.HFModel(tiny_gpt2(0)), hf.HFModel(tiny_gpt2(1, vocab_size=12)), PROMPT, 3, k=2, rng=0)
    with pytest.raises(ValueError, match="vocab_size: 9 ids but the model scores only 8"):
        hf.HFModel(tiny_gpt2(0), vocab_size=9)
    with pytest.raises(TypeError, match="model: expected a transformers causal LM"):
        hf.HFModel(object())


@needs_hf
def test_padded_vocabularies_are_truncated_to_the_tokenizer_and_renormalised():
    tok = char_tokenizer("abcdefgh")
    padded_target, padded_draft = tiny_gpt2(0, vocab_size=16), tiny_gpt2(1, vocab_size=12)
    target, draft = hf.pair(padded_target, padded_draft, tok)
    assert target.vocab_size == draft.vocab_size == 8
    assert (target.logits_width, draft.logits_width) == (16, 12)
    ids = target.encode("cafe")
    np.testing.assert_array_equal(ids, [2, 0, 5, 4])
    with torch.no_grad():
        logits = padded_target(torch.as_tensor(ids)[None]).logits[0].double()
    np.testing.assert_allclose(target(ids), torch.softmax(logits[:, :8], dim=-1).numpy(), atol=1e-6)
    tokens, _ = speculative_generate(target, draft, ids, 6, k=3, rng=0)
    assert tokens.max() < 8


@needs_hf
def test_tokenizer_mismatch_between_draft_and_target_is_refused():
    same, swapped = char_tokenizer("abcdefgh"), char_tokenizer("abcdefhg")
    hf.pair(tiny_gpt2(0), tiny_gpt2(1), same, char_tokenizer("abcdefgh"))
    with pytest.raises(ValueError, match="draft: tokenizer differs from the target's"):
        hf.pair(tiny_gpt2(0), tiny_gpt2(1), same, swapped)


# --------------------------------------------------------------------------- decoding


@needs_hf
def test_greedy_speculative_decoding_equals_the_target_own_greedy_decoding():
    target, draft = tiny_pair(temperature=0)
    for prompt in ([1], [2, 3], [7, 0, 4], [5, 5, 5, 1]):
        n_new = 16 - len(prompt)
        with torch.no_grad():
            ids = torch.as_tensor([prompt])  # an explicit mask: else generate masks every id equal to pad_token_id
            reference = target.hf_model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                                 max_new_tokens=n_new, min_new_tokens=n_new,
                                                 pad_token_id=0)[0, len(prompt):].numpy()
        for k in (1, 3, 5):
            tokens, stats = speculative_generate(target, draft, prompt, n_new, k=k, rng=0)
            np.testing.assert_array_equal(tokens, reference)
            assert stats.target_passes <= n_new


@needs_hf
@pytest.mark.parametrize("k", [1, 2])
def test_first_tokens_follow_the_target_law_and_a_faulty_verifier_is_caught(k):
    """k = 1 puts the bonus token in second place, k = 2 a second draft; both see acceptance and correction."""
    target, draft = tiny_pair()
    law = target_sequence_distribution(target, PROMPT, 2)
    np.testing.assert_allclose(hf.first_tokens_law(target, PROMPT), law, atol=CACHE_ATOL)
    # The exact enumeration on these models: zero distance for the correct rule ...
    assert total_variation(target, draft, PROMPT, 1) < CACHE_ATOL  # float32 passes of other lengths: ~1e-7
    faulty = broken.RESAMPLE_FROM_TARGET
    damage = total_variation(target, draft, PROMPT, 1, verifier=faulty.verifier)
    assert damage > 0.1  # ... and a distance the chi-square test below has the power to see
    counts = sequence_counts(target, draft, PROMPT, 2, k=k, n_samples=N_SAMPLES, rng=10 + k)
    result = chi_square_test(counts, law)
    assert result.min_expected >= 5 and result.pvalue > ALPHA_LEVEL, result
    bad = sequence_counts(target, draft, PROMPT, 2, k=k, n_samples=N_SAMPLES, rng=20 + k, verifier=faulty.verifier)
    assert chi_square_test(bad, law).pvalue < ALPHA_LEVEL


@needs_hf
def test_transformers_assisted_generation_is_counted_and_greedy_equal_to_the_target():
    target, draft = tiny_pair(temperature=0)
    settings = dict(vars(draft.hf_model.generation_config))
    for prompt in ([1], [7, 0, 4]):
        n_new = 16 - len(prompt)
        reference, _ = speculative_generate(target, draft, prompt, n_new, k=1, rng=0)
        tokens, stats = hf.library_generate(target, draft, prompt, n_new, k=3)
        np.testing.assert_array_equal(tokens, reference)
        assert stats.tokens_generated == n_new == sum(stats.tokens_per_step)
        assert max(stats.k_per_step) == 3 and stats.accepted > 0
        assert stats.accepted <= stats.draft_verified <= stats.draft_proposed
        assert all(e == a + 1 for e, a in zip(stats.tokens_per_step, stats.accepted_per_step))
    assert dict(vars(draft.hf_model.generation_config)) == settings  # the assistant's settings are restored
    with pytest.raises(ValueError, match="k: leave it None"):
        hf.library_generate(target, draft, [1], 4, k=3, library_defaults=True)
    with pytest.raises(ValueError, match="temperature"):
        hf.library_generate(target, draft.with_temperature(1.0), [1], 4, k=3)
    with pytest.raises(ValueError, match="limit of 16 positions"):
        hf.library_generate(target, draft, [1, 2], 15, k=3)
    alone, stats = hf.library_generate(target, None, [7, 0, 4], 13)
    np.testing.assert_array_equal(alone, tokens)
    assert stats.target_passes == 13 and stats.draft_passes == 0


@needs_hf
def test_library_generate_samples_the_target_law_with_the_book_settings_and_not_with_the_defaults():
    """Transformers' assisted sampling, first token of two (k = 1), binned by the target's ranks.

    V = 64 and near-flat rows: the library's default top-k (50) removes a sixth of the mass.
    Binning a multinomial by rank gives a multinomial, so the same chi-square test applies.
    """
    from speclib.core.warping import warp

    net = tiny_gpt2(0, vocab_size=64, init=0.05)
    target, draft = hf.pair(net, noisy_copy(net))
    q = target(np.array(PROMPT))[-1]
    assert 0.5 * np.abs(warp(target, top_k=50)(np.array(PROMPT))[-1] - q).sum() > 0.1
    bins = np.empty(64, dtype=np.int64)
    bins[np.argsort(-q)] = np.arange(64) // 8  # eight bins of eight ranks: the last two lie past the top 50
    law = np.bincount(bins, weights=q, minlength=8)
    for defaults in (False, True):
        counts = np.zeros(8, dtype=np.int64)
        for seed in range(N_SAMPLES // 2):
            options = {"library_defaults": True} if defaults else {"k": 1}
            tokens, _ = hf.library_generate(target, draft, PROMPT, 2, seed=seed, **options)
            counts[bins[tokens[0]]] += 1
        pvalue = chi_square_test(counts, law).pvalue
        assert (pvalue < ALPHA_LEVEL) if defaults else (pvalue > ALPHA_LEVEL), (defaults, counts, pvalue)


# --------------------------------------------------------------------------- the book's pair


@needs_hf
def test_exported_random_transformers_give_the_numpy_logits():
    from speclib.lm.transformer import TransformerConfig, random_transformer

    rng = np.random.default_rng(0)
    for tied in (True, False):
        config = TransformerConfig(vocab_size=13, block_size=16, d_model=24, n_layers=2, n_heads=3, tied=tied)
        numpy_model = random_transformer(config, seed=4)
        exported = hf.HFModel(hf.to_gpt2(numpy_model))
        ids = rng.integers(0, 13, 16)
        np.testing.assert_allclose(exported.logits(ids), numpy_model.logits(ids), atol=LOGITS_ATOL)
        assert exported.max_positions == 16
    with pytest.raises(TypeError, match="speclib.lm.transformer.Transformer"):
        hf.to_gpt2(tiny_gpt2(0))


@needs_hf
def test_exported_book_pair_gives_the_numpy_logits_and_greedy_text():
    from speclib.lm.transformer import load_pair

    numpy_target, numpy_draft = load_pair()
    target, draft = hf.export_pair(numpy_target, numpy_draft)
    rng = np.random.default_rng(1)
    for numpy_model, model in ((numpy_target, target), (numpy_draft, draft)):
        cfg = numpy_model.config
        assert (model.vocab_size, model.max_positions) == (cfg.vocab_size, cfg.block_size)
        assert model.hf_model.config.n_layer == cfg.n_layers and model.hf_model.config.n_embd == cfg.d_model
        ids = rng.integers(0, cfg.vocab_size, cfg.block_size)
        np.testing.assert_allclose(model.logits(ids), numpy_model.logits(ids), atol=LOGITS_ATOL)
    greedy_target, greedy_draft = target.with_temperature(0), draft.with_temperature(0)
    prompt = rng.integers(0, target.vocab_size, 8)
    reference, _ = autoregressive_generate(numpy_target.with_temperature(0), prompt, 40, rng=0)
    tokens, _ = speculative_generate(greedy_target, greedy_draft, prompt, 40, k=4, rng=0)
    np.testing.assert_array_equal(tokens, reference)


@needs_hf
def test_book_pair_reads_the_shipped_sizes_and_the_helpers_check_their_arguments():
    from speclib.lm.transformer import load_pair

    numpy_target, numpy_draft = load_pair()
    target, draft = hf.book_pair(temperature=0.5)
    assert target.temperature == draft.temperature == 0.5
    assert target.hf_model.config.n_layer == numpy_target.config.n_layers
    assert draft.hf_model.config.n_embd == numpy_draft.config.d_model
    with pytest.raises(ValueError, match="attn_implementation: expected one of"):
        hf.to_gpt2(numpy_draft, attn_implementation="flash")
    with pytest.raises(TypeError, match="attn_implementation"):
        hf.to_gpt2(numpy_draft, attn_implementation=None)
    with pytest.raises(TypeError, match="model: expected a model"):
        hf.first_tokens_law(None, [1])
    before = torch.get_num_threads()
    with hf.torch_threads(before + 1):
        assert torch.get_num_threads() == before + 1
    assert torch.get_num_threads() == before

"""N-gram models: valid rows, hand-checked smoothing, held-out quality, exact speculative decoding."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from speclib.book import broken
from speclib.lm.corpora import DOMAINS, load_corpus, shared_vocabulary
from speclib.core.decoding import speculative_generate
from speclib.core.exact import max_abs_error, total_variation
from speclib.lm.ngram import NGramModel, heldout_cross_entropy, ngram_pair, train_ngram

VOCAB = shared_vocabulary()

#: Held-out cross-entropy bounds (bits per character) the trained pairs must beat.  The
#: uniform distribution over 97 symbols costs log2(97) = 6.6 bits.
CE_BOUNDS = {("prose", 3): 2.9, ("prose", 7): 1.8, ("code", 3): 3.4, ("code", 7): 2.7}


def tiny_text():
    rng = np.random.default_rng(0)
    return rng.integers(0, 3, size=60)


def test_hand_computed_kneser_ney():
    # Text 0 1 0 1 2 1, vocabulary of 3, discount 1/2.  Unigram continuation counts:
    # "1" follows 0 and 2 (2), "0" follows 1 (1), "2" follows 1 (1):  P1 = (1/4, 1/2, 1/4).
    # After "0" the raw bigram counts are {1: 2}: P(1|0) = 1.5/2 + 0.5 * 1/2 * 1/2 = 0.875.
    model = NGramModel([0, 1, 0, 1, 2, 1], order=2, vocab_size=3, discount=0.5)
    np.testing.assert_allclose(model([0])[0], [0.0625, 0.875, 0.0625], atol=1e-15)
    np.testing.assert_allclose(model([2])[0], [0.125, 0.75, 0.125], atol=1e-15)
    # An order-1 model on "0 0 1" with Ney's discount D = n1 / (n1 + 2 n2) = 1/3.
    unigram = NGramModel([0, 0, 1], order=1, vocab_size=3)
    assert unigram.discounts[0] == pytest.approx(1 / 3)
    np.testing.assert_allclose(unigram([2])[0], [17 / 27, 8 / 27, 2 / 27], atol=1e-15)


def test_unseen_and_short_contexts_fall_back_to_the_lower_order():
    # Order 3 on the same text: the context "2 2" never occurs, and the first position only
    # has the one-token context "2"; both use the bigram level, P2(. | 2) = (1/8, 3/4, 1/8),
    # built from continuation counts (raw counts would give the same bigram here only by luck).
    model = NGramModel([0, 1, 0, 1, 2, 1], order=3, vocab_size=3, discount=0.5)
    np.testing.assert_allclose(model([2, 2]), [[0.125, 0.75, 0.125]] * 2, atol=1e-15)


@settings(max_examples=40, deadline=None)
@given(order=st.integers(1, 5), seed=st.integers(0, 10_000), n=st.integers(1, 80))
def test_rows_are_distributions_without_zeros(order, seed, n):
    rng = np.random.default_rng(seed)
    model = NGramModel(rng.integers(0, 5, size=200) % 4, order=order, vocab_size=5)
    rows = model(rng.integers(0, 5, size=n))  # token 4 never occurs in training
    assert rows.shape == (n, 5)
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-12)
    assert rows.min() > 0


@pytest.mark.parametrize("domain", DOMAINS)
def test_trained_rows_sum_to_one_everywhere(domain):
    target, draft = ngram_pair(domain)
    text = VOCAB.encode(load_corpus(domain).heldout[:5000])
    for model in (target, draft):
        rows = model(text)
        np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-12)
        assert rows.min() > 0


def test_cached_and_batched_rows_agree():
    target, _ = ngram_pair("code")
    text = VOCAB.encode(load_corpus("code").heldout[:300])
    whole = target(text)  # > 64 tokens: the batched path
    for start in range(0, 290, 9):  # short windows: the cached, one-row-at-a-time path
        window = text[max(0, start - 6): start + 5]
        np.testing.assert_allclose(target(window)[-5:], whole[start: start + 5], atol=1e-14)


@pytest.mark.parametrize("order", [1, 3, 7])
def test_the_models_cache_gives_the_recomputing_caches_rows_bit_for_bit(order):
    """NGramCache computes only the new tokens' rows; the rows are RecomputeCache's exactly.

    Two models trained alike, so that neither reads rows the other remembered; passes of 1 to
    70 tokens (past 64: the batched path) with rollbacks, on held-out text and random ids."""
    from speclib.core.cache import RecomputeCache, model_cache
    from speclib.lm.ngram import NGramCache

    train = VOCAB.encode(load_corpus("code").train[:200_000])
    a, b = NGramModel(train, order), NGramModel(train, order)
    recompute, own = RecomputeCache(a), model_cache(b)
    assert type(own) is NGramCache and own is not b.cache()
    rng = np.random.default_rng(order)
    text = np.concatenate([VOCAB.encode(load_corpus("code").heldout[:3000]), rng.integers(0, VOCAB.size, 3000)])
    i = 0
    while i < text.size - 70:
        n = int(rng.choice([1, 1, 1, 2, 3, 5, 9, 70]))
        np.testing.assert_array_equal(recompute.extend(text[i:i + n]), own.extend(text[i:i + n]))
        back = int(rng.integers(0, n + 1)) if rng.random() < 0.3 else 0
        recompute.rollback(len(recompute) - back)
        own.rollback(len(own) - back)
        i += n - back
        assert len(own) == len(recompute) and np.array_equal(own.tokens, recompute.tokens)
    with pytest.raises(TypeError, match="model: expected an NGramModel"):
        NGramCache(object())


def test_next_token_probability_matches_rows():
    target, draft = ngram_pair("prose")
    text = VOCAB.encode(load_corpus("prose").heldout[:2000])
    for model in (target, draft):
        rows = model(text)
        np.testing.assert_allclose(model.next_token_probability(text), rows[np.arange(1999), text[1:]],
                                   rtol=1e-12)


def test_training_is_deterministic():
    text = VOCAB.encode(load_corpus("prose").train[:100_000])
    a, b = NGramModel(text, 5), NGramModel(text, 5)
    probe = VOCAB.encode("The method returns")
    np.testing.assert_array_equal(a(probe), b(probe))
    assert a.discounts == b.discounts
    assert train_ngram("prose", 5) is train_ngram("prose", 5)


def test_models_sharing_counts_equal_models_trained_alone():
    """train_ngram shares the counting work between orders; the models must not notice."""
    text = VOCAB.encode(load_corpus("code").train)
    probe = VOCAB.encode(load_corpus("code").heldout[:400])
    for order in (1, 4, 7):
        shared, alone = train_ngram("code", order), NGramModel(text, order)
        assert shared.discounts == alone.discounts
        np.testing.assert_array_equal(shared(probe), alone(probe))
        np.testing.assert_array_equal(shared.next_token_probability(probe), alone.next_token_probability(probe))


@pytest.mark.parametrize("domain, order", sorted(CE_BOUNDS))
def test_heldout_cross_entropy_below_bound(domain, order):
    assert heldout_cross_entropy(train_ngram(domain, order), domain) < CE_BOUNDS[(domain, order)]


@pytest.mark.parametrize("domain", DOMAINS)
def test_target_beats_draft_and_domain_matters(domain):
    target, draft = ngram_pair(domain)
    assert heldout_cross_entropy(target, domain) < heldout_cross_entropy(draft, domain)
    # Negative control: the other domain's target is worse on this domain's held-out text.
    other = [d for d in DOMAINS if d != domain][0]
    assert heldout_cross_entropy(ngram_pair(other)[0], domain) > heldout_cross_entropy(target, domain) + 0.5


def test_model_follows_the_protocol():
    target, draft = ngram_pair("prose")
    assert (target.vocab_size, target.context_length, draft.context_length) == (97, 6, 2)
    assert target(np.zeros(0, dtype=np.int64)).shape == (0, 97)
    assert "order=7" in repr(target)


@pytest.mark.parametrize("target_order, draft_order, k", [(2, 1, 2), (3, 1, 2), (3, 2, 3)])
def test_speculative_decoding_is_exact_with_ngram_models(target_order, draft_order, k):
    text = tiny_text()
    target = NGramModel(text, target_order, vocab_size=3)
    draft = NGramModel(text[::-1], draft_order, vocab_size=3)
    for prefix in ([0], [2, 1], [1, 1, 0]):
        assert max_abs_error(target, draft, prefix, k) < 1e-12


@pytest.mark.parametrize("variant", broken.FAULTY, ids=lambda v: v.name)
def test_exact_check_catches_faulty_verifiers_on_ngram_models(variant):
    text = tiny_text()
    target, draft = NGramModel(text, 3, vocab_size=3), NGramModel(text[::-1], 1, vocab_size=3)
    assert total_variation(target, draft, [2, 1], 2, verifier=variant.verifier) > 1e-3


N_SAMPLES = 3000
ALPHA_LEVEL = 1e-3  # reject "the first token follows the target" when the p-value is below this


def first_token_pvalue(verifier, seed):
    """Chi-square of the first generated character against the 7-gram target's row."""
    target, draft = ngram_pair("prose")
    prompt = VOCAB.encode("The value of ")
    q = target(prompt)[-1]
    rng = np.random.default_rng(seed)
    counts = np.zeros(VOCAB.size)
    for _ in range(N_SAMPLES):
        tokens, _ = speculative_generate(target, draft, prompt, 1, k=1, rng=rng, verifier=verifier)
        counts[tokens[0]] += 1
    expected = q * N_SAMPLES
    big = expected >= 5  # pool the rare characters into one cell
    observed = np.append(counts[big], counts[~big].sum())
    return stats.chisquare(observed, np.append(expected[big], expected[~big].sum())).pvalue


def test_real_models_pass_chi_square():
    assert first_token_pvalue(broken.CORRECT.verifier, seed=1) > ALPHA_LEVEL


def test_chi_square_catches_resampling_from_target():
    assert first_token_pvalue(broken.RESAMPLE_FROM_TARGET.verifier, seed=1) < ALPHA_LEVEL


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(tokens=[0, 1, 2], order=0), ValueError, "order"),
    (dict(tokens=[0, 1, 2], order=1.5), TypeError, "order"),
    (dict(tokens=[0, 1], order=3), ValueError, "tokens"),
    (dict(tokens=[0, 1, 200], order=2), ValueError, "tokens"),
    (dict(tokens=[0, 1, 2], order=2, discount=1.0), ValueError, "discount"),
    (dict(tokens=[0, 1, 2], order=2, vocab_size=1), ValueError, "vocab_size"),
    (dict(tokens=[0, 1, 2], order=20), ValueError, "order"),
])
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        NGramModel(**kwargs)


def test_bad_calls_are_named():
    model = NGramModel([0, 1, 2], order=2, vocab_size=3)
    with pytest.raises(ValueError, match="tokens"):
        model([0, 5])
    with pytest.raises(ValueError, match="tokens"):
        model.cross_entropy([0])
    with pytest.raises(ValueError, match="domain"):
        ngram_pair("poetry")
    with pytest.raises(ValueError, match="domain"):
        train_ngram("poetry", 3)
    with pytest.raises(ValueError, match="order"):
        train_ngram("code", 0)
    with pytest.raises(TypeError, match="model"):
        heldout_cross_entropy("a model", "code")

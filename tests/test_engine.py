"""The vectorized engine (speclib.core.engine) against the reference loop, the theory and the enumerator.

Exactness is checked four ways:

1. Token for token: with ``k = 1`` the engine happens to consume random numbers in the same
   order as ``speculative_generate`` (draft, acceptance test, final token), so with the same
   seed the two must write the same text.
2. Chi-square against exact laws: tokens per step against ``theory.tokens_per_step_pmf``
   (fixed context), the first tokens of the output against
   ``exact.target_sequence_distribution`` (Markov), the whole-generation counters against a
   small dynamic programme (last-step truncation included).  Each test is seeded, rejects at
   p < ``ALPHA_LEVEL``, and has a negative control: a broken engine variant (defined here,
   through the engine's ``accept`` / ``correct`` hooks) that the same test rejects.
3. Against the reference loop: per-stream tokens per pass and acceptance, compared with a
   two-sample z-test at ``Z_MAX`` standard errors.
4. Bookkeeping: exact identities every result must satisfy.
"""

import functools
import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

import speclib.core.engine as engine
from speclib.core.decoding import speculative_generate
from speclib.core.engine import acceptance_probabilities, residual_rows, run_fixed_steps, run_streams
from speclib.core.exact import target_sequence_distribution
from speclib.lm.models import FixedContextModel, MarkovModel, fixed_pair, markov_pair
from speclib.core import sampling
from speclib.core.sampling import acceptance_rate
from speclib.core.theory import tokens_per_step_pmf

ALPHA_LEVEL = 1e-3  # a chi-square test rejects "follows the exact law" when p < ALPHA_LEVEL
Z_MAX = 4.0  # engine and reference agree when every metric is within Z_MAX standard errors


# --- broken variants: the negative controls ----------------------------------------------------

def resample_from_q(p_rows, q_rows):
    """Broken correction: after a rejection, draw from q instead of the residual."""
    return q_rows


def inverted_ratio(p_x, q_x):
    """Broken acceptance: min(1, p/q) instead of min(1, q/p)."""
    return np.minimum(1.0, np.divide(p_x, q_x, out=np.ones_like(p_x, dtype=float), where=q_x > 0))


BROKEN_STREAMS = {
    "resample from q": functools.partial(run_streams, correct=resample_from_q),
    "inverted ratio": functools.partial(run_streams, accept=inverted_ratio),
}


def chi_square_pvalue(counts, probs, min_expected=5.0):
    """Chi-square goodness of fit; cells expected below ``min_expected`` are pooled into one."""
    counts, probs = np.asarray(counts, dtype=float).ravel(), np.asarray(probs, dtype=float).ravel()
    assert counts[probs == 0].sum() == 0, "sampled an outcome of probability 0"
    expected = probs * counts.sum()
    small = expected < min_expected
    if small.any():
        counts = np.append(counts[~small], counts[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
    return stats.chisquare(counts, expected * counts.sum() / expected.sum()).pvalue


def as_markov(model: FixedContextModel) -> MarkovModel:
    """The same fixed distribution written as a Markov table: it runs the engine's general path."""
    return MarkovModel(np.tile(model.dist, (model.vocab_size, 1)))


# --- 1. token for token at k = 1 ------------------------------------------------------------

@pytest.mark.parametrize("draw_path", ["dense", "binary search"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_k1_markov_matches_reference_loop_token_for_token(monkeypatch, draw_path, seed):
    if draw_path == "binary search":
        monkeypatch.setattr(engine, "_DENSE_DRAW", 0)
    target, draft = markov_pair(vocab_size=16, draft_noise=0.4, seed=seed)
    ref_tokens, ref_stats = speculative_generate(target, draft, [3], 300, k=1, rng=seed)
    result = run_streams(target, draft, k=1, n_streams=1, n_tokens=300, rng=seed, prompt=3)
    np.testing.assert_array_equal(result.tokens[0], ref_tokens)
    assert result.stats() == ref_stats


def test_k1_fixed_bulk_path_matches_reference_loop_token_for_token():
    """The bulk path draws its steps in the same order; only the last step's draws differ."""
    target, draft = fixed_pair(draft_noise=0.3)
    n = 2000
    ref_tokens, _ = speculative_generate(target, draft, [0], n, k=1, rng=5)
    result = run_streams(target, draft, k=1, n_streams=1, n_tokens=n, rng=5)
    np.testing.assert_array_equal(result.tokens[0, : n - 1], ref_tokens[: n - 1])


def test_draws_agree_with_sample_token_on_every_path(monkeypatch):
    """Guide-table draws (one row and many rows) and on-the-fly draws (dense, binary search)."""
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.full(50, 0.3), size=7)
    probs[2, 10:20] = 0.0  # a run of impossible tokens
    probs[2, 30:35] = 1e-9  # a cluster of tiny ones: several cdf entries in one guide bucket
    probs /= probs.sum(axis=1, keepdims=True)
    rows = rng.integers(0, 7, size=5000)
    u = np.append(rng.random(4996), [0.0, 1 - 2**-53, probs[2, :3].sum(), 0.5])
    # sample_token reads one uniform from its generator; replay u with a stand-in generator
    # through its core (the draw the loops make; the public function checks for a Generator).
    draw_one = sampling._sample_token
    want = np.array([draw_one(probs[r], _OneUniform(x)) for r, x in zip(rows, u)])
    np.testing.assert_array_equal(engine._Sampler(probs).draw(rows, u), want)
    one_row = [draw_one(probs[3], _OneUniform(x)) for x in u]
    np.testing.assert_array_equal(engine._Sampler(probs[3:4]).draw(None, u), one_row)
    cdf = np.cumsum(probs[rows], axis=1)
    np.testing.assert_array_equal(engine._draw(cdf[:100], u[:100]), want[:100])  # dense
    monkeypatch.setattr(engine, "_DENSE_DRAW", 0)
    np.testing.assert_array_equal(engine._draw(cdf, u), want)  # binary search


class _OneUniform:
    """Stands in for a Generator whose next ``random()`` is ``u``."""

    def __init__(self, u):
        self.u = u

    def random(self):
        return self.u


# --- 2. chi-square against exact laws -------------------------------------------------------

def fixed_alpha(noise):
    target, draft = fixed_pair(draft_noise=noise)
    return target, draft, acceptance_rate(draft.dist, target.dist)


@pytest.mark.parametrize("k,noise", [(1, 0.3), (4, 0.3), (8, 0.8)])
def test_fixed_steps_tokens_per_step_follow_theory(k, noise):
    target, draft, alpha = fixed_alpha(noise)
    steps = run_fixed_steps(draft.dist, target.dist, k, 200_000, rng=k)
    counts = np.bincount(steps.emitted, minlength=k + 2)[1:]
    assert chi_square_pvalue(counts, tokens_per_step_pmf(alpha, k)) > ALPHA_LEVEL


def test_fixed_steps_inverted_ratio_fails_the_same_test():
    target, draft, alpha = fixed_alpha(0.3)
    steps = run_fixed_steps(draft.dist, target.dist, 4, 200_000, rng=4, accept=inverted_ratio)
    counts = np.bincount(steps.emitted, minlength=6)[1:]
    assert chi_square_pvalue(counts, tokens_per_step_pmf(alpha, 4)) < ALPHA_LEVEL


def untruncated_step_counts(result):
    """Tokens per step of the steps that started with more than k tokens to go.

    Whether a step qualifies depends only on earlier steps, and with a fixed context a step's
    count is independent of them, so these counts follow tokens_per_step_pmf exactly.
    """
    full = result.start < result.n_tokens - result.k
    return np.bincount(result.emitted[full], minlength=result.k + 2)[1:]


@pytest.mark.parametrize("path", ["fixed (bulk)", "markov (rounds)"])
@pytest.mark.parametrize("variant", ["correct", "inverted ratio"])
def test_streams_tokens_per_step_follow_theory(path, variant):
    target, draft, alpha = fixed_alpha(0.3)
    if path == "markov (rounds)":
        target, draft = as_markov(target), as_markov(draft)
    run = run_streams if variant == "correct" else BROKEN_STREAMS[variant]
    result = run(target, draft, k=4, n_streams=2000, n_tokens=100, rng=11)
    pvalue = chi_square_pvalue(untruncated_step_counts(result), tokens_per_step_pmf(alpha, 4))
    assert (pvalue > ALPHA_LEVEL) if variant == "correct" else (pvalue < ALPHA_LEVEL)


SMALL_PAIR = dict(vocab_size=3, draft_noise=0.7, seed=5)
LENGTH = 4  # tokens compared with the target's exact distribution: 3**4 = 81 cells


@pytest.mark.parametrize("k,bonus,prompt", [(1, True, 0), (2, True, 0), (3, True, 2), (2, False, [1, 0])])
def test_streams_output_follows_target_exactly(k, bonus, prompt):
    target, draft = markov_pair(**SMALL_PAIR)
    result = run_streams(target, draft, k, 100_000, LENGTH, rng=100 + k, prompt=prompt, bonus=bonus)
    counts = np.bincount(np.ravel_multi_index(result.tokens.T, (3,) * LENGTH), minlength=3**LENGTH)
    exact = target_sequence_distribution(target, np.atleast_1d(prompt), LENGTH)
    assert chi_square_pvalue(counts, exact) > ALPHA_LEVEL


@pytest.mark.parametrize("variant", sorted(BROKEN_STREAMS))
def test_broken_engines_fail_the_output_test(variant):
    target, draft = markov_pair(**SMALL_PAIR)
    result = BROKEN_STREAMS[variant](target, draft, 2, 100_000, LENGTH, rng=102)
    counts = np.bincount(np.ravel_multi_index(result.tokens.T, (3,) * LENGTH), minlength=3**LENGTH)
    exact = target_sequence_distribution(target, [0], LENGTH)
    assert chi_square_pvalue(counts, exact) < ALPHA_LEVEL


@pytest.mark.parametrize("variant", ["correct", "resample from q"])
def test_fixed_pair_tokens_are_iid_from_target(variant):
    """With a fixed context every emitted token must be an independent draw from q."""
    target, draft, _ = fixed_alpha(0.8)
    run = run_streams if variant == "correct" else BROKEN_STREAMS[variant]
    result = run(target, draft, k=4, n_streams=5000, n_tokens=60, rng=3)
    pvalue = chi_square_pvalue(np.bincount(result.tokens.ravel(), minlength=64), target.dist)
    assert (pvalue > ALPHA_LEVEL) if variant == "correct" else (pvalue < ALPHA_LEVEL)


def generation_law(alpha, k, n_tokens, truncate_last=True):
    """Exact joint law of (target passes, accepted drafts) of one fixed-context generation.

    A dynamic programme over the tokens still to go.  ``truncate_last=False`` gives the law
    of a loop that always drafts k tokens, even when fewer are needed (a bug the test must see).
    """
    law, done = {(n_tokens, 0, 0): 1.0}, {}  # (tokens to go, passes, accepted) -> probability
    while law:
        nxt = {}
        for (rem, passes, acc), prob in law.items():
            k_step = min(k, rem) if truncate_last else k
            for n_acc in range(k_step + 1):
                p_n = alpha**n_acc * (1 - alpha) if n_acc < k_step else alpha**k_step
                left, counters = rem - min(n_acc + 1, rem), (passes + 1, acc + n_acc)
                into, key = (done, counters) if left == 0 else (nxt, (left, *counters))
                into[key] = into.get(key, 0.0) + prob * p_n
        law = nxt
    return done


def joint_counts_and_law(result, law):
    per = result.per_stream()
    observed = Counter(zip(per.passes.tolist(), per.accepted.tolist()))
    keys = sorted(set(law) | set(observed))
    return np.array([observed[key] for key in keys]), np.array([law.get(key, 0.0) for key in keys])


@pytest.mark.parametrize("path", ["fixed (bulk)", "markov (rounds)"])
def test_whole_generation_counters_follow_exact_law(path):
    """Passes and accepted drafts per 12-token generation, last-step truncation included."""
    target, draft, alpha = fixed_alpha(0.5)
    if path == "markov (rounds)":
        target, draft = as_markov(target), as_markov(draft)
    k, n = 4, 12
    result = run_streams(target, draft, k, 100_000, n, rng=21)
    observed, probs = joint_counts_and_law(result, generation_law(alpha, k, n))
    assert chi_square_pvalue(observed, probs) > ALPHA_LEVEL
    # Negative control: the law of a loop that drafts the full k on the last steps is rejected.
    observed, wrong = joint_counts_and_law(result, generation_law(alpha, k, n, truncate_last=False))
    assert observed[wrong == 0].sum() > 0 or chi_square_pvalue(observed, wrong) < ALPHA_LEVEL


# --- 3. against the reference loop ----------------------------------------------------------

def per_stream_metrics(passes, accepted, verified, proposed, n_tokens):
    return {
        "tokens per pass": n_tokens / passes,
        "acceptance (accepted / verified)": accepted / verified,
        "accepted / proposed": accepted / proposed,
    }


def reference_metrics(target, draft, k, n_streams, n_tokens, seed, prompt=(0,)):
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n_streams):
        _, s = speculative_generate(target, draft, list(prompt), n_tokens, k, rng)
        rows.append((s.target_passes, s.accepted, s.draft_verified, s.draft_proposed))
    return per_stream_metrics(*np.array(rows, dtype=float).T, n_tokens)


def engine_metrics(run, target, draft, k, n_streams, n_tokens, seed, prompt=(0,)):
    per = run(target, draft, k, n_streams, n_tokens, rng=seed, prompt=list(prompt)).per_stream()
    counts = (per.passes, per.accepted, per.verified, per.proposed)
    return per_stream_metrics(*(a.astype(float) for a in counts), n_tokens)


def largest_z(ref, eng):
    z = []
    for name in ref:
        se = math.sqrt(ref[name].var(ddof=1) / ref[name].size + eng[name].var(ddof=1) / eng[name].size)
        z.append(abs(ref[name].mean() - eng[name].mean()) / se)
    return max(z)


CASES = {
    "fixed pair, k=16": (lambda: fixed_pair(draft_noise=0.3), 16),
    "markov pair, k=4": (lambda: markov_pair(vocab_size=16, draft_noise=0.5, seed=2), 4),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_engine_agrees_with_reference_loop(case):
    make, k = CASES[case]
    target, draft = make()
    ref = reference_metrics(target, draft, k, 40, 250, seed=1)
    assert largest_z(ref, engine_metrics(run_streams, target, draft, k, 4000, 250, seed=2)) < Z_MAX
    # Negative control: the same comparison catches a broken acceptance rule.
    broken = engine_metrics(BROKEN_STREAMS["inverted ratio"], target, draft, k, 4000, 250, seed=2)
    assert largest_z(ref, broken) > Z_MAX


# --- 4. bookkeeping -------------------------------------------------------------------------

PAIRS = {
    "fixed": lambda: fixed_pair(vocab_size=10, draft_noise=0.5),
    "markov": lambda: markov_pair(vocab_size=10, draft_noise=0.5, seed=1),
    "mixed": lambda: (fixed_pair(vocab_size=10)[0], markov_pair(vocab_size=10, seed=1)[1]),
}


@pytest.mark.parametrize("pair", sorted(PAIRS))
@pytest.mark.parametrize("k", [1, 3, 6])
@pytest.mark.parametrize("n_tokens", [0, 1, 4, 57])
@pytest.mark.parametrize("bonus", [True, False])
def test_records_are_consistent(pair, k, n_tokens, bonus):
    target, draft = PAIRS[pair]()
    r = run_streams(target, draft, k, 37, n_tokens, rng=k * 100 + n_tokens, bonus=bonus)
    assert r.tokens.shape == (37, n_tokens) and r.tokens.dtype == np.int32
    assert ((r.tokens >= 0) & (r.tokens < 10)).all()
    assert (np.bincount(r.stream, weights=r.emitted, minlength=37) == n_tokens).all()
    for s in range(37):  # steps in order: each starts where the previous one ended
        mine = r.stream == s
        starts = np.cumsum(r.emitted[mine]) - r.emitted[mine]
        np.testing.assert_array_equal(r.start[mine], starts)
    np.testing.assert_array_equal(r.proposed, np.minimum(k, n_tokens - r.start))
    assert ((0 <= r.accepted) & (r.accepted <= r.proposed)).all()
    assert ((1 <= r.emitted) & (r.emitted <= r.proposed + int(bonus))).all()
    assert (r.emitted >= np.minimum(r.accepted + 1, r.proposed)).all()
    s = r.stats()
    assert s.tokens_generated == 37 * n_tokens == sum(s.tokens_per_step)
    assert s.target_passes == r.emitted.size and s.draft_passes == s.draft_proposed
    assert s.accepted <= s.draft_verified <= s.draft_proposed
    per = r.per_stream()
    assert per.passes.sum() == s.target_passes and per.verified.sum() == s.draft_verified


@pytest.mark.parametrize("bonus", [True, False])
def test_perfect_draft_accepts_everything(bonus):
    target, _ = markov_pair(vocab_size=6, seed=4)
    r = run_streams(target, target, 4, 50, 23, rng=0, bonus=bonus)
    s = r.stats()
    assert s.acceptance_rate == 1.0
    assert s.target_passes == 50 * math.ceil(23 / (5 if bonus else 4))


def test_same_seed_same_result():
    target, draft = markov_pair(vocab_size=8, seed=2)
    a = run_streams(target, draft, 3, 20, 40, rng=11)
    b = run_streams(target, draft, 3, 20, 40, rng=np.random.default_rng(11))
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.emitted, b.emitted)
    assert a.stats() == b.stats()


def test_fixed_steps_bookkeeping():
    target, draft, _ = fixed_alpha(0.3)
    for bonus in (True, False):
        st = run_fixed_steps(draft.dist, target.dist, 5, 3000, rng=0, bonus=bonus)
        assert st.emitted.shape == st.accepted.shape == (3000,)
        assert st.emitted.max() == 5 + int(bonus) and st.emitted.min() == 1
        np.testing.assert_array_equal(st.emitted, np.where(st.accepted == 5, 5 + int(bonus), st.accepted + 1))
        s = st.stats()
        assert s.target_passes == 3000 and s.draft_proposed == 15000
        assert s.draft_verified == s.accepted + int((st.accepted < 5).sum())
    assert run_fixed_steps(draft.dist, target.dist, 2, 0, rng=0).emitted.size == 0


def test_vectorized_rule_matches_scalar_rule():
    p, q = np.array([0.5, 0.5, 0.0]), np.array([0.25, 0.25, 0.5])
    np.testing.assert_allclose(acceptance_probabilities(p, q), [0.5, 0.5, 1.0])
    np.testing.assert_allclose(residual_rows(p[None], q[None]), [[0.0, 0.0, 1.0]])
    np.testing.assert_allclose(residual_rows(q[None], q[None]), q[None])  # p == q: falls back to q


# --- validation -----------------------------------------------------------------------------

def test_unsupported_model_is_a_type_error_naming_the_supported_ones(second_order_pair):
    target, draft = markov_pair(vocab_size=3, seed=0)
    supported = r"FixedContextModel, .*MarkovModel or .*NGramModel"
    with pytest.raises(TypeError, match=rf"draft: .*{supported}.*SecondOrderModel"):
        run_streams(target, second_order_pair[1], 2, 10, 5, rng=0)
    with pytest.raises(TypeError, match="target: "):
        run_streams(lambda tokens: None, draft, 2, 10, 5, rng=0)


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        (dict(k=0), ValueError, "k: must be >= 1"),
        (dict(k=2.0), TypeError, "k: expected an integer"),
        (dict(n_streams=0), ValueError, "n_streams: must be >= 1"),
        (dict(n_tokens=-1), ValueError, "n_tokens: must be >= 0"),
        (dict(rng="seed"), TypeError, "rng: expected a numpy.random.Generator"),
        (dict(prompt=8), ValueError, "prompt: token 8"),
        (dict(prompt=[]), ValueError, "prompt: must contain at least one token"),
        (dict(bonus="yes"), TypeError, "bonus: expected True or False"),
        (dict(accept=0.5), TypeError, "accept: expected a function"),
        (dict(n_streams=10**6, n_tokens=10**6), ValueError, "n_streams \\* n_tokens"),
    ],
)
def test_run_streams_rejects_bad_arguments(kwargs, error, message):
    target, draft = markov_pair(vocab_size=8, seed=0)
    args = dict(k=2, n_streams=3, n_tokens=5, rng=0) | kwargs
    with pytest.raises(error, match=message):
        run_streams(target, draft, **args)


def test_run_streams_rejects_different_vocabularies():
    target, _ = markov_pair(vocab_size=8, seed=0)
    _, draft = fixed_pair(vocab_size=9)
    with pytest.raises(ValueError, match="draft: vocabulary of 9 tokens differs from the target's 8"):
        run_streams(target, draft, 2, 3, 5, rng=0)


def test_run_fixed_steps_rejects_bad_arguments():
    p, q = np.full(4, 0.25), np.array([0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match="p and q must have the same shape"):
        run_fixed_steps(p, q[:3] / q[:3].sum(), 2, 10, rng=0)
    with pytest.raises(ValueError, match="q: row 0 sums to"):
        run_fixed_steps(p, q * 2, 2, 10, rng=0)
    with pytest.raises(ValueError, match="n_steps: must be >= 0"):
        run_fixed_steps(p, q, 2, -5, rng=0)
    with pytest.raises(ValueError, match="k: must be >= 1"):
        run_fixed_steps(p, q, 0, 5, rng=0)


# --- n-gram models (tabulated through their own rows) ------------------------------------------

ngram = pytest.importorskip("speclib.lm.ngram")


def small_ngram_pair(vocab_size=3):
    text = np.random.default_rng(0).integers(0, vocab_size, size=300)
    text[::7] = 0  # some structure, so that contexts differ
    return tuple(ngram.NGramModel(text, order=order, vocab_size=vocab_size) for order in (3, 2))


def test_ngram_table_rows_are_the_models_rows():
    target, _ = small_ngram_pair(5)
    table = engine._tabulate(target, "target")
    rng = np.random.default_rng(1)
    for context in rng.integers(0, 5, size=(20, 4)):
        state = table.state_after(context)
        np.testing.assert_array_equal(table.probs[state], target(context)[-1])
        assert table.next_state[state, 3] == table.state_after(np.append(context, 3))


@pytest.mark.parametrize("variant", ["correct", "resample from q"])
def test_ngram_output_follows_target_exactly(variant):
    target, draft = small_ngram_pair()
    run = run_streams if variant == "correct" else BROKEN_STREAMS[variant]
    result = run(target, draft, 2, 100_000, LENGTH, rng=8, prompt=[1, 2])
    counts = np.bincount(np.ravel_multi_index(result.tokens.T, (3,) * LENGTH), minlength=3**LENGTH)
    pvalue = chi_square_pvalue(counts, target_sequence_distribution(target, [1, 2], LENGTH))
    assert (pvalue > ALPHA_LEVEL) if variant == "correct" else (pvalue < ALPHA_LEVEL)


def test_ngram_engine_agrees_with_reference_loop():
    target, draft = small_ngram_pair(6)
    ref = reference_metrics(target, draft, 3, 40, 120, seed=3, prompt=(0, 1))
    args = (target, draft, 3, 4000, 120, 4, (0, 1))
    assert largest_z(ref, engine_metrics(run_streams, *args)) < Z_MAX
    assert largest_z(ref, engine_metrics(BROKEN_STREAMS["inverted ratio"], *args)) > Z_MAX


def test_ngram_limits_are_clear_errors():
    target, draft = small_ngram_pair()
    with pytest.raises(ValueError, match="prompt: the target reads the last 2 tokens"):
        run_streams(target, draft, 2, 10, 5, rng=0, prompt=[1])
    big = ngram.NGramModel(np.arange(400) % 97, order=5, vocab_size=97)
    with pytest.raises(ValueError, match="target: an order-5 n-gram model over 97 tokens"):
        run_streams(big, big, 2, 10, 5, rng=0, prompt=[1, 2, 3, 4])


def test_the_engines_public_rules_check_their_rows_but_its_rounds_use_the_trusted_cores():
    from speclib.core.engine import acceptance_probabilities, residual_rows

    with pytest.raises(ValueError, match="p_x: contains NaN"):
        acceptance_probabilities(np.array([np.nan, 0.2]), np.array([0.3, 0.4]))
    with pytest.raises(TypeError, match="q_x: expected numbers in"):
        acceptance_probabilities(np.array([0.5, 0.2]), np.array(["0.3", "0.4"]))
    with pytest.raises(ValueError, match="p: row 0 sums to 0.5"):
        residual_rows(np.array([[0.25, 0.25, 0.0]]), np.array([[0.25, 0.25, 0.5]]))
    with pytest.raises(ValueError, match="q: negative probability"):
        residual_rows(np.array([[0.5, 0.5, 0.0]]), np.array([[-0.25, 0.75, 0.5]]))
    # the defaults the engine runs with are the same rules without the checks
    p, q = np.array([[0.5, 0.5, 0.0]]), np.array([[0.25, 0.25, 0.5]])
    np.testing.assert_array_equal(residual_rows.step(p, q), residual_rows(p, q))
    np.testing.assert_array_equal(acceptance_probabilities.step(p[0], q[0]), acceptance_probabilities(p[0], q[0]))

"""What crosses the loop's boundary from a user's plug-in is checked: models, verifiers, policies, proposers.

Every test hands a loop (or a protocol method) a plug-in that returns something wrong, the
way a student writing their own model, verifier, policy or proposer would, and checks that
the answer is a TypeError or ValueError naming the plug-in and what it returned, not a
silently wrong result or a traceback from deep inside numpy.  The last section checks the
other side of the bargain: speclib's own models, proposers and verifiers are trusted, so the
per-step checks cost them nothing.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from speclib.core import cache as cache_module
from speclib.core.adaptive import compare_controllers
from speclib.core.cache import RecomputeCache, checked_rows, model_cache, rows_trusted
from speclib.core.decoding import GenerationStats, autoregressive_generate, speculative_generate
from speclib.core.engine import run_fixed_steps, run_streams
from speclib.core.exact import Replay, output_distribution
from speclib.core.policies import ConfidenceStop, FallbackMonitor, FixedK, HeuristicK, PeekingStop
from speclib.core.proposers import DraftModel, MultiDraft, Proposal, PromptLookup, _lookup
from speclib.core.sampling import Sampler, Verification, verify
from speclib.core.stats import sequence_counts
from speclib.core.variants import RecurrentModel, batch_generate
from speclib.core.warping import greedy_generate, greedy_speculative_generate
from speclib.lm.models import FixedContextModel, MarkovModel, markov_pair


@pytest.fixture(scope="module")
def pair():
    return markov_pair(vocab_size=4, draft_noise=0.3, seed=0)


# --- Models: exactly one row per fed token, the right vocabulary ------------------------------

class Misaligned:
    """A user's model with an off-by-one: one row too many (an extra last row favouring token 3), or one too few."""

    def __init__(self, model, extra: int) -> None:
        self.model, self.extra, self.vocab_size = model, extra, model.vocab_size

    def __call__(self, tokens):
        rows = self.model(tokens)
        if self.extra > 0:
            favour_3 = np.full((1, self.vocab_size), 0.01)
            favour_3[0, 3] = 1 - 0.01 * (self.vocab_size - 1)
            return np.concatenate([rows, favour_3])
        return rows[1:]


ROW_COUNT = "exactly one row per token"


@pytest.mark.parametrize("extra", [1, -1])
def test_every_loop_refuses_a_model_returning_one_row_too_many_or_too_few(pair, extra):
    from speclib.book.render import trace_generation
    from speclib.book.wallclock import wallclock_experiment

    target, draft = pair
    bad = Misaligned(target, extra)
    calls = {
        "speculative_generate (target)": lambda: speculative_generate(bad, draft, [0], 5, 2, 0),
        "speculative_generate (draft)": lambda: speculative_generate(target, Misaligned(draft, extra), [0], 5, 2, 0),
        "autoregressive_generate": lambda: autoregressive_generate(bad, [0], 5, 0),
        "output_distribution": lambda: output_distribution(bad, draft, [0], 2, 1),
        "trace_generation": lambda: trace_generation(bad, draft, [0], 5, 2, 0),
        "greedy_generate": lambda: greedy_generate(bad, [0], 5),
        "greedy_speculative_generate": lambda: greedy_speculative_generate(bad, draft, [0], 5, 2),
        "batch_generate": lambda: batch_generate(bad, draft, [[0], [1]], 5, 2, 0),
        "compare_controllers": lambda: compare_controllers(bad, draft, [[0]], 5, [0.1], 0),
        "wallclock_experiment": lambda: wallclock_experiment(bad, draft, [[0]], 5, ks=(2,), reps=1),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=ROW_COUNT) as error:
            call()
        assert str(error.value).split(":")[0] in ("target", "draft", "model"), (name, str(error.value))


def test_the_misaligned_model_would_change_the_output_silently():
    """The negative control: read with the old rule (``rows[-n:]``), the extra row shifts every row."""
    target = MarkovModel(np.full((4, 4), 0.25))
    rows = Misaligned(target, 1)(np.array([0, 1, 2]))
    assert rows.shape == (4, 4) and rows[-1].argmax() == 3  # what rows[-n:] would have taken as the last row


def test_a_models_own_cache_is_checked_unless_it_is_speclibs():
    class Cache(RecomputeCache):  # a user's cache: a subclass of speclib's, returning one row too many
        def extend(self, tokens):
            rows = super().extend(tokens)
            return np.concatenate([rows, rows[-1:]])

    class Model(MarkovModel):
        def cache(self):
            return Cache(MarkovModel(self.transition))

    model = Model(np.full((4, 4), 0.25))
    cache = model_cache(model, "target")
    assert not rows_trusted(Cache(model)) and rows_trusted(cache)  # wrapped: the wrapper checks
    with pytest.raises(ValueError, match=f"target: .*{ROW_COUNT}; it returned 4 rows for 3 tokens"):
        speculative_generate(model, MarkovModel(model.transition), [0], 5, 2, 0)
    with pytest.raises(ValueError, match=f"draft: .*{ROW_COUNT}"):
        speculative_generate(MarkovModel(model.transition), model, [0], 5, 2, 0)
    np.testing.assert_array_equal(cache.tokens, [])  # everything else is the wrapped cache's
    assert cache.vocab_size == 4 and isinstance(cache.cache, Cache)


def test_rows_over_the_wrong_vocabulary_or_of_the_wrong_kind_are_refused(pair):
    target, draft = pair

    class Wide:
        vocab_size = 4

        def __call__(self, tokens):
            return np.full((len(tokens), 5), 0.2)

    class Nan(Wide):
        def __call__(self, tokens):
            return np.full((len(tokens), 4), np.nan)

    with pytest.raises(ValueError, match="target: a model must map .* shape \\(n, 4\\); it returned rows of 5"):
        speculative_generate(Wide(), draft, [0], 5, 2, 0)
    with pytest.raises(ValueError, match="draft: the model returned rows that are not probability .* NaN"):
        speculative_generate(target, Nan(), [0], 5, 2, 0)


@pytest.mark.parametrize("rows, kind, message", [
    (np.array([0.5, 0.5]), ValueError, r"shape \(n, V\); it returned an array of shape \(2,\)"),
    (np.full((1, 1, 2), 0.5), ValueError, r"it returned an array of shape \(1, 1, 2\)"),
    (np.zeros((1, 0)), ValueError, "empty vocabulary"),
    (np.full((2, 2), 0.5), ValueError, "it returned 2 rows for 1 token"),
    (0.5, ValueError, r"it returned an array of shape \(\)"),
    (np.array([["a", "b"]]), TypeError, "dtype <U1"),
    (None, TypeError, "dtype object"),
])
def test_checked_rows_refuses_every_wrong_shape(rows, kind, message):
    with pytest.raises(kind, match=f"^model: .*{message}"):
        checked_rows(rows, "model", n=1)
    np.testing.assert_array_equal(checked_rows(np.full((1, 2), 0.5), "model", 1, 2), [[0.5, 0.5]])
    with pytest.raises(TypeError, match="name: expected"):
        checked_rows(np.full((1, 2), 0.5), None)


# --- Verifiers: their hooks and what they return ------------------------------------------------

def test_accept_and_correct_rules_returning_nonsense_stop_the_loop(pair):
    target, draft = pair
    cases = [
        (dict(accept=lambda p_x, q_x: math.nan), "coin: .* probability nan"),
        (dict(accept=lambda p_x, q_x: 2.0), "coin: .* probability 2;"),
        (dict(accept=lambda p_x, q_x: 0.0, correct=lambda p, q: np.full_like(q, np.nan)), "correct: returned a row"),
        (dict(accept=lambda p_x, q_x: 0.0, correct=lambda p, q: q - 1.0), "correct: returned a row"),
        (dict(accept=lambda p_x, q_x: 0.0, correct=lambda p, q: q[:-1]), r"correct: returned .* shape \(3,\)"),
    ]
    for hooks, message in cases:
        with pytest.raises(ValueError, match=message):
            speculative_generate(target, draft, [0], 10, 3, 0, verifier=functools.partial(verify, **hooks))
    # the negative control: a valid rule of the same shape runs
    speculative_generate(target, draft, [0], 10, 3, 0, verifier=functools.partial(verify, accept=lambda p, q: 0.5))


def test_the_sampler_refuses_nan_rows_and_coins_outside_zero_one():
    sampler = Sampler(np.random.default_rng(0))
    for a in (math.nan, 2.0, -0.1):
        with pytest.raises(ValueError, match="coin: .* must lie in \\[0, 1\\]"):
            sampler.coin(a)
    for row in (np.array([np.nan, 1.0]), np.zeros(2), np.array([np.inf, 0.0])):
        with pytest.raises(ValueError, match="token: asked to draw from a row that is not a distribution"):
            sampler.token(row)
    assert sampler.coin(1.0) and not sampler.coin(0.0) and sampler.token(np.array([0.0, 1.0])) == 1
    replay = Replay([])
    with pytest.raises(ValueError, match="token: .* not a distribution"):
        replay.token(np.array([np.nan, 1.0]))
    with pytest.raises(ValueError, match="token: .* not a distribution"):
        replay.token(np.array([-0.5, 1.5]))


def test_the_engine_refuses_nonsense_rules(pair):
    target, draft = pair
    fixed_q, fixed_p = FixedContextModel(np.array([0.7, 0.3])), FixedContextModel(np.array([0.5, 0.5]))
    nan = lambda p, q: np.full(np.shape(p), np.nan)  # noqa: E731
    for t, d in ((target, draft), (fixed_q, fixed_p)):
        with pytest.raises(ValueError, match=r"accept: the rule returned nan; .* must lie in \[0, 1\]"):
            run_streams(t, d, 2, 10, 5, rng=0, accept=nan)
        with pytest.raises(ValueError, match=r"accept: the rule returned 2"):
            run_streams(t, d, 2, 10, 5, rng=0, accept=lambda p, q: np.full(np.shape(p), 2.0))
        with pytest.raises(ValueError, match="correct: the rule returned a row with NaN"):
            run_streams(t, d, 2, 10, 5, rng=0, correct=lambda p, q: -np.asarray(q))
        with pytest.raises(ValueError, match=r"accept: the rule returned ndarray of shape \(1,\)"):
            run_streams(t, d, 2, 10, 5, rng=0, accept=lambda p, q: np.ones(1))
    with pytest.raises(ValueError, match="accept: the rule returned nan"):
        run_fixed_steps(fixed_p.dist, fixed_q.dist, 2, 10, rng=0, accept=nan)
    run_streams(target, draft, 2, 10, 5, rng=0, accept=lambda p, q: np.full(np.shape(p), 0.5))  # a valid rule


def _verifier_returning(value):
    def verifier(draft_tokens, p_draft, q_target, rng, *, bonus=True):
        return value(draft_tokens) if callable(value) else value
    return verifier


@pytest.mark.parametrize("value, kind, message", [
    (None, TypeError, "returned NoneType; expected a speclib.core.sampling.Verification"),
    (0.5, TypeError, "returned float"),
    ((np.array([0]), 0), TypeError, "returned tuple"),
    (lambda d: Verification([0], 0), TypeError, "returned tokens of type list"),
    (lambda d: Verification(np.array([0.0]), 0), TypeError, "dtype float64"),
    (lambda d: Verification(np.array([0]), 0.0), TypeError, "n_accepted = 0.0"),
    (lambda d: Verification(np.append(d, 0), d.size + 1), ValueError, "n_accepted = 3 for a block of 2"),
    (lambda d: Verification(np.array([9]), 0), ValueError, "token 9, out of range for a vocabulary of 4"),
    (lambda d: Verification(np.array([], dtype=int), 0), ValueError, "returned 0 tokens"),
    (lambda d: Verification(np.append(d, [0, 0]), d.size), ValueError, "returned 4 tokens with n_accepted = 2"),
    (lambda d: Verification(np.append((d + 1) % 4, 0), d.size), ValueError, "are not drafted tokens"),
])
def test_a_verifier_returning_the_wrong_thing_is_named(pair, value, kind, message):
    target, draft = pair
    verifier = _verifier_returning(value)
    with pytest.raises(kind, match=f"^verifier verifier: .*{message}"):
        speculative_generate(target, draft, [0], 6, 2, 0, verifier=verifier)


def test_a_bad_verifier_is_named_in_every_loop_that_runs_it(pair):
    target, draft = pair
    verifier = _verifier_returning(None)
    with pytest.raises(TypeError, match="verifier verifier: returned NoneType"):
        sequence_counts(target, draft, [0], 2, 2, 10, 0, verifier=verifier)
    with pytest.raises(TypeError, match="verifier verifier: returned NoneType"):
        batch_generate(target, draft, [[0], [1]], 5, 2, 0, verifier=verifier)


def test_a_well_formed_user_verifier_runs(pair):
    target, draft = pair
    calls = []

    def user_verify(draft_tokens, p_draft, q_target, rng, *, bonus=True):
        calls.append(1)
        return verify(draft_tokens, p_draft, q_target, rng, bonus=bonus)

    a, _ = speculative_generate(target, draft, [0], 20, 3, 7, verifier=user_verify)
    b, _ = speculative_generate(target, draft, [0], 20, 3, 7)
    np.testing.assert_array_equal(a, b)
    assert calls


# --- Policies: what draft_length and keep_drafting answer ---------------------------------------

class Policy:
    name = "student"

    def __init__(self, k=2, keep=True):
        self.k, self.keep = k, keep

    def draft_length(self):
        return self.k

    def keep_drafting(self, p, x):
        return self.keep

    def update(self, n_drafted, n_accepted):
        pass


@pytest.mark.parametrize("k, kind, message", [
    ("2", TypeError, "returned '2' \\(str\\); expected an integer"),
    (2.0, TypeError, "returned 2.0 \\(float\\)"),
    (True, TypeError, "returned True"),
    (-1, ValueError, "returned -1; a draft length lies in \\[0, 10000\\]"),
    (10**12, ValueError, "returned 1000000000000"),
])
def test_a_policys_draft_length_is_checked(pair, k, kind, message):
    target, draft = pair
    with pytest.raises(kind, match=f"^policy student: draft_length\\(\\) {message}"):
        speculative_generate(target, draft, [0], 5, Policy(k), 0)


def test_numpy_spellings_of_a_policys_answers_are_valid(pair):
    target, draft = pair
    a, _ = speculative_generate(target, draft, [0], 12, Policy(np.int64(2), np.True_), 3)
    b, _ = speculative_generate(target, draft, [0], 12, 2, 3)
    np.testing.assert_array_equal(a, b)


def test_keep_drafting_must_answer_true_or_false(pair):
    target, draft = pair
    for keep in ("no", None, 0.5):
        with pytest.raises(TypeError, match=f"policy: student.keep_drafting\\(\\) returned {keep!r}"):
            speculative_generate(target, draft, [0], 5, Policy(2, keep), 0)


# --- Proposers: what propose returns ----------------------------------------------------------

class Proposer:
    def __init__(self, answer):
        self.answer = answer

    def start(self, prompt, vocab_size):
        self.vocab = vocab_size

    def propose(self, text, k, policy, choose, timings):
        return self.answer(k, self.vocab)

    def accept(self, length):
        pass


def _row(x, vocab=4):
    row = np.zeros(vocab)
    row[x] = 1.0
    return row


@pytest.mark.parametrize("answer, kind, message", [
    (lambda k, v: (np.array([1]), _row(1)[None], 0), TypeError, "returned tuple; expected a speclib.core.proposers.Proposal"),
    (lambda k, v: None, TypeError, "returned NoneType"),
    (lambda k, v: Proposal([1], _row(1)[None], 0), TypeError, "returned tokens of type list"),
    (lambda k, v: Proposal(np.array([1.0]), _row(1)[None], 0), TypeError, "dtype float64"),
    (lambda k, v: Proposal(np.array([1, 1, 1]), np.array([_row(1)] * 3), 0), ValueError, "returned 3 drafts .* at most 2"),
    (lambda k, v: Proposal(np.array([7]), _row(1)[None], 0), ValueError, "token 7, out of range"),
    (lambda k, v: Proposal(np.array([1]), _row(1), 0), ValueError, r"rows of shape \(4,\) for tokens of shape \(1,\)"),
    (lambda k, v: Proposal(np.array([1]), np.full((1, 4), 0.5), 0), ValueError, "not probability distributions"),
    (lambda k, v: Proposal(np.array([1]), _row(2)[None], 0), ValueError, "probability 0 under its own row"),
    (lambda k, v: Proposal(np.array([1]), _row(1)[None], -1), ValueError, "passes = -1"),
    (lambda k, v: Proposal(np.array([1]), _row(1)[None], 1.5), TypeError, "passes: expected an integer"),
])
def test_a_proposal_of_the_wrong_kind_is_named(pair, answer, kind, message):
    target, _ = pair
    with pytest.raises(kind, match=f"^proposer Proposer: propose\\(\\).*{message}"):
        speculative_generate(target, Proposer(answer), [0], 5, 2, 0)


def test_a_well_formed_user_proposal_runs(pair):
    target, _ = pair
    tokens, stats = speculative_generate(target, Proposer(lambda k, v: Proposal(np.array([1] * k), np.array([_row(1)] * k), 0)),
                                         [0], 12, 2, 0)
    assert tokens.size == 12 and stats.draft_proposed > 0


# --- Protocol methods validate their arguments -------------------------------------------------

@pytest.mark.parametrize("policy", [FixedK(2), HeuristicK(2), ConfidenceStop(0.5, 3), PeekingStop(0.5, 3),
                                    FallbackMonitor(FixedK(2), c=0.1)])
def test_every_policys_update_checks_its_arguments(policy):
    for args, kind, message in [(("2", 1), TypeError, "n_drafted: expected an integer"),
                                ((math.nan, 1), TypeError, "n_drafted: expected an integer"),
                                ((-1, 0), ValueError, "n_drafted: must be >= 0"),
                                ((2, -1), ValueError, "n_accepted: must be >= 0"),
                                ((2, 3), ValueError, "n_accepted: must be <= 2"),
                                ((10**12, 0), ValueError, "n_drafted: must be <= 10000"),
                                ((1, 10**12), ValueError, "n_accepted: must be <= 1")]:
        with pytest.raises(kind, match=message):
            policy.update(*args)
    policy.update(np.int64(2), np.int64(1))  # numpy's integers are integers


def test_keep_drafting_checks_its_row():
    for policy in (ConfidenceStop(0.5, 3), PeekingStop(0.5, 3)):
        with pytest.raises(ValueError, match="p: row 0 contains NaN"):
            policy.keep_drafting(np.array([[np.nan, 1.0]])[0].tolist(), 0)
        with pytest.raises(TypeError, match="p: expected"):
            policy.keep_drafting(None, 0)
        assert policy.keep_drafting(np.array([0.9, 0.1]), 0)
    with pytest.raises(ValueError, match="x: must be <= 1"):
        PeekingStop(0.5, 3).keep_drafting(np.array([0.9, 0.1]), 5)


def test_draft_model_start_propose_and_accept_check_their_arguments(pair):
    target, draft = pair
    for proposer in (DraftModel(draft), MultiDraft(draft, 2)):
        with pytest.raises(RuntimeError, match="propose\\(\\) before start\\(\\)"):
            proposer.propose(np.array([0]), 2, FixedK(2), Sampler(np.random.default_rng(0)), None)
        with pytest.raises(ValueError, match="prompt: expected a 1-D sequence"):
            proposer.start(None, 4)
        with pytest.raises(ValueError, match="prompt: token 7 at position 0 is out of range"):
            proposer.start(np.array([7]), 4)
        with pytest.raises(TypeError, match="vocab_size: expected an integer"):
            proposer.start(np.array([0]), "4")
        proposer.start(np.array([0]), 4)
        choose = Sampler(np.random.default_rng(0))
        with pytest.raises(ValueError, match="k: must be >= 0"):
            proposer.propose(np.array([0]), -1, FixedK(2), choose, None)
        with pytest.raises(ValueError, match="k: must be <= 10000"):
            proposer.propose(np.array([0]), 10**12, FixedK(2), choose, None)
        with pytest.raises(TypeError, match="k: expected an integer"):
            proposer.propose(np.array([0]), 2.0, FixedK(2), choose, None)
        with pytest.raises(TypeError, match="text: token ids must be integers"):
            proposer.propose(np.array([0.5]), 2, FixedK(2), choose, None)
        with pytest.raises(ValueError, match="length: must be >= 0"):
            proposer.accept(-1)
        proposer.propose(np.array([0]), np.int64(2), FixedK(2), choose, None)  # numpy's integers are integers
    started = DraftModel(draft)
    started.start(np.array([0]), 4)
    with pytest.raises(TypeError, match="policy: expected a draft-length policy"):
        started.propose(np.array([0]), 2, None, Sampler(np.random.default_rng(0)), None)


def test_prompt_lookup_checks_its_arguments():
    lookup = PromptLookup()
    with pytest.raises(RuntimeError, match="before start"):
        lookup.propose(np.array([0]), 2, None, None, None)
    with pytest.raises(ValueError, match="prompt: must contain at least one token"):
        lookup.start([], 4)
    lookup.start([0], 4)
    with pytest.raises(ValueError, match="k: must be <= 10000"):
        lookup.propose(np.array([0, 1, 0]), 10**12, None, None, None)
    with pytest.raises(ValueError, match="n_max: must be <= 10000"):
        PromptLookup(n_max=10**12)


def test_record_step_and_replay_check_their_arguments():
    stats = GenerationStats()
    for kwargs, kind, message in [(dict(proposed=2, accepted=math.inf, emitted=1), TypeError, "accepted: expected"),
                                  (dict(proposed=2, accepted=3, emitted=1), ValueError, "accepted: must be <= 2"),
                                  (dict(proposed=-1, accepted=0, emitted=1), ValueError, "proposed: must be >= 0"),
                                  (dict(proposed=2, accepted=1, emitted="3"), TypeError, "emitted: expected"),
                                  (dict(proposed=2, accepted=1, emitted=2, draft_passes=-1), ValueError,
                                   "draft_passes: must be >= 0")]:
        with pytest.raises(kind, match=message):
            stats.record_step(**kwargs)
    assert stats.target_passes == 0
    stats.record_step(np.int64(2), np.int64(1), np.int64(2))
    assert (stats.target_passes, stats.accepted, stats.tokens_generated) == (1, 1, 2)
    with pytest.raises(TypeError, match="script: expected a list of choice indices"):
        Replay(None)
    with pytest.raises(ValueError, match=r"script\[1\]: a choice index is >= 0"):
        Replay([0, -1])
    with pytest.raises(TypeError, match=r"script\[0\]: expected an integer"):
        Replay(["a"])
    with pytest.raises(ValueError, match="script: choice 0 takes outcome 5, but only 2 are possible"):
        Replay([5]).token(np.array([0.5, 0.5]))


# --- Prompt lookup: an index that grows with the text, the drafts of a search afresh -----------

@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 5), st.integers(1, 3), st.integers(0, 2))
def test_prompt_lookup_drafts_exactly_what_a_search_of_the_whole_text_finds(seed, vocab, n_min, spread):
    rng = np.random.default_rng(seed)
    n_max = n_min + spread
    text = rng.integers(0, vocab, size=int(rng.integers(1, 4)))
    lookup = PromptLookup(n_max, n_min)
    lookup.start(text, vocab)
    for _ in range(30):
        k = int(rng.integers(0, 5))
        want = _lookup(text, k, n_max, n_min) if k else np.zeros(0, dtype=np.int64)
        np.testing.assert_array_equal(lookup.propose(text, k, None, None, None).tokens, want)
        if rng.random() < 0.15 and text.size > 2:  # the loop truncates the text (and says so)
            text = text[:int(rng.integers(1, text.size))]
            lookup.accept(text.size - 1)
        else:
            text = np.concatenate([text, rng.integers(0, vocab, size=int(rng.integers(1, 4)))])
            lookup.accept(int(rng.integers(0, text.size)))


def test_prompt_lookup_in_the_loop_emits_what_it_did_before(pair):
    """Same tokens and counters as a proposer that searches the whole text at every step."""
    target, _ = markov_pair(vocab_size=6, seed=2, concentration=0.1)

    class Afresh(PromptLookup):
        def propose(self, text, k, policy, choose, timings):
            tokens = _lookup(text, k, self.n_max, self.n_min) if k else np.zeros(0, dtype=np.int64)
            return Proposal(tokens, np.eye(self.vocab_size)[tokens], 0)

    for seed in range(3):
        a, sa = speculative_generate(target, PromptLookup(), [0], 300, 4, seed)
        b, sb = speculative_generate(target, Afresh(), [0], 300, 4, seed)
        np.testing.assert_array_equal(a, b)
        assert (sa.target_passes, sa.accepted) == (sb.target_passes, sb.accepted)
        assert sa.accepted > 0


# --- Speclib's own parts are trusted, so the checks cost them nothing --------------------------

def test_speclibs_own_models_and_caches_are_trusted_and_a_subclass_is_not(pair):
    from speclib.lm.ngram import NGramModel
    from speclib.lm.transformer import TransformerConfig, random_transformer

    target, _ = pair
    transformer = random_transformer(TransformerConfig(vocab_size=5, block_size=8, d_model=8, n_layers=1, n_heads=2))
    recurrent = RecurrentModel(4)
    ngram = NGramModel(np.arange(20) % 5, order=2, vocab_size=5)
    for obj in (target, FixedContextModel(np.array([0.5, 0.5])), ngram, transformer.cache(), recurrent.cache(),
                RecomputeCache(target), model_cache(target)):
        assert rows_trusted(obj), obj

    class Mine(MarkovModel):
        pass

    assert not rows_trusted(Mine(target.transition)) and not rows_trusted(lambda t: t)
    assert not rows_trusted(Misaligned(target, 1))


def test_the_loop_does_not_check_speclibs_own_rows_but_checks_a_users(pair, monkeypatch):
    target, draft = pair
    calls = []
    real = cache_module.checked_rows

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cache_module, "checked_rows", counting)
    speculative_generate(target, draft, [0], 30, 3, 0)
    speculative_generate(target, PromptLookup(), [0], 30, 3, 0)
    assert calls == []
    speculative_generate(_Wrapped(target), draft, [0], 30, 3, 0)  # the negative control
    assert len(calls) > 0


class _Wrapped:
    """A user's model: speclib's rows, but not speclib's class."""

    def __init__(self, model):
        self.model, self.vocab_size = model, model.vocab_size

    def __call__(self, tokens):
        return self.model(tokens)

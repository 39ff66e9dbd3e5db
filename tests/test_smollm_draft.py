"""The EAGLE draft of a Llama target (speclib.lm.smollm_draft): exact through the one loop, its rows, its errors.

Exactness is checked by exact enumeration (speclib.core.exact) on a tiny random Llama, with a
draft vocabulary smaller than the target's (the target then writes tokens the draft never
proposes) and with all of it, against the target's own law, with faulty drafters as
negative controls.  The shipped draft and its record are checked where they exist; the
statistical test on the real model is tests/test_smollm_law.py.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from speclib.core.decoding import speculative_generate
from speclib.core.exact import output_distribution, target_sequence_distribution
from speclib.core.proposers import Proposal
from speclib.lm.drafters import FeatureTarget, acceptance_on_prompts, load_weights, run_prompts
from speclib.lm.llama import LlamaConfig, random_llama
from speclib.lm.smollm_draft import (
    DRAFT_FILE,
    RECORD_FILE,
    LlamaEagle,
    check_record,
    draft_shapes,
    load_draft,
    load_record,
    measure_loop,
    q8_0,
    random_draft,
    save_draft,
)

#: Largest gap allowed between the loop's exact law and the target's (float rounding; observed ~1e-8).
EXACT_TOL = 1e-6
#: Smallest gap a faulty drafter must produce for the check to count as catching it.
FAULT_MIN = 1e-3

TINY = LlamaConfig(vocab_size=3, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=12)
SMALL = LlamaConfig(vocab_size=40, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48, rope_base=100.0)


def _gap(target, drafter, k: int, prompt=(0, 1), length: int = 3) -> float:
    law = output_distribution(drafter.target, drafter, list(prompt), length, k=k)
    return float(abs(law - target_sequence_distribution(target, list(prompt), length)).max())


def _arrays(cfg: LlamaConfig, vocab, d_ff: int = 20, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    out = {n: (1.0 + 0.1 * rng.standard_normal(s)) if len(s) == 1 else rng.standard_normal(s) / np.sqrt(s[1])
           for n, s in draft_shapes(cfg.d_model, cfg.n_heads, cfg.n_kv_heads, d_ff).items()}
    out["vocab"] = np.asarray(vocab)
    return out


# --------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
@pytest.mark.parametrize("vocab", [[0, 2], None], ids=["reduced", "full"])
def test_the_loop_keeps_the_targets_law_with_the_llama_eagle(temperature, vocab):
    # context 1: the draft reads the prompt's last token only, so its first entry is not the
    # text's first; a draft vocabulary of 2 of the 3 tokens: the target writes token 1, which the
    # draft never proposes.
    target = random_llama(TINY, seed=0, temperature=temperature)
    for k in (1, 3):
        drafter = random_draft(target, vocab=vocab, seed=1, context=1)
        assert _gap(target, drafter, k) < EXACT_TOL
    _, stats = speculative_generate(drafter.target, drafter, [0, 1], 12, k=3, rng=0)
    assert stats.draft_proposed > 0  # it drafted: the law above is the speculative one


class _StaleRows(LlamaEagle):
    """Faulty: reports each draft's row one draft late (an off-by-one in the rows)."""

    def propose(self, text, k, policy, choose, timings):
        prop = super().propose(text, k, policy, choose, timings)
        rows = np.roll(prop.rows, 1, axis=0)
        if rows.shape[0]:
            rows[0] = 1.0 / self.vocab_size
        return Proposal(prop.tokens, rows, prop.passes)


class _FullRows(LlamaEagle):
    """Faulty: draws from the draft vocabulary, but reports the row spread over the whole vocabulary."""

    def draft_row(self, f):
        row = super().draft_row(f)
        self._reported = 0.5 * row + 0.5 / self.vocab_size
        return row

    def propose(self, text, k, policy, choose, timings):
        prop = super().propose(text, k, policy, choose, timings)
        rows = prop.rows.copy()
        if rows.shape[0]:
            rows[-1] = self._reported
        return Proposal(prop.tokens, rows, prop.passes)


@pytest.mark.parametrize("fault", [_StaleRows, _FullRows])
def test_the_exactness_check_catches_wrong_rows(fault):
    target = random_llama(TINY, seed=0)
    drafter = random_draft(target, vocab=[0, 2], seed=1, context=1)
    assert _gap(target, drafter, 2) < EXACT_TOL
    drafter.__class__ = fault
    assert _gap(target, drafter, 2) > FAULT_MIN


def test_a_reused_prompt_cache_keeps_the_law_and_drafts_from_the_first_step():
    target = random_llama(TINY, seed=0)
    drafter = random_draft(target, vocab=[0, 2], seed=1)
    prompt = [0, 1, 2]
    cache = target.cache(features=True)
    cache.extend(prompt[:-1])
    drafter.target.reuse(cache)
    assert _gap(target, drafter, 2, prompt=prompt) < EXACT_TOL
    _, stats = speculative_generate(drafter.target, drafter, prompt, 6, k=2, rng=0)
    assert stats.k_per_step[0] == 2 and len(cache) >= 2  # the first step drafted; the cache is the one reused
    with pytest.raises(ValueError, match="prompt: the target reuses a cache of 2 tokens"):
        speculative_generate(drafter.target, drafter, [1, 1, 2], 4, k=2, rng=0)
    with pytest.raises(ValueError, match="prompt: the target reuses a cache of 2 tokens"):
        speculative_generate(drafter.target, drafter, [0, 1], 4, k=2, rng=0)
    drafter.target.reuse(None)
    _, stats = speculative_generate(drafter.target, drafter, prompt, 6, k=2, rng=0)
    assert stats.k_per_step[0] == 0  # a fresh cache again: the first step is a plain one
    with pytest.raises(ValueError, match="cache: expected a cache of this target's model made with features=True"):
        drafter.target.reuse(target.cache())
    with pytest.raises(ValueError, match="cache: holds no token"):
        drafter.target.reuse(target.cache(features=True))


def test_the_draft_needs_its_own_target():
    target = random_llama(TINY, seed=0)
    with pytest.raises(ValueError, match="drafter's .target"):
        speculative_generate(target, random_draft(target, seed=1), [0, 1], 4, 2, rng=0)


def test_passes_and_entries_are_counted_as_the_loop_drafts():
    # Per drafting step: one pass over the entries the target's new states make, then one per
    # further draft (k in all); every entry from the context on is read once over the run.
    target = random_llama(SMALL, seed=0)
    drafter = random_draft(target, vocab=np.arange(0, 40, 2), seed=1, context=3)
    timings = {"passes": []}
    prompt = [1, 2, 3, 4, 5, 6]
    _, stats = speculative_generate(drafter.target, drafter, prompt, 30, 3, rng=0, timings=timings)
    ks = np.array(stats.k_per_step)
    assert ks[0] == 0 and (ks[1:] > 0).all()
    entries = [n for who, n, _ in timings["passes"] if who == "draft"]
    assert stats.draft_passes == len(entries) == int(ks.sum())
    last_text = len(prompt) + sum(stats.tokens_per_step[:-1])
    first = len(prompt) - 3  # the draft reads the prompt's last `context` tokens
    assert sum(entries) == (last_text - 1 - first) + int((ks[1:] - 1).sum())


class _Recording:
    """Wraps a proposer; keeps every (text, proposal) of a generation."""

    def __init__(self, inner):
        self.inner, self.vocab_size, self.target, self.steps = inner, inner.vocab_size, inner.target, []

    def start(self, prompt, vocab_size):
        self.inner.start(prompt, vocab_size)

    def propose(self, text, k, policy, choose, timings):
        proposal = self.inner.propose(text, k, policy, choose, timings)
        self.steps.append((text.copy(), proposal))
        return proposal

    def accept(self, length):
        self.inner.accept(length)


@pytest.mark.parametrize("context", [2, 64])
def test_the_loop_drafts_the_teacher_forced_rows(context):
    # Each step's first draft is the draft's row after the entries the target's own states make
    # (from the prompt's last `context` tokens on), as a fresh drafter computes them in one pass.
    target = random_llama(SMALL, seed=0, temperature=0.7)
    arrays = _arrays(SMALL, np.arange(0, 40, 2))
    drafter = _Recording(LlamaEagle(target, arrays, 4, 2, context=context))
    prompt = np.array([5, 6, 7, 8, 9])
    tokens, _ = speculative_generate(drafter.target, drafter, prompt, 30, 3, rng=0)
    text = np.concatenate([prompt, tokens])
    cache = target.cache(features=True)
    cache.extend(text)
    checked = 0
    for seen, proposal in drafter.steps:
        if not proposal.tokens.size:
            continue
        n, first = seen.size, max(0, prompt.size - context)
        ref = LlamaEagle(target, arrays, 4, 2, context=context)
        f = ref._pass(cache.features[first:n - 1], text[first + 1:n])[-1:]
        np.testing.assert_allclose(proposal.rows[0], ref.draft_row(f), atol=1e-6)
        checked += 1
    assert checked >= 5


# --------------------------------------------------------------------------- the rows and the pass


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_draft_rows_live_on_the_draft_vocabulary(temperature):
    target = random_llama(SMALL, seed=0, temperature=temperature)
    vocab = np.array([3, 7, 11, 30, 31])
    drafter = random_draft(target, vocab=vocab, seed=1)
    cache = drafter.target.cache()
    drafter.start(np.array([1, 2, 3, 4]), target.vocab_size)
    cache.extend([1, 2, 3])
    proposal = drafter.propose(np.array([1, 2, 3, 4]), 3, _Always(), _Argmax(), None)
    rows = proposal.rows
    assert rows.shape == (3, 40) and np.allclose(rows.sum(axis=1), 1.0)
    outside = np.setdiff1d(np.arange(40), vocab)
    assert (rows[:, outside] == 0).all() and np.isin(proposal.tokens, vocab).all()
    if temperature == 0.0:
        assert set(np.unique(rows)) <= {0.0, 1.0}
    # the row is the softmax of the head's scores over the draft vocabulary
    f = drafter._pass(cache.features[-1:], np.array([4]))
    drafter._count -= 1
    z = drafter.draft_logits(f)[0].astype(np.float64)
    assert z.shape == (5,)
    np.testing.assert_allclose(z, target.head(f)[0, vocab], rtol=1e-5, atol=1e-5)
    # column x of the row is token x's probability: the softmax of the target's head row of x
    from speclib.lm.transformer import _softmax

    want = np.zeros(40)
    want[vocab] = _softmax(target.head(f)[0, vocab], temperature)
    np.testing.assert_allclose(drafter.draft_row(f), want, atol=1e-6)


class _Always:
    def keep_drafting(self, p, x):
        return True


class _Argmax:
    def token(self, p):
        return int(np.argmax(p))


def test_the_compiled_and_quantized_passes_compute_the_numpy_pass():
    pytest.importorskip("numba")
    target = random_llama(SMALL, seed=0)
    arrays = _arrays(SMALL, np.arange(0, 40, 3), d_ff=32)
    tokens = np.random.default_rng(2).integers(0, 40, 14)
    cache = target.cache(features=True)
    cache.extend(tokens)
    ref = LlamaEagle(target, arrays, 4, 2)
    want = ref._pass(cache.features[:-1], tokens[1:])
    compiled = LlamaEagle(target.with_compiled(), arrays, 4, 2)
    np.testing.assert_allclose(compiled._pass(cache.features[:-1], tokens[1:]), want, atol=2e-5)
    q8 = LlamaEagle(target, arrays, 4, 2, layout="q8")
    assert q8.fc.layout == "q8" and q8.core.layout == "q8"
    got = q8._pass(cache.features[:-1], tokens[1:])
    assert 0 < np.abs(got - want).max() < 0.05 * np.abs(want).max()  # quantized: close, not equal
    # entries fed one at a time give what one pass over all of them gives
    ref._count = ref._first = 0
    pieces = np.concatenate([ref._pass(cache.features[i:i + 1], tokens[i + 1:i + 2]) for i in range(13)])
    np.testing.assert_allclose(pieces, want, atol=2e-5)


def test_q8_0_bounds_each_weight_by_half_its_block_scale():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 64)).astype(np.float32)
    w[2, :32] = 0.0  # a block of zeros: scale 0, codes 0
    lin = q8_0(w)
    back = lin.dequantize()
    scale = np.repeat(lin.scale, 32, axis=1)
    assert (np.abs(back - w) <= 0.5 * scale + 1e-7).all() and (back[2, :32] == 0).all()
    assert np.abs(lin.codes).max() == 127  # every block's largest weight uses the whole range
    with pytest.raises(ValueError, match="weights: expected a matrix whose rows are whole blocks of 32"):
        q8_0(np.zeros((2, 40)))


def test_a_copied_run_shares_the_weights_and_copies_the_state():
    target = random_llama(SMALL, seed=0)
    drafter = random_draft(target, seed=1)
    other = copy.deepcopy(drafter)
    assert other.core is drafter.core and other.fc is drafter.fc and other.target is drafter.target
    assert other._keys is not drafter._keys


# --------------------------------------------------------------------------- bad input


def test_bad_arrays_are_named():
    target = random_llama(SMALL, seed=0)
    good = _arrays(SMALL, [1, 2, 3])

    def bad(**changes):
        return {**good, **changes}

    with pytest.raises(TypeError, match="target: expected a speclib.lm.llama.Llama"):
        LlamaEagle("model", good, 4, 2)
    with pytest.raises(TypeError, match="arrays: expected a dict"):
        LlamaEagle(target, [1, 2], 4, 2)
    with pytest.raises(ValueError, match=r"arrays\['qkv'\]: expected shape"):
        LlamaEagle(target, bad(qkv=np.zeros((3, 3))), 4, 2)
    missing = dict(good)
    del missing["wo"]
    with pytest.raises(ValueError, match=r"arrays\['wo'\]: expected shape \(32, 32\), got nothing"):
        LlamaEagle(target, missing, 4, 2)
    with pytest.raises(ValueError, match=r"arrays\['fc'\]: holds NaN"):
        LlamaEagle(target, bad(fc=np.full((32, 64), np.nan)), 4, 2)
    with pytest.raises(ValueError, match=r"arrays\['vocab'\]: expected distinct token ids in \[0, 40\)"):
        LlamaEagle(target, bad(vocab=np.array([1, 40])), 4, 2)
    with pytest.raises(ValueError, match=r"arrays\['vocab'\]: expected distinct token ids"):
        LlamaEagle(target, bad(vocab=np.array([1, 1, 2])), 4, 2)
    with pytest.raises(ValueError, match=r"arrays\['vocab'\]: expected the draft vocabulary"):
        LlamaEagle(target, bad(vocab=np.array([1.0, 2.0])), 4, 2)
    with pytest.raises(ValueError, match="layout: expected 'f32' or 'q8'"):
        LlamaEagle(target, good, 4, 2, layout="q4")
    with pytest.raises(ValueError, match="rope_layout: expected one of"):
        LlamaEagle(target, good, 4, 2, rope_layout="left")
    with pytest.raises(ValueError, match="context: must be >= 0"):
        LlamaEagle(target, good, 4, 2, context=-1)


def test_a_draft_file_round_trips_and_refuses_another_target(tmp_path):
    target = random_llama(SMALL, seed=0)
    arrays = _arrays(SMALL, np.arange(0, 40, 5))
    path = tmp_path / "draft.npz"
    save_draft(path, arrays, target, context=7, seed=3)
    header, stored = load_weights(path)
    assert header["kind"] == "llama-eagle" and stored["vocab"].dtype == np.int64
    assert (stored["vocab"] == arrays["vocab"]).all() and stored["fc"].dtype == np.float32
    drafter = load_draft(target, path)
    assert drafter.context == 7 and (drafter.vocab == arrays["vocab"]).all()
    other = random_llama(LlamaConfig(vocab_size=40, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8))
    with pytest.raises(ValueError, match="was trained for a target with d_target = 32"):
        load_draft(other, path)
    from speclib.lm.drafters import save_weights

    save_weights(tmp_path / "medusa.npz", "medusa", {"w0": np.zeros((2, 2))})
    with pytest.raises(ValueError, match="holds a 'medusa' drafter"):
        load_draft(target, tmp_path / "medusa.npz")
    with pytest.raises(FileNotFoundError, match="path: no drafter weights"):
        load_draft(target, tmp_path / "none.npz")


# --------------------------------------------------------------------------- acceptance on prompts


def test_runs_stop_at_the_stop_token_and_count_their_steps():
    target = random_llama(SMALL, seed=0)
    drafter = random_draft(target, vocab=np.arange(20), seed=1)
    prompts = [np.array([1, 2, 3]), np.array([4, 5, 6, 7])]
    runs = run_prompts(drafter.target, drafter, prompts, 40, 3, seeds=(0, 1))
    assert [(r.prompt, r.seed) for r in runs] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(r.tokens == 40 and r.verified == r.verified_per_step.sum() for r in runs)
    # the same run, stopped at the first token it writes of a stop id
    tokens, _ = speculative_generate(drafter.target, drafter, prompts[0], 40, 3, rng=np.random.default_rng([0, 0]))
    stop = int(tokens[10])
    stopped = run_prompts(drafter.target, drafter, prompts[:1], 40, 3, seeds=(0,), stop=stop)[0]
    first = int(np.flatnonzero(tokens == stop)[0])
    assert first + 1 <= stopped.tokens <= first + 4  # the step that wrote it ends the run (at most k + 1 tokens)
    with pytest.raises(TypeError, match="target: reuse_prompt needs a FeatureTarget"):
        run_prompts(target, drafter, prompts, 4, 2, reuse_prompt=True)
    with pytest.raises(ValueError, match="seeds: expected at least one seed"):
        run_prompts(drafter.target, drafter, prompts, 4, 2, seeds=())


def test_acceptance_on_prompts_pools_the_steps_with_an_interval():
    target = random_llama(SMALL, seed=0)
    good = random_draft(target, seed=1)
    m = acceptance_on_prompts(good.target, good, [np.array([1, 2, 3])], 60, 3, seeds=(0, 1, 2), reuse_prompt=True,
                              batches=5)
    assert m.accepted == sum(r.accepted for r in m.runs) and m.verified == sum(r.verified for r in m.runs)
    assert m.rate == pytest.approx(m.accepted / m.verified) and m.low <= m.rate <= m.high
    summary = m.summary()
    assert summary["runs"] == 3 and len(summary["rate_per_run"]) == 3 and "interval95" in summary
    # a draft that knows the target (the draft is its own target's features read by the target's head)
    # is accepted far more often than a random one: the measurement sees the difference
    assert isinstance(good.target, FeatureTarget)


# --------------------------------------------------------------------------- the record


def _tiny_record(tmp_path):
    target = random_llama(SMALL, seed=0)
    path = tmp_path / "draft.npz"
    save_draft(path, _arrays(SMALL, np.arange(0, 40, 2)), target, context=8)
    prompts = {"a": [np.array([1, 2, 3, 4])], "b": [np.array([5, 6, 7]), np.array([8, 9, 10])]}
    record = measure_loop(target, prompts, path, k=2, n_new=24, seeds={"0": (0,), "1": (0, 1)}, cost_new=12,
                          batches=3, pass_repeats=3)
    record["provenance"] = {"processor": "test", "date": "today", "draft_sha256": "0" * 64, "command": "test"}
    return record


def test_a_measured_record_passes_its_check_and_faults_do_not(tmp_path):
    record = _tiny_record(tmp_path)
    assert check_record(record) is record
    assert set(record["acceptance"]) == {"0", "1"} and set(record["acceptance"]["1"]) == {"a", "b"}
    assert record["acceptance"]["1"]["b"]["runs"] == 4 and record["cost"]["verify_ratio"] > 0
    assert set(record["predicted_speedup_by_k"]["1"]["a"]) == {"1", "2"}
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    assert load_record(path) == record

    def broken(change) -> dict:
        bad = json.loads(json.dumps(record))
        change(bad)
        return bad

    faults = {
        "rate": lambda r: r["acceptance"]["1"]["a"].update(rate=r["acceptance"]["1"]["a"]["rate"] + 0.01),
        "interval": lambda r: r["acceptance"]["0"]["b"].update(interval95=[2.0, 3.0]),
        "speed-up": lambda r: r["predicted_speedup"]["1"].update(a=r["predicted_speedup"]["1"]["a"] + 0.1),
        "c": lambda r: r["cost"].update(c=r["cost"]["c"] * 2),
        "r(j+1)": lambda r: r["cost"]["isolated_ratios"].update({"2": 5.0}),
        "speed-up at j": lambda r: r["predicted_speedup_by_k"]["0"]["b"].update({"1": 9.0}),
        "family": lambda r: r["acceptance"]["0"].pop("a"),
        "provenance": lambda r: r["provenance"].pop("processor"),
        "temperature": lambda r: r["acceptance"].pop("0"),
    }
    for name, change in faults.items():
        with pytest.raises(ValueError, match="record"):
            check_record(broken(change))
    with pytest.raises(FileNotFoundError, match="path: no record"):
        load_record(tmp_path / "none.json")


def test_the_shipped_record_passes_its_check_and_names_the_shipped_draft():
    if not RECORD_FILE.is_file():
        pytest.skip("no record yet (benchmarks/smollm_draft.py writes it)")
    import hashlib

    record = load_record()
    assert record["provenance"]["draft_sha256"] == hashlib.sha256(DRAFT_FILE.read_bytes()).hexdigest()
    assert set(record["acceptance"]["1"]) == {"code_edit", "summary", "quote", "open"}


# --------------------------------------------------------------------------- the interval


def test_the_batch_means_interval_covers_the_true_ratio():
    """Seeded: 400 simulated loops of 300 steps, each step verifying 1 to 4 drafts accepted with
    probability 0.6 each; the 95% interval must hold 0.6 in 90% to 99% of them (a half-width half
    as wide covers about 70%, twice as wide about 100%: both fail)."""
    from speclib.core.stats import batch_means_ratio

    rng = np.random.default_rng(0)
    covered = 0
    for _ in range(400):
        verified = rng.integers(1, 5, 300)
        accepted = rng.binomial(verified, 0.6)
        ci = batch_means_ratio(accepted, verified, batches=10)
        assert ci.mean == pytest.approx(accepted.sum() / verified.sum())
        covered += ci.low <= 0.6 <= ci.high
    assert 0.90 <= covered / 400 <= 0.99


def test_the_batch_means_interval_names_bad_input():
    from speclib.core.stats import batch_means_ratio

    with pytest.raises(ValueError, match="denominators: expected the shape of numerators"):
        batch_means_ratio([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="numerators: counts must be finite and non-negative"):
        batch_means_ratio([1, -2, 1], [1, 2, 3], batches=2)
    with pytest.raises(ValueError, match="denominators: sum to 0"):
        batch_means_ratio([0, 0], [0, 0], batches=2)
    with pytest.raises(ValueError, match="batches: 5 batches leave one without any denominator"):
        batch_means_ratio([1, 1], [1, 1], batches=5)
    with pytest.raises(ValueError, match="batches: must be >= 2"):
        batch_means_ratio([1, 1], [1, 1], batches=1)

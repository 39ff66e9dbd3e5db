"""speclib.book.trace: drafting with recorded rows, one-pass scoring, and the verification trace."""

import numpy as np
import pytest

from speclib.book.broken import INVERTED_RATIO
from speclib.core.decoding import speculative_generate
from speclib.lm.models import fixed_pair, markov_pair
from speclib.core.sampling import sample_token, verify
from speclib.book.trace import (
    ACCEPTED,
    BONUS,
    REJECTED,
    RecordingGenerator,
    draft_block,
    score_block,
    speculative_trace,
    trace_markdown,
    trace_tokens,
    verify_trace,
)


def test_recording_generator_shares_state_and_records():
    rng = np.random.default_rng(7)
    rec = RecordingGenerator(rng)
    a = rec.random()
    b = rng.random()  # the original generator continues where the recorder left off
    ref = np.random.default_rng(7)
    assert (a, b) == (ref.random(), ref.random())
    assert rec.draws == [a]
    rec.random(size=3)  # arrays are not scalar draws
    assert rec.draws == [a]
    assert RecordingGenerator(7).random() == np.random.default_rng(7).random()


def test_draft_block_rows_are_the_conditional_draft_distributions():
    _, draft = markov_pair(vocab_size=8, draft_noise=0.4, seed=1)
    block = draft_block(draft, [3, 5], k=6, rng=2)
    seq = np.concatenate([[3, 5], block.tokens])
    np.testing.assert_array_equal(block.p_rows, draft(seq)[1:7])
    assert (block.p_rows[np.arange(6), block.tokens] > 0).all()


def test_draft_block_draws_the_random_numbers_of_sample_token():
    _, draft = markov_pair(vocab_size=8, seed=1)
    rng = np.random.default_rng(4)
    seq = [2]
    for _ in range(5):
        seq.append(sample_token(draft(np.array(seq))[-1], rng))
    np.testing.assert_array_equal(draft_block(draft, [2], 5, rng=4).tokens, seq[1:])


def test_draft_block_tokens_follow_the_recorded_row():
    # Seeded statistical check: the first drafted token's frequencies over 4000 runs are within
    # total-variation 0.05 of the recorded row (V = 6: a correct sampler gives about 0.015).
    _, draft = markov_pair(vocab_size=6, draft_noise=0.2, seed=3)
    rng = np.random.default_rng(0)
    firsts = [draft_block(draft, [1], 2, rng).tokens[0] for _ in range(4000)]
    row = draft_block(draft, [1], 1, rng).p_rows[0]
    freq = np.bincount(firsts, minlength=6) / 4000
    assert 0.5 * np.abs(freq - row).sum() < 0.05
    # Negative control: the argmax of the row (a greedy draft) is far from it.
    greedy = np.eye(6)[np.argmax(row)]
    assert 0.5 * np.abs(greedy - row).sum() > 0.05


def test_score_block_is_k_plus_1_separate_calls_in_one(second_order_pair):
    for target in (markov_pair(vocab_size=5, seed=2)[0], second_order_pair[0]):
        prefix, drafts = np.array([1, 0, 2]), np.array([2, 1, 1, 0])
        rows = score_block(target, prefix, drafts)
        assert rows.shape == (5, target.vocab_size)
        for i in range(5):
            seq = np.concatenate([prefix, drafts[:i]])
            np.testing.assert_allclose(rows[i], target(seq)[-1])


def test_verify_trace_reproduces_verify_and_explains_each_decision():
    target, draft = fixed_pair(vocab_size=16, draft_noise=0.6, seed=0)
    seen = set()
    for seed in range(60):
        rng = np.random.default_rng(seed)
        block = draft_block(draft, [0], 4, rng)
        q = score_block(target, [0], block.tokens)
        state = rng.bit_generator.state
        t = verify_trace(block.tokens, block.p_rows, q, rng)
        rng.bit_generator.state = state
        out = verify(block.tokens, block.p_rows, q, rng)
        np.testing.assert_array_equal(t.verification.tokens, out.tokens)
        assert t.verification.n_accepted == out.n_accepted
        np.testing.assert_array_equal([r.emitted for r in t.rows], out.tokens)
        for r in t.rows:
            seen.add(r.outcome)
            if r.outcome == ACCEPTED:
                assert r.u < r.accept_prob and r.emitted == r.draft_token
            elif r.outcome == REJECTED:
                assert r.u >= r.accept_prob and r is t.rows[-1]
            else:
                assert r.position == 5 and r.draft_token is None
            if r.outcome != BONUS:
                assert r.p_x == block.p_rows[r.position - 1, r.draft_token]
                assert r.accept_prob == min(1.0, r.q_x / r.p_x)
    assert seen == {ACCEPTED, REJECTED, BONUS}  # the seeds exercised every branch


def test_verify_trace_without_bonus():
    p = np.full((2, 3), 1 / 3)
    t = verify_trace([0, 2], p, np.full((3, 3), 1 / 3), rng=0, bonus=False)
    assert [r.outcome for r in t.rows] == [ACCEPTED, ACCEPTED]
    np.testing.assert_array_equal(t.verification.tokens, [0, 2])


@pytest.mark.parametrize("pair", ["fixed", "markov"])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_trace_emits_what_speculative_generate_emits(pair, k):
    target, draft = (fixed_pair(vocab_size=16, draft_noise=0.5) if pair == "fixed"
                     else markov_pair(vocab_size=8, draft_noise=0.5, seed=1))
    for seed in range(5):
        blocks = speculative_trace(target, draft, [0], n_blocks=10, k=k, rng=seed)
        emitted = trace_tokens(blocks)
        tokens, stats = speculative_generate(target, draft, [0], emitted.size + k, k=k, rng=seed)
        np.testing.assert_array_equal(tokens[: emitted.size], emitted)
        assert stats.tokens_per_step[:10] == [len(b.verification.tokens) for b in blocks]


def test_trace_equality_is_not_vacuous():
    # Negative control: a faulty verifier (accept with min(1, p/q)) emits other tokens, and the
    # comparison above catches it for at least one of the same seeds.
    target, draft = fixed_pair(vocab_size=16, draft_noise=0.5)
    differs = 0
    for seed in range(5):
        emitted = trace_tokens(speculative_trace(target, draft, [0], n_blocks=10, k=3, rng=seed))
        wrong, _ = speculative_generate(target, draft, [0], emitted.size + 3, k=3, rng=seed,
                                        verifier=INVERTED_RATIO.verifier)
        differs += not np.array_equal(wrong[: emitted.size], emitted)
    assert differs > 0


def test_trace_markdown_has_one_line_per_row():
    target, draft = fixed_pair(vocab_size=16, draft_noise=0.6)
    blocks = speculative_trace(target, draft, [0], n_blocks=6, k=3, rng=1)
    md = trace_markdown(blocks, digits=2)
    lines = md.splitlines()
    assert lines[0].startswith("| block | pos | x | p(x) | q(x) | min(1, q/p) | u |")
    assert len(lines) == 2 + sum(len(b.rows) for b in blocks)
    first = blocks[0].rows[0]
    assert f"| {first.p_x:.2f} |" in lines[2]
    rows = [r for b in blocks for r in b.rows]
    for line, r in zip(lines[2:], rows):
        assert line.endswith(f"| {r.emitted} |")
        assert ("**reject**" in line) == (r.outcome == REJECTED)
        assert ("| bonus |" in line) == (r.outcome == BONUS)
    assert any(r.outcome == REJECTED for r in rows) and any(r.outcome == BONUS for r in rows)
    assert trace_tokens([]).size == 0


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: draft_block(markov_pair(4)[1], [0], 0, 0), ValueError, r"k: must be >= 1"),
        (lambda: draft_block(markov_pair(4)[1], [], 2, 0), ValueError, r"prefix: must contain at least one token"),
        (lambda: draft_block(markov_pair(4)[1], [7], 2, 0), ValueError, r"prefix: token 7"),
        (lambda: draft_block("not a model", [0], 2, 0), TypeError, r"draft: expected a model"),
        (lambda: score_block(markov_pair(4)[0], [0], [9]), ValueError, r"draft_tokens: token 9"),
        (lambda: verify_trace([0, 1], np.full((2, 3), 1 / 3), np.full((2, 3), 1 / 3), 0), ValueError, r"q_target: expected shape"),
        (lambda: speculative_trace(*markov_pair(4), [0], 0, 2, 0), ValueError, r"n_blocks: must be >= 1"),
        (lambda: speculative_trace(markov_pair(4)[0], markov_pair(5)[1], [0], 1, 2, 0), ValueError, r"draft: vocabulary"),
        (lambda: speculative_trace(*markov_pair(4), [0], 1, 2, "seed"), TypeError, r"rng: expected"),
        (lambda: trace_markdown("blocks"), TypeError, r"blocks: expected a list of BlockTrace"),
    ],
)
def test_bad_input_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()

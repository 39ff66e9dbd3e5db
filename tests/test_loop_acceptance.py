"""speclib.lm.drafters.loop_acceptance: a drafter's acceptance inside the loop, with its interval.

Small runs of the shipped pair (a few prompts of a few dozen tokens), seeded; the negative
control is a draft whose rows are uniform, which the target must accept far less often.
"""

from __future__ import annotations

import numpy as np
import pytest

from speclib.lm.corpora import load_corpus, shared_vocabulary
from speclib.lm.drafters import ModelDrafter, _prompt_starts, heldout_prompts, load_drafter, loop_acceptance
from speclib.lm.transformer import Transformer, load_pair

SMALL = dict(n_prompts=6, n_new=24, prompt_chars=24)


def test_prompts_start_at_line_starts_spread_over_the_heldout_text():
    text = load_corpus("code").heldout
    starts = _prompt_starts(text, 12, 30, "code")
    assert all(s == 0 or text[s - 1] == "\n" for s in starts)
    assert starts == sorted(starts) and len(set(starts)) == 12
    # spread: prompt j starts at the first line start after (j + 0.5) / 12 of the text
    assert all(0 <= s - int((j + 0.5) / 12 * len(text)) < 500 for j, s in enumerate(starts))
    vocab = shared_vocabulary()
    prompts = heldout_prompts("code", 12, 30)
    assert [vocab.decode(p) for p in prompts] == [text[s:s + 30] for s in starts]
    assert all(np.array_equal(a, b) for a, b in zip(prompts, heldout_prompts("code", 12, 30)))


def test_prompts_refuse_what_does_not_fit():
    with pytest.raises(ValueError, match="n_prompts"):
        heldout_prompts("code", 10**6, 10)
    with pytest.raises(ValueError, match="n_prompts: must be >= 1"):
        heldout_prompts("code", 0, 10)
    with pytest.raises(ValueError, match="domain"):
        heldout_prompts("poetry", 3, 10)


@pytest.fixture(scope="module")
def pair_run():
    return loop_acceptance("pair", **SMALL)


def test_loop_acceptance_pools_the_loops_counters_with_an_interval(pair_run):
    m = pair_run
    assert m.accepted == m.per_prompt_accepted.sum() and m.verified == m.per_prompt_verified.sum()
    assert m.rate == m.accepted / m.verified
    assert 0.0 < m.low <= m.rate <= m.high < 1.0
    # 6 prompts x 24 tokens: the interval is wide but not absurd
    assert 0.0 < m.high - m.low < 0.4
    assert m.tokens_per_pass == pytest.approx(6 * 24 / m.per_prompt_passes.sum())
    assert 1.0 < m.tokens_per_pass <= 5.0  # k = 4: at most k + 1 tokens a pass
    assert set(m.summary()) >= {"rate", "interval95", "accepted", "verified", "tokens_per_pass", "prompts"}


def test_loop_acceptance_is_seeded(pair_run):
    again = loop_acceptance("pair", **SMALL)
    assert again.summary() == pair_run.summary() and (again.low, again.high) == (pair_run.low, pair_run.high)
    assert np.array_equal(again.per_prompt_accepted, pair_run.per_prompt_accepted)
    other = loop_acceptance("pair", seed=1, **SMALL)
    assert not np.array_equal(other.per_prompt_accepted, pair_run.per_prompt_accepted)


def test_a_uniform_draft_is_accepted_far_less_often(pair_run):
    # Negative control: the pair's draft with a zero token embedding (tied head: zero logits)
    # proposes from uniform rows; the target accepts such a draft about as often as
    # sum_x min(1/V, q(x)), near 0.1 on code, against about 0.7 for the trained draft.
    target, draft = load_pair()
    params = dict(draft.params, wte=np.zeros_like(draft.params["wte"]))
    uniform = ModelDrafter(Transformer(draft.config, params), target)
    m = loop_acceptance(uniform, **SMALL)
    assert m.rate < 0.25 and m.rate < 0.5 * pair_run.rate and m.high < pair_run.low


def test_loop_acceptance_runs_a_feature_drafter():
    m = loop_acceptance("eagle", n_prompts=3, n_new=16, prompt_chars=16)
    assert m.verified > 0 and 0.0 <= m.rate <= 1.0


def test_loop_acceptance_names_bad_arguments():
    with pytest.raises(ValueError, match="unknown drafter"):
        loop_acceptance("bogus", **SMALL)
    with pytest.raises(TypeError, match="name: expected a drafter"):
        loop_acceptance(object(), **SMALL)
    with pytest.raises(ValueError, match="k: must be >= 1"):
        loop_acceptance("pair", k=0, **SMALL)
    assert load_drafter("pair").target is not None


def test_draft_costs_time_one_token_passes_against_the_targets():
    from speclib.lm.drafters import draft_costs

    costs = draft_costs(["pair", "medusa"], n_prompts=2, n_new=12, prompt_chars=16)
    for name, cost in costs.items():
        assert cost.draft_passes_timed > 0 and cost.target_passes_timed == 2 * 11
        assert cost.c == pytest.approx(cost.draft_pass_ms / cost.target_pass_ms)
        # a one-token pass of a drafter a tenth of the target's size is far cheaper than the target's;
        # a drafter timed on the target's passes (a wrong filter) would give c near 1
        assert 0.0 < cost.c < 0.7, name
        assert set(cost.summary()) == {"c", "draft_pass_ms", "target_pass_ms", "draft_passes_timed",
                                       "target_passes_timed", "verify_ratio", "verify_pass_ms",
                                       "verify_passes_timed"}
        # the target's passes over k + 1 = 5 tokens inside the loop, against its one-token passes
        assert cost.verify_passes_timed > 0 and cost.verify_ratio == pytest.approx(
            cost.verify_pass_ms / cost.target_pass_ms)


def test_draft_costs_names_bad_arguments():
    from speclib.lm.drafters import draft_costs

    with pytest.raises(ValueError, match="names"):
        draft_costs([])
    with pytest.raises(ValueError, match="name: unknown drafter"):
        draft_costs(["bogus"], n_prompts=1, n_new=2)

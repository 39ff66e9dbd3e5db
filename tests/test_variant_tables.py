"""The table and interval helpers of the going-further chapters (speclib.book.variant_tables, trees)."""

import numpy as np
import pytest

from speclib.book.variant_tables import (
    below, fmt_interval, lookup_against_draft, separated, steps_interval, tokens_per_pass_interval, tv_table)
from speclib.core.decoding import speculative_generate
from speclib.lm.models import markov_pair


def test_below_prints_a_bound_and_refuses_a_value_that_is_not_below_it():
    assert below(2e-17) == "below 1e-12"
    assert below(-3e-13) == "below 1e-12"
    assert below(5e-8, bound=1e-6) == "below 1e-06"
    with pytest.raises(ValueError, match="value: 0.001 is not below the bound 1e-12"):
        below(1e-3)
    with pytest.raises(ValueError, match="bound"):
        below(0.0, bound=0.0)


def test_tv_table_checks_the_exact_column_and_reports_the_faulty_one():
    t = tv_table(["a", "b", "exact", "faulty"], [(["x", 1], 1e-16, 0.2), (["y", 2], 0.0, 0.05)])
    assert t.markdown.splitlines()[2] == "| x | 1 | below 1e-12 | 0.200 |"
    assert (t.exact, t.bug_min, t.bug_max) == ("below 1e-12", 0.05, 0.2)
    with pytest.raises(ValueError, match="not below"):
        tv_table(["a", "exact", "faulty"], [(["x"], 0.01, 0.2)])  # negative control: an inexact rule
    with pytest.raises(ValueError, match="rows\\[0\\]: 3 columns for a header of 4"):
        tv_table(["a", "b", "exact", "faulty"], [(["x"], 0.0, 0.2)])
    with pytest.raises(ValueError, match="rows"):
        tv_table(["a", "exact", "faulty"], [])


def test_tokens_per_pass_interval_is_centred_on_the_runs_tokens_per_pass():
    target, draft = markov_pair(vocab_size=8, draft_noise=0.5, seed=0)
    runs = [speculative_generate(target, draft, [0], 200, 3, rng=s)[1] for s in range(3)]
    value, low, high = tokens_per_pass_interval(runs)
    tpp = sum(r.tokens_generated for r in runs) / sum(r.target_passes for r in runs)
    assert value == pytest.approx(tpp)
    assert low < value < high
    assert steps_interval(sum((r.tokens_per_step for r in runs), []))[0] == pytest.approx(tpp)
    with pytest.raises(TypeError, match="stats\\[0\\]"):
        tokens_per_pass_interval([object()])
    with pytest.raises(ValueError, match="stats"):
        tokens_per_pass_interval([])


def test_interval_formatting_and_separation():
    assert fmt_interval((2.0, 1.5, 2.5), digits=1) == "2.0 (1.5 to 2.5)"
    assert separated((1, 0.9, 1.1), (2, 1.9, 2.1)) and not separated((1, 0.9, 2.0), (2, 1.9, 2.1))
    with pytest.raises(ValueError, match="estimate"):
        fmt_interval((1.0, 2.0))


def test_lookup_against_draft_balances_the_two_costs_at_c_even():
    target, draft = markov_pair(vocab_size=4, draft_noise=0.3, seed=1)
    prompts = [np.array([0, 1, 2, 3, 0, 1, 2, 3, 0, 1]), np.array([2, 3, 1, 2, 3, 1, 2])]
    x = lookup_against_draft(target, draft, prompts, 60, 4, 2)
    look = [speculative_generate(target, __import__("speclib.core.proposers", fromlist=["PromptLookup"]).PromptLookup(),
                                 p, 60, 4, rng=j)[1] for j, p in enumerate(prompts)]
    spec = [speculative_generate(target, draft, p, 60, 2, rng=j)[1] for j, p in enumerate(prompts)]
    per_token_lookup = sum(s.target_passes for s in look) / sum(s.tokens_generated for s in look)
    per_token_draft = (sum(s.target_passes for s in spec) + x.c_even * sum(s.draft_passes for s in spec)) / \
        sum(s.tokens_generated for s in spec)
    assert per_token_lookup == pytest.approx(per_token_draft)
    with pytest.raises(ValueError, match="prompts"):
        lookup_against_draft(target, draft, [], 10, 2, 2)


def test_shape_rows_price_a_measurement_with_the_cost_model():
    from speclib.book.trees import ShapeMeasurement, shape_rows, shape_table

    m = ShapeMeasurement("chain of 4", 4, 3.0, 4.0, 0.5, 1.1, (3, 3, 3))
    (row,) = shape_rows([m], {5: 1.5})
    assert row.model == pytest.approx(3.0 / 2.0) and row.free == pytest.approx(3.0 / 1.5)
    assert "| 4 | chain of 4 | 3.00 | 1.50 | 0.50 | 1.10 | 1.50 | 2.00 |" in shape_table([row])
    with pytest.raises(ValueError, match="no r\\(5\\)"):
        shape_rows([m], {9: 2.0})
    with pytest.raises(TypeError, match="measured"):
        shape_rows([], {5: 1.0})
    with pytest.raises(TypeError, match="rows"):
        shape_table([m])


def test_pooled_acceptance_interval_is_centred_on_the_pooled_rate():
    from speclib.book.render import pooled_acceptance
    from speclib.book.variant_tables import pooled_acceptance_interval

    target, draft = markov_pair(vocab_size=6, draft_noise=0.5, seed=2)
    prompts = [[0], [1, 2], [3], [4, 5, 0]]
    value, low, high = pooled_acceptance_interval(target, draft, prompts, 40, 3, seed=1)
    assert value == pytest.approx(pooled_acceptance(target, draft, prompts, 40, 3, seed=1))
    assert low < value < high
    same = pooled_acceptance_interval(target, target, prompts, 40, 3)  # a perfect draft: no spread
    assert same == pytest.approx((1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="prompts"):
        pooled_acceptance_interval(target, draft, [[0]], 40, 3)

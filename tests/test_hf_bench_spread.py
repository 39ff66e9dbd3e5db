"""time_settings reports the spread of its runs, and speed_table shows it."""

import math

import numpy as np

from speclib.book import hf_bench
from speclib.core.decoding import GenerationStats


def _run(tokens_per_pass):
    # a fake setting whose run r emits tokens_per_pass[r] tokens per target pass, 12 tokens in all
    calls = iter(range(10**6))

    def run(prompt, seed):
        tpp = tokens_per_pass[next(calls) % len(tokens_per_pass)]
        stats = GenerationStats()
        for _ in range(int(12 / tpp)):
            stats.record_step(proposed=tpp - 1, accepted=tpp - 1, emitted=tpp)
        return np.zeros(12, dtype=int), stats
    return run


def test_the_middle_half_of_the_runs_is_their_quartiles():
    speed = hf_bench.time_settings({"spec": _run([1, 2, 3, 4])}, [[0], [1]], reps=2)["spec"]
    assert speed.n_runs == 4
    assert speed.tokens_per_pass_middle_half == tuple(np.percentile([1, 2, 3, 4], [25, 75]))
    lo, hi = speed.ms_middle_half
    assert 0 < lo <= speed.ms_per_token <= hi


def test_the_table_shows_both_spreads():
    speed = hf_bench.time_settings({"spec": _run([2, 4])}, [[0]], reps=2)
    table = hf_bench.speed_table(speed)
    assert "| 2.67 (2.50 to 3.50) |" in table  # tokens per target pass, its middle half in brackets


def test_a_result_without_spread_shows_no_brackets():
    speed = {"old": hf_bench.SettingSpeed(1.0, 2.0, 0.5, 1.0, 3)}
    assert math.isnan(speed["old"].ms_middle_half[0])
    assert "| old | 1.0 | 2.00 | 0.50 | 1.00 |" in hf_bench.speed_table(speed)  # no brackets without a spread

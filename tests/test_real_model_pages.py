"""speclib.book.real_model: the real model's record as chapter 7 shows it."""

import pytest

from speclib.book.real_model import engines_table, identity_sentence, prediction_table, settings_in
from speclib.book.record import Quantity, Record


def q(key, value, low=None, high=None):
    return Quantity(key, value, low, high, None, None, 3, "", "fake")


def fake():
    qs = {}
    for key, v, lo, hi in [
        ("decode_tokens_per_s/speclib-plain/T0/grounded/q8/cpu", 45.0, 44.0, 46.0),
        ("decode_tokens_per_s/speclib-lookup/k8/T0/grounded/q8/cpu", 120.0, 110.0, 130.0),
        ("decode_tokens_per_s/speclib-lookup/k10/T0/grounded/q8/cpu", 119.0, 100.0, 130.0),
        ("speedup/speclib-lookup/k8/T0/grounded/q8/cpu", 2.6, 2.4, 2.8),
        ("speedup/speclib-lookup/k10/T0/grounded/q8/cpu", 2.5, 2.3, 2.7),
        ("predicted/speclib-lookup/k8/T0/grounded/q8/cpu", 3.0, None, None),
        ("alpha/speclib-lookup/k8/T0/grounded/loop", 0.9, None, None),
        ("decode_tokens_per_s/llamacpp-plain/T0/grounded/ggml/cpu", 60.0, 59.0, 61.0),
    ]:
        qs[key] = q(key, v, lo, hi)
    return Record(qs)


def test_settings_are_read_from_the_names_in_order():
    assert settings_in(fake(), "speclib") == ["plain", "lookup-8", "lookup-10"]
    assert settings_in(fake(), "llama.cpp") == ["plain"]
    assert settings_in(fake(), "transformers") == []


def test_the_engines_table_shows_rates_and_paired_speedups():
    table = engines_table(fake(), 0.0, groups=("grounded",))
    lines = table.splitlines()
    assert lines[0] == "| engine | setting | grounded: tokens/s | grounded: x own plain |"
    assert "| speclib | lookup-8 | 120 (110 to 130) | 2.60 (2.40 to 2.80) |" in lines
    assert "| llama.cpp | plain | 60 (59 to 61) | 1 |" in lines
    assert not any(line.startswith("| transformers") for line in lines)


def test_the_prediction_rows_feed_the_gap_sentence():
    table, gaps = prediction_table(fake(), temperatures=(0.0,), groups=("grounded",))
    assert "| 0 | lookup-8 | grounded | 0.90 | 3.00 | 2.60 (2.40 to 2.80) |" in table
    assert gaps == [{"drafter": "lookup, grounded tasks, T = 0", "k": 8, "predicted": 3.0, "measured": 2.6}]


def test_identity_needs_a_comparison():
    with pytest.raises(ValueError, match="identity: no engine"):
        identity_sentence({"speclib": {"lookup-8": {"identical": 0, "compared": 0, "first_differences": []}}})

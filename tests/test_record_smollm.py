"""benchmarks/record_smollm.py: the real model's record from the engines' runs (pooled rates, paired speed-ups)."""

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import record_smollm as rs  # noqa: E402

from speclib.book.record import check_record, parse_name  # noqa: E402


def _run(engine, setting, prompt, family, rep, new_tokens, seconds, prefill=0.1, **extra):
    return {"engine": engine, "setting": setting, "prompt": prompt, "family": family, "temperature": 0.0,
            "repetition": rep, "new_tokens": new_tokens, "first_tokens": 1, "seconds": seconds,
            "prefill_seconds": prefill, "extra": extra}


def fake_engines():
    runs = []
    for rep, slow in enumerate([1.0, 2.0]):  # a slow spell falls on the whole repetition
        for prompt, family in (("a", "code_edit"), ("b", "summary"), ("c", "quote"), ("d", "open")):
            runs.append(_run("speclib", "plain", prompt, family, rep, 101, 0.1 + 1.0 * slow))
            lookup_s = 0.25 if family != "open" else 1.0
            runs.append(_run("speclib", "lookup-4", prompt, family, rep, 101, 0.1 + lookup_s * slow,
                             accepted=60, draft_verified=80, draft_passes=0, k_per_step=[4] + [4] * 25))
            runs.append(_run("llama.cpp", "plain", prompt, family, rep, 101, 0.1 + 0.5 * slow))
    return {"settings": {"engines": {"speclib": ["plain", "lookup-4"], "llama.cpp": ["plain"]},
                         "families": ["code_edit", "summary", "quote", "open"], "temperatures": [0.0]},
            "runs": runs}


def test_rates_are_pooled_within_a_repetition_and_speedups_paired():
    t = {n: 0.02 * (1 + 0.1 * (n - 1)) for n in rs.COUNTS}
    q = rs.engine_quantities(fake_engines(), t, None)
    for key in q:
        parse_name(key)
    # grounded: 300 decoded tokens over 0.75 s (rep 0) and 1.5 s (rep 1): median of 400 and 200
    assert q["decode_tokens_per_s/speclib-lookup/k4/T0/grounded/q8/cpu"]["value"] == pytest.approx(300.0)
    # the plain runs take four times longer in both repetitions: the paired speed-up is 4 exactly
    s = q["speedup/speclib-lookup/k4/T0/grounded/q8/cpu"]
    assert s["value"] == pytest.approx(4.0) and s["low"] == pytest.approx(4.0) and s["high"] == pytest.approx(4.0)
    assert q["speedup/speclib-lookup/k4/T0/open/q8/cpu"]["value"] == pytest.approx(1.0)
    assert q["speedup/speclib-lookup-over-llamacpp-plain/k4/T0/grounded/q8/cpu"]["value"] == pytest.approx(2.0)
    assert q["alpha/speclib-lookup/k4/T0/all/loop"]["value"] == pytest.approx(0.75)
    # the prediction: 100 tokens of plain passes over 25 passes of 5 tokens (r(5) = 1.4)
    assert q["predicted/speclib-lookup/k4/T0/all/q8/cpu"]["value"] == pytest.approx(100 / (25 * 1.4))
    assert "speedup/llamacpp-plain/T0/all/ggml/cpu" not in q


def test_a_pairing_with_the_wrong_plain_run_would_show():
    # Negative control: pairing across repetitions (rep 0's lookup with rep 1's plain) changes the
    # ratios, which the pooled pairing does not see.
    record = fake_engines()
    for r in record["runs"]:
        if r["setting"] == "plain" and r["engine"] == "speclib":
            r["repetition"] = 1 - r["repetition"]
    q = rs.engine_quantities(record, {n: 0.02 for n in rs.COUNTS}, None)
    s = q["speedup/speclib-lookup/k4/T0/grounded/q8/cpu"]
    assert s["low"] == pytest.approx(2.0) and s["high"] == pytest.approx(8.0)


def test_the_quantities_make_a_valid_record():
    q = rs.engine_quantities(fake_engines(), {n: 0.02 for n in rs.COUNTS}, None)
    provenance = {"date": "d", "commit": "c", "command": "x", "processor": "p", "python": "3", "numpy": "2",
                  "quick": False, "seconds": 1.0}
    check_record({"format": 1, "provenance": provenance, "settings": {}, "quantities": q}, "fake")
    assert np.isfinite([v["value"] for v in q.values()]).all()

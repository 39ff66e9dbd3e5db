"""The book's record (speclib.book.record, benchmarks/record.py): names, the check, the reader, the glue.

The stored record was measured by benchmarks/record.py; what the pages state of it is checked
by tests/test_cross_page.py.
"""

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from speclib.book import record as R
from speclib.core.cost import speedup_with_overhead
from speclib.core.theory import expected_tokens_per_pass
from speclib.lm.drafters import DRAFTER_NAMES
from speclib.lm.transformer import speedup_with_costs

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stored():
    return json.loads(R.BOOK_RECORD.read_text())


# --- names ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["alpha/eagle/k4/T1/loop", "c/pair/loop/numpy/cpu", "r17/target/isolated/full/cpu",
                                  "speedup/early-exit/k8/T0.8/torch/gpu", "weights_mib/small-stack"])
def test_a_name_round_trips_through_its_keywords(text):
    parts = R.parse_name(text)
    keywords = {k: v for k, v in parts.items() if k not in ("quantity", "subject")}
    for dim, prefix in (("k", "k"), ("B", "B"), ("T", "T")):
        if dim in keywords:
            keywords[dim] = float(keywords[dim][1:]) if dim == "T" else int(keywords[dim][1:])
    assert R.name(parts["quantity"], parts["subject"], **keywords) == text


@pytest.mark.parametrize("text, message", [
    ("c/pair/cpu/loop", "'loop' comes after 'cpu'"),
    ("c/pair/loop/loop", "two values of 'where'"),
    ("c/pair/fast", "'fast' is no condition"),
    ("speed/pair/k3", "'speed' is not a quantity"),
    ("c", "expected quantity/subject"),
    ("c//loop", "expected quantity/subject"),
    ("c/Pair/loop", "is not a subject"),
])
def test_a_malformed_name_is_refused_saying_why(text, message):
    with pytest.raises(ValueError, match=message):
        R.parse_name(text)
    assert not R.is_name(text)


def test_a_glue_key_may_name_a_field_of_a_quantity():
    assert R.split_field("alpha/pair/k4/T1/loop/low") == ("alpha/pair/k4/T1/loop", "low")
    assert R.split_field("alpha/pair/k4/T1/loop") == ("alpha/pair/k4/T1/loop", None)
    assert R.is_name("speedup/pair/k3/T1/numpy/cpu/text") and not R.is_name("c_pair")


# --- the check ------------------------------------------------------------------------------------

@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.update(format=2), "format is 2"),
    (lambda r: r["provenance"].pop("commit"), "provenance has no 'commit'"),
    (lambda r: r["provenance"].update(quick=True), "quick"),
    (lambda r: r.pop("settings"), "no 'settings'"),
    (lambda r: r["quantities"].clear(), "no 'quantities'"),
    (lambda r: r["quantities"].update({"c/pair/cpu/loop": {"value": 0.1}}), "'loop' comes after 'cpu'"),
    (lambda r: r["quantities"].update({"c/pair/loop/numpy/cpu": {"median": 0.1}}), "has no 'value'"),
    (lambda r: r["quantities"]["c/pair/loop/numpy/cpu"].update(value=float("nan")), "not a finite number"),
    (lambda r: r["quantities"]["c/pair/loop/numpy/cpu"].update(value="0.1"), "not a finite number"),
    (lambda r: r["quantities"]["c/pair/loop/numpy/cpu"].update(value=-0.1), "below 0"),
    (lambda r: r["quantities"]["alpha/pair/k4/T1/loop"].update(low=0.99, high=0.999), "lies outside low to high"),
    (lambda r: r["quantities"]["alpha/pair/k4/T1/loop"].pop("high"), "'low' without 'high'"),
    (lambda r: r["quantities"]["alpha/pair/k4/T1/loop"].pop("interval"), "does not say what it is"),
    (lambda r: r["quantities"]["alpha/pair/k4/T1/loop"].update(n=0), "not a positive count"),
    (lambda r: r["quantities"]["alpha/pair/k4/T1/loop"].update(median=0.7), "unknown parts"),
])
def test_a_damaged_record_is_refused_by_name(stored, mutate, message, record_checks):
    record_checks[0](R.check_record, stored, mutate, message)


def test_load_names_a_missing_or_broken_file(record_checks):
    record_checks[1](R.load_record, "record.py")


def test_two_records_may_not_hold_the_same_name(stored):
    one = R.Record.from_json(stored, "a.json")
    with pytest.raises(ValueError, match="is in two records"):
        one.merged(R.Record.from_json(stored, "b.json"))


def test_a_missing_name_is_told_with_its_neighbours(stored):
    rec = R.Record.from_json(stored, "a.json")
    with pytest.raises(KeyError, match="c/pair/loop/numpy/cpu"):
        rec["c/pair/loop/numpy/gpu"]
    with pytest.raises(ValueError, match="comes after"):
        rec["c/pair/cpu/loop"]


# --- the stored record ----------------------------------------------------------------------------

def test_the_stored_record_is_a_measurement_with_its_provenance(stored):
    R.check_record(stored)
    prov = stored["provenance"]
    assert prov["quick"] is False and len(prov["commit"]) == 40 and prov["blas"]["kernel"]
    rec = R.load_records()
    for drafter in DRAFTER_NAMES:  # what every page may ask of a drafter
        assert f"alpha/{drafter}/k4/T1/loop" in rec and f"c/{drafter}/loop/numpy/cpu" in rec
        assert f"speedup/{drafter}/k4/T1/numpy/cpu" in rec and f"outside/{drafter}/k4/T1/numpy/cpu" in rec
        assert f"c/{drafter}/loop/torch/gpu" in rec  # the accelerator's record, in the same namespace
    for n in (2, 4, 5, 9, 17):
        assert f"r{n}/target/isolated/numpy/cpu" in rec
    q = rec["alpha/pair/k4/T1/loop"]
    assert q.low <= q.value <= q.high and q.n >= 100 and "bootstrap" in q.interval


def test_the_quick_benchmark_writes_a_record_of_the_same_names(tmp_path, stored):
    spec = importlib.util.spec_from_file_location("record_script", ROOT / "benchmarks" / "record.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "quick.json"
    assert script.main(["--quick", "--drafters", "pair", "medusa", "--out", str(out)]) == 0
    quick = json.loads(out.read_text())
    with pytest.raises(ValueError, match="quick"):
        R.check_record(quick)  # a test run is never read as a measurement
    R.check_record(quick, allow_quick=True)
    assert set(quick["quantities"]) <= set(stored["quantities"])
    assert "r5/medusa/loop/numpy/cpu" in quick["quantities"]  # k = 4: the heads' five-token pass
    assert "r6/medusa/loop/numpy/cpu" not in quick["quantities"]  # never made: four heads draft four


# --- reading and gluing ---------------------------------------------------------------------------

def test_glue_states_the_rounded_value_under_the_name(stored, monkeypatch):
    import myst_nb

    glued = {}
    monkeypatch.setattr(myst_nb, "glue", lambda key, value, display=True: glued.__setitem__(key, value))
    rec = R.Record.from_json(stored, "a.json")
    key = "speedup/pair/k3/T1/numpy/cpu"
    assert rec.glue(key, "low", "high", "n", "text") == round(stored["quantities"][key]["value"], 2)
    q = stored["quantities"][key]
    assert glued == {key: round(q["value"], 2), f"{key}/low": round(q["low"], 2), f"{key}/high": round(q["high"], 2),
                     f"{key}/n": q["n"], f"{key}/text": f"{q['value']:.2f} ({q['low']:.2f} to {q['high']:.2f})"}
    with pytest.raises(ValueError, match="fields"):
        rec.glue(key, "median")


def test_ranking_goes_through_the_intervals(stored):
    rec = R.Record.from_json(stored, "a.json")
    sentence = rec.ranking({d: f"alpha/{d}/k4/T1/loop" for d in ("pair", "distilled", "eagle")},
                           "acceptance inside the loop")
    assert all(d in sentence.lower() for d in ("pair", "distilled", "eagle"))
    assert sentence[0].isupper()  # it may open a paragraph
    with pytest.raises(ValueError, match="no interval"):
        rec.ranking({"a": "c/pair/loop/numpy/cpu", "b": "c/eagle/loop/numpy/cpu"}, "cost")


def test_the_accelerator_record_reads_as_names_on_the_gpu():
    acc = json.loads((R.DATA / "accelerator_pair.json").read_text())
    rec = R.accelerator_quantities(acc)
    assert all(n.endswith("/torch/gpu") for n in rec.names())
    assert rec.value("c/pair/loop/torch/gpu") == acc["cost"]["pair"]["c"]
    ks = acc["drafters"]["medusa"]["ks"]
    assert rec["speedup/medusa/k7/T1/torch/gpu"].q75 == acc["drafters"]["medusa"]["speedup_q75"][ks.index(7)]
    dev = acc["isolated"]["device"]
    assert rec.value("r9/target/isolated/torch/gpu") == dev["r"][dev["n_tokens"].index(9)]


def test_the_bootstrap_interval_of_a_median_covers_it_and_a_narrow_one_does_not():
    # Seeded; threshold: the 95% interval covers the true median in at least 85% of 300 samples of
    # 20 runs (the percentile bootstrap of a median undercovers a little at this size); the same
    # procedure at level 0.2, the negative control, covers it in fewer than 50%.
    rng = np.random.default_rng(0)
    hits = {0.95: 0, 0.2: 0}
    for i in range(300):
        x = rng.lognormal(0.0, 0.2, 20)  # true median 1.0
        for level in hits:
            _, low, high = R.median_interval(x, level=level, n_boot=400, seed=i)
            hits[level] += low <= 1.0 <= high
    assert hits[0.95] / 300 >= 0.85 and hits[0.2] / 300 < 0.5, hits
    with pytest.raises(ValueError, match="values"):
        R.median_interval([1.0])


# --- the cost model with the loop's own time ------------------------------------------------------

def test_the_overhead_model_reduces_to_the_plain_formula_and_counts_the_overhead():
    assert math.isclose(speedup_with_overhead(0.7, 4, 0.1, 1.5), speedup_with_costs(0.7, 4, 0.1, 1.5))
    with_o = speedup_with_overhead(0.7, 4, 0.1, 1.5, outside=0.4, outside_plain=0.05)
    assert math.isclose(with_o, float(expected_tokens_per_pass(0.7, 4)) * 1.05 / (0.4 + 1.5 + 0.4))
    # Medusa at k = 6 with 4 heads: four drafts from one pass, verified over five tokens
    assert math.isclose(speedup_with_overhead(0.4, 6, 0.2, 1.3, drafts=4, draft_passes=1),
                        float(expected_tokens_per_pass(0.4, 4)) / (0.2 + 1.3))
    for bad, message in ((dict(drafts=7), "drafts"), (dict(outside=-0.1), "outside"), (dict(alpha=1.2), "alpha")):
        args = dict(alpha=0.7, k=4, c=0.1, r=1.5) | bad
        with pytest.raises(ValueError, match=message):
            speedup_with_overhead(**args)

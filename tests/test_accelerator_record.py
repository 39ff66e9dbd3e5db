"""The stored accelerator record (benchmarks/accelerator.py): its layout, its provenance, what 07 reads.

The record was measured on a GPU that the tests do not have, so it is checked as stored; the
script that wrote it is run here on PyTorch's CPU build in its quick form, and what it writes
must have the same layout.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from speclib.book.accelerator import (ACCELERATOR_RECORD, LOGIT_TOLERANCE, accelerator_summary,
                                      check_accelerator_record, load_accelerator_record,
                                      stepped_logit_difference)
from speclib.core.theory import expected_tokens_per_pass
from speclib.lm.drafters import DRAFTER_NAMES

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def record():
    return load_accelerator_record()


def test_the_stored_record_is_a_gpu_measurement_with_its_provenance(record):
    prov = record["provenance"]
    assert prov["quick"] is False and len(prov["commit"]) == 40
    assert prov["accelerator"]["device"].startswith("cuda") and prov["accelerator"]["tf32"] is False
    assert prov["accelerator"]["torch"] and prov["accelerator"]["cuda"]
    assert sorted(record["drafters"]) == sorted(DRAFTER_NAMES)
    assert all(v == 1.0 for v in record["agreement"]["same_tokens_fraction"].values())


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r["provenance"].pop("commit"), "provenance has no 'commit'"),
    (lambda r: r["provenance"].update(quick=True), "quick"),
    (lambda r: r["provenance"]["accelerator"].update(tf32=True), "tf32"),
    (lambda r: r["agreement"]["max_abs_logit_difference"].update(target=10 * LOGIT_TOLERANCE), "another network"),
    (lambda r: r["isolated"]["device"]["r"].pop(), "isolated.device.r"),
    (lambda r: r["isolated"]["host_numpy"].update(q25_ms=[1e9] * len(r["isolated"]["host_numpy"]["q25_ms"])),
     "out of order"),
    (lambda r: r["cost"].pop("eagle"), "cost has no 'eagle'"),
    (lambda r: r["cost"]["pair"].update(c=-0.1), "cost.pair.c"),
    (lambda r: r["drafters"].pop("ngram"), "drafters has no 'ngram'"),
    (lambda r: r["drafters"]["eagle"]["speedup_median"].append(1.0), "drafters.eagle.speedup_median"),
    (lambda r: r["drafters"]["pair"]["c"].__setitem__(0, "fast"), "drafters.pair.c"),
    (lambda r: r["drafters"]["pair"].update(best_speedup=100.0), "outside its middle half"),
    (lambda r: r["drafters"]["pair"].update(ks=[1, 2]), "differs from settings.ks"),
])
def test_a_damaged_record_is_refused_by_name(record, mutate, message, record_checks):
    record_checks[0](check_accelerator_record, record, mutate, message)


def test_load_names_a_missing_or_broken_file(record_checks):
    record_checks[1](load_accelerator_record, "accelerator.py")


def test_the_summary_is_the_cost_model_on_the_recorded_costs(record):
    s = accelerator_summary(record, {"eagle": 0.8})
    eagle = s["rows"]["eagle"]
    k = eagle["k"]
    assert eagle["alpha"] == 0.8 and eagle["c"] == record["cost"]["eagle"]["c"]
    assert eagle["r"] == s["r_device"][k + 1]
    assert eagle["outside"] == record["drafters"]["eagle"]["outside_per_step"][record["drafters"]["eagle"]["ks"].index(k)]
    assert math.isclose(eagle["predicted"], float(expected_tokens_per_pass(0.8, k)) / (k * eagle["c"] + eagle["r"]))
    # Medusa: one pass drafts min(k, heads) tokens, verified in one pass of min(k, heads) + 1
    medusa = s["rows"]["medusa"]
    drafts = min(medusa["k"], 4)
    assert math.isclose(medusa["predicted"], float(expected_tokens_per_pass(medusa["alpha"], drafts))
                        / (medusa["c"] + s["r_device"][drafts + 1]))
    assert s["best"] == max(s["rows"], key=lambda n: s["rows"][n]["speedup"])
    assert s["prediction_errors"].shape == (len(DRAFTER_NAMES),) and np.isfinite(s["prediction_errors"]).all()


def test_the_script_writes_a_record_of_the_same_layout(tmp_path, record):
    pytest.importorskip("torch")
    import importlib.util

    out = tmp_path / "quick.json"
    # In this process, so that the models and the n-gram this worker has already built are reused.
    spec = importlib.util.spec_from_file_location("accelerator_script", ROOT / "benchmarks" / "accelerator.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--device", "cpu", "--quick", "--out", str(out)]) == 0
    quick = json.loads(out.read_text())
    with pytest.raises(ValueError, match="quick"):
        check_accelerator_record(quick)  # a test run is never shown as a measurement
    quick["provenance"]["quick"] = False
    check_accelerator_record(quick)

    def layout(obj):
        return sorted(obj) if isinstance(obj, dict) else None

    for key in ("provenance", "settings", "agreement", "isolated", "cost", "drafters"):
        assert layout(quick[key]) == layout(record[key]), key
    assert ACCELERATOR_RECORD.is_file()


@pytest.mark.parametrize("script", ["accelerator.py", "drafters.py"])
def test_a_device_pytorch_cannot_use_is_one_line_of_error(script):
    torch = pytest.importorskip("torch")
    device = "cuda:7" if torch.cuda.device_count() < 8 else "nonsense"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--device", device],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"--device: {device!r}" in done.stderr.splitlines()[-1]


def test_the_stepped_comparison_sees_a_different_network_and_a_wrong_rollback():
    from speclib.lm.transformer import TransformerConfig, random_transformer

    cfg = TransformerConfig(vocab_size=7, block_size=8, d_model=8, n_layers=1, n_heads=2)
    ids = np.arange(40) % 7  # past the 8-token block: the window moves
    a, b = random_transformer(cfg, seed=0), random_transformer(cfg, seed=1)
    assert stepped_logit_difference(a, a, ids) == 0.0
    assert stepped_logit_difference(a, b, ids) > 0.1

    class ForgetsRollbacks:  # a cache whose rollback keeps the tokens: its later rows read stale text
        def __init__(self, model):
            self.model = model

        def cache(self):
            inner = self.model.cache()

            class Cache:
                extend_logits = staticmethod(inner.extend_logits)
                __len__ = inner.__len__

                def rollback(self, length):
                    pass
            return Cache()

    assert stepped_logit_difference(a, ForgetsRollbacks(a), ids) > 0.1


# --- data that the shipped record hides ----------------------------------------------------------
# On the shipped record the drafter with the highest measured speed-up also has the highest
# prediction, Medusa's best k is within its heads, and every drafter ran at settings.ks: a
# summary or a check that confused those would still pass on it.  These records make them differ.

def test_the_best_drafter_is_the_fastest_measured_not_the_fastest_predicted(record):
    import copy

    rec = copy.deepcopy(record)
    for name in rec["cost"]:  # the pair's prediction becomes the highest ...
        rec["cost"][name]["c"] = 1e-4 if name == "pair" else 1.0
    for name, run in rec["drafters"].items():  # ... and its measurement the lowest
        fast = name == "early-exit"
        run.update(best_speedup=3.0 if fast else 0.5, best_q25=2.9 if fast else 0.4,
                   best_q75=3.1 if fast else 0.6)
    s = accelerator_summary(rec)
    assert max(s["rows"], key=lambda n: s["rows"][n]["predicted"]) == "pair"  # the data do separate them
    assert s["best"] == "early-exit"


def test_medusa_past_its_heads_is_predicted_from_the_pass_it_makes(record):
    import copy

    rec = copy.deepcopy(record)
    medusa = rec["drafters"]["medusa"]
    k = 7  # beyond its 4 heads: one draft pass proposes 4 tokens, the target verifies 5
    i = medusa["ks"].index(k)
    medusa.update(best_k=k, best_speedup=medusa["speedup_median"][i], best_q25=medusa["speedup_q25"][i],
                  best_q75=medusa["speedup_q75"][i])
    iso = rec["isolated"]["device"]
    iso["r"] = [1.0 + 0.1 * (n - 1) for n in iso["n_tokens"]]  # every r(n) its own value
    s = accelerator_summary(rec, {"medusa": 0.5})
    row = s["rows"]["medusa"]
    assert row["k"] == k and row["r"] == s["r_device"][5] != s["r_device"][k + 1]
    assert math.isclose(row["predicted"], float(expected_tokens_per_pass(0.5, 4)) / (row["c"] + s["r_device"][5]))


def test_a_drafter_measured_at_other_draft_lengths_is_refused(record, record_checks):
    shifted = lambda r: r["drafters"]["eagle"].update(ks=[k + 1 for k in r["drafters"]["eagle"]["ks"]])
    record_checks[0](check_accelerator_record, record, shifted, "drafters.eagle.ks differs from settings.ks")

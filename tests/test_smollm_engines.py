"""The side-by-side benchmark of the real model (benchmarks/smollm_engines.py) and its runners.

The harness is tested on fake runners whose timings and outputs are chosen, so that what it
computes can be checked exactly: every (engine, setting) runs once per repetition, prompt and
temperature, in orders that change; medians and middle halves over repetitions; speed-ups
paired within a repetition (a slow spell that falls on both settings leaves the ratio alone);
the record written with its provenance; and the identity check, which must name a setting
whose greedy output differs from plain (negative control) and pass one that does not.
The transformers runner is tried on one tiny prompt where transformers and the model's wheel
are installed, the llama.cpp runner where llama-cpp-python is.
"""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import smollm_engines as bench  # noqa: E402
from smollm_engines import Generation  # noqa: E402

PROMPTS = [{"id": f"p{i}", "family": family, "messages": [{"role": "user", "content": f"question {i}"}]}
           for i, family in enumerate(["code_edit", "summary", "quote", "open"])]
#: Seconds per token of each setting, and a per-repetition slow-down that falls on every setting.
PER_TOKEN = {"plain": 0.010, "lookup": 0.005}
SLOWDOWN = [1.0, 3.0, 1.0, 2.0, 1.5]


def render(messages):
    return "|".join(m["content"] for m in messages)


class FakeRunner:
    """Tokens that depend on the prompt (and at T > 0 on the seed) only, or for the negative
    control also on the setting; seconds from PER_TOKEN and SLOWDOWN, whose repetition it reads
    from the seed the harness passes (``seed + 1000 * repetition + prompt``)."""

    def __init__(self, name="fake", settings=("plain", "lookup"), differ_on=None, tokenize_shift=0):
        self.name, self.settings = name, settings
        self.differ_on, self.tokenize_shift = differ_on, tokenize_shift
        self.calls = []

    def versions(self):
        return {f"{self.name}_library": "1.0"}

    def tokenize(self, text):
        return [ord(c) + self.tokenize_shift for c in text]

    def generate(self, prompt_ids, setting, new_tokens, temperature, seed, stop_at_eos):
        self.calls.append((setting, tuple(prompt_ids), temperature))
        tokens = [int(sum(prompt_ids) + i + (seed if temperature > 0 else 0)) % 97 for i in range(new_tokens)]
        if setting == self.differ_on and temperature == 0 and seed % 1000 == 0:  # the first prompt
            tokens[5] += 1
        seconds = new_tokens * PER_TOKEN[setting] * SLOWDOWN[seed // 1000]
        return Generation(tokens=tokens, seconds=seconds, prefill_seconds=seconds / 10, first_tokens=1)


def run(runners, **settings):
    options = dict(temperatures=(0.0, 1.0), repetitions=5, new_tokens=20, seed=0, warmup=False, log=lambda _: None)
    options.update(settings)
    return bench.run_benchmark(runners, PROMPTS, render=render, **options)


def test_every_pair_runs_once_per_block_in_orders_that_change():
    runner, other = FakeRunner(), FakeRunner("other", ("plain",))
    record = run([runner, other])
    runs = record["runs"]
    assert len(runs) == 5 * 4 * 2 * 3
    blocks = {}
    for r in runs:
        blocks.setdefault((r["repetition"], r["prompt"], r["temperature"]), []).append((r["engine"], r["setting"]))
    units = {("fake", "plain"), ("fake", "lookup"), ("other", "plain")}
    assert all(sorted(b) == sorted(units) and len(b) == 3 for b in blocks.values())
    orders = {tuple(b) for b in blocks.values()}
    assert len(orders) > 1, "the order of the pairs is drawn afresh for each block"
    # The runs are recorded in the order they ran: the runner saw the same sequence.
    assert [c[0] for c in runner.calls] == [r["setting"] for r in runs if r["engine"] == "fake"]
    assert [r["order"] for r in runs[:3]] == [0, 1, 2]
    # The same seed, the same schedule; another seed, another one.
    assert [(r["engine"], r["setting"]) for r in run([FakeRunner(), FakeRunner("other", ("plain",)) ])["runs"]] == \
        [(r["engine"], r["setting"]) for r in runs]
    assert [(r["engine"], r["setting"]) for r in run([FakeRunner(), FakeRunner("other", ("plain",))], seed=1)["runs"]] != \
        [(r["engine"], r["setting"]) for r in runs]


def test_medians_middle_halves_and_paired_speedups_are_those_of_the_chosen_timings():
    record = run([FakeRunner()])
    plain = record["summary"]["fake"]["plain"]["0.0"]["all"]
    lookup = record["summary"]["fake"]["lookup"]["0.0"]["all"]
    rates = np.array([1 / (PER_TOKEN["plain"] * s) for s in SLOWDOWN])
    assert plain["end_to_end"]["median"] == pytest.approx(np.median(rates))
    assert plain["end_to_end"]["middle_half"] == pytest.approx(list(np.percentile(rates, [25, 75])))
    assert plain["end_to_end"]["n"] == 5
    # Decoding rate: 19 tokens after the first over 0.9 of the time.
    assert plain["decoding"]["median"] == pytest.approx(np.median(rates) * 19 / 20 / 0.9)
    # The slow spells fall on both settings of a repetition: the paired ratio is exactly 2 in each.
    assert lookup["speedup"]["end_to_end"]["fake"] == {"median": pytest.approx(2.0),
                                                       "middle_half": [pytest.approx(2.0)] * 2, "n": 5}
    assert plain["speedup"]["decoding"]["fake"]["median"] == pytest.approx(1.0)
    assert set(record["summary"]["fake"]["lookup"]["1.0"]) == {"code_edit", "summary", "quote", "open",
                                                              "grounded", "all"}
    assert record["summary"]["fake"]["plain"]["0.0"]["grounded"]["tokens"] == 3 * 5 * 20


def test_the_identity_check_names_a_setting_whose_greedy_output_differs():
    good = run([FakeRunner()])["identity"]
    assert good["by_temperature"]["0.0"]["fake"]["lookup"] == {"identical": 20, "compared": 20, "differing": []}
    assert good["plain_greedy_repeatable"] == {"fake": True}
    record = run([FakeRunner(differ_on="lookup")])
    bad = record["identity"]["by_temperature"]["0.0"]["fake"]["lookup"]
    assert bad["identical"] == 15 and bad["compared"] == 20
    assert {(d["prompt"], d["first_difference"]) for d in bad["differing"]} == {("p0", 5)}
    assert record["identity"]["by_temperature"]["1.0"]["fake"]["lookup"]["identical"] == 20
    flagged = [r for r in record["runs"] if r["identical_to_plain"] is False]
    assert len(flagged) == 5 and all(r["prompt"] == "p0" and r["temperature"] == 0.0 for r in flagged)
    assert "identical to plain: 15/20" in bench.report(record)


def test_engines_are_compared_with_one_another_and_a_differing_tokenizer_is_reported():
    first, second = FakeRunner("a"), FakeRunner("b", tokenize_shift=1)
    lines = []
    record = run([first, second], log=lines.append)
    assert record["tokenization"]["a"] == {"identical": True, "differences": []}
    assert record["tokenization"]["b"]["identical"] is False
    assert record["tokenization"]["b"]["differences"][0] == {"prompt": "p0", "first_difference": 0,
                                                             "length": 10, "reference_length": 10}
    assert any("b: its tokenization differs" in line for line in lines)
    # Both decode from the first runner's ids.
    assert {c[1] for c in second.calls} == {c[1] for c in first.calls}
    across = record["identity"]["plain_greedy_across_engines"]["a / b"]
    assert across["identical"] == 4 and across["compared"] == 4
    assert record["summary"]["b"]["plain"]["0.0"]["all"]["speedup"]["end_to_end"]["a"]["median"] == pytest.approx(1.0)


def test_the_record_is_written_with_its_provenance(tmp_path):
    path = tmp_path / "out" / "record.json"
    record = bench.run_and_record([FakeRunner()], PROMPTS, render, path, repetitions=2, new_tokens=8,
                                  warmup=True, log=lambda _: None)
    stored = json.loads(path.read_text())
    assert stored["summary"] == json.loads(json.dumps(record["summary"]))
    provenance = stored["provenance"]
    for key in ("date", "repository_commit", "cpu", "processor", "blas", "versions", "threads",
                "load_average", "load_average_after", "thread_pools"):
        assert key in provenance, key
    assert {"library", "kernel"} <= set(provenance["blas"])
    assert provenance["versions"]["fake_library"] == "1.0" and "numpy" in provenance["versions"]
    assert stored["settings"]["repetitions"] == 2 and stored["settings"]["prompts"] == ["p0", "p1", "p2", "p3"]
    # Tokens are kept for the first repetition only; every run keeps its digest.
    assert all(("tokens" in r) == (r["repetition"] == 0) and len(r["digest"]) == 16 for r in stored["runs"])


@pytest.mark.parametrize("fault, message", [
    (lambda r: setattr(r, "settings", ("lookup", "plain")), "must start with 'plain'"),
    (lambda r: setattr(r, "generate", lambda *a: Generation([1] * 99, 1.0)), "99 new tokens"),
    (lambda r: setattr(r, "generate", lambda *a: Generation([1], 0.0)), "seconds must be positive"),
    (lambda r: setattr(r, "generate", lambda *a: Generation([1], 1.0, prefill_seconds=2.0)), "prefill_seconds"),
    (lambda r: setattr(r, "generate", lambda *a: (1, 2)), "not a Generation"),
])
def test_a_runner_that_breaks_the_interface_is_named(fault, message):
    runner = FakeRunner()
    fault(runner)
    with pytest.raises((ValueError, TypeError), match=message):
        run([runner])


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="at least one runner"):
        run([])
    with pytest.raises(ValueError, match="names must differ"):
        run([FakeRunner(), FakeRunner()])
    with pytest.raises(ValueError, match="too many for"):
        run([FakeRunner()], new_tokens=bench.CONTEXT)


def test_a_missing_engine_is_skipped_with_one_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    lines = []
    assert bench.make_runners(["llama.cpp"], Path("unused"), [3], None, log=lines.append) == []
    assert lines == ["llama.cpp: skipped (not installed: pip install -r requirements-llama.txt)"]


# --- the real engines, where installed ---------------------------------------------------------------

def _model():
    from speclib.lm.smollm import model_path

    try:
        return model_path()
    except FileNotFoundError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def hf_runner():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from smollm_hf import TransformersRunner

    return TransformersRunner(_model(), lookups=(3,))


def test_transformers_renders_tokenizes_and_decodes_the_task_set_as_the_harness_does(hf_runner):
    from speclib.lm.smollm_tasks import evaluation_prompts, training_prompts

    from speclib.lm.smollm import load_tokenizer

    render = load_tokenizer(_model()).render_chat  # what the benchmark renders with
    for prompt in evaluation_prompts(per_family=1):
        assert render(prompt["messages"]) == hf_runner.render(prompt["messages"])
    text = render(prompt["messages"])  # the shortest: an open question
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    # Every prompt of the task set leaves room for 192 new tokens, with a margin.
    texts = [render(p["messages"]) for p in evaluation_prompts() + training_prompts()]
    longest = max(map(len, hf_runner.tokenizer(texts, add_special_tokens=False)["input_ids"]))
    assert longest + 192 <= bench.CONTEXT - 512
    ids = hf_runner.tokenize(text)
    assert ids[0] == 1 and ids.count(1) == 3  # <|im_start|> read as one special token, no BOS added
    plain = hf_runner.generate(ids, "plain", 8, 0.0, 0, True)
    lookup = hf_runner.generate(ids, "lookup-3", 8, 0.0, 0, True)
    assert len(plain.tokens) == 8 and lookup.tokens == plain.tokens
    assert 0 < plain.prefill_seconds < plain.seconds and plain.first_tokens == 1
    sampled = [hf_runner.generate(ids, "plain", 8, 1.0, 7, False).tokens for _ in range(2)]
    assert sampled[0] == sampled[1]
    with pytest.raises(ValueError, match="setting"):
        hf_runner.generate(ids, "lookup-4", 8, 0.0, 0, True)
    # T = 1 is the softmax itself: no top-k (transformers' default is 50), top-p or penalty.
    config = hf_runner._config("lookup-3", 8, 1.0, False)["generation_config"]
    assert (config.do_sample, config.temperature, config.top_k, config.top_p) == (True, 1.0, 0, 1.0)
    assert config.repetition_penalty in (None, 1.0) and config.eos_token_id is None
    assert config.prompt_lookup_num_tokens == 3


def test_transformers_drafts_with_an_assistant_model_of_the_same_vocabulary(hf_runner, tmp_path):
    import torch
    import transformers

    # No Hugging Face-format draft of SmolLM2 ships: a tiny random Llama with its vocabulary
    # checks the wiring (a bad draft is slow, never wrong: greedy output stays plain's).
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=hf_runner.model.config.vocab_size, hidden_size=16,
                                      intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                      num_key_value_heads=1, tie_word_embeddings=True)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "draft")
    hf_runner.add_draft(tmp_path / "draft")
    assert hf_runner.settings[-1] == "draft"
    ids = hf_runner.tokenize("<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n")
    assert hf_runner.generate(ids, "draft", 6, 0.0, 0, True).tokens == \
        hf_runner.generate(ids, "plain", 6, 0.0, 0, True).tokens
    config.vocab_size = 100
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "small")
    with pytest.raises(ValueError, match="vocabulary of 100"):
        hf_runner.add_draft(tmp_path / "small")


def test_llama_cpp_runs_the_same_file_on_one_thread():
    pytest.importorskip("llama_cpp")
    from smollm_llamacpp import LlamaCppRunner

    runner = LlamaCppRunner(_model(), lookups=(3,))
    assert runner.versions()["llama_cpp_extra_buffers"].startswith(("on", "off"))
    assert all(m.n_threads == 1 and m.n_threads_batch == 1 for m in runner.models.values())
    ids = runner.tokenize("<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n")
    assert ids[0] == 1 and ids.count(1) == 2
    first = runner.generate(ids, "plain", 8, 0.0, 0, True)
    assert len(first.tokens) == 8 and first.tokens == runner.generate(ids, "plain", 8, 0.0, 0, True).tokens
    assert 0 < first.prefill_seconds < first.seconds
    assert len(runner.generate(ids, "lookup-3", 8, 1.0, 3, False).tokens) == 8

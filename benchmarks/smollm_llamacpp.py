"""llama.cpp (through llama-cpp-python) on the real model's GGUF file: a runner for benchmarks/smollm_engines.py.

llama.cpp runs the file as it is (Q4_1 matrices, a Q8_0 embedding), with its own kernels, on
one thread (``n_threads=1``, ``n_threads_batch=1``).  Settings:

``"plain"``
    ``Llama.generate`` one token at a time.
``"lookup-N"``
    The same with ``draft_model=LlamaPromptLookupDecoding(num_pred_tokens=N)``
    (llama-cpp-python's prompt lookup: up to N tokens copied after the first earlier match
    of the last two tokens, verified in one pass; the sampled token at each drafted position
    must equal the draft to keep it).  A draft model makes llama-cpp-python keep the logits
    of every position (``logits_all``), which also makes its prefill compute the vocabulary's
    logits at every prompt position: that is why each setting has its own ``Llama`` (the
    file is memory-mapped once by the system) and plain decoding keeps only the last row.

llama.cpp's *extra buffer types* (weights repacked for AMX tiles or wider vector kernels at
load) are used only where a probe in a child process decodes a 4-token batch with them: on a
processor that reports AMX inside a virtual machine that does not grant it, llama.cpp 0.3.36's
AMX matrix product dies with a segmentation fault (seen on the machine this was written on);
there the runner loads the file with ``use_extra_bufts`` off, the ordinary CPU kernels, and
says so in its versions (the record's provenance).

Temperature 0 is llama.cpp's greedy sampler; above 0 its sampler chain with top-k, typical,
top-p and min-p switched off (0, 1, 1, 0), no penalties, and its distribution sampler seeded
by the call's seed.  Before every call the context is reset, so llama-cpp-python's
prompt-prefix cache never skips a prefill.  ``prefill_seconds`` is the time until
``generate`` yields its first token.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import llama_cpp
from llama_cpp import Llama
from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

from smollm_engines import CONTEXT, Generation

_PROBE = """
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=64, n_threads=1, n_threads_batch=1, verbose=False)
llm.eval(llm.tokenize(b"one two three four", add_bos=False))
"""


def extra_buffers_work(path: str | Path) -> tuple[bool, str]:
    """Whether llama.cpp decodes a 4-token batch with its extra buffer types, tried in a child
    process (a crash there is a crash of the child); with a one-line account."""
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, str(path)], capture_output=True, text=True,
                              timeout=120)
    except subprocess.TimeoutExpired:
        return False, "off: a probe decoding 4 tokens with them did not finish in 120 s"
    if done.returncode == 0:
        return True, "on (llama.cpp's default)"
    how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit status {done.returncode}"
    return False, f"off: a probe decoding 4 tokens with them died ({how})"


@contextlib.contextmanager
def _without_extra_buffers():
    """Make ``Llama`` load with ``use_extra_bufts`` off (llama-cpp-python 0.3.36 has no argument for it)."""
    import llama_cpp.llama as module

    default = module.llama_cpp.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = False
        return p

    module.llama_cpp.llama_model_default_params = params
    try:
        yield
    finally:
        module.llama_cpp.llama_model_default_params = default


class LlamaCppRunner:
    """llama-cpp-python's ``Llama.generate`` on the GGUF file, one thread; see the module's docstring.

    Parameters
    ----------
    path : path
        The GGUF file.
    lookups : sequence of int
        The draft lengths of prompt lookup to measure (settings ``"lookup-N"``).
    extra_buffers : bool or None
        Use llama.cpp's extra buffer types; None (the default) probes whether they work
        (:func:`extra_buffers_work`).
    """

    name = "llama.cpp"

    def __init__(self, path: str | Path, lookups=(3, 5, 10), extra_buffers: bool | None = None) -> None:
        self.path = str(path)
        if extra_buffers is None:
            extra_buffers, self.extra_buffers = extra_buffers_work(path)
        else:
            self.extra_buffers = "on (asked for)" if extra_buffers else "off (asked for)"
        self._use_extra = bool(extra_buffers)
        self.lookups = tuple(int(n) for n in lookups)
        self.settings = ("plain",) + tuple(f"lookup-{n}" for n in self.lookups)
        self.models = {"plain": self._load(None)}
        for n in self.lookups:
            self.models[f"lookup-{n}"] = self._load(LlamaPromptLookupDecoding(max_ngram_size=2, num_pred_tokens=n))
        self.eos = int(self.models["plain"].token_eos())

    def _load(self, draft) -> Llama:
        switch = contextlib.nullcontext() if self._use_extra else _without_extra_buffers()
        with open(os.devnull, "w") as null, contextlib.redirect_stderr(null), switch:
            # logits_all with a draft: llama-cpp-python 0.3.36 keeps every row's logits when it
            # drafts, but sizes their buffer by n_batch unless logits_all is set, so a prompt and
            # answer past 512 tokens overflow it ("could not broadcast ... into shape").
            return Llama(model_path=self.path, n_ctx=CONTEXT, n_batch=512, n_threads=1, n_threads_batch=1,
                         seed=0, verbose=False, draft_model=draft, logits_all=draft is not None)

    def versions(self) -> dict[str, str]:
        return {"llama_cpp_python": llama_cpp.__version__,
                "llama_cpp_system": llama_cpp.llama_print_system_info().decode().strip(),
                "llama_cpp_extra_buffers": self.extra_buffers}

    def tokenize(self, text: str) -> list[int]:
        return [int(t) for t in self.models["plain"].tokenize(text.encode("utf-8"), add_bos=False, special=True)]

    def generate(self, prompt_ids, setting: str, new_tokens: int, temperature: float, seed: int,
                 stop_at_eos: bool) -> Generation:
        if setting not in self.models:
            raise ValueError(f"setting: {setting!r} is not one of {self.settings}")
        llm = self.models[setting]
        llm.reset()
        llm.set_seed(int(seed))
        tokens, prefill = [], None
        start = time.perf_counter()
        for token in llm.generate(list(prompt_ids), temp=float(temperature), top_k=0, top_p=1.0, min_p=0.0,
                                  typical_p=1.0, repeat_penalty=1.0, frequency_penalty=0.0,
                                  presence_penalty=0.0, reset=True):
            if prefill is None:
                prefill = time.perf_counter() - start
            tokens.append(int(token))
            if len(tokens) >= new_tokens or (stop_at_eos and token == self.eos):
                break
        seconds = time.perf_counter() - start
        return Generation(tokens=tokens, seconds=seconds, prefill_seconds=prefill, first_tokens=1)

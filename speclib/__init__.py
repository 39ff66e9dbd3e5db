"""speclib: the companion code of "Speculative Decoding, Step by Step".

Notation: ``p`` is the draft distribution, ``q`` the target distribution, ``k`` the draft
length, ``alpha`` the acceptance rate and ``c`` the draft/target cost ratio.  The model
protocol every model follows is documented in :mod:`speclib.lm.models`.

Three layers: :mod:`speclib.core` is the algorithm (the sampling rule, the one decoding loop
and the parts that plug into it, theory, the exact law, the vectorized engine),
:mod:`speclib.lm` the language models, :mod:`speclib.book` what only serves the book.  The
names below are the ones a reader meets first.
"""

from importlib import import_module as _import_module

# The names are imported on first use (PEP 562), so that ``import speclib`` and the command line
# start at once: ``python -m speclib`` installs its Ctrl-C handling before numpy loads.
_EXPORTS = {
    "core.decoding": ("GenerationStats", "autoregressive_generate", "speculative_generate"),
    "core.exact": ("output_distribution", "target_sequence_distribution"),
    "core.policies": ("ConfidenceStop", "FallbackMonitor", "FixedK", "HeuristicK"),
    "core.proposers": ("MultiDraft", "PromptLookup", "TreeDraft"),
    "lm.models": ("FixedContextModel", "MarkovModel", "Model", "fixed_pair", "markov_pair", "noisy_draft"),
    "core.sampling": ("Verification", "acceptance_rate", "residual_distribution", "sample_token", "verify"),
    "core.theory": ("expected_tokens_per_pass", "operations_factor", "optimal_k", "tokens_per_step_pmf",
                    "tokens_per_step_variance", "speedup_in_passes", "walltime_speedup"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str) -> object:
    if name in _WHERE:
        value = getattr(_import_module(f"{__name__}.{_WHERE[name]}"), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    if name in ("core", "lm", "book"):
        return _import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


__version__ = "0.1.0"

__all__ = [
    "ConfidenceStop",
    "FallbackMonitor",
    "FixedContextModel",
    "FixedK",
    "GenerationStats",
    "HeuristicK",
    "MarkovModel",
    "Model",
    "MultiDraft",
    "TreeDraft",
    "PromptLookup",
    "Verification",
    "acceptance_rate",
    "autoregressive_generate",
    "expected_tokens_per_pass",
    "fixed_pair",
    "markov_pair",
    "noisy_draft",
    "operations_factor",
    "optimal_k",
    "output_distribution",
    "residual_distribution",
    "sample_token",
    "speculative_generate",
    "speedup_in_passes",
    "target_sequence_distribution",
    "tokens_per_step_pmf",
    "tokens_per_step_variance",
    "verify",
    "walltime_speedup",
]

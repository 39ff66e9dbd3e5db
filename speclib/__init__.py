"""speclib: the companion code of "Speculative Decoding, Step by Step".

Notation: ``p`` is the draft distribution, ``q`` the target distribution, ``k`` the draft
length, ``alpha`` the acceptance rate and ``c`` the draft/target cost ratio.  The model
protocol every model follows is documented in :mod:`speclib.lm.models`.

Three layers: :mod:`speclib.core` is the algorithm (the sampling rule, the one decoding loop
and the parts that plug into it, theory, the exact law, the vectorized engine),
:mod:`speclib.lm` the language models, :mod:`speclib.book` what only serves the book.  The
names below are the ones a reader meets first.
"""

from .core.decoding import GenerationStats, autoregressive_generate, speculative_generate
from .core.exact import output_distribution, target_sequence_distribution
from .core.policies import ConfidenceStop, FallbackMonitor, FixedK, HeuristicK
from .core.proposers import MultiDraft, PromptLookup
from .lm.models import FixedContextModel, MarkovModel, Model, fixed_pair, markov_pair, noisy_draft
from .core.sampling import Verification, acceptance_rate, residual_distribution, sample_token, verify
from .core.theory import (
    expected_tokens_per_pass,
    operations_factor,
    optimal_k,
    tokens_per_step_pmf,
    tokens_per_step_variance,
    walltime_speedup,
)

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
    "target_sequence_distribution",
    "tokens_per_step_pmf",
    "tokens_per_step_variance",
    "verify",
    "walltime_speedup",
]

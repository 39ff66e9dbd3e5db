"""speclib: the companion code of "Speculative Decoding, Step by Step".

Notation: ``p`` is the draft distribution, ``q`` the target distribution, ``k`` the draft
length, ``alpha`` the acceptance rate and ``c`` the draft/target cost ratio.  The model
protocol every model follows is documented in :mod:`speclib.lm.models`.
"""

from .core.decoding import GenerationStats, autoregressive_generate, speculative_generate
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
    "FixedContextModel",
    "GenerationStats",
    "MarkovModel",
    "Model",
    "Verification",
    "acceptance_rate",
    "autoregressive_generate",
    "expected_tokens_per_pass",
    "fixed_pair",
    "markov_pair",
    "noisy_draft",
    "operations_factor",
    "optimal_k",
    "residual_distribution",
    "sample_token",
    "speculative_generate",
    "tokens_per_step_pmf",
    "tokens_per_step_variance",
    "verify",
    "walltime_speedup",
]

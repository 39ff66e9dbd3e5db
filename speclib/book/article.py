"""The reference article's experiment, with its interface and its random streams.

The article simulates a target and a draft over a 64-token vocabulary: 256 target rows
drawn from Dirichlet(0.5), a draft that mixes each row with uniform noise, and a context id
that never changes.  This module rebuilds that experiment so that, with the article's seeds,
it reproduces the article's three tables digit for digit, and prints beside each of its
acceptance figures the corrected ones:

* ``accepted / verified``: a draft token discarded after an earlier rejection in its block
  was never judged, so it is not a rejection (the article divides by all proposals);
* ``alpha = sum_x min(p(x), q(x))``, the exact acceptance probability of this pair;
* the closed-form tokens per pass at that alpha, which matches the simulation at every K.

The random draws happen in the article's order (``Generator.choice`` for every sample,
``Generator.random`` for every acceptance test), which is what makes the digits agree.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._validate import MAX_DRAFT_LENGTH, MAX_NEW_TOKENS, as_int, as_int_list, as_real
from ..core.decoding import GenerationStats
from ..lm.models import dirichlet_targets, noisy_draft
from ..core.theory import expected_tokens_per_pass

N_CONTEXTS = 256
CONTEXT_ID = 42


def theoretical_speedup(alpha: float, k: int) -> float:
    """The article's name for :func:`speclib.core.theory.expected_tokens_per_pass`."""
    return expected_tokens_per_pass(alpha, k)


class SpeculativeDecoder:
    """The article's simulated decoder: a fixed-context target and a noisy draft.

    Parameters
    ----------
    vocab_size : int, default 64
    draft_noise : float in [0, 1], default 0.3
        0 makes the draft equal to the target, 1 makes it uniform.
    draft_k : int, default 4
        Draft length K.
    seed : int, default 42
        Seeds the one generator used for the tables *and* for all sampling afterwards.
    """

    def __init__(self, vocab_size: int = 64, draft_noise: float = 0.3, draft_k: int = 4, seed: int = 42) -> None:
        self.vocab_size = as_int(vocab_size, "vocab_size", minimum=2)
        self.draft_noise = as_real(draft_noise, "draft_noise", low=0.0, high=1.0)
        self.draft_k = as_int(draft_k, "draft_k", minimum=1, maximum=MAX_DRAFT_LENGTH)
        self._rng = np.random.default_rng(as_int(seed, "seed", minimum=0))
        self.target_table = dirichlet_targets(self.vocab_size, N_CONTEXTS, self._rng)
        self.draft_table = noisy_draft(self.target_table, self.draft_noise)

    def q(self, context_id: int) -> np.ndarray:
        """Target distribution for a context id."""
        return self.target_table[context_id % N_CONTEXTS]

    def p(self, context_id: int) -> np.ndarray:
        """Draft distribution for a context id."""
        return self.draft_table[context_id % N_CONTEXTS]

    def alpha(self, context_id: int = CONTEXT_ID) -> float:
        """Exact acceptance probability ``sum_x min(p(x), q(x))`` for a context."""
        return float(np.minimum(self.p(context_id), self.q(context_id)).sum())

    def speculative_step(self, context_id: int) -> tuple[list[int], int, int]:
        """One draft / verify step in the same context.

        Returns ``(tokens, n_accepted, draft_k)`` as the article does: 1 to K+1 tokens,
        the accepted drafts among them, and the number of drafts proposed.
        """
        rng, vocab = self._rng, self.vocab_size
        q, p = self.q(context_id), self.p(context_id)
        drafts = [int(rng.choice(vocab, p=p)) for _ in range(self.draft_k)]
        out: list[int] = []
        for x in drafts:
            if rng.random() < min(1.0, q[x] / max(p[x], 1e-12)):
                out.append(x)
                continue
            excess = np.maximum(q - p, 0.0)
            z = excess.sum()
            residual = excess / z if z > 0 else np.full(vocab, 1.0 / vocab)
            out.append(int(rng.choice(vocab, p=residual)))
            return out, len(out) - 1, self.draft_k
        out.append(int(rng.choice(vocab, p=q)))
        return out, self.draft_k, self.draft_k

    def generate(self, context_id: int, n_tokens: int) -> tuple[list[int], GenerationStats]:
        """Speculative steps until ``n_tokens`` tokens; the last step's surplus is dropped."""
        n_tokens = as_int(n_tokens, "n_tokens", minimum=0, maximum=MAX_NEW_TOKENS, why="tokens one call generates")
        stats, tokens = GenerationStats(), []
        while len(tokens) < n_tokens:
            new, n_acc, k = self.speculative_step(context_id)
            kept = new[: n_tokens - len(tokens)]
            tokens.extend(kept)
            stats.record_step(k, n_acc, len(kept))
        return tokens, stats

    def generate_greedy(self, context_id: int, n_tokens: int) -> tuple[list[int], GenerationStats]:
        """The article's baseline: one target pass per token.

        Called "greedy" in the article, but it *samples* from q; greedy decoding would take
        the argmax.  The name is kept so the article's script runs unchanged.
        """
        n_tokens = as_int(n_tokens, "n_tokens", minimum=0, maximum=MAX_NEW_TOKENS, why="tokens one call generates")
        stats, tokens = GenerationStats(), []
        q = self.q(context_id)
        for _ in range(n_tokens):
            tokens.append(int(self._rng.choice(self.vocab_size, p=q)))
            stats.record_step(proposed=0, accepted=0, emitted=1)
        return tokens, stats


class SweepRow(NamedTuple):
    """One row of a sweep: the article's columns, then the corrected ones."""

    k: int
    noise: float
    acceptance: float  #: the article's accepted / proposed
    tokens_per_pass: float
    theoretical: float  #: the formula at the article's acceptance
    acceptance_verified: float  #: accepted / verified
    alpha: float  #: sum of min(p, q)
    theory_at_alpha: float  #: the formula at alpha


def _check_run(noise: object, n_tokens: object, seed: object) -> tuple[float, int, int]:
    """The arguments every table shares, checked: at least one token, or its rates are 0 / 0."""
    return (as_real(noise, "noise", low=0.0, high=1.0),
            as_int(n_tokens, "n_tokens", minimum=1, maximum=MAX_NEW_TOKENS, why="tokens one call generates"),
            as_int(seed, "seed", minimum=0))


def _row(k: int, noise: float, n_tokens: int, seed: int) -> SweepRow:
    dec = SpeculativeDecoder(draft_noise=noise, draft_k=k, seed=seed)
    _, s = dec.generate(CONTEXT_ID, n_tokens)
    alpha = dec.alpha(CONTEXT_ID)
    return SweepRow(
        k, noise, s.accepted_per_proposed, s.tokens_per_target_pass,
        theoretical_speedup(s.accepted_per_proposed, k), s.acceptance_rate, alpha,
        theoretical_speedup(min(alpha, 1.0), k),
    )


def k_sweep(noise: float = 0.3, n_tokens: int = 2000, ks: tuple[int, ...] = (1, 2, 4, 8, 16), seed: int = 0) -> list[SweepRow]:
    """The article's first table: draft lengths at a fixed noise."""
    noise, n_tokens, seed = _check_run(noise, n_tokens, seed)
    ks = as_int_list(ks, "ks", minimum=1, maximum=MAX_DRAFT_LENGTH)
    return [_row(k, noise, n_tokens, seed) for k in ks]


def noise_sweep(k: int = 4, n_tokens: int = 2000, noises: tuple[float, ...] = (0.0, 0.1, 0.3, 0.5, 0.8, 1.0), seed: int = 0) -> list[SweepRow]:
    """The article's second table: draft noise at a fixed K."""
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    _, n_tokens, seed = _check_run(0.0, n_tokens, seed)
    if isinstance(noises, (str, bytes)) or not hasattr(noises, "__iter__"):
        raise TypeError(f"noises: expected a sequence of noise levels in [0, 1], got {type(noises).__name__}")
    noises = [as_real(noise, "noises", low=0.0, high=1.0) for noise in noises]
    if not noises:
        raise ValueError("noises: must contain at least one value")
    return [_row(k, noise, n_tokens, seed) for noise in noises]


class EndToEnd(NamedTuple):
    speculative: GenerationStats
    baseline: GenerationStats

    @property
    def speedup(self) -> float:
        """Ratio of target passes saved (the article's "speedup")."""
        return self.speculative.tokens_per_target_pass / self.baseline.tokens_per_target_pass


def end_to_end(k: int = 4, noise: float = 0.3, n_tokens: int = 500, seed: int = 1) -> EndToEnd:
    """The article's third table: speculative against one-token-per-pass decoding."""
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    noise, n_tokens, seed = _check_run(noise, n_tokens, seed)
    _, spec = SpeculativeDecoder(draft_noise=noise, draft_k=k, seed=seed).generate(CONTEXT_ID, n_tokens)
    _, base = SpeculativeDecoder(draft_noise=noise, draft_k=k, seed=seed).generate_greedy(CONTEXT_ID, n_tokens)
    return EndToEnd(spec, base)


def report() -> str:
    """The article's three tables, digit for digit, with the corrected columns beside them."""
    lines = ["Reference article's experiment (its seeds); corrected columns after the bar", ""]
    head = f"{'Acceptance':>11} {'Tokens/pass':>12}"
    fix = f" | {'acc/verified':>12} {'alpha':>6} {'theory(alpha)':>13}"

    def right(r: SweepRow) -> str:
        return f" | {r.acceptance_verified:>12.3f} {r.alpha:>6.3f} {r.theory_at_alpha:>13.2f}"

    lines += ["=== K sweep (draft_noise=0.3, n_tokens=2000) ===",
              f"{'K':>4} {head} {'Theoretical':>12}{fix}"]
    for r in k_sweep():
        lines.append(f"{r.k:>4} {r.acceptance:>11.3f} {r.tokens_per_pass:>12.2f} {r.theoretical:>12.2f}{right(r)}")
    lines += ["", "=== Noise sweep (K=4, n_tokens=2000) ===", f"{'Noise':>6} {head}{fix}"]
    for r in noise_sweep():
        lines.append(f"{r.noise:>6.1f} {r.acceptance:>11.3f} {r.tokens_per_pass:>12.2f}{right(r)}")
    e = end_to_end()
    s, b = e.speculative, e.baseline
    lines += [
        "", "=== End-to-end comparison (K=4, noise=0.3, n_tokens=500) ===",
        f"  Speculative: {s.tokens_generated} tokens, {s.target_passes} target passes, "
        f"{s.tokens_per_target_pass:.2f} tokens/pass",
        f"  Baseline:    {b.tokens_generated} tokens, {b.target_passes} target passes, "
        f"{b.tokens_per_target_pass:.2f} tokens/pass  (the article calls it greedy; it samples)",
        f"  Speedup:     {e.speedup:.2f}x fewer target passes",
        f"  Acceptance:  {s.accepted_per_proposed:.3f} as the article counts (accepted / proposed), "
        f"{s.acceptance_rate:.3f} accepted / verified",
        "",
        "acc/verified counts only drafts the target judged; alpha = sum min(p, q) is exact;",
        "theory(alpha) = (1 - alpha^(K+1)) / (1 - alpha) is what the simulation should match.",
    ]
    return "\n".join(lines)

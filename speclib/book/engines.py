"""What serving engines do differently, computed with the book's theory on the book's pair.

A proposer that drafts *greedily* (the draft's most likely token, as vLLM's draft-model and
n-gram proposers do) hands the verifier a point mass: the draft "distribution" is one-hot at
``x* = argmax p``.  The ratio rule then keeps ``x*`` with probability ``min(1, q(x*) / 1) =
q(x*)`` and otherwise draws from ``q`` without ``x*``: still exact (the point-mass proposal of
prompt lookup, chapter 13), but the acceptance falls from ``sum_x min(p, q)`` to ``q(x*)``.
With a draft identical to the target at temperature 1, the book's rule accepts every draft
while the one-hot rule accepts ``E[max_x q(x)]``.  :func:`one_hot_acceptance` computes both on
real text.
"""

from __future__ import annotations

import numpy as np

from .._validate import as_real, as_tokens
from ..core.sampling import acceptance_rate
from ..lm.transformer import Transformer, softmax_rows


def _rows(model: Transformer, ids: np.ndarray, temperature: float) -> np.ndarray:
    block = model.config.block_size
    logits = np.concatenate([model.logits(ids[s:s + block]) for s in range(0, ids.size, block)])
    return softmax_rows(logits, temperature)


def one_hot_acceptance(target: Transformer, draft: Transformer, ids: object,
                       temperature: float = 1.0) -> dict[str, float]:
    """Acceptance of the ratio rule with a sampled draft and with a greedy (one-hot) draft.

    Both models read ``ids`` (teacher-forced, in windows of their block) at ``temperature``;
    at every position, with ``p`` the draft's row and ``q`` the target's:

    ``"sampled"``
        ``sum_x min(p(x), q(x))``: the book's rule with the draft sampled from ``p``;
    ``"one_hot"``
        ``q(argmax p)``: a greedy draft verified against its one-hot distribution;
    ``"identical_one_hot"``
        ``max_x q(x)``: the same with the target as its own draft (where ``"sampled"``
        would be 1).

    Each value is the mean over positions.

    Examples
    --------
    >>> from speclib.lm.transformer import TransformerConfig, random_transformer
    >>> cfg = TransformerConfig(vocab_size=6, block_size=8, d_model=8, n_layers=1, n_heads=2)
    >>> t = random_transformer(cfg, seed=0)
    >>> r = one_hot_acceptance(t, t, np.arange(20) % 6)
    >>> round(r["sampled"], 6), r["one_hot"] == r["identical_one_hot"] < 1
    (1.0, True)
    """
    for name, model in (("target", target), ("draft", draft)):
        if not isinstance(model, Transformer):
            raise TypeError(f"{name}: expected a speclib.lm.transformer.Transformer, got {type(model).__name__}")
    if target.vocab_size != draft.vocab_size:
        raise ValueError(f"draft: vocabulary of {draft.vocab_size} tokens differs from the target's {target.vocab_size}")
    ids = as_tokens(ids, "ids", target.vocab_size, allow_empty=False)
    temperature = as_real(temperature, "temperature", low=0.0)
    q, p = _rows(target, ids, temperature), _rows(draft, ids, temperature)
    greedy = p.argmax(axis=1)
    return {"sampled": float(np.mean(acceptance_rate(p, q))),
            "one_hot": float(np.mean(q[np.arange(q.shape[0]), greedy])),
            "identical_one_hot": float(np.mean(q.max(axis=1)))}

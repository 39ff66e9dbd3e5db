"""ex-11-1, wrong: hands in the faulty verifier unchanged (one coin for the whole block)."""
import numpy as np

from speclib.core.sampling import Verification, sample_token

EXERCISE = "ex-11-1"
HINT = r"Should keeping the first draft make keeping the second more likely"


def fresh_coin_verify(draft_tokens, p_draft, q_target, rng, *, bonus=True):
    rng = np.random.default_rng(rng)
    u, k = rng.random(), len(draft_tokens)
    for i, x in enumerate(draft_tokens):
        if u < min(1.0, q_target[i, x] / p_draft[i, x]):
            continue
        residual = np.maximum(q_target[i] - p_draft[i], 0.0)
        fix = sample_token(residual / residual.sum(), rng)
        return Verification(np.append(draft_tokens[:i], fix), i)
    if not bonus:
        return Verification(np.array(draft_tokens), k)
    return Verification(np.append(draft_tokens, sample_token(q_target[k], rng)), k)

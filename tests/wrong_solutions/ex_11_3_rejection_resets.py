"""ex-11-3, wrong: after a rejected draft the next token comes from q, as if nothing was rejected."""
import numpy as np

EXERCISE = "ex-11-3"
HINT = r"the first token is right, but not what follows it"


def kept_rejection_two_tokens(p, q):
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    return p[:, None] * q[None, :]

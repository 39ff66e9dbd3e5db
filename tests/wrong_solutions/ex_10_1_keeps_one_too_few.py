"""ex-10-1, wrong: keeps the tokens whose cumulative mass *including* themselves stays below top_p."""
import numpy as np

EXERCISE = "ex-10-1"
HINT = r"fewer than the nucleus holds"


def top_p_row(q, top_p):
    q = np.asarray(q, dtype=float)
    order = np.argsort(-q, kind="stable")
    keep = order[np.cumsum(q[order]) <= top_p]
    if keep.size == 0:
        keep = order[:1]
    out = np.zeros_like(q)
    out[keep] = q[keep]
    return out / out.sum()

"""ex-13-1, wrong: treats the m candidates as m independent tries against the same q."""
import numpy as np

EXERCISE = "ex-13-1"
HINT = r"independent tries against q"


def multi_draft_acceptance(p, q, m):
    alpha = np.minimum(p, q).sum()
    return 1.0 - (1.0 - alpha) ** m

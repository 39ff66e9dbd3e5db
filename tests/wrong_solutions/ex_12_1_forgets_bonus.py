"""ex-12-1, wrong: counts only the accepted drafts, not the token each pass adds."""
import numpy as np

EXERCISE = "ex-12-1"
HINT = r"one token more than it accepted drafts"


def oracle_speedup(accepted_per_step, c):
    n = np.asarray(accepted_per_step)
    return n.sum() / (n.size + c * n.sum())

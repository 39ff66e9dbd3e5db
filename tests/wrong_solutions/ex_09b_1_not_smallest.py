"""ex-09b-1, wrong: a coarse grid search, which returns an alpha above the smallest one."""
import math

from speclib.core.theory import expected_tokens_per_pass

EXERCISE = "ex-09b-1"
HINT = r"a smaller alpha reaches it too"


def needed_alpha_closed(k, c, r, goal):
    for i in range(101):
        alpha = i / 100
        if expected_tokens_per_pass(alpha, k) / (k * c + r) >= goal:
            return alpha
    return math.nan

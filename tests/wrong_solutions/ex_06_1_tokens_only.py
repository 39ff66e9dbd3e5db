"""ex-06-1, wrong: returns the tokens per pass, forgetting what the k draft passes cost."""
from speclib.core.theory import expected_tokens_per_pass

EXERCISE = "ex-06-1"
HINT = r"you returned the tokens per pass; what does one step cost"


def speedup(alpha, k, c):
    return expected_tokens_per_pass(alpha, k)

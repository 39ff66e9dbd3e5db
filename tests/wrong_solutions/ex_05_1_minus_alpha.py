"""ex-05-1, wrong: takes alpha instead of alpha**k off (the bonus needs all k drafts kept)."""
from speclib.core.theory import expected_tokens_per_pass

EXERCISE = "ex-05-1"
HINT = r"reached only when the first i drafts were all kept"


def expected_tokens(alpha, k):
    return expected_tokens_per_pass(alpha, k) - alpha

"""ex-15-1, wrong: prices a step with the batch-1 pass times whatever the batch size."""
from speclib.core.theory import expected_tokens_per_pass

EXERCISE = "ex-15-1"
HINT = r"not the choice with the largest predicted speed-up"


def turn_down_k(alpha, B, pass_seconds, draft_seconds, ks):
    plain = pass_seconds[(1, 1)]
    speedup = {k: expected_tokens_per_pass(alpha, k) * plain / (k * draft_seconds + pass_seconds[(1, k + 1)])
               for k in ks}
    best = max(speedup, key=speedup.get)
    return best if speedup[best] > 1 else 0

"""ex-14-1, wrong: charges one target pass per token, ignoring the tokens a pass emits."""
EXERCISE = "ex-14-1"
HINT = r"how many tokens share one pass"


def outside_ms(ms_per_token, tokens_per_pass, draft_passes_per_token, target_ms, verify_ratio, draft_ms):
    return ms_per_token - (target_ms * verify_ratio + draft_ms * draft_passes_per_token)

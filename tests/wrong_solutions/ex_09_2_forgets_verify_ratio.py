"""ex-09-2, wrong: the break-even of a verification pass that costs one pass (verify_ratio ignored)."""
EXERCISE = "ex-09-2"
HINT = r"predicted speed-up with k = 1 is 0\.7857, not 1"


def one_draft_break_even(c, verify_ratio):
    return c

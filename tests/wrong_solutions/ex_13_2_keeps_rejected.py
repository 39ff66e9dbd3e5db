"""ex-13-2, wrong: keeps the rejected draft's position in the cache too."""
EXERCISE = "ex-13-2"
HINT = r"keeps too much"


def keep_after_step(prefix_length, n_accepted):
    return prefix_length + n_accepted + 1

"""ex-07-1, wrong: returns alpha, the limit of accepted / verified, for the article's counter."""

EXERCISE = "ex-07-1"
HINT = r"that is alpha itself, what accepted / verified tends to"


def counter_limit(alpha, k):
    return alpha

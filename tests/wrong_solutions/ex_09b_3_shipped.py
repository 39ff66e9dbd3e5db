"""ex-09b-3, wrong: the shipped block itself (drafts from the cut rows, reports the uncut ones)."""
from speclib.book.broken import shipped_topk_block as fixed_topk_block  # noqa: F401

EXERCISE = "ex-09b-3"
HINT = r"which row was each draft drawn from"

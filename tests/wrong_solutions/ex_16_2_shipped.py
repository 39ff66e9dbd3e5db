"""ex-16-2, wrong: the shipped widen, unrepaired (every score doubled)."""
from speclib.book.broken import shipped_widen as fixed_widen  # noqa: F401

EXERCISE = "ex-16-2"
HINT = r"as if read at a lower temperature"

"""ex-15-2, wrong: the shipped batched pass, unrepaired."""
from speclib.book.broken import shipped_batched_extend_logits as fixed_batched_extend_logits  # noqa: F401

EXERCISE = "ex-15-2"
HINT = r"Which list decides where each request's rows go"

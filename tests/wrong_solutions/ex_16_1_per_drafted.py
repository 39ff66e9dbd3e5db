"""ex-16-1, wrong: divides by every drafted token for the book's alpha too (vLLM's figure twice)."""
EXERCISE = "ex-16-1"
HINT = r"your second ratio equals the first"


def book_ratios(num_drafts, accepted_per_pos):
    k, accepted = len(accepted_per_pos), sum(accepted_per_pos)
    per_drafted = accepted / (k * num_drafts)
    return per_drafted, per_drafted, 1 + accepted / num_drafts

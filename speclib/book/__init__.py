"""What serves only the book: self-checks, widgets, plots, traces and renderings, the course, the article's reproduction, the bug zoo."""

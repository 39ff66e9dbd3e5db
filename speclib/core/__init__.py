"""The algorithm: the sampling rule, the one speculative loop and its parts, theory, the exact law, the vectorized engine."""

"""Language models: the toy models and their protocol, corpora, n-gram models, the numpy transformer."""

"""Root pytest configuration: what to collect when the optional Hugging Face stack is absent.

`python3 dev.py test` installs requirements-hf.txt, so CI collects everything. Someone who
runs pytest in an environment without PyTorch or transformers (Binder's, for instance) gets
the rest of the suite instead of a collection error from the adapter's clear ImportError.
"""

import importlib.util

_HF = all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers"))

collect_ignore = [] if _HF else ["speclib/lm/hf.py", "book/16_models_and_engines.ipynb"]


"""Root pytest configuration: what to collect when the optional Hugging Face stack (or PyTorch) is absent.

`python3 dev.py test` installs requirements-hf.txt, so CI collects everything. Someone who
runs pytest in an environment without PyTorch or transformers (Binder's, for instance) gets
the rest of the suite instead of a collection error from the adapter's clear ImportError.
"""

import importlib.util

_HF = all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers"))
_TORCH = importlib.util.find_spec("torch") is not None

collect_ignore = ([] if _HF else ["speclib/lm/hf.py", "book/16_models_and_engines.ipynb"]) + \
    ([] if _TORCH else ["speclib/lm/torch_pass.py"])


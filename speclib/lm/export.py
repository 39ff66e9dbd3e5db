"""Write the book's pair in the Hugging Face format, so any engine that reads it can load them.

``python -m speclib export DIR`` calls :func:`export_pair_files`: ``DIR/target``, ``DIR/draft``
and the two drafters of chapter 9b that are whole transformers, ``DIR/distilled`` and
``DIR/early-exit`` (the target's first layers with a trained head), each receive a
``GPT2LMHeadModel`` (``config.json``, ``model.safetensors``,
via ``save_pretrained``, converted by :func:`speclib.lm.hf.to_gpt2`) and a tokenizer for the
book's 97-symbol character vocabulary (:func:`char_tokenizer`), built here from the
vocabulary itself: nothing is downloaded.  Afterwards

>>> from transformers import AutoModelForCausalLM, AutoTokenizer   # doctest: +SKIP
>>> model = AutoModelForCausalLM.from_pretrained("DIR/target")       # doctest: +SKIP
>>> tokenizer = AutoTokenizer.from_pretrained("DIR/target")          # doctest: +SKIP

give the numpy target's rows and its token ids (``tests/test_export.py`` checks both).

Needs PyTorch, ``transformers`` and ``tokenizers`` (``requirements-hf.txt``).
"""

from __future__ import annotations

import json
from pathlib import Path

from .corpora import Vocabulary, shared_vocabulary
from .transformer import Transformer

#: The exported folders: the pair of :func:`speclib.lm.transformer.load_pair`, then the drafters
#: of :func:`speclib.lm.drafters.load_drafter_model` (the Medusa heads and the EAGLE drafter read
#: the target's hidden states, which a GPT-2 folder cannot express, so they are not exported).
ROLES = ("target", "draft", "distilled", "early-exit")


def book_models() -> dict[str, Transformer]:
    """The book's models by exported folder name (:data:`ROLES`), at temperature 1."""
    from .drafters import load_drafter_model
    from .transformer import load_pair

    target, draft = load_pair()
    return {"target": target, "draft": draft,
            "distilled": load_drafter_model("distilled"),
            "early-exit": load_drafter_model("early-exit", target=target)}


def char_tokenizer(vocabulary: Vocabulary | None = None):
    """A ``transformers`` fast tokenizer for a character vocabulary of :mod:`speclib.lm.corpora`.

    Every character is one token: id ``i`` is ``vocabulary.chars[i]``, and any other
    character becomes the unknown symbol (id ``vocabulary.unk_id``), as
    :meth:`Vocabulary.encode` does.  Built from a ``tokenizers`` word-level model whose
    pre-tokenizer isolates every character and whose decoder joins them back unchanged.

    Examples
    --------
    >>> tok = char_tokenizer()
    >>> ids = tok("def f(x):\\n    return x")["input_ids"]
    >>> ids == shared_vocabulary().encode("def f(x):\\n    return x").tolist()
    True
    >>> tok.decode(ids)
    'def f(x):\\n    return x'
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocabulary = shared_vocabulary() if vocabulary is None else vocabulary
    if not isinstance(vocabulary, Vocabulary):
        raise TypeError(f"vocabulary: expected a speclib.lm.corpora.Vocabulary, got {type(vocabulary).__name__}")
    table = {ch: i for i, ch in enumerate(vocabulary.chars)}
    table[Vocabulary.UNKNOWN] = vocabulary.unk_id
    core = Tokenizer(models.WordLevel(vocab=table, unk_token=Vocabulary.UNKNOWN))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token=Vocabulary.UNKNOWN,
                                   clean_up_tokenization_spaces=False, model_max_length=None)


def export_model(model: Transformer, directory: str | Path, tokenizer=None) -> Path:
    """Save ``model`` as a ``GPT2LMHeadModel`` in ``directory``, with its tokenizer beside it."""
    from .hf import to_gpt2

    if not isinstance(model, Transformer):
        raise TypeError(f"model: expected a speclib.lm.transformer.Transformer, got {type(model).__name__}")
    from transformers.utils import logging as hf_logging

    directory = Path(directory)
    net = to_gpt2(model)
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a few megabytes: no progress bars on the terminal
    try:
        net.save_pretrained(directory)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    (char_tokenizer() if tokenizer is None else tokenizer).save_pretrained(directory)
    return directory


def export_pair_files(directory: str | Path, models: dict[str, Transformer] | None = None) -> dict[str, Path]:
    """Write the book's models (or ``models``, by folder name) under ``directory``; return the folders.

    ``directory`` must be new or empty, so that an export never mixes with older files.  A
    ``speclib_export.json`` beside the folders records what was written (sizes, vocabulary,
    the tools' versions).
    """
    import transformers

    directory = Path(directory)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise FileExistsError(f"directory: {directory} exists and is not an empty folder; "
                              "choose a new or empty folder")
    if models is None:
        models = book_models()
    if not isinstance(models, dict) or not models:
        raise TypeError("models: expected a dict of folder name -> Transformer")
    tokenizer = char_tokenizer()
    folders = {name: export_model(model, directory / name, tokenizer) for name, model in models.items()}
    vocab = shared_vocabulary()
    record = {
        "written_by": "python -m speclib export",
        "format": "transformers GPT2LMHeadModel + PreTrainedTokenizerFast (one token per character)",
        "vocabulary": {"size": vocab.size, "unk_id": vocab.unk_id, "chars": vocab.chars},
        "models": {name: {"folder": name, "n_parameters": m.n_parameters, "block_size": m.config.block_size,
                          "layers": m.config.n_layers, "d_model": m.config.d_model}
                   for name, m in models.items()},
        "transformers": transformers.__version__,
        "note": "positions beyond block_size do not exist in the exported models (the numpy model's "
                "moving window has no GPT-2 counterpart)",
    }
    (directory / "speclib_export.json").write_text(json.dumps(record, indent=1) + "\n")
    return folders

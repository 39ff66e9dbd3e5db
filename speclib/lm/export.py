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
import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from .._validate import as_int
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


def widen(model: Transformer, factor: int = 2) -> Transformer:
    """The same function as ``model``, computed by a network ``factor`` times as wide.

    Serving engines run only some head sizes (vLLM's CPU attention: 32 to 512 dimensions),
    and the book's draft has heads of 16.  Every vector of the residual stream is stored
    ``factor`` times over, ``[x, x, ...]``, which a layer norm maps to ``[LN(x), LN(x), ...]``
    (same mean, same variance); each matrix that reads the stream divides its rows among the
    copies, each one that writes it writes every copy.  Every head keeps its own dimensions
    first and pads the rest with zeros, its queries scaled by ``sqrt(factor)`` for the
    ``1 / sqrt(head size)`` of the wider head; the MLP's extra units have zero weights, and
    GELU(0) = 0.  The final layer norm's gain and bias are divided by ``factor``, so the
    output embedding, tied or not, gives the same logits.  Equal to float32 rounding
    (``tests/test_export.py``).

    Examples
    --------
    >>> from speclib.lm.transformer import TransformerConfig, random_transformer
    >>> m = random_transformer(TransformerConfig(vocab_size=7, block_size=8, d_model=8, n_layers=2, n_heads=2), seed=0)
    >>> w = widen(m, 2)
    >>> w.config.d_model, w.config.head_dim
    (16, 8)
    >>> bool(np.allclose(w.logits(np.arange(6)), m.logits(np.arange(6)), atol=1e-5))
    True
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"model: expected a speclib.lm.transformer.Transformer, got {type(model).__name__}")
    f = as_int(factor, "factor", minimum=1)
    params = widened_body(model, f)
    P = model.params
    params["ln_f.g"] = np.concatenate([P["ln_f.g"]] * f) / f  # the copies add up f times:
    params["ln_f.b"] = np.concatenate([P["ln_f.b"]] * f) / f  # each contributes 1/f
    if not model.config.tied:
        params["w_out"] = np.concatenate([P["w_out"]] * f, axis=0)
    return wider_transformer(model, f, params)


def wider_transformer(model: Transformer, factor: int, params: dict[str, np.ndarray]) -> Transformer:
    """A :class:`Transformer` ``factor`` times as wide as ``model`` (same heads) with ``params``."""
    return Transformer(replace(model.config, d_model=factor * model.config.d_model),
                       {k: np.asarray(v, dtype=np.float32) for k, v in params.items()},
                       temperature=model.temperature)


def widened_body(model: Transformer, factor: int) -> dict[str, np.ndarray]:
    """The parameters :func:`widen` gives the embeddings and the blocks (all but the final norm and output)."""
    f = factor
    cfg = model.config
    d, h, dh = cfg.d_model, cfg.n_heads, cfg.head_dim
    P = {name: np.asarray(value, dtype=np.float64) for name, value in model.params.items()}

    def copies(v):  # a vector of the stream, or the last axis of a matrix that writes it
        return np.concatenate([v] * f, axis=-1)

    def reads(w):  # a matrix (d, out) that reads the stream: its rows shared among the copies
        return np.concatenate([w / f] * f, axis=0)

    def head_columns(w, scale=1.0):  # (..., d) in heads of dh -> (..., f*d) in heads of f*dh, zero-padded
        out = np.zeros(w.shape[:-1] + (f * d,))
        for j in range(h):
            out[..., j * f * dh: j * f * dh + dh] = scale * w[..., j * dh:(j + 1) * dh]
        return out

    params = {"wte": copies(P["wte"]), "wpe": copies(P["wpe"])}
    for layer in range(cfg.n_layers):
        p = f"h{layer}."
        for norm in ("ln1", "ln2"):
            params[p + norm + ".g"], params[p + norm + ".b"] = copies(P[p + norm + ".g"]), copies(P[p + norm + ".b"])
        w, b = P[p + "attn.w_qkv"], P[p + "attn.b_qkv"]
        scales = (math.sqrt(f), 1.0, 1.0)  # queries, keys, values
        params[p + "attn.w_qkv"] = np.concatenate(
            [reads(head_columns(w[:, i * d:(i + 1) * d], scales[i])) for i in range(3)], axis=1)
        params[p + "attn.b_qkv"] = np.concatenate(
            [head_columns(b[i * d:(i + 1) * d], scales[i]) for i in range(3)])
        w_o = np.zeros((f * d, d))  # rows in heads of f*dh, the padding rows zero
        for j in range(h):
            w_o[j * f * dh: j * f * dh + dh] = P[p + "attn.w_o"][j * dh:(j + 1) * dh]
        params[p + "attn.w_o"], params[p + "attn.b_o"] = copies(w_o), copies(P[p + "attn.b_o"])
        up = np.zeros((f * d, 4 * f * d))
        up[:, :4 * d] = reads(P[p + "mlp.w_up"])
        b_up = np.zeros(4 * f * d)
        b_up[:4 * d] = P[p + "mlp.b_up"]
        down = np.zeros((4 * f * d, f * d))
        down[:4 * d] = copies(P[p + "mlp.w_down"])
        params.update({p + "mlp.w_up": up, p + "mlp.b_up": b_up, p + "mlp.w_down": down,
                       p + "mlp.b_down": copies(P[p + "mlp.b_down"])})
    return params


def export_model(model: Transformer, directory: str | Path, tokenizer=None, min_head_dim: int | None = None) -> Path:
    """Save ``model`` as a ``GPT2LMHeadModel`` in ``directory``, with its tokenizer beside it.

    ``min_head_dim``: widen the model (:func:`widen`, the same function) by the smallest
    whole factor that gives heads of at least this many dimensions, for an engine whose
    attention runs only larger heads.
    """
    from .hf import to_gpt2

    if not isinstance(model, Transformer):
        raise TypeError(f"model: expected a speclib.lm.transformer.Transformer, got {type(model).__name__}")
    if min_head_dim is not None:
        min_head_dim = as_int(min_head_dim, "min_head_dim", minimum=1)
        model = widen(model, max(1, -(-min_head_dim // model.config.head_dim)))
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


def export_pair_files(directory: str | Path, models: dict[str, Transformer] | None = None,
                      min_head_dim: int | None = None) -> dict[str, Path]:
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
    folders = {name: export_model(model, directory / name, tokenizer, min_head_dim)
               for name, model in models.items()}
    vocab = shared_vocabulary()
    record = {
        "written_by": "python -m speclib export",
        "format": "transformers GPT2LMHeadModel + PreTrainedTokenizerFast (one token per character)",
        "vocabulary": {"size": vocab.size, "unk_id": vocab.unk_id, "chars": vocab.chars},
        "models": {name: {"folder": name, "n_parameters": m.n_parameters, "block_size": m.config.block_size,
                          "layers": m.config.n_layers, "d_model": m.config.d_model}
                   for name, m in models.items()},
        "min_head_dim": min_head_dim,
        "transformers": transformers.__version__,
        "note": "positions beyond block_size do not exist in the exported models (the numpy model's "
                "moving window has no GPT-2 counterpart)",
    }
    (directory / "speclib_export.json").write_text(json.dumps(record, indent=1) + "\n")
    return folders

"""A real model's tokenizer, built from what its GGUF file stores: vocabulary, merges, chat template.

A GGUF file carries no ``tokenizer.json``.  It stores the byte-level BPE vocabulary
(``tokenizer.ggml.tokens``, each token spelled in GPT-2's byte alphabet, where byte ``b``
is one printable character), the merges in the order they were learned
(``tokenizer.ggml.merges``), which tokens are control tokens (``tokenizer.ggml.token_type``
3: ``<|im_start|>``, ``<|im_end|>`` ...), and the *name* of the rule that cuts text into
pieces before the merges apply (``tokenizer.ggml.pre``).  :class:`GGUFTokenizer` rebuilds the
tokenizer from them with the ``tokenizers`` library.

The pre-tokenizer.  SmolLM2's file names ``smollm``; llama.cpp (``llama-vocab.cpp``) splits
such text first into single digits (``\\p{N}``), then by GPT-2's pattern (contractions, runs
of letters, of digits, of other symbols, each with one leading space, and whitespace runs),
which is what SmolLM2's own ``tokenizer.json`` does with ``Digits(individual_digits=True)``
followed by ``ByteLevel``.  Without the digit split (GPT-2's rule alone, which ``transformers``
5.23 falls back to for a ``smollm`` file), a whitespace run before a digit is cut
differently: ``"a  1"`` gives ``a, Ġ, Ġ, 1`` there and ``a, ĠĠ, 1`` here (the tests show
it).  No token of the vocabulary joins a digit to anything, so numbers themselves are read
alike.

The chat template (``tokenizer.chat_template``, Jinja) is rendered as ``transformers``'
``apply_chat_template`` renders it: a sandboxed environment that trims blocks.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from .._validate import as_bool, as_tokens

#: ``tokenizer.ggml.pre`` names this module reads, and the rule each stands for.
PRE_TOKENIZERS = {
    "smollm": "single digits, then GPT-2's byte-level pattern",
    "gpt2": "GPT-2's byte-level pattern",
}

_CONTROL = 3  # tokenizer.ggml.token_type of a control token (llama.cpp's LLAMA_TOKEN_TYPE_CONTROL)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte alphabet: every byte as one printable character (printable ASCII and
    Latin-1 stand for themselves, the others are moved past 255).

    Examples
    --------
    >>> alphabet = bytes_to_unicode()
    >>> alphabet[ord("a")], alphabet[ord(" ")], len(set(alphabet.values()))
    ('a', 'Ġ', 256)
    """
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


class GGUFTokenizer:
    """Byte-level BPE from a GGUF file's vocabulary and merges, with its control tokens and chat template.

    Build it with :meth:`from_metadata` (or :func:`speclib.lm.smollm.load_tokenizer`).

    Parameters
    ----------
    tokens : sequence of str
        The vocabulary in id order, spelled in the byte alphabet (:func:`bytes_to_unicode`).
    merges : sequence of str
        ``"left right"`` pairs, best first.
    token_types : sequence of int
        llama.cpp's type of every token; type 3 (control) tokens are matched whole in text.
    pre : str
        The pre-tokenizer's name, a key of :data:`PRE_TOKENIZERS`.
    bos_id, eos_id : int
        The beginning- and end-of-sequence ids (the file's).
    chat_template : str, optional
        The Jinja chat template.
    """

    def __init__(self, tokens: Sequence[str], merges: Sequence[str], token_types: Sequence[int], pre: str,
                 bos_id: int, eos_id: int, chat_template: str | None = None) -> None:
        from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers
        from tokenizers.models import BPE

        tokens = [str(t) for t in tokens]
        if len(tokens) < 2:
            raise ValueError(f"tokens: expected a vocabulary, got {len(tokens)} tokens")
        if len(token_types) != len(tokens):
            raise ValueError(f"token_types: expected one type per token ({len(tokens)}), got {len(token_types)}")
        if pre not in PRE_TOKENIZERS:
            raise ValueError(f"pre: the pre-tokenizer {pre!r} is not one speclib reads "
                             f"({', '.join(map(repr, PRE_TOKENIZERS))})")
        self.vocab_size = len(tokens)
        for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
            if not (isinstance(value, (int, np.integer)) and 0 <= value < self.vocab_size):
                raise ValueError(f"{name}: expected an id below {self.vocab_size}, got {value!r}")
        self.bos_id, self.eos_id, self.pre = int(bos_id), int(eos_id), pre
        self.chat_template = chat_template
        alphabet = bytes_to_unicode()
        spelled = set(alphabet.values())
        # A token outside the byte alphabet (a file that stores raw text) is respelled byte by byte.
        vocab = {(t if set(t) <= spelled else "".join(alphabet[b] for b in t.encode("utf-8"))): i
                 for i, t in enumerate(tokens)}
        if len(vocab) != len(tokens):
            raise ValueError("tokens: the vocabulary spells two ids the same way")
        pairs = []
        for i, merge in enumerate(merges):
            parts = str(merge).split(" ")
            if len(parts) != 2:
                raise ValueError(f"merges[{i}]: expected 'left right', got {merge!r}")
            pairs.append((parts[0], parts[1]))
        backend = Tokenizer(BPE(vocab=vocab, merges=pairs, dropout=None, continuing_subword_prefix="",
                                end_of_word_suffix="", fuse_unk=False))
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        backend.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                                 if pre == "smollm" else byte_level)
        backend.decoder = decoders.ByteLevel()
        self.special_ids = np.array([i for i, kind in enumerate(token_types) if int(kind) == _CONTROL], dtype=np.int64)
        backend.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i in self.special_ids])
        self.backend = backend
        self._tokens = tokens
        self._template = None

    @classmethod
    def from_metadata(cls, metadata: dict, source: object = "the GGUF file") -> "GGUFTokenizer":
        """The tokenizer a GGUF file's metadata describes (``speclib.lm.gguf_file.GGUFFile.metadata``).

        ``source`` names the file in errors.
        """
        def value(key: str, default: object = KeyError):
            if key not in metadata:
                if default is KeyError:
                    raise ValueError(f"path: {source} has no {key!r}: it stores no tokenizer speclib can build")
                return default
            return metadata[key]

        kind = value("tokenizer.ggml.model")
        if kind != "gpt2":
            raise ValueError(f"path: {source} has the tokenizer {kind!r}; speclib builds byte-level BPE ('gpt2') only")
        return cls(value("tokenizer.ggml.tokens"), value("tokenizer.ggml.merges"), value("tokenizer.ggml.token_type"),
                   value("tokenizer.ggml.pre", "gpt2"), value("tokenizer.ggml.bos_token_id"),
                   value("tokenizer.ggml.eos_token_id"), value("tokenizer.chat_template", None))

    def __repr__(self) -> str:
        return (f"GGUFTokenizer(vocab_size={self.vocab_size}, pre={self.pre!r}, "
                f"special={len(self.special_ids)}, chat_template={self.chat_template is not None})")

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def bos_token(self) -> str:
        return self._tokens[self.bos_id]

    @property
    def eos_token(self) -> str:
        return self._tokens[self.eos_id]

    def encode(self, text: str) -> np.ndarray:
        """The ids of ``text`` (int64); control tokens written in the text (``<|im_end|>``) are read whole.

        No beginning-of-sequence id is added (the file says not to; the chat template writes
        its own markers).
        """
        if not isinstance(text, str):
            raise TypeError(f"text: expected a string, got {type(text).__name__}")
        return np.array(self.backend.encode(text, add_special_tokens=False).ids, dtype=np.int64)

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        """The text of ``ids`` (control tokens left out with ``skip_special``).

        ``decode(encode(text)) == text`` for every string.  A piece of a longer text may end
        inside a character's bytes; those show as U+FFFD.
        """
        ids = as_tokens(ids, "ids", self.vocab_size)
        return self.backend.decode(ids.tolist(), skip_special_tokens=as_bool(skip_special, "skip_special"))

    def token_texts(self, ids: Iterable[int]) -> list[str]:
        """Each id's own text (its bytes decoded, U+FFFD for a character split between tokens)."""
        ids = as_tokens(ids, "ids", self.vocab_size)
        return [self.backend.decode([int(i)], skip_special_tokens=False) for i in ids]

    def render_chat(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        """The text the chat template makes of ``messages`` (as ``transformers``' ``apply_chat_template``).

        ``messages`` is a list of ``{"role": ..., "content": ...}`` (roles such as
        ``"system"``, ``"user"``, ``"assistant"``); ``add_generation_prompt`` ends the text
        with the opening of the assistant's turn.
        """
        if self.chat_template is None:
            raise ValueError("this tokenizer's file stores no chat template (tokenizer.chat_template)")
        messages = _check_messages(messages)
        return self._compiled().render(messages=messages,
                                       add_generation_prompt=as_bool(add_generation_prompt, "add_generation_prompt"),
                                       bos_token=self.bos_token, eos_token=self.eos_token)

    def encode_chat(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> np.ndarray:
        """The ids of :meth:`render_chat`'s text: a prompt for the model."""
        return self.encode(self.render_chat(messages, add_generation_prompt))

    def _compiled(self):
        if self._template is None:
            import jinja2.ext
            from jinja2.sandbox import ImmutableSandboxedEnvironment

            def raise_exception(message: str):
                raise ValueError(f"chat template: {message}")

            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=[jinja2.ext.loopcontrols])
            env.globals["raise_exception"] = raise_exception
            self._template = env.from_string(self.chat_template)
        return self._template


def _check_messages(messages: object) -> list[dict]:
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise TypeError(f"messages: expected a list of {{'role': ..., 'content': ...}} dicts, "
                        f"got {type(messages).__name__}")
    if not messages:
        raise ValueError("messages: expected at least one message")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TypeError(f"messages[{i}]: expected a dict with 'role' and 'content', got {type(message).__name__}")
        for key in ("role", "content"):
            if not isinstance(message.get(key), str):
                raise ValueError(f"messages[{i}]: expected a string under {key!r}, got {message.get(key)!r}")
        out.append(dict(message))
    return out

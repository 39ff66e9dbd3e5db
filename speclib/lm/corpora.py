"""Real text that ships with Python: English prose and Python code, no download needed.

Two *domains*, both read from the running Python installation:

``"prose"``
    The help topics of Python's own documentation, :data:`pydoc_data.topics.topics` (the
    text ``help("if")`` prints): every topic, in sorted order of its name, cut into its
    titled sections.
``"code"``
    The source of a fixed list of pure-Python standard-library modules
    (:data:`CODE_FILES`), read from the directory that ``sysconfig`` reports.

A *document* is one section of a help topic, or one source file.  The split into training
and held-out text is by whole documents and deterministic: with ``heldout_fraction = 0.1`` every 10th document is
held out.  Nothing is shuffled, so the same Python gives the same corpus every time
(another Python version ships slightly different text, hence slightly different numbers).

Every model in the book reads characters through one :class:`Vocabulary`: a newline, the
95 printable ASCII characters and one *unknown* symbol for anything else (tabs, accented
letters), 97 symbols whatever the Python version.  Typographic quotes, dashes and the
ellipsis are first replaced by ASCII look-alikes so that they do not all become unknown.
"""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .._validate import as_real, as_tokens

#: The two text domains.
DOMAINS = ("prose", "code")

#: Standard-library files (relative to the ``stdlib`` directory) that make up the code corpus:
#: long-lived, pure-Python modules, about 0.9 MB together.
CODE_FILES = (
    "abc.py", "base64.py", "bdb.py", "bisect.py", "calendar.py", "cmd.py",
    "collections/__init__.py", "colorsys.py", "contextlib.py", "copy.py", "csv.py", "dis.py",
    "fnmatch.py", "fractions.py", "functools.py", "getopt.py", "gettext.py", "glob.py",
    "graphlib.py", "hashlib.py", "heapq.py", "html/parser.py", "json/__init__.py",
    "json/decoder.py", "json/encoder.py", "keyword.py", "linecache.py", "mimetypes.py",
    "numbers.py", "operator.py", "os.py", "posixpath.py", "pprint.py", "queue.py", "quopri.py",
    "random.py", "reprlib.py", "sched.py", "selectors.py", "shlex.py", "stat.py",
    "statistics.py", "string.py", "tempfile.py", "textwrap.py", "timeit.py", "tokenize.py",
    "trace.py", "types.py", "uuid.py", "warnings.py", "weakref.py",
)

# Typographic characters of the documentation, written with the vocabulary's ASCII.
_ASCII_LOOKALIKES = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
    "\u2013": "-", "\u2014": "--", "\u2026": "...", "\u00a0": " ",
})

_DOC_SEPARATOR = "\n\n"

# A help topic's section starts at a title line underlined with *, =, -, ~ or ^.
_SECTION_START = re.compile(r"\n\n(?=[^\n]+\n[*=~^-]{3,}\n)")


def _check_domain(domain: object) -> str:
    if not isinstance(domain, str):
        raise TypeError(f"domain: expected one of {DOMAINS}, got {type(domain).__name__}")
    if domain not in DOMAINS:
        raise ValueError(f"domain: expected one of {DOMAINS}, got {domain!r}")
    return domain


def _prose_documents() -> list[str]:
    try:
        from pydoc_data.topics import topics
    except ImportError:
        raise RuntimeError(
            "the 'prose' corpus needs pydoc_data.topics (Python's documentation help topics), "
            "which this Python installation lacks; install the full standard library "
            "(for example the python3 package, not only python3-minimal)"
        ) from None
    return [section for name in sorted(topics) for section in _SECTION_START.split(topics[name])]


def stdlib_directory() -> Path:
    """Where the running Python keeps its standard-library source files."""
    return Path(sysconfig.get_paths()["stdlib"])


def _code_documents() -> list[str]:
    root = stdlib_directory()
    missing = [name for name in CODE_FILES if not (root / name).is_file()]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise RuntimeError(
            f"the 'code' corpus needs the standard library's .py source files, but {shown} "
            f"cannot be found in {root}; this Python installation ships without them "
            "(install the full standard library, e.g. python3 rather than python3-minimal)"
        )
    return [(root / name).read_text(encoding="utf-8") for name in CODE_FILES]


def documents(domain: str) -> list[str]:
    """The documents of a domain (topic sections or files), in their fixed order, ASCII look-alikes applied.

    Examples
    --------
    >>> docs = documents("code")
    >>> len(docs) == len(CODE_FILES)
    True
    """
    domain = _check_domain(domain)
    docs = _prose_documents() if domain == "prose" else _code_documents()
    return [doc.translate(_ASCII_LOOKALIKES).strip("\n") + "\n" for doc in docs]


def load_text(domain: str) -> str:
    """All the text of a domain, its documents joined by blank lines.

    Parameters
    ----------
    domain : {"prose", "code"}

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If ``domain`` is not one of :data:`DOMAINS`.
    RuntimeError
        If this Python installation lacks ``pydoc_data`` or the standard-library sources.

    Examples
    --------
    >>> text = load_text("code")
    >>> "def " in text
    True
    """
    return _DOC_SEPARATOR.join(documents(domain))


class Corpus(NamedTuple):
    """One domain's text, split into training and held-out parts."""

    domain: str
    train: str
    heldout: str


def load_corpus(domain: str, heldout_fraction: float = 0.1) -> Corpus:
    """The training / held-out split of a domain, by whole documents.

    Document ``i`` is held out when ``i % n == n - 1`` with ``n = round(1 / heldout_fraction)``,
    so ``heldout_fraction = 0.1`` holds out every 10th document.  No randomness.

    Parameters
    ----------
    domain : {"prose", "code"}
    heldout_fraction : float, default 0.1
        Fraction of the *documents* held out, in (0, 0.5].

    Returns
    -------
    Corpus

    Examples
    --------
    >>> corpus = load_corpus("prose")
    >>> corpus.domain, len(corpus.heldout) < len(corpus.train)
    ('prose', True)
    """
    domain = _check_domain(domain)
    heldout_fraction = as_real(heldout_fraction, "heldout_fraction", low=0.0, high=0.5)
    if heldout_fraction == 0.0:
        raise ValueError("heldout_fraction: must be > 0 (at least one document is held out)")
    every = max(2, round(1.0 / heldout_fraction))
    docs = documents(domain)
    if len(docs) < every:
        raise ValueError(f"heldout_fraction: {heldout_fraction} holds out no document of the "
                         f"{len(docs)} in the {domain!r} corpus")
    train = [d for i, d in enumerate(docs) if i % every != every - 1]
    heldout = [d for i, d in enumerate(docs) if i % every == every - 1]
    return Corpus(domain, _DOC_SEPARATOR.join(train), _DOC_SEPARATOR.join(heldout))


class Vocabulary:
    """The fixed character vocabulary shared by every model of the book.

    Symbols: ``"\\n"`` (id 0), the printable ASCII characters ``" "`` to ``"~"`` (ids 1 to
    95) and the unknown symbol (id 96), which stands for every other character and is shown
    as ``"\\ufffd"`` when decoding.

    Examples
    --------
    >>> vocab = shared_vocabulary()
    >>> vocab.size
    97
    >>> ids = vocab.encode("a\\tb")
    >>> ids.tolist(), vocab.decode(ids)
    ([66, 96, 67], 'a\\ufffdb')
    """

    #: How the unknown symbol is printed.
    UNKNOWN = "\ufffd"

    def __init__(self) -> None:
        self.chars: str = "\n" + "".join(chr(c) for c in range(32, 127))
        self.unk_id: int = len(self.chars)
        self.size: int = len(self.chars) + 1
        self.vocab_size: int = self.size
        table = np.full(128, self.unk_id, dtype=np.int64)
        for i, ch in enumerate(self.chars):
            table[ord(ch)] = i
        self._table = table
        self._symbols = np.array(list(self.chars) + [self.UNKNOWN])

    def encode(self, text: str) -> np.ndarray:
        """Token ids (int64) of ``text``; characters outside the vocabulary become :attr:`unk_id`."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected a str, got {type(text).__name__}")
        try:
            raw = text.encode("utf-32-le")
        except UnicodeEncodeError as error:  # a lone surrogate: bytes that were never valid text
            raise ValueError(f"text: character {error.start + 1} is U+{ord(text[error.start]):04X}, a lone "
                             "surrogate (undecodable bytes), not a character") from None
        codes = np.frombuffer(raw, dtype="<u4").astype(np.int64)
        ids = np.full(codes.shape, self.unk_id, dtype=np.int64)
        ascii_ = codes < 128
        ids[ascii_] = self._table[codes[ascii_]]
        return ids

    def decode(self, ids: object) -> str:
        """The text of token ids; the unknown id shows as ``"\\ufffd"``."""
        ids = as_tokens(ids, "ids", self.size)
        return "".join(self._symbols[ids].tolist())

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"Vocabulary(size={self.size}, unk_id={self.unk_id})"


_SHARED = Vocabulary()


def shared_vocabulary() -> Vocabulary:
    """The one :class:`Vocabulary` every model uses (97 symbols)."""
    return _SHARED

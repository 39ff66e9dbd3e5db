"""Character n-gram language models with interpolated Kneser-Ney smoothing.

An order-``n`` model predicts the next character from the last ``n - 1``.  Counts alone
would give probability 0 to every character never seen after a context, and speculative
decoding divides by draft probabilities, so the model *interpolates*: each order keeps
a discount ``D`` from every count and hands the saved mass to the next-shorter context,
down to the uniform distribution over the vocabulary,

.. math::

    P_m(w \\mid h) = \\frac{\\max(c_m(h w) - D_m, 0)}{c_m(h)}
                   + \\frac{D_m \\, N_{1+}(h \\, \\bullet)}{c_m(h)} \\, P_{m-1}(w \\mid h'),
    \\qquad P_0(w) = 1 / V,

where ``h'`` drops the oldest character of ``h`` and a context never seen falls straight
through to ``P_{m-1}``.  The highest order counts occurrences; lower orders count in how
many different contexts a string continues (Kneser and Ney's *continuation counts*), and
``D_m`` is Ney's estimate ``n_1 / (n_1 + 2 n_2)`` from the numbers of strings seen once
and twice.  Every probability is positive and every row sums to 1.

Training is a handful of sorts over integer keys: seconds for a megabyte of text.  The
model follows the protocol of :mod:`speclib.lm.models` with ``context_length = order - 1``,
and caches the rows it has computed, so decoding loops that ask for the same contexts
again cost a dictionary look-up.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from .._validate import as_int, as_real, as_tokens
from ..core.cache import RecomputeCache
from .corpora import load_corpus, shared_vocabulary

#: Discounts are kept inside this range so that every order passes mass to the next.
DISCOUNT_RANGE = (0.05, 0.95)


class _Level(NamedTuple):
    """The counts of one order ``m``: strings of ``m`` characters, grouped by context."""

    gram_keys: np.ndarray  # sorted keys  context * V + next, int64
    counts: np.ndarray  # the count used at this order (raw or continuation), float
    ctx_keys: np.ndarray  # sorted unique contexts (m - 1 characters as one integer)
    ctx_start: np.ndarray  # where each context's grams start in gram_keys
    ctx_types: np.ndarray  # N1+(h .): how many different characters follow the context
    ctx_total: np.ndarray  # c(h): total count of the context
    discount: float


def _ney_discount(counts: np.ndarray) -> float:
    n1 = int(np.count_nonzero(counts == 1))
    n2 = int(np.count_nonzero(counts == 2))
    d = n1 / (n1 + 2 * n2) if n1 + n2 > 0 else 0.5
    return float(min(max(d, DISCOUNT_RANGE[0]), DISCOUNT_RANGE[1]))


def _level(gram_keys: np.ndarray, counts: np.ndarray, vocab: int, discount: float | None) -> _Level:
    ctx_keys, ctx_start, ctx_types = np.unique(gram_keys // vocab, return_index=True, return_counts=True)
    counts = counts.astype(float)
    return _Level(
        gram_keys, counts, ctx_keys, ctx_start, ctx_types,
        np.add.reduceat(counts, ctx_start) if counts.size else np.zeros(0),
        _ney_discount(counts) if discount is None else discount,
    )


class _StringCounts:
    """The distinct strings of one training text, by length, and the levels built from them.

    Computed on demand and kept, so that models of several orders trained on the same text
    (the order sweep of chapter 8) share the sorting work instead of repeating it.
    """

    def __init__(self, tokens: np.ndarray, vocab: int) -> None:
        self.tokens, self.vocab = tokens, vocab
        self._keys = tokens.copy()  # the strings of the longest length computed so far
        self._strings: list[tuple[np.ndarray, np.ndarray]] = []  # (unique keys, raw counts) by length
        self._levels: dict[tuple, _Level] = {}

    def strings(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """The distinct strings of ``m`` tokens (as integer keys) and how often each occurs."""
        while len(self._strings) < m:
            length = len(self._strings) + 1
            if length > 1:
                self._keys = self._keys[:-1] * self.vocab + self.tokens[length - 1:]
            self._strings.append(np.unique(self._keys, return_counts=True))
        return self._strings[m - 1]

    def level(self, m: int, order: int, discount: float | None) -> _Level:
        """Order ``m``'s level in a model of ``order``: raw counts at the top, continuation counts below."""
        key = (m, m == order, discount)
        if key not in self._levels:
            if m == order:
                grams, counts = self.strings(m)
            else:
                # Continuation count of a string: in how many contexts it continues.
                grams, counts = np.unique(self.strings(m + 1)[0] % self.vocab**m, return_counts=True)
            self._levels[key] = _level(grams, counts, self.vocab, discount)
        return self._levels[key]


class NGramModel:
    """A character n-gram model with interpolated Kneser-Ney smoothing.

    Parameters
    ----------
    tokens : array_like of int, shape (N,)
        The training text as token ids (see :class:`speclib.lm.corpora.Vocabulary`).
    order : int
        ``n``: the model reads the last ``n - 1`` tokens.  1 is a smoothed unigram model.
    vocab_size : int, default 97
        Size of the vocabulary (the shared character vocabulary's by default).
    discount : float, optional
        One discount for every order, in (0, 1).  By default each order estimates its own.

    Attributes
    ----------
    order, vocab_size, context_length : int
    discounts : tuple of float
        The discount of each order, lowest first.

    Examples
    --------
    >>> from speclib.lm.corpora import shared_vocabulary
    >>> vocab = shared_vocabulary()
    >>> model = NGramModel(vocab.encode("abracadabra " * 20), order=3)
    >>> probs = model(vocab.encode("abr"))
    >>> probs.shape, bool(abs(probs.sum(axis=1) - 1).max() < 1e-12), bool(probs.min() > 0)
    ((3, 97), True, True)
    >>> vocab.chars[int(probs[-1].argmax())]      # after "br" comes "a"
    'a'
    """

    #: Cached rows kept at most; the cache is emptied when it is full.
    CACHE_SIZE = 20_000

    #: Rows right by construction: the loops do not check them again (speclib.core.cache.rows_trusted).
    trusted_rows = True

    def __init__(self, tokens: object, order: int, vocab_size: int | None = None,
                 discount: float | None = None, *, _counts: _StringCounts | None = None) -> None:
        if vocab_size is None:
            vocab = shared_vocabulary().size
        else:
            vocab = as_int(vocab_size, "vocab_size", minimum=2)
        order = as_int(order, "order", minimum=1)
        if order * math.log2(vocab) > 62 or order * vocab ** (order - 1) >= 2**62:
            raise ValueError(f"order: {order} is too high for a vocabulary of {vocab} (vocab_size) "
                             f"(strings of {order} tokens must fit in a 64-bit key)")
        tokens = as_tokens(tokens, "tokens", vocab)
        if tokens.size < order:
            raise ValueError(f"tokens: need at least order = {order} training tokens, got {tokens.size}")
        if discount is not None:
            discount = as_real(discount, "discount", low=0.0, high=1.0)
            if not 0.0 < discount < 1.0:
                raise ValueError(f"discount: must lie strictly between 0 and 1, got {discount}")
        self.order = order
        self.vocab_size = vocab
        self.context_length = order - 1
        self.n_train_tokens = int(tokens.size)

        counts = _counts if _counts is not None else _StringCounts(tokens, vocab)
        levels = [counts.level(m, order, discount) for m in range(1, order + 1)]
        self._levels = levels
        self.discounts = tuple(level.discount for level in levels)
        self._cache: dict[bytes, np.ndarray] = {}
        self._table: np.ndarray | None = None
        self._ready = False  # the look-up tables below are built on the first call

    def _prepare(self) -> None:
        """Build the tables that :meth:`__call__` reads (not needed to measure cross-entropy)."""
        levels, vocab = self._levels, self.vocab_size
        # All orders' contexts in one sorted table (order m's keys shifted by (m - 1) * stride),
        # so that one row needs one search instead of one per order.
        stride = vocab ** (self.order - 1)
        offsets = np.cumsum([0] + [level.gram_keys.size for level in levels[:-1]])
        self._stride = stride
        self._all_ctx = np.concatenate([m * stride + level.ctx_keys for m, level in enumerate(levels)])
        self._all_start = np.concatenate([level.ctx_start + off for level, off in zip(levels, offsets)])
        self._all_types = np.concatenate([level.ctx_types for level in levels])
        self._all_total = np.concatenate([level.ctx_total for level in levels])
        self._all_discount = np.concatenate([np.full(lv.ctx_keys.size, lv.discount) for lv in levels])
        self._all_next = np.concatenate([level.gram_keys % vocab for level in levels])
        self._all_kept = np.concatenate([np.maximum(level.counts - level.discount, 0.0) for level in levels])
        self._build_table()
        self._ready = True

    def __repr__(self) -> str:
        return (f"NGramModel(order={self.order}, vocab_size={self.vocab_size}, "
                f"trained on {self.n_train_tokens} tokens)")

    # ----------------------------------------------------------------------------- rows
    def _contexts(self, tokens: np.ndarray) -> np.ndarray:
        """Row ``i``: the ``order - 1`` tokens up to position ``i``, left-padded with -1."""
        n, width = tokens.size, self.context_length
        padded = np.concatenate([np.full(width, -1, dtype=np.int64), tokens])
        return padded[np.arange(n)[:, None] + np.arange(1, width + 1)]

    def _rows(self, contexts: np.ndarray, first: int = 1, last: int | None = None,
              rows: np.ndarray | None = None) -> np.ndarray:
        """The next-token distribution for each row of ``contexts`` (shape (B, order - 1)).

        Runs the recursion from order ``first`` to order ``last``, starting from ``rows``
        (``P_{first - 1}``; the uniform distribution when ``first`` is 1).
        """
        vocab, width = self.vocab_size, self.context_length
        last = self.order if last is None else last
        if rows is None:
            rows = np.full((contexts.shape[0], vocab), 1.0 / vocab)
        ctx_key = np.zeros(contexts.shape[0], dtype=np.int64)
        for m, level in enumerate(self._levels[:last], start=1):
            if m > 1:
                oldest = contexts[:, width - (m - 1)]  # the oldest token this order adds
                ctx_key = ctx_key + np.maximum(oldest, 0) * vocab ** (m - 2)
                active = np.flatnonzero(oldest >= 0)
            else:
                active = np.arange(contexts.shape[0])
            if m < first:
                continue
            if active.size == 0 or level.ctx_keys.size == 0:
                break
            j = np.minimum(np.searchsorted(level.ctx_keys, ctx_key[active]), level.ctx_keys.size - 1)
            found = level.ctx_keys[j] == ctx_key[active]
            pos, j = active[found], j[found]
            if pos.size == 0:
                continue
            types = level.ctx_types[j]
            # Scatter each found context's discounted counts into a dense (len(pos), V) block.
            idx = np.repeat(level.ctx_start[j] - np.cumsum(types) + types, types) + np.arange(types.sum())
            kept = np.zeros((pos.size, vocab))
            kept[np.repeat(np.arange(pos.size), types), level.gram_keys[idx] % vocab] = \
                np.maximum(level.counts[idx] - level.discount, 0.0)
            rows[pos] = (kept + (level.discount * types)[:, None] * rows[pos]) / level.ctx_total[j][:, None]
        return rows

    def _build_table(self) -> None:
        """Tabulate ``P_m`` for every possible context of the low orders (all of the draft's).

        Orders up to ``m`` have at most ``V ** (m - 1)`` contexts, few enough to list them all:
        a row for such a context is then a table look-up, and the recursion of a longer
        context starts from it.
        """
        vocab, width = self.vocab_size, self.context_length
        m = 1
        while m < self.order and vocab ** (m + 1) <= 2_000_000:
            m += 1
        self._table_order = m
        if m < 2:
            self._table = None
            return
        keys = np.arange(vocab ** (m - 1))
        contexts = np.full((keys.size, width), -1, dtype=np.int64)
        for d in range(m - 1):  # token d places back from the end is digit d of the key
            contexts[:, width - 1 - d] = (keys // vocab**d) % vocab
        self._table = self._rows(contexts, last=m)
        self._table.flags.writeable = False

    def _table_key(self, contexts: np.ndarray) -> np.ndarray:
        width, vocab = self.context_length, self.vocab_size
        return sum(contexts[..., width - 1 - d] * vocab**d for d in range(self._table_order - 1))

    def _batch(self, contexts: np.ndarray) -> np.ndarray:
        """:meth:`_rows`, starting from the table wherever the context is long enough."""
        m = self._table_order
        if self._table is None:
            return self._rows(contexts)
        long_enough = contexts[:, self.context_length - (m - 1)] >= 0
        rows = np.empty((contexts.shape[0], self.vocab_size))
        if not long_enough.all():
            rows[~long_enough] = self._rows(contexts[~long_enough])
        start = self._table[self._table_key(contexts[long_enough])]
        if m < self.order:
            start = self._rows(contexts[long_enough], first=m + 1, rows=start)
        rows[long_enough] = start
        return rows

    def _row(self, context: np.ndarray) -> np.ndarray:
        """One row of :meth:`_batch`, for a single context (quicker than a batch of one).

        The same recursion and the same floating-point operations as :meth:`_rows`, on one
        vector: start from a table row (or the uniform distribution for very short contexts),
        then for each longer order whose context was seen,
        ``P_m = (kept_m + D_m N1+(h .) P_{m-1}) / c_m(h)``.
        """
        vocab, width, m0 = self.vocab_size, self.context_length, self._table_order
        ctx = context.tolist()
        if self._table is not None and ctx[width - (m0 - 1)] >= 0:
            key = sum(ctx[width - 1 - d] * vocab**d for d in range(m0 - 1))
            row, first = self._table[key].copy(), m0 + 1
        else:
            row, first = np.full(vocab, 1.0 / vocab), 1
        keys, key = ([0] if first == 1 else []), 0
        for m in range(2, self.order + 1):
            oldest = ctx[width - (m - 1)]
            if oldest < 0:
                break
            key += oldest * vocab ** (m - 2)
            if m >= first:
                keys.append((m - 1) * self._stride + key)
        if not keys:
            return row
        all_ctx = self._all_ctx
        for key, j in zip(keys, all_ctx.searchsorted(keys).tolist()):  # lowest order first
            if j == all_ctx.size or all_ctx[j] != key:
                continue  # a context never seen: P_m = P_{m-1}
            start, types = self._all_start[j], self._all_types[j]
            row *= self._all_discount[j] * types
            row[self._all_next[start:start + types]] += self._all_kept[start:start + types]
            row /= self._all_total[j]
        return row

    def __call__(self, tokens: object) -> np.ndarray:
        """Next-token distributions, shape ``(n, V)``: row ``i`` given ``tokens[: i + 1]``."""
        if not (isinstance(tokens, np.ndarray) and tokens.dtype == np.int64 and tokens.ndim == 1
                and (tokens.size == 0 or 0 <= tokens.min() <= tokens.max() < self.vocab_size)):
            tokens = as_tokens(tokens, "tokens", self.vocab_size)  # the slow path says what is wrong
        if tokens.size == 0:
            return np.zeros((0, self.vocab_size))
        return self._context_rows(self._contexts(tokens))

    def cache(self) -> "NGramCache":
        """An incremental reader of one sequence (:class:`NGramCache`): rows of the new tokens only."""
        return NGramCache(self)

    def _context_rows(self, contexts: np.ndarray) -> np.ndarray:
        """The rows of ``contexts`` (from :meth:`_contexts`), remembered for the next calls."""
        if not self._ready:
            self._prepare()
        if contexts.shape[0] > 64:  # long inputs (evaluation): compute in chunks, bypass the cache
            return np.concatenate([self._batch(contexts[i:i + 4096]) for i in range(0, contexts.shape[0], 4096)])
        keys = [c.tobytes() for c in contexts]
        cache = self._cache
        missing = [i for i, key in enumerate(keys) if key not in cache]
        if missing:
            if len(cache) + len(missing) > self.CACHE_SIZE:
                cache.clear()
                missing = list(range(len(keys)))
            if len(missing) <= 8:
                rows = [self._row(contexts[i]) for i in missing]
            else:
                rows = self._batch(contexts[missing])
            for i, row in zip(missing, rows):
                row.flags.writeable = False
                cache[keys[i]] = row
        return np.stack([cache[key] for key in keys])

    # ----------------------------------------------------------------------- evaluation
    def next_token_probability(self, tokens: object) -> np.ndarray:
        """Probability of each token given the ones before it: ``P(tokens[i] | tokens[:i])``, i >= 1.

        The same numbers as ``model(tokens)[i - 1, tokens[i]]``, computed without building
        whole rows, so it is quick on long texts.

        Returns
        -------
        ndarray of shape (n - 1,)
        """
        tokens = as_tokens(tokens, "tokens", self.vocab_size)
        if tokens.size < 2:
            return np.zeros(0)
        vocab, width = self.vocab_size, self.context_length
        contexts = self._contexts(tokens[:-1])
        nxt = tokens[1:]
        prob = np.full(nxt.size, 1.0 / vocab)
        ctx_key = np.zeros(nxt.size, dtype=np.int64)
        for m, level in enumerate(self._levels, start=1):
            if m > 1:
                oldest = contexts[:, width - (m - 1)]
                ctx_key = ctx_key + np.maximum(oldest, 0) * vocab ** (m - 2)
                active = oldest >= 0
            else:
                active = np.ones(nxt.size, dtype=bool)
            if level.ctx_keys.size == 0:
                break
            j = np.minimum(np.searchsorted(level.ctx_keys, ctx_key), level.ctx_keys.size - 1)
            found = active & (level.ctx_keys[j] == ctx_key)
            gram = ctx_key * vocab + nxt
            g = np.minimum(np.searchsorted(level.gram_keys, gram), level.gram_keys.size - 1)
            count = np.where(level.gram_keys[g] == gram, level.counts[g], 0.0)
            d = level.discount
            smoothed = (np.maximum(count - d, 0.0) + d * level.ctx_types[j] * prob) / level.ctx_total[j]
            prob = np.where(found, smoothed, prob)
        return prob

    def cross_entropy(self, tokens: object) -> float:
        """Average ``-log2 P(token | tokens before it)`` over ``tokens[1:]``: bits per token.

        Examples
        --------
        >>> from speclib.lm.corpora import shared_vocabulary
        >>> vocab = shared_vocabulary()
        >>> model = NGramModel(vocab.encode("abab" * 50), order=2)
        >>> bool(model.cross_entropy(vocab.encode("abababab")) < 0.1)
        True
        """
        tokens = as_tokens(tokens, "tokens", self.vocab_size)
        if tokens.size < 2:
            raise ValueError("tokens: need at least 2 tokens to measure a cross-entropy")
        return float(-np.log2(self.next_token_probability(tokens)).mean())


class NGramCache(RecomputeCache):
    """The cache of an :class:`NGramModel`: the rows of the fed tokens, and no others.

    :class:`~speclib.core.cache.RecomputeCache` hands a model the last ``context_length + n``
    tokens and keeps the last ``n`` rows: the model computes ``context_length`` rows more, for
    the short contexts at the start of that window, which the loop throws away.  A draft pass
    of the 7-gram then computes seven rows to use one.  This cache computes the ``n`` rows
    alone, from the same contexts: the same rows, bit for bit (``tests/test_ngram.py``).
    """

    trusted_rows = True

    def __init__(self, model: NGramModel) -> None:
        if not isinstance(model, NGramModel):
            raise TypeError(f"model: expected an NGramModel, got {type(model).__name__}")
        super().__init__(model, "model")

    def _rows(self, window: np.ndarray, n: int) -> np.ndarray:
        return self.model._context_rows(self.model._contexts(window)[-n:])


@functools.lru_cache(maxsize=2)
def _training_counts(domain: str, heldout_fraction: float) -> _StringCounts:
    vocab = shared_vocabulary()
    return _StringCounts(vocab.encode(load_corpus(domain, heldout_fraction).train), vocab.size)


@functools.lru_cache(maxsize=16)
def train_ngram(domain: str, order: int, heldout_fraction: float = 0.1) -> NGramModel:
    """An n-gram model of ``order`` trained on the training part of a domain's corpus.

    Cached: the same arguments return the same (already trained) model, and models of
    different orders on the same domain share their counting work.

    Examples
    --------
    >>> model = train_ngram("code", 3)
    >>> model.order, model.vocab_size
    (3, 97)
    """
    order = as_int(order, "order", minimum=1)
    counts = _training_counts(domain, heldout_fraction)
    return NGramModel(counts.tokens, order, _counts=counts)


def ngram_pair(domain: str, draft_order: int = 3, target_order: int = 7) -> tuple[NGramModel, NGramModel]:
    """A ``(target, draft)`` pair of n-gram models trained on the same text.

    The target reads more context than the draft; both share the vocabulary of
    :func:`speclib.lm.corpora.shared_vocabulary`.  Order as in :func:`speclib.lm.models.markov_pair`.

    Examples
    --------
    >>> target, draft = ngram_pair("prose")
    >>> target.context_length, draft.context_length
    (6, 2)
    """
    draft_order = as_int(draft_order, "draft_order", minimum=1)
    target_order = as_int(target_order, "target_order", minimum=1)
    return train_ngram(domain, target_order), train_ngram(domain, draft_order)


@functools.lru_cache(maxsize=4)
def _heldout_tokens(domain: str, heldout_fraction: float) -> np.ndarray:
    tokens = shared_vocabulary().encode(load_corpus(domain, heldout_fraction).heldout)
    tokens.flags.writeable = False
    return tokens


def heldout_cross_entropy(model: NGramModel, domain: str, heldout_fraction: float = 0.1) -> float:
    """Bits per character of ``model`` on the held-out part of a domain's corpus.

    Examples
    --------
    >>> bits = heldout_cross_entropy(train_ngram("code", 2), "code")
    >>> bool(2.0 < bits < 6.6)    # better than uniform over 97 symbols (6.6 bits)
    True
    """
    if not isinstance(model, NGramModel):
        raise TypeError(f"model: expected an NGramModel, got {type(model).__name__}")
    return model.cross_entropy(_heldout_tokens(domain, heldout_fraction))

"""Speculative decoding under batching: measured on the book's pair, with the cost model beside it.

A server runs ``B`` requests through every forward pass.  Plain decoding then reads ``B``
tokens per target pass; speculative decoding reads ``B (k + 1)`` (each request's draft and
the token after it) and keeps, per request, a ragged number of them.  Whether speculation
still pays depends on how the cost of one batched pass grows with the tokens it reads.  This
module measures that on the numpy pair, with the batched pass of
:mod:`speclib.lm.batched` and the batch driver :func:`speclib.core.variants.batch_generate`:

* :func:`batched_pass_times`: the seconds of one batched target (or draft) pass over ``B``
  sequences of ``n`` new tokens each (medians of the repeats, as every timing of the book);
* :func:`serve`: one batch of requests decoded to the end, timed (throughput, time per
  generated token of one request, tokens per pass, acceptance, ragged waste);
* :func:`serving_grid`: :func:`serve` over batch sizes and draft lengths, every setting once
  per repeat in a fresh order, so that a slow spell of the machine hits every setting alike;
  :func:`speedup_intervals` pairs each speculative run with the plain run of its repeat and
  gives the median ratio with the range of the paired runs, which the sentences rank by
  (:func:`speedup_sentence`);
* :func:`pass_grid_from_record`: the pass times of the book's record as a :class:`PassGrid`;
* :func:`batch_speedup`: the cost model of :mod:`speclib.core.theory` extended to a batch,
  from the measured pass times and the measured acceptance;
* :func:`k_for_batch`: a turn-down policy, the draft length that model predicts best at
  each batch size (0: plain decoding), which is what serving engines expose as a setting.

Every time is wall-clock on one BLAS thread.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .._validate import MAX_DRAFT_LENGTH, as_int, as_int_list, as_real, timing_repeats
from ..core.theory import expected_tokens_per_pass
from ..core.variants import batch_generate, expected_block_extremes
from ..lm.batched import batched_extend, batched_extend_logits
from ..lm.corpora import load_corpus, shared_vocabulary
from ..lm.transformer import Transformer, blas_threads

__all__ = ["PassGrid", "ServingRun", "batch_speedup", "batched_pass_times", "batching_sentence", "heldout_prompts",
           "k_for_batch", "pass_grid_from_record", "plot_batch_speedup", "plot_serving", "ragged_waste", "runs_from_record",
           "serve",
           "serving_grid", "speedup_intervals", "speedup_sentence", "speedups", "typical_runs"]


def heldout_prompts(n: int, length: int = 32, domain: str = "code", seed: int = 0) -> list[np.ndarray]:
    """``n`` prompts of ``length`` characters cut at random places of a domain's held-out text.

    Examples
    --------
    >>> [p.size for p in heldout_prompts(3, length=10)]
    [10, 10, 10]
    """
    n = as_int(n, "n", minimum=1, maximum=4096)
    length = as_int(length, "length", minimum=1, maximum=100)
    rng = np.random.default_rng(as_int(seed, "seed", minimum=0))
    text = load_corpus(domain).heldout
    vocab = shared_vocabulary()
    starts = rng.integers(0, len(text) - length, n)
    return [vocab.encode(text[s:s + length]) for s in starts]


def _check_transformer(model: object, name: str) -> Transformer:
    if not isinstance(model, Transformer):
        raise TypeError(f"{name}: expected a speclib.lm.transformer.Transformer, got {type(model).__name__}")
    return model


@dataclass(frozen=True)
class PassGrid:
    """Seconds of batched passes (the median of the repeats): ``seconds[i, j]`` for ``batch_sizes[i]`` sequences of
    ``n_tokens[j]`` new tokens each."""

    batch_sizes: np.ndarray
    n_tokens: np.ndarray
    seconds: np.ndarray

    def at(self, batch_size: int, n_tokens: int) -> float:
        """The seconds of one pass over ``batch_size`` sequences of ``n_tokens`` tokens."""
        i = np.flatnonzero(self.batch_sizes == batch_size)
        j = np.flatnonzero(self.n_tokens == n_tokens)
        if not i.size:
            raise ValueError(f"batch_size: {batch_size} was not measured (measured: {self.batch_sizes.tolist()})")
        if not j.size:
            raise ValueError(f"n_tokens: {n_tokens} was not measured (measured: {self.n_tokens.tolist()})")
        return float(self.seconds[i[0], j[0]])

    def ratio(self, batch_size: int, n_tokens: int) -> float:
        """A pass over ``batch_size x n_tokens`` tokens in units of one over ``batch_size`` tokens."""
        return self.at(batch_size, n_tokens) / self.at(batch_size, 1)


def batched_pass_times(model: Transformer, batch_sizes: Sequence[int], n_tokens: Sequence[int],
                       prefix_length: int = 40, repeats: int = 5, seed: int = 0) -> PassGrid:
    """Time one batched cached pass of ``model`` for every ``(B, n)``: the median of ``repeats``.

    Each of the ``B`` caches holds ``prefix_length`` random tokens; the pass feeds each ``n``
    random tokens (as a verification pass feeds ``k + 1``), and the caches are rolled back
    after it.  Each repeat visits every ``(B, n)`` once in a fresh random order, so that a slow
    spell of the machine slows one timing of each setting, not the median.

    Examples
    --------
    >>> from speclib.lm.transformer import TransformerConfig, random_transformer
    >>> cfg = TransformerConfig(vocab_size=5, block_size=16, d_model=8, n_layers=1, n_heads=2)
    >>> grid = batched_pass_times(random_transformer(cfg), [1, 2], [1, 3], prefix_length=4, repeats=2)
    >>> grid.seconds.shape, bool((grid.seconds > 0).all())
    ((2, 2), True)
    """
    model = _check_transformer(model, "model")
    bs = np.array(sorted(set(as_int_list(batch_sizes, "batch_sizes", minimum=1, maximum=1024))))
    ns = np.array(sorted(set(as_int_list(n_tokens, "n_tokens", minimum=1, maximum=MAX_DRAFT_LENGTH + 1))))
    prefix_length = as_int(prefix_length, "prefix_length", minimum=0)
    repeats = timing_repeats(as_int(repeats, "repeats", minimum=1, maximum=1000))
    if prefix_length + ns[-1] > model.config.block_size:
        raise ValueError(f"prefix_length + n_tokens: must fit in the block of {model.config.block_size} tokens")
    rng = np.random.default_rng(as_int(seed, "seed", minimum=0))
    caches = [model.cache() for _ in range(bs[-1])]
    for c in caches:
        c.extend(rng.integers(0, model.vocab_size, prefix_length))
    feeds = [rng.integers(0, model.vocab_size, ns[-1]) for _ in range(bs[-1])]
    cells = [(i, j) for i in range(bs.size) for j in range(ns.size)]
    seconds = np.empty((repeats, bs.size, ns.size))

    def one(i: int, j: int) -> float:
        b, n = bs[i], ns[j]
        t0 = time.perf_counter()
        batched_extend_logits(caches[:b], [f[:n] for f in feeds[:b]])
        elapsed = time.perf_counter() - t0
        for c in caches[:b]:
            c.rollback(prefix_length)
        return elapsed

    with blas_threads(1):
        for i, j in cells:  # warm-up
            one(i, j)
        for r in range(repeats):
            for c in rng.permutation(len(cells)):
                seconds[r][cells[c]] = one(*cells[c])
    return PassGrid(bs, ns, np.median(seconds, axis=0))


def pass_grid_from_record(record, batch_sizes: Sequence[int], n_tokens: Sequence[int],
                          passes: str = "numpy", device: str = "cpu") -> PassGrid:
    """The record's batched passes of the target as a :class:`PassGrid` (seconds).

    Reads ``t1_ms/target/B<b>/isolated/<passes>/<device>`` and
    ``r<n>/target/B<b>/isolated/<passes>/<device>`` of a
    :class:`speclib.book.record.Record`.
    """
    from .record import name

    bs = np.array(as_int_list(batch_sizes, "batch_sizes", minimum=1))
    ns = np.array(as_int_list(n_tokens, "n_tokens", minimum=1))
    seconds = np.empty((bs.size, ns.size))
    for i, b in enumerate(bs):
        t1 = record[name("t1_ms", "target", B=b, where="isolated", passes=passes, device=device)].value / 1e3
        for j, n in enumerate(ns):
            seconds[i, j] = t1 if n == 1 else t1 * record[name(f"r{n}", "target", B=b, where="isolated",
                                                                 passes=passes, device=device)].value
    return PassGrid(bs, ns, seconds)


@dataclass(frozen=True)
class ServingRun:
    """One batch of requests decoded to the end.

    ``seconds`` is the wall-clock time of the whole batch; every request receives ``n_new``
    tokens in that time, so one request's time per generated token is ``seconds / n_new``
    and the server's throughput is ``batch_size * n_new / seconds``.
    """

    batch_size: int
    k: int
    n_new: int
    seconds: float
    target_passes: int
    pass_tokens: int  #: tokens all target passes read (prompt passes included)
    acceptance: float  #: accepted / verified drafts (nan for plain decoding)
    waste: float  #: fraction of the ``B * max_i n_i`` slots of a padded batch that keep no token
    rejected_share: float  #: fraction of the drafted tokens the target rejected or never judged
    repeat: int = 0  #: which repeat of :func:`serving_grid` made it

    @property
    def throughput(self) -> float:
        """Generated tokens per second, over the whole batch."""
        return self.batch_size * self.n_new / self.seconds

    @property
    def time_per_token(self) -> float:
        """Seconds per generated token of one request."""
        return self.seconds / self.n_new

    @property
    def tokens_per_pass(self) -> float:
        """Generated tokens per target pass, per request."""
        return self.n_new / self.target_passes


def serve(target: Transformer, draft: Transformer, prompts: Sequence[np.ndarray], n_new: int, k: int,
          seed: int = 0) -> ServingRun:
    """Decode ``n_new`` tokens for every prompt as one batch (``k = 0``: plain), timed.

    Each request ``i`` samples with its own generator (seed ``seed + i``), so its tokens are
    those it would get alone; the target's passes are batched
    (:func:`speclib.lm.batched.batched_extend`), the draft runs request by request.

    Examples
    --------
    >>> from speclib.lm.transformer import TransformerConfig, random_transformer
    >>> cfg = TransformerConfig(vocab_size=5, block_size=16, d_model=8, n_layers=1, n_heads=2)
    >>> run = serve(random_transformer(cfg, 0), random_transformer(cfg, 1), [[1], [2, 3]], 6, k=2)
    >>> run.batch_size, run.n_new, run.seconds > 0
    (2, 6, True)
    """
    target = _check_transformer(target, "target")
    draft = _check_transformer(draft, "draft")
    seed = as_int(seed, "seed", minimum=0)
    n_prompts = len(prompts) if isinstance(prompts, (list, tuple)) else 0
    with blas_threads(1):
        t0 = time.perf_counter()
        _, st = batch_generate(target, draft, prompts, n_new, k, rng=[seed + i for i in range(n_prompts)],
                               target_pass=batched_extend)
        seconds = time.perf_counter() - t0
    lengths = [n for step in st.block_lengths for n in step]
    drafted = k * len(lengths)
    return ServingRun(st.batch_size, k, n_new, seconds, st.target_passes, int(sum(st.pass_tokens)),
                      st.acceptance_rate, st.waste, 1 - st.accepted / drafted if drafted else float("nan"))


def serving_grid(target: Transformer, draft: Transformer, batch_sizes: Sequence[int], ks: Sequence[int],
                 n_new: int, prompt_length: int = 32, repeats: int = 1, seed: int = 0) -> list[ServingRun]:
    """:func:`serve` for every batch size and draft length (0: plain), ``repeats`` times each.

    Batch ``B`` decodes the first ``B`` of one list of held-out code prompts, so a bigger
    batch adds requests to a smaller one.  The settings are visited in a fresh random order
    in every repeat.  Every run is returned (``repeat`` says which), setting by setting in
    the order of ``batch_sizes`` and ``ks``; :func:`typical_runs` keeps each setting's median
    run and :func:`speedup_intervals` pairs the runs of a repeat.
    """
    bs = as_int_list(batch_sizes, "batch_sizes", minimum=1, maximum=1024)
    ks = as_int_list(ks, "ks", minimum=0, maximum=MAX_DRAFT_LENGTH)
    repeats = timing_repeats(as_int(repeats, "repeats", minimum=1, maximum=100))
    prompts = heldout_prompts(max(bs), prompt_length, seed=seed)
    cells = [(b, k) for b in bs for k in ks]
    runs: dict[tuple[int, int], list[ServingRun]] = {c: [] for c in cells}
    order = np.random.default_rng(seed)
    for _ in range(repeats):
        for c in order.permutation(len(cells)):
            b, k = cells[c]
            run = serve(target, draft, prompts[:b], n_new, k, seed)
            runs[(b, k)].append(ServingRun(**{**run.__dict__, "repeat": len(runs[(b, k)])}))
    return [r for c in cells for r in runs[c]]


def runs_from_record(record, batch_sizes: Sequence[int], ks: Sequence[int], n_new: int,
                     temperature: float = 1.0) -> list[ServingRun]:
    """The record's median serving runs (``tokens_per_s``, ``tokens_per_pass``, ``waste`` of
    ``pair`` at every ``(B, k)``, ``k = 0`` plain) as :class:`ServingRun` objects, for
    :func:`plot_serving`; what the record does not keep (passes read, acceptance) is left empty."""
    from .record import name

    out = []
    for b in as_int_list(batch_sizes, "batch_sizes", minimum=1):
        for k in as_int_list(ks, "ks", minimum=0):
            tp = record[name("tokens_per_s", "pair", k=k, B=b, T=temperature, passes="numpy", device="cpu")].value
            loop = dict(k=k, B=b, T=temperature, where="loop")
            tpp = record[name("tokens_per_pass", "pair", **loop)].value if k else 1.0
            waste = record[name("waste", "pair", **loop)].value if k else 0.0
            out.append(ServingRun(b, k, n_new, b * n_new / tp, max(1, round(n_new / tpp)), 0, float("nan"),
                                  waste, float("nan")))
    return out


def typical_runs(runs: Sequence[ServingRun]) -> list[ServingRun]:
    """Each setting's median run by time (of an even count, the faster of the two middle ones)."""
    runs = _runs(runs)
    cells: dict[tuple[int, int], list[ServingRun]] = {}
    for r in runs:
        cells.setdefault((r.batch_size, r.k), []).append(r)
    return [sorted(c, key=lambda r: r.seconds)[(len(c) - 1) // 2] for c in cells.values()]


def speedup_intervals(runs: Sequence[ServingRun]) -> dict[tuple[int, int], tuple[float, float, float]]:
    """``(B, k) -> (median, low, high)`` of speculation's throughput over plain decoding's.

    Each speculative run is paired with the plain run of the same batch size and repeat (they
    ran in the same sweep of the machine); the median of the paired ratios is the estimate and
    the lowest and highest ratio its range.  The range of ``m`` paired runs covers their
    median with probability ``1 - 2 / 2**m`` (0.94 for five runs).

    Examples
    --------
    >>> runs = [ServingRun(2, k, 10, s, 10, 20, 0.7, 0.0, 0.0, repeat=r)
    ...         for r, (p, q) in enumerate([(1.0, 0.5), (1.2, 0.5), (1.0, 0.4)]) for k, s in ((0, p), (3, q))]
    >>> speedup_intervals(runs)
    {(2, 3): (2.4, 2.0, 2.5)}
    """
    runs = _runs(runs)
    plain = {(r.batch_size, r.repeat): r.seconds for r in runs if r.k == 0}
    ratios: dict[tuple[int, int], list[float]] = {}
    for r in runs:
        if r.k and (r.batch_size, r.repeat) in plain:
            ratios.setdefault((r.batch_size, r.k), []).append(plain[(r.batch_size, r.repeat)] / r.seconds)
    return {cell: (float(np.median(v)), float(min(v)), float(max(v))) for cell, v in ratios.items()}


def batch_speedup(alpha: float, k: int, batch_size: int, target_times: PassGrid, draft_seconds: float,
                  batched_draft: bool = False, draft_times: PassGrid | None = None) -> float:
    """The cost model of a batch step: predicted speed-up of speculation over plain decoding at ``B``.

    ``E[n] t_T(B, 1) / (k t_D + t_T(B, k + 1))``, with ``E[n] = (1 - alpha^(k+1)) / (1 - alpha)``
    the tokens each request keeps per step, ``t_T(B, n)`` a batched target pass over ``B``
    sequences of ``n`` tokens (measured), and ``t_D`` the draft's cost per step: ``B``
    single-sequence draft passes (``draft_seconds`` each, as :func:`serve` runs them), or one
    batched draft pass over ``B`` tokens when ``batched_draft`` (from ``draft_times``).  With
    ``B = 1`` and ``t_T(1, k+1) = t_T(1, 1)`` this is :func:`speclib.core.theory.speedup_in_passes`.

    Examples
    --------
    >>> grid = PassGrid(np.array([1, 8]), np.array([1, 4]), np.array([[1.0, 1.0], [2.0, 6.0]]))
    >>> round(batch_speedup(0.8, 3, 1, grid, draft_seconds=0.0), 3)
    2.952
    >>> round(batch_speedup(0.8, 3, 8, grid, draft_seconds=0.0), 3)
    0.984
    """
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    batch_size = as_int(batch_size, "batch_size", minimum=1)
    draft_seconds = as_real(draft_seconds, "draft_seconds", low=0.0)
    if batched_draft:
        if draft_times is None:
            raise ValueError("draft_times: needed when batched_draft is True")
        t_draft = draft_times.at(batch_size, 1)
    else:
        t_draft = batch_size * draft_seconds
    tokens = float(expected_tokens_per_pass(alpha, k))
    return tokens * target_times.at(batch_size, 1) / (k * t_draft + target_times.at(batch_size, k + 1))


def k_for_batch(alpha: float, batch_size: int, target_times: PassGrid, draft_seconds: float,
                ks: Sequence[int], margin: float = 1.0, **kwargs: object) -> int:
    """The turn-down policy: the ``k`` in ``ks`` the batch cost model predicts fastest at ``B``.

    Returns 0 (speculation off) when no ``k`` is predicted to beat plain decoding by more
    than ``margin``; so as the batch grows and a pass over ``B (k + 1)`` tokens costs more
    than one over ``B``, the policy shortens the draft and then turns speculation off.

    Examples
    --------
    >>> grid = PassGrid(np.array([1, 8]), np.array([1, 2, 4]), np.array([[1., 1., 1.], [2., 3., 6.]]))
    >>> k_for_batch(0.8, 1, grid, 0.0, ks=[1, 3]), k_for_batch(0.8, 8, grid, 0.0, ks=[1, 3])
    (3, 1)
    """
    margin = as_real(margin, "margin", low=0.0)
    ks = as_int_list(ks, "ks", minimum=1, maximum=MAX_DRAFT_LENGTH)
    if not ks:
        raise ValueError("ks: need at least one draft length")
    predicted = [batch_speedup(alpha, k, batch_size, target_times, draft_seconds, **kwargs) for k in ks]
    best = int(np.argmax(predicted))
    return ks[best] if predicted[best] > margin else 0


def ragged_waste(alpha: float, k: int, batch_size: int) -> float:
    """Predicted share of a padded batch's slots that keep no token: ``1 - E[n] / E[max_i n_i]``.

    Examples
    --------
    >>> ragged_waste(0.8, 3, 1)
    0.0
    """
    mean, _, high = expected_block_extremes(alpha, k, batch_size)
    return float(1.0 - mean / high)


def _runs(runs: object) -> list[ServingRun]:
    if not isinstance(runs, (list, tuple)) or not runs or not all(isinstance(r, ServingRun) for r in runs):
        raise TypeError("runs: expected a non-empty list of ServingRun (what serving_grid returns)")
    return list(runs)


def speedups(runs: Sequence[ServingRun]) -> dict[tuple[int, int], float]:
    """Measured throughput of every ``(B, k)`` with ``k > 0`` over plain decoding at the same ``B``:
    the median of the paired runs (:func:`speedup_intervals`).

    Examples
    --------
    >>> a = ServingRun(2, 0, 10, 1.0, 10, 20, float("nan"), 0.0, float("nan"))
    >>> b = ServingRun(2, 3, 10, 0.5, 4, 40, 0.7, 0.2, 0.4)
    >>> speedups([a, b])
    {(2, 3): 2.0}
    """
    return {cell: m for cell, (m, _, _) in speedup_intervals(runs).items()}


def plot_serving(runs: Sequence[ServingRun], axes=None):
    """Throughput (left) and one request's time per generated token (right) against the batch size.

    One line for plain decoding and one per draft length (each setting's median run); both
    axes logarithmic.  Returns the two axes.
    """
    import matplotlib.pyplot as plt

    runs = typical_runs(runs)
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    ks = sorted({r.k for r in runs})
    colours = plt.cm.viridis(np.linspace(0.0, 0.85, max(1, len(ks) - 1)))
    for i, k in enumerate(ks):
        sel = sorted((r for r in runs if r.k == k), key=lambda r: r.batch_size)
        b = [r.batch_size for r in sel]
        style = dict(color="black", lw=2.2, marker="s") if k == 0 else dict(color=colours[i - 1], marker="o")
        label = "plain" if k == 0 else f"k = {k}"
        axes[0].plot(b, [r.throughput for r in sel], label=label, **style)
        axes[1].plot(b, [1e3 * r.time_per_token for r in sel], label=label, **style)
    for ax, what in zip(axes, ("generated tokens per second (batch)", "ms per token of one request")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch size B (requests)")
        ax.set_ylabel(what)
        ax.grid(alpha=0.3, which="both")
    axes[0].set_title("Throughput")
    axes[1].set_title("Latency of one request")
    axes[0].legend(fontsize=9)
    return axes


def plot_batch_speedup(measured: dict, predicted: dict, ax=None):
    """Measured (markers) and predicted (lines) speed-up over plain decoding against the batch size.

    ``measured`` maps ``(B, k)`` to a speed-up or to ``(median, low, high)``
    (:func:`speedup_intervals`, drawn with its range), ``predicted`` to a speed-up
    (:func:`batch_speedup`).  Returns the axes.
    """
    import matplotlib.pyplot as plt

    if not isinstance(measured, dict) or not isinstance(predicted, dict):
        raise TypeError("measured, predicted: expected dicts mapping (B, k) to a speed-up")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.6))
    ks = sorted({k for _, k in measured})
    colours = plt.cm.viridis(np.linspace(0.0, 0.85, max(1, len(ks))))
    for colour, k in zip(colours, ks):
        bs = sorted(b for b, kk in measured if kk == k)
        m = np.array([measured[(b, k)] if isinstance(measured[(b, k)], tuple) else (measured[(b, k)],) * 3
                      for b in bs], dtype=float)
        shift = 2 ** (0.06 * (list(ks).index(k) - (len(ks) - 1) / 2))  # side by side on the log axis
        ax.errorbar(np.array(bs) * shift, m[:, 0], yerr=[m[:, 0] - m[:, 1], m[:, 2] - m[:, 0]], fmt="o",
                    color=colour, capsize=2, label=f"k = {k}, measured")
        pb = sorted(b for b, kk in predicted if kk == k)
        ax.plot(pb, [predicted[(b, k)] for b in pb], "-", color=colour, alpha=0.7)
    ax.axhline(1.0, color="black", lw=1, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size B (requests)")
    ax.set_ylabel("throughput / plain throughput")
    ax.set_title("Speculation under batching: measured (dots), cost model (lines)")
    ax.legend(fontsize=9, ncol=2)
    ax.grid(alpha=0.3)
    return ax


def _times(x: float) -> str:
    return f"{x:.2f}x"


def batching_sentence(plain: dict[int, tuple[float, float]]) -> str:
    """One sentence on plain decoding as the batch grows, generated from the measured numbers.

    ``plain`` maps a batch size to (throughput in tokens per second, one request's
    milliseconds per token).  The verbs follow the numbers, and a batch size whose throughput
    fell below a smaller batch's is named, so the sentence cannot contradict the table.

    Examples
    --------
    >>> batching_sentence({1: (500.0, 2.0), 2: (900.0, 2.2), 32: (1300.0, 25.0)})
    "Plain decoding's throughput rose from 500 tokens per second at *B* = 1 to 1300 at *B* = 32, while one request's time per token rose from 2.0 ms to 25.0 ms."
    >>> batching_sentence({1: (516.0, 1.9), 2: (356.0, 5.6), 4: (558.0, 7.2)})
    "Plain decoding's throughput rose from 516 tokens per second at *B* = 1 to 558 at *B* = 4, though not at every step (at *B* = 2 it was below *B* = 1's), while one request's time per token rose from 1.9 ms to 7.2 ms."
    """
    if not isinstance(plain, dict) or len(plain) < 2:
        raise ValueError("plain: expected a dict of at least two batch sizes -> (tokens/s, ms per token)")
    bs = sorted(plain)
    (tp0, lat0), (tp1, lat1) = plain[bs[0]], plain[bs[-1]]
    verb = "rose" if round(tp1) > round(tp0) else "fell" if round(tp1) < round(tp0) else "stayed"
    text = f"Plain decoding's throughput {verb} from {tp0:.0f} tokens per second at *B* = {bs[0]} "
    text += f"to {tp1:.0f} at *B* = {bs[-1]}" if verb != "stayed" else f"at *B* = {bs[-1]} too"
    dips = [(b, a) for a, b in zip(bs, bs[1:]) if plain[b][0] < plain[a][0]]
    if dips and verb == "rose":
        text += ", though not at every step (" + "; ".join(
            f"at *B* = {b} it was below *B* = {a}'s" for b, a in dips) + ")"
    lat_verb = "rose" if round(lat1, 1) > round(lat0, 1) else "fell" if round(lat1, 1) < round(lat0, 1) else "stayed"
    text += f", while one request's time per token {lat_verb} from {lat0:.1f} ms to {lat1:.1f} ms." \
        if lat_verb != "stayed" else f", while one request's time per token stayed at {lat0:.1f} ms."
    return text


def speedup_sentence(measured: dict[tuple[int, int], tuple[float, float, float]],
                     interval: str = "range of the paired runs") -> str:
    """What the measured speed-ups say at the smallest and the largest batch, through their intervals.

    ``measured`` maps ``(B, k)`` to ``(median, low, high)`` of throughput over plain
    throughput at the same ``B`` (:func:`speedup_intervals`).  At each of the two batch sizes
    the draft length with the highest median is named with its interval, together with every
    other draft length whose interval reaches it (then no single best ``k`` is claimed); and
    the sentence says whether speculation was faster or slower than plain decoding beyond the
    interval (its low end above 1, or its high end below 1) or within it.

    Examples
    --------
    >>> print(speedup_sentence({(1, 1): (1.2, 1.1, 1.3), (1, 3): (1.3, 1.25, 1.4),
    ...                         (32, 1): (0.8, 0.7, 0.9), (32, 3): (0.55, 0.5, 0.65)}))
    At *B* = 1 the highest median is at *k* = 3, 1.30x plain decoding's throughput (range of the paired runs 1.25 to 1.40), but *k* = 1 reaches into that range; faster beyond the range. At *B* = 32 *k* = 1 leads alone with 0.80x (0.70 to 0.90), slower beyond the range.
    """
    if not isinstance(measured, dict) or not measured:
        raise ValueError("measured: expected a dict (B, k) -> (median, low, high), as speedup_intervals() returns")
    for cell, v in measured.items():
        if not (isinstance(v, tuple) and len(v) == 3 and v[1] <= v[0] <= v[2]):
            raise ValueError(f"measured[{cell}]: expected (median, low, high) with low <= median <= high, got {v!r}")
    bs = sorted({b for b, _ in measured})
    out = []
    for n, b in enumerate(dict.fromkeys((bs[0], bs[-1]))):
        cells = {k: measured[(bb, k)] for bb, k in measured if bb == b}
        k0 = max(cells, key=lambda k: cells[k][0])
        m, lo, hi = cells[k0]
        close = sorted(k for k, v in cells.items() if k != k0 and v[2] >= lo)
        side = ("faster beyond the range" if lo > 1 else "slower beyond the range" if hi < 1 else
                "within the range of plain decoding's throughput")
        if close:
            named = [f"*k* = {k}" for k in close]
            ks = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
            verb = "reaches" if len(close) == 1 else "reach"
            text = (f"the highest median is at *k* = {k0}, {_times(m)} plain decoding's throughput ({interval} "
                    f"{lo:.2f} to {hi:.2f}), but {ks} {verb} into that range; {side}")
        else:
            text = f"*k* = {k0} leads alone with {_times(m)} ({lo:.2f} to {hi:.2f}), {side}"
        out.append(f"At *B* = {b} {text}.")
    return " ".join(out)

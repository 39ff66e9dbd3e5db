"""What one forward pass costs, as a function of how many tokens it processes at once.

Speculative decoding rests on one physical fact: a large model's forward pass over a few
tokens costs about as much as over one, because the time goes into reading the weights
from memory, and the weights are read once per pass whatever the number of tokens.  This
module measures that on the machine at hand, with a stack of dense layers in numpy:

* :func:`layer_stack` builds seeded weights (make them larger than the processor's caches,
  see :func:`largest_cache_bytes`, so that every pass must stream them from main memory);
* :func:`forward_pass` pushes ``n`` token vectors through the stack, one matrix product per
  layer, as a transformer's dense layers do.  With ``blocked=True`` a product over 2 to
  :data:`SPLIT_MAX_TOKENS` tokens is computed column block by column block
  (:func:`column_blocks`, :func:`product`): OpenBLAS, numpy's usual BLAS, copies a whole
  weight matrix into its own layout before a product with more than a few rows, so the
  plain product of a pass over two tokens mostly measures that copy, not the reading of
  the weights.  The blocks keep such products on the library's direct kernel, which reads
  each weight once, as the product for one token does.  :class:`speclib.lm.transformer.Transformer`
  computes its passes by the same rule;
* :func:`measure_pass_times` times passes over 1, 2, 4, ... tokens, interleaving the sizes
  so that a slow moment of the machine hurts all of them alike, and keeps every repeat;
* :func:`fit_pass_cost` summarises the medians as ``fixed + per_token * n``: the per-token
  part is the arithmetic each extra token adds; the fixed part is what a pass costs before
  any of it.  Where the routine streams the weights at the memory's speed, that is reading
  the weights, and the ratio of the two, the *crossover* ``n*``, says where the fact stops
  holding; compare it with the measured one-token pass, which reads the same weights,
  before reading it so (on a CPU the routine for several rows often costs more than that);
* :func:`speedup_with_overhead` is the cost model of a speculative step with the loop's
  own time per step, which the plain formula leaves out;
* :func:`predicted_pass_time` is the same model written with hardware quantities (bytes of
  weights over memory bandwidth, plus arithmetic over throughput), for other machines.

:class:`CountingModel` wraps any model of :mod:`speclib.lm.models` and counts its calls, the
number that plain decoding spends one of per token.

Timings vary from run to run and machine to machine; nothing in the tests asserts one.
On a shared machine, pin the BLAS library to one thread (``OPENBLAS_NUM_THREADS=1`` before
numpy is imported) or the timings mostly measure thread scheduling.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

import numpy as np

from .._validate import MAX_ENTRIES, MAX_REPEATS, as_generator, as_int, as_real, as_real_array, as_tokens, timing_repeats

#: OpenBLAS multiplies small matrices with a direct kernel only while
#: ``rows * inner * columns`` stays below about this many; above it, it first repacks the
#: whole weight matrix, which makes a pass over 2 to 16 tokens cost several times a pass
#: over one.  (The same constants as :mod:`speclib.lm.transformer`.)
SMALL_PRODUCT = 1_000_000
#: Products over 2 .. SPLIT_MAX_TOKENS rows use the column blocks; one row uses the whole
#: matrix (a matrix-vector product, which reads the weights once), more rows the ordinary
#: matrix product (there the arithmetic, not the copy, dominates).
SPLIT_MAX_TOKENS = 16


def layer_stack(d_model: int, n_layers: int, rng: np.random.Generator | int,
                dtype: type = np.float64) -> list[np.ndarray]:
    """Seeded weights of ``n_layers`` dense layers of size ``d_model x d_model``.

    Entries are standard normal scaled by ``1 / sqrt(d_model)`` so activations neither
    blow up nor vanish through the stack.  ``n_layers * d_model**2`` numbers in all, 8 bytes
    each in float64 (the default: numpy's float64 matrix product degrades more gracefully
    for a handful of rows than its float32 one on common CPUs), 4 in float32.

    Examples
    --------
    >>> weights = layer_stack(8, 3, rng=0)
    >>> len(weights), weights[0].shape, weights[0].dtype
    (3, (8, 8), dtype('float64'))
    """
    d_model = as_int(d_model, "d_model", minimum=1, maximum=math.isqrt(MAX_ENTRIES),
                     why=f"a layer holds d_model**2 weights, at most {MAX_ENTRIES}")
    n_layers = as_int(n_layers, "n_layers", minimum=1, maximum=MAX_ENTRIES // d_model**2,
                      why=f"n_layers * d_model**2 weights may not exceed {MAX_ENTRIES}")
    try:
        dtype = np.dtype(dtype) if dtype is not None else None
    except TypeError:
        dtype = None
    if dtype is None or dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype: expected float32 or float64, got {dtype}")
    rng = as_generator(rng)
    scale = dtype.type(1.0 / np.sqrt(d_model))
    return [rng.standard_normal((d_model, d_model), dtype=dtype) * scale for _ in range(n_layers)]


def stack_bytes(weights: Sequence[np.ndarray]) -> int:
    """Total size in bytes of the weights (what one pass must read)."""
    return int(sum(np.asarray(w).nbytes for w in _check_weights(weights)))


def stack_params(weights: Sequence[np.ndarray]) -> int:
    """Total number of weights."""
    return int(sum(np.asarray(w).size for w in _check_weights(weights)))


def _check_weights(weights: Sequence[np.ndarray]) -> list[np.ndarray]:
    if isinstance(weights, np.ndarray) or not isinstance(weights, (list, tuple)) or not weights:
        raise TypeError("weights: expected a non-empty list of 2-D arrays (see layer_stack)")
    d = None
    for i, w in enumerate(weights):
        if not isinstance(w, np.ndarray) or w.ndim != 2 or w.shape[0] != w.shape[1]:
            raise ValueError(f"weights: layer {i} must be a square 2-D array, got "
                             f"{getattr(w, 'shape', type(w).__name__)}")
        if d is not None and w.shape[0] != d:
            raise ValueError(f"weights: layer {i} has size {w.shape[0]}, layer 0 has {d}")
        d = w.shape[0]
    return list(weights)


def column_blocks(w: np.ndarray, max_tokens: int = SPLIT_MAX_TOKENS) -> list[np.ndarray] | None:
    """``w`` cut into contiguous column blocks narrow enough for the direct kernel.

    Each block has ``d`` rows and a width (a multiple of 16, at least 16) such that a
    product of ``max_tokens`` rows with it stays under :data:`SMALL_PRODUCT`.  The blocks are
    copies, made once; concatenated side by side they are ``w``.  Returns None when one
    block would be the whole matrix (nothing to split).

    Examples
    --------
    >>> blocks = column_blocks(np.zeros((4096, 64)))
    >>> [b.shape for b in blocks]
    [(4096, 16), (4096, 16), (4096, 16), (4096, 16)]
    >>> column_blocks(np.zeros((8, 8))) is None
    True
    """
    as_real_array(w, "w", "a weight matrix")  # refuses strings, complex, objects; keeps the dtype:
    w = np.asarray(w)  # a float32 stack is timed in float32
    if not np.all(np.isfinite(w)):
        raise ValueError("w: contains NaN or an infinite value")
    if w.ndim != 2:
        raise ValueError(f"w: expected a 2-D weight matrix, got shape {w.shape}")
    if 0 in w.shape:
        raise ValueError(f"w: the weight matrix is empty (shape {w.shape})")
    max_tokens = as_int(max_tokens, "max_tokens", minimum=1)
    width = max(16, SMALL_PRODUCT // (max_tokens * w.shape[0]) // 16 * 16)
    if width >= w.shape[1]:
        return None
    return [w[:, i:i + width].copy() for i in range(0, w.shape[1], width)]


def product(x: np.ndarray, w: np.ndarray, blocks: list[np.ndarray] | None = None) -> np.ndarray:
    """``x @ w``, by the route that reads ``w`` once without copying it first.

    One row: the whole matrix (a matrix-vector product).  2 to :data:`SPLIT_MAX_TOKENS`
    rows with ``blocks`` from :func:`column_blocks`: one product per block, side by side.
    Otherwise the ordinary product.  The result is ``x @ w`` up to rounding.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> w, x = rng.standard_normal((4096, 64)), rng.standard_normal((3, 4096))
    >>> bool(np.allclose(product(x, w, column_blocks(w)), x @ w))
    True
    """
    if not isinstance(x, np.ndarray) or not isinstance(w, np.ndarray):
        raise TypeError(f"x, w: expected numpy arrays, got {type(x).__name__} and {type(w).__name__}")
    n = x.shape[0]
    if blocks is None or n == 1 or n > SPLIT_MAX_TOKENS:
        return x @ w
    return np.concatenate([x @ b for b in blocks], axis=1)


def forward_pass(weights: Sequence[np.ndarray], x: np.ndarray,
                 blocks: Sequence[list[np.ndarray] | None] | None = None) -> np.ndarray:
    """Push token vectors ``x`` of shape ``(n, d_model)`` through the stack (ReLU between layers).

    Every layer is one matrix product ``(n, d) @ (d, d)``: it reads all ``d * d`` weights
    once, and does ``2 n d**2`` floating-point operations.  ``blocks``, one entry per layer
    from :func:`column_blocks`, computes each product with :func:`product`; without it,
    each is the plain ``x @ w``.

    Examples
    --------
    >>> weights = layer_stack(4, 2, rng=0)
    >>> forward_pass(weights, np.ones((3, 4))).shape
    (3, 4)
    """
    weights = _check_weights(weights)
    as_real_array(x, "x", "token vectors")  # refuses strings, complex, objects; keeps the dtype:
    x = np.asarray(x)  # a float32 stack is timed in float32
    if not np.all(np.isfinite(x)):
        raise ValueError("x: contains NaN or an infinite value")
    d = weights[0].shape[0]
    if x.ndim != 2 or x.shape[1] != d or x.shape[0] < 1:
        raise ValueError(f"x: expected token vectors of shape (n, {d}) with n >= 1, got {x.shape}")
    if blocks is None:
        for w in weights:
            x = np.maximum(x @ w, 0.0)
        return x
    if len(blocks) != len(weights):
        raise ValueError(f"blocks: expected one entry per layer ({len(weights)}), got {len(blocks)}")
    for w, b in zip(weights, blocks):
        x = np.maximum(product(x, w, b), 0.0)
    return x


class PassTimes(NamedTuple):
    """Repeated timings of one forward pass at several numbers of tokens."""

    n_tokens: np.ndarray  #: the token counts, increasing, shape (m,)
    seconds: np.ndarray  #: every timing, shape (repeats, m); column j is n_tokens[j]
    n_bytes: int  #: size of the weights
    n_params: int  #: number of weights
    blocked: bool = False  #: whether the passes used the column-block products

    @property
    def median(self) -> np.ndarray:
        """Median seconds per pass for each token count."""
        return np.median(self.seconds, axis=0)

    @property
    def relative(self) -> np.ndarray:
        """Median cost relative to the smallest token count (1.0 for that one)."""
        med = self.median
        return med / med[0]


def measure_pass_times(
    weights: Sequence[np.ndarray],
    n_tokens: Sequence[int] = (1, 2, 4, 8, 16),
    repeats: int = 7,
    rng: np.random.Generator | int = 0,
    max_seconds: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    blocked: bool = False,
) -> PassTimes:
    """Time :func:`forward_pass` over the stack for each number of tokens.

    Each repeat times every token count once, in a fresh random order, after one untimed
    warm-up pass per count; report :attr:`PassTimes.median`, which a few slow outliers do
    not move.

    Parameters
    ----------
    weights : list of arrays
        From :func:`layer_stack`.
    n_tokens : sequence of int
        Distinct token counts, each at least 1.
    repeats : int
        Timings per token count.
    rng : numpy.random.Generator or int
        For the token vectors and the order of the counts.
    max_seconds : float, optional
        Stop repeating once this much time has been spent (at least 3 repeats are kept),
        so a slow machine keeps the measurement short.
    clock : callable
        A clock returning seconds (for tests).
    blocked : bool
        Compute each product with :func:`product` on :func:`column_blocks` cut once before
        timing (what a pass costs when the weights are only read), instead of the plain
        ``x @ w`` (which, with OpenBLAS, also copies each matrix for 2 or more tokens).

    Returns
    -------
    PassTimes
    """
    weights = _check_weights(weights)
    counts = [as_int(n, "n_tokens", minimum=1, maximum=MAX_ENTRIES // 4096, why="tokens per timed pass")
              for n in np.atleast_1d(np.asarray(n_tokens, dtype=object))]
    if not callable(clock):
        raise TypeError(f"clock: expected a function returning seconds, got {type(clock).__name__}")
    if not counts:
        raise ValueError("n_tokens: expected at least one token count")
    if len(set(counts)) != len(counts):
        raise ValueError(f"n_tokens: counts must be distinct, got {counts}")
    counts = sorted(counts)
    repeats = timing_repeats(as_int(repeats, "repeats", minimum=1, maximum=MAX_REPEATS, why="timings settle long before"))
    if max_seconds is not None:
        max_seconds = as_real(max_seconds, "max_seconds", low=0.0)
    if not isinstance(blocked, (bool, np.bool_)):
        raise TypeError(f"blocked: expected True or False, got {blocked!r}")
    rng = as_generator(rng)
    d, dtype = weights[0].shape[0], weights[0].dtype
    blocks = [column_blocks(w) for w in weights] if blocked else None
    xs = [rng.standard_normal((n, d)).astype(dtype) for n in counts]
    for x in xs:
        forward_pass(weights, x, blocks)  # warm-up: first-touch costs are not part of a pass

    rows, start = [], clock()
    for r in range(repeats):
        row = np.empty(len(counts))
        for j in rng.permutation(len(counts)):
            t0 = clock()
            forward_pass(weights, xs[j], blocks)
            row[j] = clock() - t0
        rows.append(row)
        if max_seconds is not None and r + 1 >= 3 and clock() - start > max_seconds:
            break
    return PassTimes(np.array(counts), np.array(rows), stack_bytes(weights), stack_params(weights),
                     bool(blocked))


class PassCostFit(NamedTuple):
    """``seconds(n) ~ fixed + per_token * n``, fitted to measured pass times."""

    fixed: float  #: seconds per pass that do not depend on the tokens (reading the weights)
    per_token: float  #: extra seconds per token processed (the arithmetic)

    def predict(self, n_tokens: np.ndarray | float) -> np.ndarray | float:
        """Predicted seconds per pass."""
        return self.fixed + self.per_token * np.asarray(n_tokens, dtype=float)

    @property
    def crossover(self) -> float:
        """Token count at which the per-token part equals the fixed part (inf if it never does)."""
        return self.fixed / self.per_token if self.per_token > 0 else float("inf")

    def relative(self, n_tokens: np.ndarray | float) -> np.ndarray | float:
        """Predicted cost of a pass over ``n_tokens`` relative to a pass over one token."""
        return self.predict(n_tokens) / self.predict(1)


def fit_pass_cost(n_tokens: Sequence[int], seconds: Sequence[float]) -> PassCostFit:
    """Least-squares fit of ``fixed + per_token * n`` to median pass times.

    The fit minimises *relative* errors, so the short passes count as much as the long
    ones; both coefficients are constrained to be non-negative.

    Examples
    --------
    >>> fit = fit_pass_cost([1, 2, 4, 8], [0.011, 0.012, 0.014, 0.018])
    >>> round(fit.fixed, 4), round(fit.per_token, 4), round(fit.crossover, 1)
    (0.01, 0.001, 10.0)
    """
    n = as_real_array(n_tokens, "n_tokens", "token counts")
    t = as_real_array(seconds, "seconds", "times in seconds")
    if n.ndim != 1 or t.shape != n.shape:
        raise ValueError(f"seconds: expected one time per token count, got shapes {n.shape} and {t.shape}")
    if len(np.unique(n)) < 2:
        raise ValueError("n_tokens: need at least two distinct token counts to fit a line")
    if not np.all(np.isfinite(t)) or (t <= 0).any():
        raise ValueError("seconds: times must be finite and positive")
    if (n < 1).any():
        raise ValueError("n_tokens: counts must be at least 1")
    design = np.column_stack([np.ones_like(n), n]) / t[:, None]
    (fixed, per_token), *_ = np.linalg.lstsq(design, np.ones_like(n), rcond=None)
    if fixed < 0 or per_token < 0:
        # Refit with the offending coefficient pinned at zero (a one-parameter fit).
        if fixed < 0:
            fixed, per_token = 0.0, float(np.sum(n / t) / np.sum((n / t) ** 2))
        else:
            fixed, per_token = float(np.sum(1 / t) / np.sum(1 / t**2)), 0.0
    return PassCostFit(float(fixed), float(per_token))


def predicted_pass_time(n_tokens: np.ndarray | float, n_params: float, bytes_per_param: float,
                        bandwidth: float, flops: float) -> np.ndarray | float:
    """Pass time from hardware quantities: weights over bandwidth, plus arithmetic over throughput.

    ``n_params * bytes_per_param / bandwidth + 2 * n_params * n_tokens / flops``: every
    weight is read once per pass, and every token costs one multiply-add per weight.  The
    crossover (the two parts equal) is at ``n* = bytes_per_param * flops / (2 * bandwidth)``,
    whatever the model's size.

    Parameters
    ----------
    n_tokens : float or array
        Tokens processed at once.
    n_params : float
        Number of weights.
    bytes_per_param : float
        4 for float32, 2 for float16 / bfloat16.
    bandwidth : float
        Memory bandwidth in bytes per second.
    flops : float
        Arithmetic throughput in floating-point operations per second.

    Examples
    --------
    >>> predicted_pass_time([1, 100], n_params=1e9, bytes_per_param=2, bandwidth=1e12, flops=1e14)
    array([0.00202, 0.004  ])
    """
    n = as_real_array(n_tokens, "n_tokens", "token counts")
    if not np.all(np.isfinite(n)) or (n < 0).any():
        raise ValueError("n_tokens: must be non-negative and finite")
    n_params = as_real(n_params, "n_params", low=0.0)
    bytes_per_param = as_real(bytes_per_param, "bytes_per_param", low=0.0)
    bandwidth = as_real(bandwidth, "bandwidth", low=1e-300)
    flops = as_real(flops, "flops", low=1e-300)
    out = n_params * bytes_per_param / bandwidth + 2.0 * n_params * n / flops
    return float(out) if out.ndim == 0 else out


def speedup_with_overhead(alpha: float, k: int, c: float, r: float, outside: float = 0.0,
                          outside_plain: float = 0.0, *, drafts: int | None = None,
                          draft_passes: int | None = None) -> float:
    """The cost model's speed-up of a speculative step, with the loop's own time per step.

    Everything is in one-token target passes of plain decoding.  A step drafts ``drafts``
    tokens (``k`` unless the drafter proposes fewer: Medusa's heads draft ``min(k, heads)``)
    in ``draft_passes`` draft passes of cost ``c`` (one per draft unless given), verifies them
    in one target pass of cost ``r = r(drafts + 1)``, and spends ``outside`` on its own work
    between the passes (drawing tokens, the verification rule, rolling the caches back); it
    emits ``E = (1 - alpha**(drafts+1)) / (1 - alpha)`` tokens on average.  Plain decoding
    spends ``1 + outside_plain`` per token.  So

    ``S = E (1 + outside_plain) / (draft_passes c + r + outside)``.

    With ``outside = outside_plain = 0`` this is
    :func:`speclib.lm.transformer.speedup_with_costs`, which is then an upper bound on this
    one whenever a step's own work is a larger share of the step than plain decoding's is of a
    token (``outside / (draft_passes c + r) > outside_plain``), as in every loop the book measures.

    Examples
    --------
    >>> round(speedup_with_overhead(0.8, 3, 0.05, 1.5), 3)        # no overhead
    1.789
    >>> round(speedup_with_overhead(0.8, 3, 0.05, 1.5, outside=0.4, outside_plain=0.05), 3)
    1.512
    >>> round(speedup_with_overhead(0.4, 6, 0.2, 1.3, drafts=4, draft_passes=1), 3)  # Medusa at k = 6
    1.1
    """
    from .theory import expected_tokens_per_pass

    k = as_int(k, "k", minimum=1)
    drafts = k if drafts is None else as_int(drafts, "drafts", minimum=1, maximum=k, why="a step drafts at most k")
    draft_passes = drafts if draft_passes is None else as_int(draft_passes, "draft_passes", minimum=0)
    alpha = as_real(alpha, "alpha", low=0.0, high=1.0)
    c = as_real(c, "c", low=0.0)
    r = as_real(r, "r", low=0.0)
    outside = as_real(outside, "outside", low=0.0)
    outside_plain = as_real(outside_plain, "outside_plain", low=0.0)
    step = draft_passes * c + r + outside
    if step <= 0:
        raise ValueError("r: a step must cost something (draft_passes c + r + outside > 0)")
    return float(expected_tokens_per_pass(alpha, drafts)) * (1.0 + outside_plain) / step


def largest_cache_bytes(sysfs: str | Path = "/sys/devices/system/cpu/cpu0/cache") -> int | None:
    """Size in bytes of the largest CPU cache the operating system reports, or None.

    Reads Linux's ``/sys/devices/system/cpu/cpu0/cache/index*/size``; elsewhere (or in a
    container that hides it) returns None.  Weights larger than this cannot stay in cache
    between passes.
    """
    if not isinstance(sysfs, (str, os.PathLike)):
        raise TypeError(f"sysfs: expected a directory path, got {sysfs!r} ({type(sysfs).__name__})")
    sizes = []
    for f in sorted(Path(sysfs).glob("index*/size")):
        text = f.read_text().strip().upper()
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        try:
            sizes.append(int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text))
        except (ValueError, IndexError):
            continue
    return max(sizes) if sizes else None


class CountingModel:
    """Wrap a model (see :mod:`speclib.lm.models`) and count how often it is called.

    ``calls`` is the number of forward passes; ``tokens_in`` the length of each call's
    input.  The wrapper changes no probability and passes on ``vocab_size`` and
    ``context_length``.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> from speclib.core.decoding import autoregressive_generate
    >>> target, _ = markov_pair(vocab_size=8, seed=0)
    >>> counted = CountingModel(target)
    >>> _ = autoregressive_generate(counted, [0], 5, rng=1)
    >>> counted.calls
    5
    """

    def __init__(self, model: Callable) -> None:
        if not callable(model) or not hasattr(model, "vocab_size"):
            raise TypeError(f"model: expected a model (a callable with a vocab_size attribute), "
                            f"got {type(model).__name__}")
        self.model = model
        self.vocab_size = model.vocab_size
        self.context_length = getattr(model, "context_length", None)
        self.tokens_in: list[int] = []

    @property
    def calls(self) -> int:
        """Number of forward passes so far."""
        return len(self.tokens_in)

    def reset(self) -> None:
        """Forget the calls counted so far."""
        self.tokens_in.clear()

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        tokens = as_tokens(tokens, "tokens", self.vocab_size)
        self.tokens_in.append(int(tokens.size))
        return self.model(tokens)

    def __repr__(self) -> str:
        return f"CountingModel({self.model!r}, calls={self.calls})"

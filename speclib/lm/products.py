"""The matrix products of a pass over a few tokens, chosen by measurement on this machine.

What a pass over ``k + 1`` tokens costs is mostly what the matrix library charges for
multiplying ``k + 1`` rows by each weight matrix, and that is a property of the library's
kernel, not only of the hardware: numpy's BLAS picks a kernel for the processor (OpenBLAS's
"Haswell", "SkylakeX", ...), and the same product can cost two rows' time on one and ten on
another.  So the transformer does not assume a strategy: for each weight shape and each
number of rows from 1 to :data:`MAX_ROWS` (and a few longer passes, :data:`LONG_ROWS`) it
times every strategy below once per process (a fraction of a second) and uses the fastest.

``full``
    ``x @ w``: the library's own choice (a matrix-vector product for one row).
``blocks``
    ``x`` times column blocks of ``w``, each small enough for OpenBLAS's direct small-matrix
    path, joined: avoids the repacking that some kernels do for a general product.
``rows``
    one matrix-vector product per row: ``n`` rows cost ``n`` single rows.
``transposed``
    ``(w.T @ x.T).T`` with a stored contiguous transpose: the other memory order.
``kernel``
    :func:`speclib.lm.kernel.rows_matmul`, which reads each weight once for all the rows
    (needs numba).

The environment variable ``SPECLIB_PRODUCTS`` (a comma-separated list of these names)
limits the candidates, for example ``SPECLIB_PRODUCTS=full`` to run numpy's own product
everywhere.  Every strategy computes the same product up to float32 rounding.
"""

from __future__ import annotations

import os
import time

import numpy as np

from .._validate import as_real_array
from . import kernel as _kernel

#: Every strategy, in the order ties are broken.
STRATEGIES = ("full", "blocks", "rows", "transposed", "kernel")
#: Every row count from 1 to MAX_ROWS is measured; longer passes (a prompt, a re-read
#: window) use the plan of the next larger count in LONG_ROWS; beyond the last, ``full``.
MAX_ROWS = 16
LONG_ROWS = (24, 32, 48, 64, 96, 128)
ROW_COUNTS = tuple(range(1, MAX_ROWS + 1)) + LONG_ROWS
#: Strategies worth timing for the long passes (the others are never faster there).
LONG_CANDIDATES = ("full", "transposed", "kernel")
_ROW_INDEX = [0] + [next(i for i, c in enumerate(ROW_COUNTS) if c >= n) for n in range(1, ROW_COUNTS[-1] + 1)]
#: Column blocks keep ``rows * inner * block width`` below this for up to 9 rows: OpenBLAS
#: multiplies such small products directly, without repacking the matrix.
SMALL_PRODUCT = 1_000_000
#: Repetitions of each timing when a plan is measured.  The plan takes the fastest of them: a
#: product's cost is deterministic work plus delays from whatever else runs on the core, which
#: only ever add, so the minimum estimates the work; a median taken on a busy machine once chose
#: a strategy three times slower for two rows.
PLAN_REPEATS = 7

_PLANS: dict[tuple, tuple[str, ...]] = {}  # (inner, outer, candidates) -> strategy per entry of ROW_COUNTS
_TABLES: dict[tuple, np.ndarray] = {}  # the same key -> the seconds measured, (len(ROW_COUNTS), len(candidates))


def candidates() -> tuple[str, ...]:
    """The strategies this process may use: all of :data:`STRATEGIES` that can run here
    (``kernel`` only with numba), limited by ``SPECLIB_PRODUCTS`` when it is set.

    Raises ValueError when ``SPECLIB_PRODUCTS`` names no known strategy.
    """
    usable = tuple(s for s in STRATEGIES if s != "kernel" or _kernel.available())
    wanted = os.environ.get("SPECLIB_PRODUCTS", "").strip()
    if not wanted:
        return usable
    names = [w.strip() for w in wanted.split(",") if w.strip()]
    unknown = [w for w in names if w not in STRATEGIES]
    if unknown or not names:
        raise ValueError(f"SPECLIB_PRODUCTS: unknown strategy {unknown[0] if unknown else wanted!r}; "
                         f"expected a comma-separated list of {', '.join(STRATEGIES)}")
    chosen = tuple(s for s in usable if s in names)
    if not chosen:
        raise ValueError(f"SPECLIB_PRODUCTS={wanted!r}: none of these can run here "
                         "(the kernel needs numba: pip install -r requirements.txt)")
    return chosen


class Product:
    """One weight matrix ``w`` (``(inner, outer)``, float32), ready for every strategy.

    ``product(x)`` returns ``x @ w`` for rows ``x`` of shape ``(n, inner)`` with the strategy
    measured fastest for ``n`` rows (the plan is measured at the first call and shared by
    every matrix of the same shape in the process); ``product(x, "rows")`` forces one.

    Examples
    --------
    >>> w = np.arange(12, dtype=np.float32).reshape(3, 4)
    >>> p = Product(w)
    >>> x = np.ones((2, 3), dtype=np.float32)
    >>> [bool(np.allclose(p(x, s), x @ w)) for s in candidates()] == [True] * len(candidates())
    True
    """

    def __init__(self, w: np.ndarray) -> None:
        self.source = w  # the matrix as given (kept, so that its id names it while this lives)
        if isinstance(w, np.ndarray) and w.dtype == np.float32:
            self.w = np.ascontiguousarray(w)  # a model's own weights, checked when it was built
        else:
            self.w = np.ascontiguousarray(as_real_array(w, "w", "a matrix of real numbers"), dtype=np.float32)
        if self.w.ndim != 2:
            raise ValueError(f"w: expected a matrix, got shape {self.w.shape}")
        if not np.isfinite(self.w).all():
            raise ValueError("w: contains NaN or infinite values")
        self.inner, self.outer = self.w.shape
        self._wt = self._blocks = None
        self._plan: tuple | None = None

    # --- the strategies -------------------------------------------------------------

    @property
    def wt(self) -> np.ndarray:
        if self._wt is None:
            self._wt = np.ascontiguousarray(self.w.T)
        return self._wt

    def full(self, x: np.ndarray) -> np.ndarray:
        return x @ self.w

    def blocks(self, x: np.ndarray) -> np.ndarray:
        if self._blocks is None:
            width = max(16, SMALL_PRODUCT // (9 * self.inner) // 16 * 16)
            self._blocks = [self.w[:, i:i + width].copy() for i in range(0, self.outer, width)]
        if len(self._blocks) == 1:
            return x @ self.w
        return np.concatenate([x @ b for b in self._blocks], axis=1)

    def rows(self, x: np.ndarray) -> np.ndarray:
        out = np.empty((x.shape[0], self.outer), dtype=np.float32)
        for i in range(x.shape[0]):
            np.matmul(x[i], self.w, out=out[i])
        return out

    def transposed(self, x: np.ndarray) -> np.ndarray:
        return (self.wt @ x.T).T

    def kernel(self, x: np.ndarray) -> np.ndarray:
        if x.dtype != np.float32 or not x.flags.c_contiguous:
            x = np.ascontiguousarray(x, dtype=np.float32)
        return _kernel.rows_matmul(x, self.wt, np.empty((x.shape[0], self.outer), dtype=np.float32))

    # --- choosing ---------------------------------------------------------------------

    def __call__(self, x: np.ndarray, strategy: str | None = None) -> np.ndarray:
        if strategy is not None:
            return getattr(self, strategy)(x)
        n = x.shape[0]
        if n > ROW_COUNTS[-1]:
            return x @ self.w
        plan = self._plan
        if plan is None:
            plan = self._plan = tuple(getattr(self, s) for s in self.plan())
        return plan[_ROW_INDEX[n]](x)

    def plan(self) -> tuple[str, ...]:
        """The strategy used for each row count of :data:`ROW_COUNTS` (measured once per shape
        and process; a pass over ``n`` rows uses the entry of the smallest count >= ``n``)."""
        names = candidates()
        key = (self.inner, self.outer, names)
        if key not in _PLANS:
            seconds = self.measure(names)
            _TABLES[key] = seconds
            _PLANS[key] = choose_plan(seconds, names)
        return _PLANS[key]

    def measure(self, names: tuple[str, ...] | None = None, counts: tuple[int, ...] = ROW_COUNTS,
                repeats: int = PLAN_REPEATS, seed: int = 0) -> np.ndarray:
        """Fastest seconds of each strategy for each row count over ``repeats``, ``(len(counts), len(names))``.

        Random rows, on one BLAS thread; each repetition times every (rows, strategy) pair once
        in a shuffled order, so that a slow spell of the machine does not fall on one strategy
        only.  Above
        :data:`MAX_ROWS` rows only :data:`LONG_CANDIDATES` are timed (nan for the others).
        """
        names = candidates() if names is None else tuple(names)
        rng = np.random.default_rng(seed)
        xs = [rng.standard_normal((n, self.inner)).astype(np.float32) for n in counts]
        fns = [getattr(self, s) for s in names]
        for fn in fns:  # warm up: compile the kernel, build the blocks and the transpose
            fn(xs[0])
            fn(xs[-1])
        pairs = [(i, j) for i, n in enumerate(counts) for j, s in enumerate(names)
                 if n <= MAX_ROWS or s in LONG_CANDIDATES]
        seconds = np.full((repeats, len(counts), len(names)), np.nan)
        clock = time.perf_counter
        from .transformer import blas_threads

        # One BLAS thread, as every timing of a decoding stream in speclib: a second thread that
        # waits for a busy core can make one product a hundred times slower.
        with blas_threads(1):
            for r in range(repeats):
                for idx in rng.permutation(len(pairs)):
                    i, j = pairs[idx]
                    t0 = clock()
                    fns[j](xs[i])
                    seconds[r, i, j] = clock() - t0
        seconds = np.min(seconds, axis=0)
        if not (np.isfinite(seconds).any(axis=1)).all():  # no candidate timed for a long count
            seconds[~np.isfinite(seconds).any(axis=1), names.index(names[0])] = 0.0
        return seconds


def choose_plan(seconds: np.ndarray, names: tuple[str, ...],
                counts: tuple[int, ...] = ROW_COUNTS) -> tuple[str, ...]:
    """The strategy for each row count from a table of measured seconds (``(len(counts),
    len(names))``, nan where not timed): the fastest, with one structural bound.

    ``rows`` is ``n`` one-row products, so ``n`` rows never need to cost more than ``n``
    times the fastest one-row product.  A single timing of ``rows`` can come out slower than
    that on a busy machine, and then a general product that is slower still for a few rows
    (a BLAS kernel that repacks the matrix) could win the table by accident: a batch of two
    requests would then cost more than the two run one after the other.  So where ``rows``
    can run, its time at ``n`` rows is taken as at most ``n`` times the best one-row time,
    and a strategy is chosen over it only when it was measured faster than that bound.

    Examples
    --------
    >>> names = ("full", "rows")
    >>> t = np.array([[1.0, 1.1], [3.5, 2.6], [4.0, 3.9]])  # 1, 2 and 3 rows
    >>> choose_plan(t, names, counts=(1, 2, 3))
    ('full', 'rows', 'rows')
    """
    seconds = np.array(seconds, dtype=float)
    names = tuple(names)
    if seconds.shape != (len(counts), len(names)):
        raise ValueError(f"seconds: expected shape {(len(counts), len(names))}, got {seconds.shape}")
    if "rows" in names and counts and counts[0] == 1:
        j = names.index("rows")
        one = np.nanmin(seconds[0])
        for i, n in enumerate(counts):
            if n <= MAX_ROWS and np.isfinite(seconds[i, j]):
                seconds[i, j] = min(seconds[i, j], n * one)
    return tuple(names[j] for j in np.nanargmin(seconds, axis=1))


def measured_plans() -> dict[tuple[int, int], dict[str, object]]:
    """What this process has measured so far: for each weight shape, the strategy chosen for
    each row count and the fastest seconds of every candidate (``{"names", "plan", "seconds"}``)."""
    return {(inner, outer): {"names": names, "plan": _PLANS[inner, outer, names],
                             "seconds": _TABLES[inner, outer, names]}
            for (inner, outer, names) in _TABLES}


#: Environment variables with which OpenBLAS is told which kernel to use instead of choosing one.
FORCING_VARIABLES = ("OPENBLAS_CORETYPE",)
#: Set by tools/execute_notebooks.py when it removed a forced kernel for a timing chapter.
UNFORCED_MARK = "SPECLIB_UNFORCED_KERNEL"


def blas_kernel() -> dict[str, str | None]:
    """Which BLAS numpy runs and which of its kernels, as threadpoolctl reports it.

    ``{"library": "OpenBLAS", "version": "0.3.29", "kernel": "Haswell", "forced": None,
    "unforced": None}``: ``kernel`` is the kernel family the library chose for this processor
    (threadpoolctl's ``architecture``); ``forced`` is the value of a variable that made the
    library use another one (``OPENBLAS_CORETYPE``), ``unforced`` the value of one that
    ``tools/execute_notebooks.py`` removed for this execution.  Values it cannot find are None.

    Examples
    --------
    >>> sorted(blas_kernel())
    ['forced', 'kernel', 'library', 'unforced', 'version']
    """
    info: dict[str, str | None] = {"library": None, "version": None, "kernel": None,
                                   "forced": None, "unforced": os.environ.get(UNFORCED_MARK) or None}
    for name in FORCING_VARIABLES:
        if os.environ.get(name):
            info["forced"] = f"{name}={os.environ[name]}"
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # threadpoolctl is in requirements.txt; without it, numpy's build record
        threadpool_info = None
    if threadpool_info is not None:
        for pool in threadpool_info():
            if pool.get("user_api") == "blas":
                api = str(pool.get("internal_api", ""))
                info["library"] = {"openblas": "OpenBLAS", "mkl": "MKL", "blis": "BLIS"}.get(api, api or None)
                info["version"] = pool.get("version")
                info["kernel"] = pool.get("architecture")
                break
    if info["library"] is None:
        try:
            blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
            info["library"] = str(blas.get("name", "")).replace("scipy-openblas", "OpenBLAS") or None
            info["version"] = blas.get("version")
        except Exception:
            pass
    return info


def describe() -> str:
    """One phrase for a timing's processor line: the BLAS, its kernel, whether it was forced,
    and which product strategies the transformer chose from.

    Examples
    --------
    >>> "BLAS" in describe() or "OpenBLAS" in describe() or "kernel" in describe()
    True
    """
    info = blas_kernel()
    blas = " ".join(str(v) for v in (info["library"], info["version"]) if v) or "an unidentified BLAS"
    if info["kernel"]:
        blas += f" with its {info['kernel']} kernels"
    if info["forced"]:
        blas += f" (forced by {info['forced']})"
    elif info["unforced"]:
        blas += f" (the library's own choice: the environment's OPENBLAS_CORETYPE={info['unforced']} " \
                "was removed for this execution)"
    else:
        blas += " (the library's own choice)"
    try:
        names = candidates()
    except ValueError:
        names = ()
    if "kernel" in names:
        import numba

        tail = f"products chosen by measurement among {', '.join(names)} (kernel: numba {numba.__version__})"
    else:
        tail = f"products chosen by measurement among {', '.join(names) or 'none'}"
    return f"{blas}; {tail}"

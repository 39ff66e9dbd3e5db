"""Draft-length policies: how many tokens to draft at each step, and when to stop drafting.

The one loop, :func:`speclib.core.decoding.speculative_generate`, asks its policy three things
(the :class:`Controller` protocol): how many tokens it may draft at the next step, whether
to keep drafting after seeing the row of each proposal, and what came of the step.  An
integer ``k`` given to the loop means :class:`FixedK`.  The policies:

:class:`FixedK`
    The same ``k`` every step.
:class:`HeuristicK`
    Hugging Face's assisted-generation schedule: ``k + 2`` after a step whose drafts were all
    accepted, ``k - 1`` (never below 1) after any rejection.
:class:`ConfidenceStop`
    llama.cpp's ``p_min`` rule: draft up to ``k_max`` tokens, but stop as soon as the draft's
    own top probability for the next token falls below ``p_min``.
:class:`PeekingStop`
    The negative control: stops on the drawn token's own probability, which biases the output.
:class:`FallbackMonitor`
    Keeps a rolling acceptance rate and switches to plain decoding when it drops to the
    break-even ``alpha <= c`` of :func:`speclib.core.theory.optimal_k`; while falling back it
    probes with one drafted token now and then, and resumes when speculation pays again.

Why an exact policy keeps the output exact, and how the book measures them, is in
:mod:`speclib.core.adaptive`.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol, runtime_checkable

import numpy as np

from .._validate import MAX_DRAFT_LENGTH, as_distribution, as_int, as_real


# --- Controllers ------------------------------------------------------------------------------


@runtime_checkable
class Controller(Protocol):
    """What :func:`speclib.core.decoding.speculative_generate` asks of its draft-length policy.

    ``draft_length()``
        The most tokens the draft may propose at the next step; 0 means a plain step (one
        target pass, no draft).
    ``keep_drafting(p, x)``
        Called after the draft proposed token ``x`` from row ``p``; returning False throws
        ``x`` away and ends the draft.  An exact controller decides from ``p`` (and its own
        state) only, never from ``x``.
    ``update(n_drafted, n_accepted)``
        Called after each step with how many tokens were drafted and how many the target
        accepted.
    """

    name: str

    def draft_length(self) -> int: ...

    def keep_drafting(self, p: np.ndarray, x: int) -> bool: ...

    def update(self, n_drafted: int, n_accepted: int) -> None: ...


def _row(p: object) -> np.ndarray:
    """The draft's row as the loop passes it (a 1-D array), checked when it is anything else."""
    if type(p) is np.ndarray and p.ndim == 1:
        return p
    return as_distribution(p, "p", ndim=1)


def _outcome(n_drafted: object, n_accepted: object) -> tuple[int, int]:
    """The arguments of ``update``: ``0 <= n_accepted <= n_drafted <= MAX_DRAFT_LENGTH`` (a fast path for ints)."""
    if type(n_drafted) is int and type(n_accepted) is int and 0 <= n_accepted <= n_drafted <= MAX_DRAFT_LENGTH:
        return n_drafted, n_accepted
    n_drafted = as_int(n_drafted, "n_drafted", minimum=0, maximum=MAX_DRAFT_LENGTH,
                       why="the longest draft speclib computes with")
    n_accepted = as_int(n_accepted, "n_accepted", minimum=0, maximum=n_drafted,
                        why="no more drafts are accepted than were drafted")
    return n_drafted, n_accepted


class FixedK:
    """Draft ``k`` tokens at every step."""

    def __init__(self, k: int) -> None:
        self.k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH, why="the longest draft speclib computes with")
        self.name = f"fixed K={self.k}"

    def draft_length(self) -> int:
        return self.k

    def keep_drafting(self, p: np.ndarray, x: int) -> bool:
        return True

    def update(self, n_drafted: int, n_accepted: int) -> None:
        _outcome(n_drafted, n_accepted)

    def __repr__(self) -> str:
        return f"FixedK(k={self.k})"


class HeuristicK:
    """Hugging Face's schedule: ``+2`` after an all-accepted step, ``-1`` otherwise (floor 1).

    Parameters
    ----------
    k_init : int, default 5
        The draft length of the first step.
    k_max : int, optional
        A ceiling on the draft length (none by default, as in the original schedule).

    Examples
    --------
    >>> ctrl = HeuristicK(k_init=3)
    >>> ctrl.update(3, 3); ctrl.draft_length()
    5
    >>> ctrl.update(5, 1); ctrl.draft_length()
    4
    """

    def __init__(self, k_init: int = 5, k_max: int | None = None) -> None:
        self.k = as_int(k_init, "k_init", minimum=1, maximum=MAX_DRAFT_LENGTH)
        self.k_max = None if k_max is None else as_int(k_max, "k_max", minimum=self.k, maximum=MAX_DRAFT_LENGTH)
        self.name = "heuristic +2/-1"

    def draft_length(self) -> int:
        return self.k

    def keep_drafting(self, p: np.ndarray, x: int) -> bool:
        return True

    def update(self, n_drafted: int, n_accepted: int) -> None:
        n_drafted, n_accepted = _outcome(n_drafted, n_accepted)
        if n_drafted == 0:
            return
        if n_accepted == n_drafted:
            self.k = min(self.k + 2, MAX_DRAFT_LENGTH if self.k_max is None else self.k_max)
        else:
            self.k = max(1, self.k - 1)

    def __repr__(self) -> str:
        return f"HeuristicK(k={self.k}, k_max={self.k_max})"


class ConfidenceStop:
    """llama.cpp's ``p_min`` rule: stop drafting when the draft's top probability is below ``p_min``.

    The test looks at the draft's whole row (its largest entry), which is fixed before the
    token is drawn, so the rule keeps the output exact.  The row that triggers the stop has
    cost a draft pass although it yields no draft token; the decoder counts it.
    """

    def __init__(self, p_min: float, k_max: int) -> None:
        self.p_min = as_real(p_min, "p_min", low=0.0, high=1.0)
        self.k_max = as_int(k_max, "k_max", minimum=1, maximum=MAX_DRAFT_LENGTH)
        self.name = f"p_min={self.p_min:g}"

    def draft_length(self) -> int:
        return self.k_max

    def keep_drafting(self, p: np.ndarray, x: int) -> bool:
        return bool(_row(p).max() >= self.p_min)

    def update(self, n_drafted: int, n_accepted: int) -> None:
        _outcome(n_drafted, n_accepted)

    def __repr__(self) -> str:
        return f"ConfidenceStop(p_min={self.p_min}, k_max={self.k_max})"


class PeekingStop(ConfidenceStop):
    """The negative control: stop when the *drawn token's* probability is below ``p_min``.

    With greedy drafting the drawn token is the top token, so this looks like the ``p_min``
    rule; with sampled drafts it keeps a token only when the token itself is likely, which
    biases the kept tokens towards the draft's favourites.  The exactness checks must
    reject it.
    """

    def __init__(self, p_min: float, k_max: int) -> None:
        super().__init__(p_min, k_max)
        self.name = f"peeking p_min={self.p_min:g} (wrong)"

    def keep_drafting(self, p: np.ndarray, x: int) -> bool:
        p = _row(p)
        if type(x) is not int or not 0 <= x < p.size:
            x = as_int(x, "x", minimum=0, maximum=p.size - 1)
        return bool(p[x] >= self.p_min)


def speculation_pays(alpha: float, c: float) -> bool:
    """The break-even of the theory chapter: some draft length beats plain decoding iff ``alpha > c``.

    Equivalent to ``speclib.core.theory.optimal_k(alpha, c) > 0`` (a test checks it), but cheap
    enough to call at every step.

    Examples
    --------
    >>> speculation_pays(0.5, 0.3), speculation_pays(0.3, 0.5)
    (True, False)
    """
    return as_real(alpha, "alpha", 0.0, 1.0) > as_real(c, "c", low=0.0)


class FallbackMonitor:
    """Wrap a controller; fall back to plain decoding while speculation does not pay.

    The monitor keeps the outcomes of the last ``window`` *verified* drafts (accepted ones,
    and the first rejected one of each block).  Once it has ``min_samples`` of them, it
    speculates only while their acceptance rate exceeds the cost ratio ``c``, the
    break-even of :func:`speculation_pays`.  After ``probe_every`` plain steps in a row it
    drafts one probe token, so that it notices when acceptance recovers.  A plain step is
    one where the monitor has fallen back, or where the wrapped controller itself chose
    ``k = 0`` (a controller that stops drafting would otherwise never learn again).  The
    wrapped controller is told the outcome of every step, probes included.

    Parameters
    ----------
    controller : Controller
        Chooses ``k`` while the monitor speculates.
    c : float
        Cost of a draft pass relative to a target pass.
    window : int, default 40
        How many verified drafts the rolling estimate covers.
    probe_every : int, default 10
        Plain steps in a row before a one-token probe.
    min_samples : int, default 10
        Verified drafts needed before the monitor may fall back.

    Attributes
    ----------
    speculating : bool
        The current mode.
    history : list of bool
        Every step so far: True if it was allowed to draft (speculative, or a probe), False
        for a plain step.
    estimates : list of float
        The rolling acceptance estimate after every step (nan before the first verified draft).
    """

    def __init__(self, controller: Controller, c: float, window: int = 40, probe_every: int = 10,
                 min_samples: int = 10) -> None:
        if not isinstance(controller, Controller):
            raise TypeError(f"controller: expected a controller (draft_length, keep_drafting, update), "
                            f"got {type(controller).__name__}")
        self.controller = controller
        self.c = as_real(c, "c", low=0.0)
        self.window = as_int(window, "window", minimum=1)
        self.probe_every = as_int(probe_every, "probe_every", minimum=1)
        self.min_samples = as_int(min_samples, "min_samples", minimum=1)
        if self.min_samples > self.window:
            raise ValueError(f"min_samples: must be <= window ({self.window}), got {self.min_samples}")
        self.outcomes: deque[bool] = deque(maxlen=self.window)
        self.speculating = True
        self.plain_steps = 0
        self.history: list[bool] = []
        self.estimates: list[float] = []
        self._probing = False
        self._plain = False  # the step being decoded drafts nothing
        self.name = f"{controller.name} + fallback"

    @property
    def alpha_estimate(self) -> float:
        """Acceptance rate over the window (nan before any verified draft)."""
        return float(np.mean(self.outcomes)) if self.outcomes else float("nan")

    def draft_length(self) -> int:
        k = self.controller.draft_length() if self.speculating else 0
        # A plain step, the monitor's choice or the wrapped controller's: probe now and then.
        self._probing = k == 0 and self.plain_steps >= self.probe_every
        self._plain = k == 0 and not self._probing
        return 1 if self._probing else k

    def keep_drafting(self, p: np.ndarray, x: int) -> bool:
        return True if self._probing else self.controller.keep_drafting(p, x)

    def update(self, n_drafted: int, n_accepted: int) -> None:
        n_drafted, n_accepted = _outcome(n_drafted, n_accepted)
        self.history.append(not self._plain)
        self.controller.update(n_drafted, n_accepted)
        self.plain_steps = self.plain_steps + 1 if self._plain else 0
        if n_drafted > 0:
            # Verified drafts: the accepted ones and the first rejected one.
            self.outcomes.extend([True] * n_accepted + [False] * int(n_accepted < n_drafted))
            if len(self.outcomes) >= self.min_samples:
                self.speculating = speculation_pays(self.alpha_estimate, self.c)
        self.estimates.append(self.alpha_estimate)

    def __repr__(self) -> str:
        return f"FallbackMonitor({self.controller!r}, c={self.c}, window={self.window})"


def _check_controller(controller: object) -> Controller:
    if not isinstance(controller, Controller):
        raise TypeError(f"controller: expected an object with name, draft_length(), keep_drafting(p, x) "
                        f"and update(n_drafted, n_accepted), got {type(controller).__name__}")
    return controller

"""One real tree step, taken apart and drawn (chapter 13).

:func:`tree_step` runs one step of the speculative loop with a tree proposer and returns
what it drafted, what the target's one pass scored and what the verifier kept;
:func:`node_status` tells, from that result alone, which nodes were kept, which were tested
and rejected and which were never judged; :func:`plot_tree_step` draws it.
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple

import numpy as np

from .._validate import MAX_NEW_TOKENS, as_int, as_real, as_tokens
from ..core.decoding import _target_rows, prepare_run
from ..core.proposers import check_model
from ..core.sampling import Verification, as_chooser
from ..core.tree import TokenTree, depths

#: What :func:`node_status` calls each node.
KEPT, REJECTED, UNJUDGED = "kept", "rejected", "not judged"


class TreeStep(NamedTuple):
    """One tree step: the drafted tree, the target's rows, what was emitted."""

    text: np.ndarray  #: the text before the step
    tree: TokenTree  #: the drafted tree
    q_rows: np.ndarray  #: the target's rows, (n + 1, V): at the root, then after each node
    verification: Verification  #: what the verifier emitted
    target_passes: int  #: target passes the step made


def tree_step(target: Callable, proposer, prompt: np.ndarray, k: int, rng) -> TreeStep:
    """Run the loop's first step on ``prompt`` with a tree ``proposer``; return its parts.

    The step is the loop's own (:meth:`speclib.core.decoding.SpeculativeRun.draft`, one
    target pass, :meth:`~speclib.core.decoding.SpeculativeRun.finish`), called in its
    three halves so that the tree and the rows can be kept.
    """
    run = prepare_run(target, proposer, prompt, k + 1, k)
    choose = as_chooser(rng)
    text = run.text[:run.n].copy()
    proposal = run.draft(choose)
    if proposal.tree is None:
        raise ValueError(f"proposer: {proposer!r} proposed no token tree (a chain, or nothing)")
    q_rows = _target_rows(run.target_cache, run.text[:run.n], proposal.tree, None)
    out = run.finish(proposal, q_rows, choose)
    return TreeStep(text, proposal.tree, q_rows, out, run.stats.target_passes)


def node_status(tree: TokenTree, verification: Verification) -> list[str]:
    """:data:`KEPT`, :data:`REJECTED` or :data:`UNJUDGED` for every node, from the step's result.

    The rule tests the candidates below the last kept node in draw order until one is
    kept: the ones before the kept candidate were rejected, the ones after it were never
    tested, and when none is kept (a correction follows) every candidate was rejected.

    Examples
    --------
    >>> from speclib.core.tree import token_tree
    >>> tree = token_tree([5, 6, 7, 8], [-1, -1, 1, 1])
    >>> node_status(tree, Verification(np.array([6, 8, 2]), 2))
    ['rejected', 'kept', 'rejected', 'kept']
    """
    if not isinstance(tree, TokenTree):
        raise TypeError(f"tree: expected a speclib.core.tree.TokenTree, got {type(tree).__name__}")
    if not isinstance(verification, Verification):
        raise TypeError(f"verification: expected a speclib.core.sampling.Verification, got "
                        f"{type(verification).__name__}")
    kept_tokens = np.asarray(verification.tokens)[:verification.n_accepted]
    status = [UNJUDGED] * tree.size
    node = -1
    for x in kept_tokens:
        for c in tree.children(node):
            if tree.tokens[c] == x:
                status[c] = KEPT
                node = c
                break
            status[c] = REJECTED
        else:
            raise ValueError(f"verification: kept token {int(x)} is not a child of node {node}")
    for c in tree.children(node):  # below the last kept node: all rejected, or a leaf (bonus)
        status[c] = REJECTED
    return status


_COLOURS = {KEPT: "#2ca02c", REJECTED: "#d62728", UNJUDGED: "#bbbbbb"}


def plot_tree_step(step: TreeStep, label: Callable[[int], str] = str, ax=None, title: str | None = None):
    """Draw a tree step: nodes by depth (left to right), kept path in green, rejected in red.

    The emitted token after the kept path (a correction, or the bonus after a kept leaf) is
    drawn in blue, dashed.  ``label`` turns a token id into the text shown in its box.
    Returns the axes.
    """
    from .plots import _axes

    if not isinstance(step, TreeStep):
        raise TypeError(f"step: expected a TreeStep (what tree_step returns), got {type(step).__name__}")
    if not callable(label):
        raise TypeError(f"label: expected a function from a token id to text, got {type(label).__name__}")
    tree, out = step.tree, step.verification
    status = node_status(tree, out)
    ax = _axes(ax, figsize=(7, 3.8))
    depth = depths(tree.parents)
    # y: leaves in depth-first order, a parent at the middle of its children
    y = np.zeros(tree.size)
    leaf = [0]

    def place(node: int) -> float:
        kids = [c for c in range(tree.size) if tree.parents[c] == node]
        if not kids:
            value = float(leaf[0])
            leaf[0] += 1
        else:
            value = float(np.mean([place(c) for c in kids]))
        if node >= 0:
            y[node] = value
        return value

    root_y = place(-1)
    box = dict(boxstyle="round,pad=0.3", lw=1.5)
    ax.text(0, root_y, repr(label(int(step.text[-1]))), ha="center", va="center",
            bbox={**box, "fc": "white", "ec": "black"})
    for i in range(tree.size):
        px, py = (0, root_y) if tree.parents[i] < 0 else (depth[tree.parents[i]], y[tree.parents[i]])
        ax.plot([px, depth[i]], [py, y[i]], color=_COLOURS[status[i]], lw=2 if status[i] == KEPT else 1, zorder=0)
        ax.text(depth[i], y[i], repr(label(int(tree.tokens[i]))), ha="center", va="center",
                bbox={**box, "fc": "white", "ec": _COLOURS[status[i]]})
    kept = [i for i in range(tree.size) if status[i] == KEPT]
    last = kept[-1] if kept else -1
    n_emitted = len(out.tokens)
    if n_emitted > out.n_accepted:
        lx, ly = (0, root_y) if last < 0 else (depth[last], y[last])
        below = [y[c] for c in range(tree.size) if tree.parents[c] == last]
        extra_y = min(below) - 0.8 if below else ly  # under the rejected candidates, or after the leaf
        ax.plot([lx, lx + 1], [ly, extra_y], color="tab:blue", ls="--", lw=1.5, zorder=0)
        is_bonus = last >= 0 and not any(tree.parents[c] == last for c in range(tree.size))
        ax.text(lx + 1, extra_y, repr(label(int(out.tokens[-1]))), ha="center", va="center",
                bbox={**box, "fc": "#e8f0ff", "ec": "tab:blue", "ls": "--"})
        ax.text(lx + 1, extra_y - 0.45, "bonus" if is_bonus else "correction", ha="center", va="top",
                fontsize=9, color="tab:blue")
    for name, colour in _COLOURS.items():
        ax.plot([], [], color=colour, lw=2, label=name)
    ax.plot([], [], color="tab:blue", ls="--", label="emitted by the target")
    ax.set_xlim(-0.5, depth.max() + 1.5)
    ax.set_ylim(min(-0.6, extra_y - 0.9) if n_emitted > out.n_accepted else -0.6, max(leaf[0] - 1, 0) + 0.6)
    ax.set_xticks(range(int(depth.max()) + 2))
    ax.set_xlabel("depth below the last token of the text (0: that token)")
    ax.set_yticks([])
    ax.legend(loc="upper left", fontsize=9, frameon=False, bbox_to_anchor=(1.0, 1.0))
    ax.set_title(title or f"One tree step: {tree.size} nodes scored in {step.target_passes} target pass, "
                 f"{out.n_accepted} kept, {n_emitted} emitted", fontsize=10)
    return ax


# --- measured: chains and trees on a real pair ----------------------------------------------------


class Shape(NamedTuple):
    """A proposal shape to measure: a label, its node budget, a factory of fresh proposers, ``k``."""

    label: str
    budget: int  #: drafted nodes the target scores per pass (at most)
    make: Callable  #: ``make() -> proposer`` (a fresh one per run)
    k: int  #: draft length (a tree's depth)


class ShapeMeasurement(NamedTuple):
    """What one shape did, measured in the loop, beside plain decoding on the same prompts."""

    label: str
    budget: int
    tokens_per_pass: float  #: generated tokens per target pass
    nodes_per_pass: float  #: drafted nodes scored per target pass
    draft_per_step: float  #: seconds of drafting per step, in units of t1 (one plain target pass)
    speedup: float  #: plain decoding's seconds / this shape's seconds, same prompts and lengths
    steps: tuple = ()  #: tokens emitted by every step (one target pass each), all prompts in order


def measure_shapes(target, draft_shapes: list[Shape], prompts: list, n_new: int, seed: int = 0):
    """Time plain decoding and each shape on every prompt (one BLAS thread), alternating runs.

    Returns ``(t1, measurements)``: ``t1`` the seconds of one target pass inside plain
    decoding, and one :class:`ShapeMeasurement` per shape.  Every run on a prompt uses the
    same seed, so shapes differ only by what they draft.
    """
    from ..core.decoding import autoregressive_generate, speculative_generate
    from ..lm.transformer import blas_threads

    if not isinstance(draft_shapes, (list, tuple)) or not draft_shapes or \
            not all(isinstance(s, Shape) for s in draft_shapes):
        raise TypeError("draft_shapes: expected a non-empty list of Shape")
    vocab = check_model(target, "target")
    if not isinstance(prompts, (list, tuple)) or not prompts:
        raise TypeError("prompts: expected a non-empty list of token arrays")
    prompts = [as_tokens(p, f"prompts[{i}]", vocab, allow_empty=False) for i, p in enumerate(prompts)]
    n_new = as_int(n_new, "n_new", minimum=1, maximum=MAX_NEW_TOKENS)
    seed = as_int(seed, "seed", minimum=0)
    plain_s, plain_passes, plain_model = 0.0, 0, 0.0
    acc = {s.label: dict(seconds=0.0, tokens=0, passes=0, nodes=0, draft=0.0, steps=[]) for s in draft_shapes}
    with blas_threads(1):
        autoregressive_generate(target, prompts[0], 8, rng=seed)  # warm-up
        for i, prompt in enumerate(prompts):
            timings = {}
            t0 = time.perf_counter()
            _, st = autoregressive_generate(target, prompt, n_new, rng=seed + i, timings=timings)
            plain_s += time.perf_counter() - t0
            plain_passes += st.target_passes
            plain_model += timings["model"]
            order = draft_shapes if i % 2 == 0 else draft_shapes[::-1]
            for shape in order:
                timings = {}
                t0 = time.perf_counter()
                _, st = speculative_generate(target, shape.make(), prompt, n_new, shape.k, rng=seed + i,
                                             timings=timings)
                a = acc[shape.label]
                a["seconds"] += time.perf_counter() - t0
                a["tokens"] += st.tokens_generated
                a["passes"] += st.target_passes
                a["nodes"] += st.scored_nodes
                a["draft"] += timings.get("draft", 0.0)
                a["steps"].extend(st.tokens_per_step)
    t1 = plain_model / plain_passes
    out = [ShapeMeasurement(s.label, s.budget, acc[s.label]["tokens"] / acc[s.label]["passes"],
                            acc[s.label]["nodes"] / acc[s.label]["passes"],
                            acc[s.label]["draft"] / acc[s.label]["passes"] / t1, plain_s / acc[s.label]["seconds"],
                            tuple(acc[s.label]["steps"]))
           for s in draft_shapes]
    return t1, out


def predicted_speedup(tokens_per_pass: float, verify_ratio: float, draft_per_step: float) -> float:
    """The cost model: tokens per pass over the cost of a step, ``r(n) + drafting``, in target passes.

    Examples
    --------
    >>> predicted_speedup(3.0, 1.5, 0.5)
    1.5
    """
    tokens_per_pass = as_real(tokens_per_pass, "tokens_per_pass", low=0.0)
    verify_ratio = as_real(verify_ratio, "verify_ratio", low=0.0)
    draft_per_step = as_real(draft_per_step, "draft_per_step", low=0.0)
    if verify_ratio + draft_per_step <= 0:
        raise ValueError("verify_ratio: a step must cost something (verify_ratio + draft_per_step > 0)")
    return tokens_per_pass / (verify_ratio + draft_per_step)


class ShapeRow(NamedTuple):
    """One row of the tree-cost table: a measured shape and what the cost model says of it."""

    measured: ShapeMeasurement
    verify_ratio: float  #: r(budget + 1), the cost of the target pass in single-token passes
    model: float  #: the cost model's speed-up with the measured r
    free: float  #: the cost model's speed-up if the pass cost nothing extra (r = 1)


def shape_rows(measured: list, verify_ratio: dict) -> list[ShapeRow]:
    """Price every measured shape with the cost model, at its measured ``r(budget + 1)`` and at ``r = 1``.

    ``verify_ratio`` maps a pass's token count ``n`` to ``r(n)``; it must hold ``budget + 1``
    for every shape.
    """
    if not isinstance(measured, (list, tuple)) or not measured or \
            not all(isinstance(m, ShapeMeasurement) for m in measured):
        raise TypeError("measured: expected a non-empty list of ShapeMeasurement")
    if not isinstance(verify_ratio, dict):
        raise TypeError(f"verify_ratio: expected a dict n -> r(n), got {type(verify_ratio).__name__}")
    rows = []
    for m in measured:
        if m.budget + 1 not in verify_ratio:
            raise ValueError(f"verify_ratio: no r({m.budget + 1}) for the shape {m.label!r}")
        cost = float(verify_ratio[m.budget + 1])
        rows.append(ShapeRow(m, cost, predicted_speedup(m.tokens_per_pass, cost, m.draft_per_step),
                             predicted_speedup(m.tokens_per_pass, 1.0, m.draft_per_step)))
    return rows


def shape_table(rows: list) -> str:
    """The Markdown table of :func:`shape_rows`: tokens per pass, r, drafting, measured and modelled speed-ups."""
    if not isinstance(rows, (list, tuple)) or not all(isinstance(r, ShapeRow) for r in rows):
        raise TypeError("rows: expected a list of ShapeRow (from shape_rows)")
    lines = ["| nodes | shape | tokens / pass | r(n+1) | draft / step | measured | model | if r = 1 |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        m = row.measured
        lines.append(f"| {m.budget} | {m.label} | {m.tokens_per_pass:.2f} | {row.verify_ratio:.2f} "
                     f"| {m.draft_per_step:.2f} | {m.speedup:.2f} | {row.model:.2f} | {row.free:.2f} |")
    return "\n".join(lines)

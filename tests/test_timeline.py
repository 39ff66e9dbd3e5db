"""The timeline of a traced generation: its boxes are the trace's own events."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from speclib.book.trace import (animation_html, plot_timeline, speculative_trace, timeline_animation,  # noqa: E402
                                timeline_boxes, trace_tokens)
from speclib.lm.models import markov_pair  # noqa: E402


@pytest.fixture(scope="module")
def blocks():
    target, draft = markov_pair(vocab_size=8, draft_noise=0.5, seed=0)
    return speculative_trace(target, draft, [0], n_blocks=8, k=3, rng=2)


def test_boxes_are_the_traced_events(blocks):
    c = 0.2
    boxes = timeline_boxes(blocks, c)
    lanes = {lane: [b for b in boxes if b[0] == lane] for lane in ("draft", "target", "output", "plain")}
    assert len(lanes["draft"]) == sum(b.draft_tokens.size for b in blocks)
    assert len(lanes["target"]) == len(blocks)
    # The output lane spells the generated tokens, in order, and plain decoding makes as many.
    np.testing.assert_array_equal([b[4] for b in lanes["output"]], trace_tokens(blocks))
    assert len(lanes["plain"]) == trace_tokens(blocks).size
    kinds = [b[3] for b in lanes["output"]]
    assert kinds.count("accepted") == sum(b.verification.n_accepted for b in blocks)
    assert kinds.count("bonus") == sum(b.verification.n_accepted == b.draft_tokens.size for b in blocks)
    assert kinds.count("corrected") == sum(b.verification.n_accepted < b.draft_tokens.size for b in blocks)
    assert [b[3] for b in lanes["draft"]].count("rejected") == kinds.count("corrected")
    # Time: k draft passes of c, then one target pass, block after block.
    end = max(s + w for _, s, w, _, _ in lanes["target"])
    assert end == pytest.approx(len(blocks) * (1 + 3 * c))
    assert 0 < kinds.count("corrected") < len(blocks)  # this seed shows both kinds of step


def test_plot_and_animation(blocks):
    ax = plot_timeline(blocks, c=0.1, decode=lambda t: "abcdefgh"[t])
    texts = [t.get_text() for t in ax.texts]
    assert "".join(t for t in texts if len(t) == 1 and t in "abcdefgh").startswith(
        "".join("abcdefgh"[t] for t in trace_tokens(blocks)[:3]))
    half = plot_timeline(blocks, c=0.1, upto=4)
    assert len(half.patches) < len(ax.patches)
    anim = timeline_animation(blocks[:2], c=0.1)
    assert list(anim.new_frame_seq()) == [1, 2]  # one frame per step, the first already drawn
    html = animation_html(anim)
    assert "<img" in html or "data:image" in html
    assert "font-awesome" in anim.to_jshtml()  # what matplotlib would link ...
    assert "http" not in html  # ... and what the book's page keeps: nothing from another site
    with pytest.raises(TypeError, match="anim"):
        animation_html("frames")
    with pytest.raises(TypeError, match="decode"):
        plot_timeline(blocks, decode="abc")
    with pytest.raises(ValueError, match="c"):
        timeline_boxes(blocks, c=-1)
    with pytest.raises(TypeError, match="blocks"):
        timeline_boxes("blocks")


def test_verification_pass_drawn_at_its_measured_cost(blocks):
    """A pass over k + 1 tokens is drawn r(k + 1) long: the plain lane then makes as many tokens
    as fit in the same time, not one per speculative step's pass (chapter 00's first figure)."""
    c, r = 0.1, 2.5
    boxes = timeline_boxes(blocks, c, r=lambda n: r if n == 4 else 99.0)
    target = [b for b in boxes if b[0] == "target"]
    assert all(w == pytest.approx(r) for _, _, w, _, _ in target)
    assert max(s + w for _, s, w, _, _ in target) == pytest.approx(len(blocks) * (3 * c + r))
    assert timeline_boxes(blocks, c, r=r) == boxes  # a number: the same cost for every step
    with pytest.raises(ValueError, match="r"):
        timeline_boxes(blocks, c, r=-1.0)
    with pytest.raises(ValueError, match=r"r\(4\)"):
        timeline_boxes(blocks, c, r=lambda n: float("nan"))


def test_counts_agree_in_number(blocks):
    # One step at c = 0 and r = 1 lasts one pass: plain decoding has made "1 token", not "1 tokens".
    ax = plot_timeline(blocks[:1], c=0.0, r=1.0)
    counts = [t.get_text() for t in ax.texts if t.get_text().endswith(("token", "tokens"))]
    assert "1 token" in counts and "1 tokens" not in counts, counts
    assert all(t.startswith("1 ") == t.endswith(" token") for t in counts), counts


def test_the_overview_draws_its_timeline_at_measured_costs():
    """Chapter 00's figure and animation pass the record's c, r(k + 1) and the loop's own time: with
    the defaults every verification pass would be drawn as one plain pass, the picture issue 28
    found contradicting chapter 07's measurement (issue 38: the costs are the record's, the
    stretch its typical one)."""
    import json
    import re
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[1] / "book" / "00_overview.ipynb").read_text(encoding="utf-8"))
    source = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    calls = re.findall(r"\b(?:plot_timeline|timeline_animation)\((.*?)\)\s*(?:\)|$)", source, re.S | re.M)
    assert len(calls) >= 2, "the overview no longer draws its timeline and animation"
    assert all(re.search(r"\*\*costs\b", call) for call in calls), calls  # c, r, outside, outside_plain
    for key in ("c/pair/loop/numpy/cpu", "r5/pair/loop/numpy/cpu", "outside/pair/k4/T1/numpy/cpu",
                "tokens_per_pass/pair/k4/T1/loop"):
        assert key in source  # the costs and the typical stretch are the record's, not typed in
    assert "typical_trace(" in source


# --- the loop's own time and the typical stretch (issue 38: 00's figure at the record's costs) ----

def test_the_loops_own_work_follows_each_target_pass_and_slows_plain_tokens(blocks):
    c, r, o, o1 = 0.1, 1.5, 0.3, 0.05
    boxes = timeline_boxes(blocks, c, r, outside=o, outside_plain=o1)
    loop = [b for b in boxes if b[3] == "loop"]
    passes = [b for b in boxes if b[3] == "target"]
    assert len(loop) == len(blocks)
    for (_, s, w, _, _), (_, s2, w2, _, _) in zip(passes, loop):
        assert s2 == pytest.approx(s + w) and w2 == pytest.approx(o)  # right after its pass
    end = max(s + w for _, s, w, _, _ in loop)
    assert end == pytest.approx(len(blocks) * (3 * c + r + o))
    plain = [b for b in boxes if b[0] == "plain"]
    assert all(w == pytest.approx(1 + o1) for _, _, w, _, _ in plain)
    assert timeline_boxes(blocks, c, r) == [b for b in timeline_boxes(blocks, c, r, 0.0, 0.0)]  # the default
    with pytest.raises(ValueError, match="outside"):
        timeline_boxes(blocks, c, r, outside=-0.1)


def test_every_label_stays_inside_the_axes(blocks):
    import matplotlib.pyplot as plt

    ax = plot_timeline(blocks, c=0.02, decode=lambda t: "abcdefgh"[t], outside=0.2, outside_plain=0.05)
    fig = ax.figure
    fig.canvas.draw()
    box = ax.get_window_extent()
    for text in ax.texts:
        if text.get_text().endswith("tokens") or text.get_text().endswith("token"):
            continue  # the counts stand to the right of the last step, inside the x-limits
        ext = text.get_window_extent()
        assert box.x0 - 0.5 <= ext.x0 and ext.x1 <= box.x1 + 0.5 and box.y0 - 0.5 <= ext.y0 and ext.y1 <= box.y1 + 0.5, \
            text.get_text()
    plt.close(fig)


def test_the_typical_trace_has_the_measured_tokens_per_step():
    from speclib.book.trace import typical_trace

    target, draft = markov_pair(vocab_size=8, draft_noise=0.5, seed=0)
    for want in (1.5, 2.5, 3.5):
        blocks, seed = typical_trace(target, draft, [0], want, n_blocks=4, k=3, seeds=range(60))
        got = sum(b.verification.tokens.size for b in blocks) / 4
        assert abs(got - want) <= 0.125 + 1e-12  # a quarter of a token: four steps' resolution, halved
        again = speculative_trace(target, draft, [0], n_blocks=4, k=3, rng=seed)
        np.testing.assert_array_equal(trace_tokens(again), trace_tokens(blocks))
    # negative control: the first seed alone is no typical stretch for every target
    firsts = {sum(b.verification.tokens.size for b in speculative_trace(target, draft, [0], 4, 3, rng=0)) / 4}
    assert any(abs(f - w) > 0.125 for f in firsts for w in (1.5, 3.5))

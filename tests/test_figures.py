"""Every figure is readable in the book's column: its smallest text at least 9 pixels high.

In the built book at a 1280-pixel window (both sidebars open) a page's column is
:data:`COLUMN_PX` wide (measured in Chromium on the rendered pages); an image wider than the
column is scaled down to it.  A label of ``pt`` points in a figure saved at ``dpi`` dots per
inch is ``pt * dpi / 72`` pixels in the PNG, so on the page it is

    pt * dpi / 72 * min(1, COLUMN_PX / png_width)

pixels high.  The smallest size any figure may use is :data:`MIN_POINTS` (font sizes set in the
chapters' code and in speclib.book are checked against it; matplotlib's "small" is 8.3 points
and is refused), and every stored PNG (figures and the frames of an animation) must then show
it at :data:`MIN_PIXELS` or more.
"""

import base64
import json
import re
import struct
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
CODE = sorted((ROOT / "speclib" / "book").glob("*.py"))

COLUMN_PX = 675  #: the text column of a page at a 1280-pixel window, in pixels
MIN_POINTS = 9.0  #: the smallest font size a figure may set
MIN_PIXELS = 9.0  #: the smallest text height on the page

#: A font size set in code: fontsize=7, labelsize="small", titlesize=8.5, prop={"size": 6}
#: (a bare ``size=`` is an array size far more often than a font size, and is not read).
SIZE = re.compile(r"""(?:fontsize|labelsize|titlesize|["']size["'])\s*[=:]\s*(?:["']([a-z-]+)["']|(\d+(?:\.\d+)?))""")
TOO_SMALL_NAMES = {"xx-small", "x-small", "small", "smaller"}


def png_size_and_dpi(data: bytes) -> tuple[int, float]:
    """Width in pixels and dots per inch (72 where the PNG does not say) of a PNG."""
    width = struct.unpack(">I", data[16:20])[0]
    pos, dpi = 8, 72.0
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I", data[pos:pos + 4])[0], data[pos + 4:pos + 8]
        if kind == b"pHYs":
            per_unit, _, unit = struct.unpack(">IIB", data[pos + 8:pos + 17])
            if unit == 1:
                dpi = per_unit * 0.0254
        if kind == b"IDAT":
            break
        pos += 12 + length
    return width, dpi


def displayed_pixels(points: float, width: int, dpi: float) -> float:
    return points * dpi / 72 * min(1.0, COLUMN_PX / width)


def stored_pngs(nb: dict):
    """(cell index, PNG bytes) of every figure and every animation frame a notebook shows."""
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "image/png" in data:
                yield i, base64.b64decode(data["image/png"])
            html = data.get("text/html")
            if html:
                html = "".join(html) if isinstance(html, list) else html
                for frame in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=\\n]+)", html):
                    yield i, base64.b64decode(frame.replace("\\n", ""))


def small_sizes(source: str) -> list[str]:
    found = []
    for m in SIZE.finditer(source):
        name, number = m.group(1), m.group(2)
        if (name and name in TOO_SMALL_NAMES) or (number and float(number) < MIN_POINTS):
            found.append(m.group(0))
    return found


def test_the_rules_catch_what_they_should():
    assert small_sizes('ax.legend(fontsize=8)') and small_sizes('ax.text(0, 0, "a", fontsize="small")')
    assert small_sizes('ax.tick_params(labelsize=7.5)') and small_sizes('prop={"size": 6}')
    assert not small_sizes('ax.legend(fontsize=9)') and not small_sizes('fontsize="medium"')
    assert not small_sizes('rng.integers(0, 5, size=3)')
    # a 1089-pixel figure at 100 dpi shows 9-point text at 8.0 pixels: refused
    assert displayed_pixels(9, 1089, 100) < MIN_PIXELS <= displayed_pixels(9, 700, 100)


@pytest.mark.parametrize("path", NOTEBOOKS + CODE, ids=lambda p: p.name)
def test_no_font_smaller_than_the_minimum(path):
    if path.suffix == ".ipynb":
        nb = json.loads(path.read_text(encoding="utf-8"))
        source = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    else:
        source = path.read_text(encoding="utf-8")
    assert not small_sizes(source), f"{path.name}: font sizes below {MIN_POINTS:g} points: {small_sizes(source)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_shows_its_smallest_text_at_nine_pixels(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    bad = []
    for i, png in stored_pngs(nb):
        width, dpi = png_size_and_dpi(png)
        px = displayed_pixels(MIN_POINTS, width, dpi)
        if px < MIN_PIXELS:
            bad.append(f"cell {i}: {width} px wide at {dpi:.0f} dpi, {MIN_POINTS:g}-point text shows at {px:.1f} px")
    assert not bad, f"{path.name}: figures too wide for the column ({COLUMN_PX} px) to keep labels readable: {bad}"

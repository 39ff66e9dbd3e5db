"""Every explorer: it shows its controls above what it draws, redraws when a control moves, prints
nothing under them, and holds no Output widget.

A cell that ends with the call (as chapters 1, 2, 3, 8, 12 and 13 do) would print
``<function ...show(...)>`` if an explorer returned ``interact``'s redraw function.  An Output
widget (what ``ipywidgets.interact`` draws into) is what a headless runner mirrors by sending
its state back to the kernel while the cell runs, where one run of chapter 2 in thirteen hung
(tests/test_headless_runs.py runs the explorers headless); the explorers draw into an Image
or HTML widget instead, whose value only goes from the kernel to the front end.
"""

import inspect

import matplotlib
import pytest

matplotlib.use("Agg")

import ipywidgets  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from speclib.book import widgets  # noqa: E402

EXPLORERS = sorted(name for name, fn in inspect.getmembers(widgets, inspect.isfunction)
                   if name.endswith("_explorer") and fn.__module__ == widgets.__name__)


def all_widgets(widget):
    """``widget`` and every widget inside it."""
    yield widget
    for child in getattr(widget, "children", ()):
        yield from all_widgets(child)


@pytest.fixture
def shown(monkeypatch):
    """What the explorers display, instead of displaying it."""
    boxes = []
    monkeypatch.setattr(widgets, "_display", boxes.append)
    return boxes


def test_every_explorer_is_found():
    assert len(EXPLORERS) >= 10 and "batch_waste_explorer" in EXPLORERS


@pytest.mark.parametrize("name", EXPLORERS)
def test_an_explorer_shows_its_controls_and_its_drawing_and_redraws(name, shown):
    plt.close("all")
    assert getattr(widgets, name)() is None  # a cell ending with the call prints nothing more
    (box,) = shown
    *controls, view = box.children
    assert controls and all(isinstance(c, ipywidgets.ValueWidget) for c in controls)
    if isinstance(view, ipywidgets.Image):
        assert bytes(view.value).startswith(b"\x89PNG"), "the drawing is a PNG image"
    else:
        assert isinstance(view, ipywidgets.HTML) and "<" in view.value
    assert not [w for w in all_widgets(box) if isinstance(w, ipywidgets.Output)]
    assert plt.get_fignums() == [], "the figure is closed once drawn (the inline backend would show it twice)"
    before = bytes(view.value) if isinstance(view, ipywidgets.Image) else view.value
    control = controls[0]
    if isinstance(control, ipywidgets.Dropdown):
        control.value = [o for o in control.options if o != control.value][0]
    else:
        control.value = control.min if control.value != control.min else control.max
    assert (bytes(view.value) if isinstance(view, ipywidgets.Image) else view.value) != before, "moving a control redraws"
    assert plt.get_fignums() == []


def test_an_explorer_box_refuses_what_is_not_a_control():
    with pytest.raises(ValueError, match="controls"):
        widgets.explorer_box(lambda: "<p>x</p>")
    with pytest.raises(TypeError, match="x: expected an ipywidgets control"):
        widgets.explorer_box(lambda x: "<p>x</p>", x=3)


def test_outside_a_notebook_the_box_stands_for_the_explorer(capsys):
    """Outside IPython, displaying the box prints its text: the explorer was shown, nothing else."""
    assert widgets.bonus_explorer() is None
    assert capsys.readouterr().out.startswith("VBox(")
    plt.close("all")


def test_interact_draws_into_an_output_widget_and_returns_a_function():
    """Negative controls: what the explorers used to use holds an Output widget (which a headless
    runner mirrors back to the kernel), and returns what a cell prints as <function ...>; the
    checks above would see both."""
    returned = ipywidgets.interact(lambda x=1: None, x=(0, 2))
    assert repr(returned).startswith("<function")
    box = ipywidgets.interactive(lambda x=1: None, x=(0, 2))
    assert [w for w in all_widgets(box) if isinstance(w, ipywidgets.Output)]

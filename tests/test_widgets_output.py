"""An explorer shows its sliders and prints nothing under them: a cell that ends with the call
(as chapters 1, 2, 3, 8, 12 and 13 do) would otherwise print ``<function ...show(...)>``."""

import inspect

import matplotlib
import pytest

matplotlib.use("Agg")

from speclib.book import widgets  # noqa: E402

EXPLORERS = sorted(name for name, fn in inspect.getmembers(widgets, inspect.isfunction)
                   if name.endswith("_explorer") and fn.__module__ == widgets.__name__)


def test_every_explorer_is_found():
    assert len(EXPLORERS) >= 10 and "batch_waste_explorer" in EXPLORERS


@pytest.mark.parametrize("name", EXPLORERS)
def test_an_explorer_returns_nothing_to_print(name, capsys):
    import matplotlib.pyplot as plt

    assert getattr(widgets, name)() is None
    shown = capsys.readouterr().out
    assert "interactive(" in shown  # outside a notebook, the widget's text stands for it: it was shown
    plt.close("all")


def test_interact_itself_returns_the_function_a_cell_would_print():
    """Negative control: what the explorers used to return prints as <function ...>."""
    import ipywidgets

    returned = ipywidgets.interact(lambda x=1: None, x=(0, 2))
    assert repr(returned).startswith("<function")

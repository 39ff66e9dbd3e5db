"""Interactive explorers for the chapters (ipywidgets).

Each explorer is split in two: a pure function that computes what the explorer shows for
given slider values (tested in tests/), and a ``*_explorer()`` function that wires it to
``ipywidgets.interact``.  The rendered book cannot run widgets, so every chapter shows a
static figure made by the same pure function next to the explorer.
"""

from __future__ import annotations

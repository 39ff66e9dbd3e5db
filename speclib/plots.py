"""Figures shared by several chapters (matplotlib).

Functions take data computed elsewhere in speclib and an optional ``ax``; they draw, label
and return the axes, and never call ``plt.show()`` (the notebook does).
"""

from __future__ import annotations

"""The figures the library draws (a profile, a plan, an endpoint's metrics): matplotlib figures that show
themselves in a notebook.

The plots are drawn on :class:`matplotlib.figure.Figure` objects, not through ``pyplot`` (no global state,
no window), and Jupyter shows such a figure only as ``<Figure size ... with 4 Axes>`` unless the inline
backend's formatter was set up (``%matplotlib inline``). :class:`NotebookFigure` gives it its own PNG
representation, so a cell ending with ``report.plot()`` shows the plot; everything else is matplotlib's.
Imported only when a plot is drawn: matplotlib is optional (the ``notebooks`` extra).
"""

from __future__ import annotations

import io

from matplotlib.figure import Figure

__all__ = ["NotebookFigure"]


class NotebookFigure(Figure):
    """A :class:`matplotlib.figure.Figure` that Jupyter shows as a PNG."""

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=90)
        return buffer.getvalue()

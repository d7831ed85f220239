"""Figure helpers shared by the experiments: a headless pyplot and the log-log axes style.

matplotlib is imported on first use, so commands that draw nothing never pay for it.
"""

from __future__ import annotations

from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend: figures go to files, never to a screen."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def style_loglog(ax: Any, legend_size: int = 7, **labels: Any) -> None:
    """Log scales on both axes, ``labels`` (xlabel, ylabel, title, ylim ...), a grid on major
    and minor ticks and a small legend: the look of every scaling-law figure."""
    ax.set(xscale="log", yscale="log", **labels)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=legend_size)

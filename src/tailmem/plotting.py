"""Figure helpers shared by the experiments: a headless pyplot with readable sizes, the log-log
axes style, legends outside the data (and a layout that keeps them off the neighbouring panels),
integer ticks and the "no data" note of an empty panel.

matplotlib is imported on first use, so commands that draw nothing never pay for it. Sizes are
set so that a figure shown at the report's width (about 1100 px) keeps tick labels of ≥ 9 pt.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matplotlib itself is imported on first use
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.legend import Legend
    from matplotlib.typing import RcKeyType

MIN_FONT = 9
"""The smallest font (points) of any text the helpers draw: tick labels, legends."""
READABLE: dict[RcKeyType, int] = {
    "font.size": 10,
    "axes.labelsize": 10,
    "axes.titlesize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": MIN_FONT,
    "legend.title_fontsize": MIN_FONT,
    "figure.titlesize": 12,
}
"""matplotlib rcParams every figure starts from."""


def pyplot() -> types.ModuleType:
    """``matplotlib.pyplot`` on the Agg backend (figures go to files, never to a screen), with
    the :data:`READABLE` font sizes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(READABLE)
    return plt


def legend_outside(ax: Axes, **kwargs: Any) -> Legend:
    """A legend to the right of ``ax``, outside the data (saved figures grow to hold it);
    ``kwargs`` go to ``ax.legend`` as they are."""
    kwargs.setdefault("fontsize", MIN_FONT)
    kwargs["fontsize"] = max(kwargs["fontsize"], MIN_FONT)
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kwargs)


def covered_panels(fig: Figure) -> list[tuple[int, int]]:
    """``(i, j)`` for every legend of axes ``i`` that covers axes ``j`` (a legend placed outside
    one panel of a row lands on its neighbour unless the layout makes room)."""
    fig.draw_without_rendering()
    boxes = [ax.get_window_extent() for ax in fig.axes]
    out = []
    for i, ax in enumerate(fig.axes):
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent()
        out += [(i, j) for j, other in enumerate(boxes) if j != i and box.overlaps(other)]
    return out


def keep_legends_clear(fig: Figure) -> None:
    """Lay ``fig`` out again (tight layout, which counts each axes' legend) when a legend covers
    another panel; a figure whose legends are clear is left as it was drawn."""
    if covered_panels(fig):
        fig.tight_layout()


def note_no_data(ax: Axes, why: str) -> None:
    """Say in the middle of the empty ``ax`` that it has no data, and ``why`` (a smoke run's
    few steps often reach no level): an empty panel is then not read as a drawing error."""
    ax.text(
        0.5, 0.5, f"no data: {why}", transform=ax.transAxes, ha="center", va="center",
        color="#555555", fontsize=MIN_FONT + 1, wrap=True,
    )  # fmt: skip


def integer_ticks(ax: Axes, axis: str = "x") -> None:
    """Ticks only at integers on ``axis`` (layers, groups): a 2-layer axis reads 0, 1, not 0.2."""
    from matplotlib.ticker import MaxNLocator

    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(MaxNLocator(integer=True))


def style_loglog(ax: Axes, legend_size: int = MIN_FONT, **labels: Any) -> None:
    """Log scales on both axes, ``labels`` (xlabel, ylabel, title, ylim ...: ``ax.set``'s
    properties, whatever their types), a grid on major and minor ticks and a legend outside the
    data: the look of every scaling-law figure."""
    ax.set(xscale="log", yscale="log", **labels)
    ax.grid(True, which="both", alpha=0.3)
    legend_outside(ax, fontsize=legend_size)


SMOKE_MARK = "smoke preset: checks that the code runs; not evidence"


def mark_smoke(fig: Figure) -> None:
    """Write :data:`SMOKE_MARK` above ``fig``'s axes, so a smoke run's figure says what it is
    wherever it is shown (saved with ``bbox_inches="tight"``, the figure grows to hold it)."""
    fig.text(
        0.0, 1.0, SMOKE_MARK, ha="left", va="bottom", color="#a05a00", fontsize=MIN_FONT + 1,
        fontweight="bold", transform=fig.transFigure,
    )  # fmt: skip

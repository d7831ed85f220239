"""The figure helpers: readable sizes, legends outside the data, integer ticks."""

from tailmem.plotting import MIN_FONT, integer_ticks, legend_outside, pyplot, style_loglog


def test_ticks_legends_and_integer_axes():
    plt = pyplot()
    fig, (ax, ay) = plt.subplots(1, 2)
    ax.plot([0, 1], [0.5, 0.7], label="adam")
    integer_ticks(ax)
    legend = legend_outside(ax, fontsize=MIN_FONT - 3)
    fig.canvas.draw()
    ticks = [t for t in ax.get_xticks() if 0 <= t <= 1]
    assert ticks == [0.0, 1.0]  # a two-layer axis: 0 and 1, not 0.0, 0.2, ...
    assert all(t.get_fontsize() >= MIN_FONT for t in ax.get_xticklabels())
    assert all(t.get_fontsize() >= MIN_FONT for t in legend.get_texts())
    # The legend box lies right of the axes: it covers no data.
    renderer = fig.canvas.get_renderer()
    assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1
    ay.plot([1, 10], [1, 0.1], label="gd")
    style_loglog(ay, xlabel="K")
    assert ay.get_xscale() == "log" and ay.get_legend() is not None
    plt.close(fig)

"""The figure helpers: readable sizes, legends outside the data and off the neighbouring panels,
integer ticks, the "no data" note of an empty panel."""

from tailmem.plotting import (
    MIN_FONT,
    covered_panels,
    integer_ticks,
    keep_legends_clear,
    legend_outside,
    note_no_data,
    pyplot,
    style_loglog,
)


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


def test_a_legend_beside_one_panel_of_a_row_is_kept_off_its_neighbour(tmp_path):
    """Two panels side by side, each with its legend outside: drawn as they are, the left one's
    legend covers the right panel (the gallery's noisy-scaling figure did); written by
    ``tailmem.outputs.write`` the figure is laid out again and nothing covers a panel."""
    from tailmem.outputs import Figure, Outputs, write
    from tailmem.rundir import RunDir

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    for ax in axes:
        for k in range(5):
            ax.plot([1, 2], [k, k + 1], label=f"β = {k}: fit −1.99, a label of some length")
        legend_outside(ax)
    assert covered_panels(fig) == [(0, 1)]
    write(RunDir(tmp_path), Outputs(figures=(Figure("two_panels", fig, None),)))
    assert covered_panels(fig) == []
    assert (tmp_path / "two_panels.png").is_file()
    clear, ax = plt.subplots()
    ax.plot([0, 1], label="one")
    legend_outside(ax)
    position = ax.get_position().bounds
    keep_legends_clear(clear)  # nothing covered: the layout is left as drawn
    assert ax.get_position().bounds == position
    plt.close("all")


def test_an_empty_panel_says_it_has_no_data_and_why():
    plt = pyplot()
    fig, ax = plt.subplots()
    note_no_data(ax, "no group reached a level τ")
    (text,) = ax.texts
    assert text.get_text() == "no data: no group reached a level τ"
    assert text.get_position() == (0.5, 0.5) and text.get_transform() == ax.transAxes
    assert text.get_fontsize() >= MIN_FONT
    plt.close(fig)

"""``compare.html``: a :class:`~tailmem.compare.Comparison` as one self-contained page (the
report's style sheet, figures embedded, a column per run)."""

from __future__ import annotations

import base64
import html

from tailmem.claims.core import VERDICTS
from tailmem.compare import (
    CURVES_CAPTION,
    DIFFERENCE_NOTE,
    KEY_FIGURES,
    NO_CURVES,
    Comparison,
    answers,
    claim_cells,
    claim_header,
    config_header,
    counts_rows,
    presets_note,
)
from tailmem.report.layout import Figure
from tailmem.report.page import html_table, note_html
from tailmem.report.style import CSS

PAGE_CSS = "body{display:block} main{margin:0 auto;padding:0 1em 2em} td{overflow-wrap:break-word}"
"""The report's sheet is laid out around its table of contents, which this page has none of, and
breaks words anywhere to fit; a comparison's cells break between words."""


def render_html(comparison: Comparison, curves: bytes | None = None) -> str:
    """The page; ``curves`` the overlaid training curves as PNG bytes (None: there are none)."""
    c = comparison
    runs = "".join(f"<li><code>{html.escape(str(r.path))}</code></li>" for r in c.runs)
    body = [f"<h1>tailmem compare: {html.escape(c.experiment)}</h1>", f"<ul>{runs}</ul>"]
    presets = dict.fromkeys(r.preset for r in c.runs)
    body += [
        f'<p class="banner preset-{html.escape(p.name)}">{html.escape(p.banner())}</p>'
        for p in presets
    ]
    if note := presets_note(c):
        body.append(f'<p class="banner mixed">{html.escape(note)}</p>')
    body += [f'<p class="incomplete">{html.escape(note)}</p>' for note in c.notes()]
    body.append("<h2>Config difference</h2>")
    if c.config:
        rows = [[d.key, *d.values] for d in c.config]
        body.append(html_table(config_header(c), rows, "config"))
    else:
        body.append("<p>The configs are identical.</p>")
    if c.environment:
        rows = [[d.key, *d.values] for d in c.environment]
        body.append("<h3>Environment</h3>" + html_table(config_header(c), rows, "env"))
    body.append("<h2>Verdicts</h2>" + html_table(["run", *VERDICTS], counts_rows(c), "summary"))
    body.append("<h2>Claims</h2>" + _claims(c) + note_html(DIFFERENCE_NOTE))
    if found := answers(c):
        body.append("<h2>Answers</h2>")
        for question, given in found:
            items = "".join(
                f"<li><b>{html.escape(label)}</b>: {html.escape(text)}</li>"
                for label, text in given
            )
            body.append(f"<h3>{html.escape(question)}</h3><ul>{items}</ul>")
    body.append("<h2>Training curves</h2>")
    if curves is None:
        body.append(f"<p>{html.escape(NO_CURVES)}</p>")
    else:
        data = base64.b64encode(curves).decode()
        body.append(
            f'<figure><img alt="{html.escape(CURVES_CAPTION)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(CURVES_CAPTION)}</figcaption></figure>"
        )
    body.append("<h2>Key figures</h2>")
    body += [_figure_row(figures, c.labels) for figures in c.figures[:KEY_FIGURES]]
    rest = c.figures[KEY_FIGURES:]
    if rest:
        body.append(
            f"<details><summary>{len(rest)} more figures every run has</summary>"
            + "".join(_figure_row(figures, c.labels) for figures in rest)
            + "</details>"
        )
    if c.only_some:
        body.append(f"<p>Figures only some runs have: {html.escape(', '.join(c.only_some))}.</p>")
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>tailmem compare: {html.escape(c.experiment)}</title>"
        f"<style>{CSS}{PAGE_CSS}</style></head><body><main>"
        + "\n".join(body)
        + "</main></body></html>\n"
    )


def _claims(comparison: Comparison) -> str:
    """The claims table; a row whose verdicts differ between runs is marked."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in claim_header(comparison))
    rows = []
    for row in comparison.claims:
        css = "" if row.agree else ' class="v-inconclusive"'
        cells = "".join(f"<td>{html.escape(cell)}</td>" for cell in claim_cells(row))
        rows.append(f"<tr{css}>{cells}</tr>")
    return (
        f'<div class="scroll"><table class="claims"><thead><tr>{head}</tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table></div>"
        + '<p class="columns">Rows whose verdicts differ between the runs are shaded.</p>'
    )


def _figure_row(figures: tuple[Figure, ...], labels: tuple[str, ...]) -> str:
    """One figure of every run, side by side, each captioned with its run."""
    cells = []
    for figure, label in zip(figures, labels, strict=True):
        data = base64.b64encode(figure.path.read_bytes()).decode()
        cells.append(
            f'<figure><img alt="{html.escape(figure.caption)} — {html.escape(label)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{html.escape(label)}</figcaption>'
            "</figure>"
        )
    columns = f"grid-template-columns:repeat({len(figures)},minmax(0,1fr))"
    return (
        f"<h3>{html.escape(figures[0].caption)}</h3>"
        f'<div class="figures" style="{columns}">' + "".join(cells) + "</div>"
    )

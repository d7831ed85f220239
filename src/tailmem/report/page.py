"""``report.html``: the report's content (:mod:`tailmem.report.content`) as one self-contained
page (figures embedded, :mod:`.style`'s sheet inline).

Its first screen holds the preset banner, the answers and the table of contents. Each study's
section is kept short: the summary, the claims (how each was decided folds out under it), the
first :data:`KEY_FIGURES` figures side by side; the other figures and every table fold away
behind ``<details>``.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path

from tailmem.claims.core import VERDICTS
from tailmem.report import content as C
from tailmem.report.layout import Figure, Table
from tailmem.report.reader import Results, RunSummary
from tailmem.report.style import CSS

KEY_FIGURES = 2
"""The figures a study shows open (report.json lists its key figures first)."""
CLAIM_HEADER = ["claim", "published", "ours", "verdict"]


def render_html(results: Results, folder: Path | None, questions: Mapping[str, str]) -> str:
    """The whole page; ``folder`` is the results folder (None for a report of one run),
    ``questions`` the headline question of each study that states answers
    (:func:`.content.unanswered`)."""
    body = ["<main>", "<h1>tailmem report</h1>"]
    body += [
        f'<p class="banner preset-{html.escape(p.name)}">{_bold_first(p.banner())}</p>'
        for p in C.presets(results)
    ]
    if warning := C.mixed_warning(results):
        body.append(f'<p class="banner mixed">{html.escape(warning)}</p>')
    body.append(_answers(results, folder, questions))
    body.append(_verdicts(results))
    if results.not_rendered:
        items = "".join(
            f"<li><b>{html.escape(b.name)}</b> not rendered: {html.escape(b.reason)}</li>"
            for b in results.not_rendered
        )
        body.append(
            f'<section id="not-rendered"><h2>{C.NOT_RENDERED_TITLE}</h2>'
            f'<p class="incomplete">{html.escape(C.NOT_RENDERED_NOTE)}</p>'
            f"<ul>{items}</ul></section>"
        )
    body += [_section(run, results) for run in results.runs]
    uncovered = C.uncovered_rows()
    body.append(
        f'<section id="uncovered"><h2>{C.UNCOVERED_TITLE}</h2><details><summary>'
        f"{len(uncovered)} claims that no experiment measures yet</summary>"
        + html_table(C.UNCOVERED_HEADER, uncovered, "uncovered")
        + "</details></section>"
    )
    env = C.environment_rows(results)
    body.append(
        f'<section id="environment"><h2>{C.ENVIRONMENT_TITLE}</h2>'
        + html_table(C.ENV_HEADER, env, "env")
        + "</section></main>"
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>tailmem report</title><style>{CSS}</style></head><body>"
        + _contents(results)
        + "\n".join(body)
        + "</body></html>\n"
    )


def _bold_first(text: str) -> str:
    """``Preset cpu: what it shows`` with the part before the colon in bold."""
    head, _, rest = text.partition(":")
    return f"<b>{html.escape(head)}</b>:{html.escape(rest)}"


def _contents(results: Results) -> str:
    items = "".join(
        f'<li><a href="#{html.escape(anchor)}">{html.escape(title)}</a></li>'
        for anchor, title in C.contents(results)
    )
    title = '<p class="toc-title">Contents</p>'
    return f'<nav class="toc" aria-label="Contents">{title}<ol>{items}</ol></nav>'


def _answers(results: Results, folder: Path | None, questions: Mapping[str, str]) -> str:
    parts = [f'<section id="answers"><h2>{C.ANSWERS_TITLE}</h2>']
    answered = C.answers(results)
    if answered:
        rows = [C.answer_row(r, a, results) for r, a in answered]
        verdicts = [_shown(r, a.verdict) for r, a in answered]
        parts.append(html_table(C.ANSWER_HEADER, rows, "answers", verdicts))
    missing = C.unanswered(results, folder, questions)
    if missing:
        items = "".join(f"<li>{_code_spans(line)}</li>" for line in missing)
        parts.append(f'<ul class="unanswered">{items}</ul>')
    parts.append("</section>")
    return "".join(parts)


def _verdicts(results: Results) -> str:
    lines = []
    for tally in C.tallies(results):
        counts = ", ".join(f"<b>{n}</b> {html.escape(v)}" for n, v in tally.text())
        studies = html.escape(", ".join(tally.experiments))
        lines.append(f"<li>{html.escape(tally.preset)}: {counts} ({studies})</li>")
    missing = C.unmeasured(results)
    lines.append(
        f"<li>not measured here: <b>{missing.not_run}</b> claims of experiments not in this "
        f"folder, <b>{missing.uncovered}</b> that no experiment measures yet</li>"
    )
    return (
        f'<section id="verdicts"><h2>{C.VERDICTS_TITLE}</h2><ul class="tallies">'
        + "".join(lines)
        + "</ul>"
        + html_table(C.SUMMARY_HEADER, C.summary_rows(results), "summary")
        + "</section>"
    )


def _section(run: RunSummary, results: Results) -> str:
    title = html.escape(C.section_title(run, results))
    parts = [f'<section id="{html.escape(C.anchor(run))}"><h2>{title}</h2>']
    if not run.complete:
        parts.append(f'<p class="incomplete">{html.escape(C.incomplete_note(run))}</p>')
    if note := C.smoke_note(run):
        parts.append(f'<p class="banner preset-smoke">{_bold_first(note)}</p>')
    if run.layout.summary:
        parts.append(f"<p>{html.escape(run.layout.summary)}</p>")
    if run.layout.data is not None:
        parts.append(f'<p class="data"><b>Data</b>: {html.escape(run.layout.data.text())}</p>')
    if run.claims:
        parts.append("<h3>Claims</h3>" + _claims(run) + note_html(C.CLAIMS_TABLE_NOTE))
    figures = run.layout.figures
    if figures:
        parts.append(_figures(run, figures[:KEY_FIGURES]))
    if len(figures) > KEY_FIGURES:
        rest = figures[KEY_FIGURES:]
        parts.append(
            f"<details><summary>{len(rest)} more figure{'s' if len(rest) > 1 else ''}</summary>"
            + _figures(run, rest)
            + "</details>"
        )
    parts += [_data_table(table) for table in run.layout.tables]
    parts.append("</section>")
    return "".join(parts)


def _claims(run: RunSummary) -> str:
    """The claims as a table of claim, published, ours and verdict; the source, rule and seeds
    of each fold out under its statement."""
    rows = []
    for claim, row in zip(run.claims, C.claim_rows(run), strict=True):
        statement, source, published, ours, rule, seeds, verdict = row
        how = (
            f"<details><summary>how it was decided</summary><p><b>source</b> "
            f"{html.escape(source)}</p><p><b>rule</b> {html.escape(rule)}</p>"
            f"<p><b>seeds</b> {html.escape(seeds)}</p></details>"
        )
        cells = [html.escape(statement) + how, *map(html.escape, (published, ours, verdict))]
        css = _verdict_class(_shown(run, claim.verdict))
        rows.append(f'<tr class="{css}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in CLAIM_HEADER)
    return (
        f'<div class="scroll"><table class="claims"><thead><tr>{head}</tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table></div>"
    )


def _figures(run: RunSummary, figures: Sequence[Figure]) -> str:
    shown = []
    for figure in figures:
        data = base64.b64encode(figure.path.read_bytes()).decode()
        caption = html.escape(C.figure_caption(run, figure.caption))
        shown.append(
            f'<figure><img alt="{caption}" src="data:image/png;base64,{data}">'
            f"<figcaption>{caption}</figcaption></figure>"
        )
    return '<div class="figures">' + "".join(shown) + "</div>"


def _data_table(table: Table) -> str:
    """A study's table, folded: its caption and row count open it."""
    if not table.header:
        return f"<p>{html.escape(table.caption)}: {html.escape(table.file)} is empty.</p>"
    rows = f"{table.total} row{'s' if table.total != 1 else ''}"
    parts = [
        f"<details><summary>Table: {html.escape(table.caption)} ({rows})</summary>",
        html_table(list(table.header), [list(r) for r in table.rows]),
    ]
    if cut := C.cut_note(table):
        parts.append(f'<p class="columns">{html.escape(cut)}</p>')
    if table.columns:
        parts.append(note_html(C.column_notes(table.columns)))
    parts.append("</details>")
    return "".join(parts)


def _verdict_class(verdict: str) -> str:
    """The colour class of a verdict (a claim verdict; other words of an answer: none; a smoke
    run's: the neutral ``v-smoke``, never a reproduced green)."""
    if verdict == C.SMOKE_VERDICT:
        return "v-smoke"
    return f"v-{verdict.replace(' ', '-')}" if verdict in VERDICTS else ""


def _shown(run: RunSummary, verdict: str) -> str:
    """The verdict whose colour a row takes: a smoke run's are all :data:`C.SMOKE_VERDICT`."""
    return C.SMOKE_VERDICT if C.is_smoke(run) else verdict


def html_table(
    header: list[str],
    rows: list[list[str]],
    css_class: str = "",
    verdicts: Sequence[str] | None = None,
) -> str:
    """A table in a horizontally scrolling box (wide tables never clip); ``verdicts`` colour
    the rows."""
    parts = [f'<div class="scroll"><table class="{css_class}"><thead><tr>']
    parts += [f"<th>{html.escape(str(h))}</th>" for h in header]
    parts.append("</tr></thead><tbody>")
    for i, row in enumerate(rows):
        css = _verdict_class(verdicts[i]) if verdicts else ""
        parts.append(f'<tr class="{css}">' if css else "<tr>")
        parts.append("".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>")
    parts.append("</tbody></table></div>")
    return "".join(parts)


def note_html(markdown: str) -> str:
    """A column explanation (``**name** text; …``) as an HTML paragraph."""
    parts = html.escape(markdown).split("**")
    text = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
    return f'<p class="columns">{text}</p>'


def _code_spans(markdown: str) -> str:
    """A line with Markdown code spans (```cmd```) as HTML."""
    parts = html.escape(markdown).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))

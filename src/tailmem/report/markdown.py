"""``report.md``: the report's content (:mod:`tailmem.report.content`) as Markdown, figures
linked by their path relative to the results folder."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tailmem.mdtable import md_table
from tailmem.report import content as C
from tailmem.report.reader import Results, RunSummary


def render_markdown(
    results: Results, root: Path, folder: Path | None, questions: Mapping[str, str]
) -> str:
    """The whole report; ``root`` is where it is written (figure links are relative to it),
    ``folder`` the results folder (None for a report of one run), ``questions`` the headline
    question of each study that states answers (:func:`.content.unanswered`)."""
    out = ["# tailmem report", ""]
    out += [f"> **{p.banner()}**" for p in C.presets(results)]
    if warning := C.mixed_warning(results):
        out += [">", f"> **{warning}**"]
    out += ["", '<a id="answers"></a>', "", f"## {C.ANSWERS_TITLE}", ""]
    answered = C.answers(results)
    if answered:
        rows = [C.answer_row(r, a, results) for r, a in answered]
        out += [md_table(C.ANSWER_HEADER, rows), ""]
    out += [f"- {line}" for line in C.unanswered(results, folder, questions)]
    out += ["", "**Contents**", ""]
    out += [f"- [{title}](#{anchor})" for anchor, title in C.contents(results)]
    out += ["", '<a id="verdicts"></a>', "", f"## {C.VERDICTS_TITLE}", ""]
    for tally in C.tallies(results):
        counts = ", ".join(f"**{n}** {v}" for n, v in tally.text())
        out.append(f"- {tally.preset}: {counts} ({', '.join(tally.experiments)})")
    missing = C.unmeasured(results)
    out += [
        f"- not measured here: **{missing.not_run}** claims of experiments not in this folder, "
        f"**{missing.uncovered}** that no experiment measures yet",
        "",
        md_table(C.SUMMARY_HEADER, C.summary_rows(results)),
    ]
    if results.not_rendered:
        out += ["", '<a id="not-rendered"></a>', "", f"## {C.NOT_RENDERED_TITLE}", ""]
        out += [C.NOT_RENDERED_NOTE, ""]
        out += [f"- **{b.name}** not rendered: {b.reason}" for b in results.not_rendered]
    for run in results.runs:
        out += _section(run, results, root)
    out += ["", '<a id="uncovered"></a>', "", f"## {C.UNCOVERED_TITLE}", ""]
    out += [md_table(C.UNCOVERED_HEADER, C.uncovered_rows())]
    out += ["", '<a id="environment"></a>', "", f"## {C.ENVIRONMENT_TITLE}", ""]
    out += [md_table(C.ENV_HEADER, C.environment_rows(results)), ""]
    return "\n".join(out)


def _section(run: RunSummary, results: Results, root: Path) -> list[str]:
    out = ["", f'<a id="{C.anchor(run)}"></a>', "", f"## {C.section_title(run, results)}", ""]
    if not run.complete:
        out += [f"*{C.incomplete_note(run)}*", ""]
    if note := C.smoke_note(run):
        out += [f"> **{note}**", ""]
    if run.layout.summary:
        out += [run.layout.summary, ""]
    if run.layout.data is not None:
        out += [f"**Data**: {run.layout.data.text()}", ""]
    if run.claims:
        out += ["**Claims**", "", md_table(C.CLAIM_HEADER, C.claim_rows(run)), ""]
        out += [C.CLAIMS_TABLE_NOTE, ""]
    for figure in run.layout.figures:
        link = figure.path.relative_to(root).as_posix()
        caption = C.figure_caption(run, figure.caption)
        out += [f"![{caption}]({link})", "", f"*{caption}*", ""]
    for table in run.layout.tables:
        out += [f"**{table.caption}**", ""]
        if not table.header:
            out += [f"*{table.file} is empty.*", ""]
            continue
        out += [md_table(table.header, table.rows), ""]
        out += [f"*{cut}*", ""] if (cut := C.cut_note(table)) else []
        out += [C.column_notes(table.columns), ""] if table.columns else []
    return out

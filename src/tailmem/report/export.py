"""``tailmem export RUN``: one results table of a run folder, as LaTeX or CSV, for a paper.

The tables of a run are its claims (``claims``: each published claim, its source, the published
value, ours, the verdict and the seeds behind it, the registry's claims the run lacks as not
measured, as in the report), its headline answers (``answers``) and every CSV it wrote (by file
name, ``tail_table_plain.csv``, or stem). LaTeX gives the table as the report shows it (each
mean and SE pair merged into ``mean $\\pm$ SE``, long numbers shortened, every row), a
``booktabs`` table with its caption and a label; CSV gives every column and digit of the file
(the claims and answers as their fields), for a spreadsheet. A smoke run's caption says its
numbers are not evidence.

Only a finished run is exported: one that never completed, or whose files changed after it did
(a hash in ``COMPLETE`` no longer matches), is refused in one line, as is a name that is no
table of the run (the line lists the tables there are).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tailmem.errors import ConfigError, DataError
from tailmem.report.content import seeds_text
from tailmem.report.layout import read_layout, read_table
from tailmem.report.reader import RunSummary, read_run, require_run
from tailmem.rundir import RunDir

FORMATS = ("latex", "csv")
CLAIMS = "claims"
ANSWERS = "answers"
SMOKE_CAPTION = " (smoke preset: checks that the code runs; not evidence)"


@dataclass(frozen=True)
class ExportTable:
    """One table of a run: shown ``header``/``rows`` (LaTeX) and ``raw`` every field (CSV)."""

    name: str
    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    raw: str


def export(path: str | Path, table: str = CLAIMS, fmt: str = "latex") -> str:
    """The table ``table`` of the run folder ``path`` as ``fmt`` (module docstring)."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format: got {fmt!r}; expected one of: {', '.join(FORMATS)}")
    path = Path(path)
    require_run(path)
    run = read_run(path)
    if not run.complete:
        raise DataError(
            f"{path} is not a finished run ({run.incomplete}); expected a complete run: rerun it"
        )
    found = _table(run, table)
    if fmt == "csv":
        return found.raw
    return latex(found, label=f"tab:{run.experiment}-{found.name}")


def tables(run: RunSummary) -> list[str]:
    """The names of the tables of ``run``: claims, answers (where it states any), its CSVs."""
    names = [CLAIMS] + ([ANSWERS] if run.layout.answers else [])
    return names + [p.name for p in sorted(run.path.glob("*.csv"))]


def _table(run: RunSummary, name: str) -> ExportTable:
    smoke = SMOKE_CAPTION if run.preset.name == "smoke" else ""
    what = f"{run.experiment} ({run.preset.label})"
    if name == CLAIMS:
        header: tuple[str, ...] = ("claim", "source", "published", "ours", "verdict", "seeds")
        rows: tuple[tuple[str, ...], ...] = tuple(
            (f"{c.claim} ({c.id})", c.source, c.published, c.ours, c.verdict, seeds_text(c))
            for c in run.claims
        )
        caption = f"{what}: each published claim beside our measurement{smoke}"
        return ExportTable(CLAIMS, caption, header, rows, _csv(header, rows))
    if name == ANSWERS and run.layout.answers:
        header = ("question", "answer", "evidence", "verdict")
        rows = tuple((a.question, a.answer, a.evidence, a.verdict) for a in run.layout.answers)
        caption = f"{what}: the headline answers{smoke}"
        return ExportTable(ANSWERS, caption, header, rows, _csv(header, rows))
    file = name if name.endswith(".csv") else f"{name}.csv"
    listed = {t.file: t for t in read_layout(RunDir(run.path), run.experiment, None).tables}
    if file in listed:
        shown = listed[file]
    elif Path(file).name == file and _inside(run.path, run.path / file):
        shown = read_table(run.path / file, Path(file).stem.replace("_", " "), {}, None)
    else:
        raise ConfigError(
            f"--table: {run.path} has no table {name!r}; expected one of: {', '.join(tables(run))}"
        )
    if not shown.header:
        raise DataError(f"{run.path / file} is empty; expected a table with a header row")
    caption = f"{what}: {shown.caption}{smoke}"
    raw = (run.path / file).read_text(encoding="utf-8")
    return ExportTable(Path(file).stem, caption, shown.header, shown.rows, raw)


def _inside(root: Path, path: Path) -> bool:
    """A file of the run itself (not a link out of it)."""
    return path.is_file() and path.resolve().is_relative_to(root.resolve())


def _csv(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


# ------------------------------------------------------------------------------ LaTeX

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "—": "---",
    "–": "--",
    "…": r"\ldots{}",
    "“": "``",
    "”": "''",
    "’": "'",
}
_MATH = {
    "±": r"\pm",
    "×": r"\times",
    "÷": r"\div",
    "−": "-",
    "≥": r"\geq",
    "≤": r"\leq",
    "≈": r"\approx",
    "≍": r"\asymp",
    "→": r"\to",
    "·": r"\cdot",
    "√": r"\surd",
    "∞": r"\infty",
    "²": "^{2}",
    "³": "^{3}",
    **{
        letter: "\\" + name
        for letter, name in zip(
            "αβγδεζηθκλμνξπρστφχψωϱϵΔΣΩ",
            [
                "alpha", "beta", "gamma", "delta", "varepsilon", "zeta", "eta", "theta",
                "kappa", "lambda", "mu", "nu", "xi", "pi", "rho", "sigma", "tau", "varphi",
                "chi", "psi", "omega", "varrho", "epsilon", "Delta", "Sigma", "Omega",
            ],
            strict=True,
        )
    },
}  # fmt: skip
"""Symbols of tailmem's tables written in math mode (each ``$...$``)."""
LONG_CELL = 30
"""A column whose cells run longer than this many characters wraps (a ``p{}`` column)."""


def latex_escape(text: str) -> str:
    """``text`` as LaTeX source: its special characters escaped, its math symbols and Greek
    letters in math mode (``0.9 ± 0.01`` -> ``0.9 $\\pm$ 0.01``), so it compiles with pdfLaTeX."""
    out: list[str] = []
    math: list[str] = []  # a run of adjacent math symbols, written as one $...$ span
    for char in text:
        if char in _MATH:
            math.append(_MATH[char])
            continue
        if math:
            out.append("$" + " ".join(math) + "$")
            math = []
        out.append(_SPECIAL.get(char, char))
    if math:
        out.append("$" + " ".join(math) + "$")
    return "".join(out)


def latex(table: ExportTable, label: str) -> str:
    """``table`` as a ``booktabs`` LaTeX table (``\\usepackage{booktabs}``), with its caption and
    ``label``: numbers right-aligned, long text in wrapped columns sharing the line width."""
    width = len(table.header)
    lengths = [max([len(row[i]) for row in table.rows] + [0]) for i in range(width)]
    long = [i for i in range(width) if lengths[i] > LONG_CELL]
    total = sum(lengths[i] for i in long) or 1
    spec = []
    for i in range(width):
        if i in long:
            spec.append(f"p{{{max(0.7 * lengths[i] / total, 0.12):.2f}\\linewidth}}")
        else:
            numeric = all(_numeric(row[i]) for row in table.rows)
            spec.append("r" if numeric and table.rows else "l")
    lines = [
        "% tailmem export: needs \\usepackage{booktabs}",
        "\\begin{table}[htbp]",
        "\\centering",
        "\\small",
        f"\\caption{{{latex_escape(table.caption)}}}",
        f"\\label{{{re.sub(r'[^A-Za-z0-9:._-]+', '-', label)}}}",
        f"\\begin{{tabular}}{{{''.join(spec)}}}",
        "\\toprule",
        _row(table.header),
        "\\midrule",
        *(_row(row) for row in table.rows),
        "\\bottomrule",
        "\\end{tabular}",
        "\\end{table}",
    ]
    return "\n".join(lines) + "\n"


def _row(cells: Sequence[str]) -> str:
    return " & ".join(latex_escape(c) for c in cells) + r" \\"


_NUMBER = re.compile(r"^[-+−]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?( ± [-+]?[\d.eE+-]+)?$")


def _numeric(cell: str) -> bool:
    """A number, a ``mean ± SE`` or an empty/``—`` cell."""
    return cell.strip() in ("", "—") or bool(_NUMBER.match(cell.strip()))

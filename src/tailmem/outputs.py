"""What a run writes, declared as one value, and the one writer that turns it into files.

A study computes typed results, then a pure function of them and its config returns
:class:`Outputs`: the tables (rows, with the caption and column notes that show a table in the
report), the figures (with their captions), the JSON records (``results.json``), the claims and
the report's text and answers. :func:`write` is the only code that makes files of it, all
through :class:`~tailmem.rundir.RunDir` (atomic, recorded in the manifest), and
``report.json`` is written from the same values the report reads back
(:mod:`tailmem.report.layout`)::

    outputs = Outputs(
        tables=(Table("rho.csv", records(rows), "ρ per K", column_docs(Row)),),
        figures=(Figure("rho_vs_k", fig, "ρ against K"),),
        records={"results.json": {"rho": rho}},
        claims=tuple(claims),
        report=Report("One-step balance", summary),
    )
    write(run, outputs)

The report shows the tables and figures that have a caption, in the order declared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from tailmem.plotting import keep_legends_clear, mark_smoke
from tailmem.rundir import RunDir

if TYPE_CHECKING:
    from matplotlib.figure import Figure as PlotFigure

    from tailmem.claims.core import ClaimResult


@dataclass(frozen=True)
class Answer:
    """One headline question of a study: the answer in words, the number behind it and the
    study's verdict (a claim verdict such as ``reproduced``, or words such as ``faster``)."""

    question: str
    answer: str
    evidence: str
    verdict: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Table:
    """A CSV of the run (``name``), its ``rows`` as records (:func:`tailmem.columns.records`);
    shown in the report when it has a ``caption``, with ``columns`` explaining its headers and
    ``mean_se`` merging a mean and its SE column into one shown column."""

    name: str
    rows: Sequence[Mapping[str, Any]]
    caption: str | None = None
    columns: Mapping[str, str] = field(default_factory=dict)
    mean_se: Mapping[str, Sequence[str]] | None = None

    def entry(self) -> dict[str, object]:
        """Its ``report.json`` entry."""
        out: dict[str, object] = {"file": self.name, "caption": self.caption}
        if self.columns:
            out["columns"] = dict(self.columns)
        if self.mean_se is not None:
            out["mean_se"] = {shown: list(pair) for shown, pair in self.mean_se.items()}
        return out


@dataclass(frozen=True)
class Figure:
    """A matplotlib figure saved as ``stem.png`` and ``stem.svg``; shown in the report when it
    has a ``caption``."""

    stem: str
    figure: PlotFigure
    caption: str | None = None

    def entry(self) -> dict[str, str | None]:
        """Its ``report.json`` entry."""
        return {"file": f"{self.stem}.png", "caption": self.caption}


@dataclass(frozen=True)
class Report:
    """The report's text of a run: ``title``, one Markdown ``summary`` paragraph, the headline
    ``answers`` and the ``data`` it trained on (``corpus``, token counts, ``tokenizer``)."""

    title: str
    summary: str
    answers: tuple[Answer, ...] = ()
    data: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Outputs:
    """Everything a run writes (see the module docstring); ``claims`` None writes no
    ``claims.json``, ``report`` None no ``report.json``."""

    tables: tuple[Table, ...] = ()
    figures: tuple[Figure, ...] = ()
    records: Mapping[str, Any] = field(default_factory=dict)
    claims: tuple[ClaimResult, ...] | None = None
    report: Report | None = None

    def __add__(self, other: Outputs) -> Outputs:
        """Both runs' files (``other``'s claims and report where it has them)."""
        return Outputs(
            self.tables + other.tables,
            self.figures + other.figures,
            {**self.records, **other.records},
            other.claims if other.claims is not None else self.claims,
            other.report if other.report is not None else self.report,
        )

    def layout(self) -> dict[str, object]:
        """``report.json``: the report's text, then the figures and tables with a caption."""
        assert self.report is not None
        out: dict[str, object] = {"title": self.report.title, "summary": self.report.summary}
        if self.report.answers:
            out["answers"] = [a.to_json() for a in self.report.answers]
        out["figures"] = [f.entry() for f in self.figures if f.caption is not None]
        out["tables"] = [t.entry() for t in self.tables if t.caption is not None]
        if self.report.data is not None:
            out["data"] = dict(self.report.data)
        return out


def write(run: RunDir, outputs: Outputs) -> None:
    """Write ``outputs`` into ``run``: every table, figure (closed once saved) and record, then
    ``claims.json`` and ``report.json``; the one place a study's results become files. A figure
    whose legend covers another of its panels is laid out again
    (:func:`~tailmem.plotting.keep_legends_clear`). A run at the smoke preset (its
    ``config.yaml`` says so) marks every figure as such (:func:`~tailmem.plotting.mark_smoke`):
    a smoke figure is no evidence wherever it is shown."""
    for table in outputs.tables:
        run.write_csv(table.name, table.rows)
    smoke = run.file("config.yaml").is_file() and run.read_config().get("preset") == "smoke"
    for figure in outputs.figures:
        keep_legends_clear(figure.figure)
        if smoke:
            mark_smoke(figure.figure)
        run.save_figure(figure.figure, figure.stem)
    for name, record in outputs.records.items():
        run.write_json(name, record)
    if outputs.claims is not None:
        ids = [claim.id for claim in outputs.claims]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"duplicate claim ids: {', '.join(repeated)}")
        run.write_json("claims.json", [asdict(claim) for claim in outputs.claims])
    if outputs.report is not None:
        run.write_json("report.json", outputs.layout())

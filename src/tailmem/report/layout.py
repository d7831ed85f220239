"""``report.json``: what a study chooses to show in the report, read and checked.

A study may write ``report.json`` beside its results; every key is optional::

    {"title": "...",
     "summary": "one Markdown paragraph",
     "answers": [{"question": "...", "answer": "...", "evidence": "...", "verdict": "..."}],
     "figures": [{"file": "rho_vs_k.png", "caption": "..."}],
     "tables": [{"file": "rho.csv", "caption": "...", "columns": {"name": "what it means"},
                 "mean_se": {"shown name": ["mean column", "SE column"]}}],
     "data": {"corpus": "...", "train_tokens": N, "val_tokens": N, "tokenizer": "..."}}

- ``answers``: the study's headline questions, each answered in words (``answer``), with the
  number behind it (``evidence``) and its ``verdict`` (the study's own word for the outcome:
  a claim verdict such as ``reproduced``, or words such as ``faster``/``equivalent``). All four
  are required, non-empty text, nothing else; the report states them on its first screen.
- ``figures``: PNG files of the run with captions; without the key, every PNG of the run is
  shown.
- ``tables``: CSV files of the run with captions; ``columns`` explains headers (a name that is
  neither a column of the CSV's header nor a shown ``mean_se`` name is a stale note, refused);
  ``mean_se`` shows a mean column and its standard-error column as one column ``mean ± SE``
  under the shown name (placed where the mean column is; its note its own, else the mean
  column's), so a study's CSV keeps numbers in numeric columns while the report reads as the
  paper's tables do.
- ``data`` names the data a study trained on (printed under the summary, so a loss beside a
  published one says what it was measured on).

Every file named must be a file inside the run (no ``../``, no symbolic link out of it), so the
report never embeds a file from elsewhere. Anything that does not fit is a one-line
:class:`~tailmem.errors.DataError` naming the file and what was expected.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailmem.errors import DataError
from tailmem.outputs import Answer
from tailmem.rundir import RunDir

MAX_TABLE_ROWS = 40
"""A table shows at most this many rows; the CSV beside the report has them all."""
LAYOUT_KEYS = ("title", "summary", "answers", "figures", "tables", "data")
"""The keys ``report.json`` may hold."""
ENTRY_KEYS = {"figures": ("file", "caption"), "tables": ("file", "caption", "columns", "mean_se")}
"""The keys each ``report.json`` figure or table entry may hold."""
ANSWER_KEYS = ("question", "answer", "evidence", "verdict")
"""The keys of each answer, every one required."""
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Figure:
    """A PNG of the run and its caption."""

    path: Path
    caption: str


@dataclass(frozen=True)
class Table:
    """One ``report.json`` table, read: its shown ``header`` (``mean_se`` pairs merged) and at
    most :data:`MAX_TABLE_ROWS` ``rows`` (numbers shortened for reading); ``total`` the data
    rows of ``file``."""

    file: str
    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    total: int
    columns: dict[str, str]


@dataclass(frozen=True)
class Data:
    """The data a study trained on (``report.json`` ``data``)."""

    corpus: str
    train_tokens: int | None
    val_tokens: int | None
    tokenizer: str

    def text(self) -> str:
        """The corpus, token counts and tokenizer in one line."""
        parts = [self.corpus]
        tokens = [
            f"{count:,} {label} tokens"
            for count, label in ((self.train_tokens, "training"), (self.val_tokens, "validation"))
            if count is not None
        ]
        if tokens:
            parts.append(", ".join(tokens))
        if self.tokenizer:
            parts.append(f"tokenizer: {self.tokenizer}")
        return "; ".join(parts)


@dataclass(frozen=True)
class Layout:
    """A run's ``report.json``, checked, with its figures and tables read (an empty layout where
    the run has none: its title is the experiment's name and every PNG is shown)."""

    title: str
    summary: str
    answers: tuple[Answer, ...]
    figures: tuple[Figure, ...]
    tables: tuple[Table, ...]
    data: Data | None


def read_layout(run: RunDir, experiment: str, max_rows: int | None = MAX_TABLE_ROWS) -> Layout:
    """``report.json`` of ``run`` (an experiment of ``experiment``), every key and entry
    checked; without the file, the experiment's name and every PNG of the run. Each table keeps
    its first ``max_rows`` rows (None: every row)."""
    source = run.file("report.json")
    raw: Any = run.read_json("report.json") if source.is_file() else {}
    if not isinstance(raw, dict):
        raise DataError(f"{source}: expected a JSON object")
    unknown = [key for key in raw if key not in LAYOUT_KEYS]
    if unknown:
        raise DataError(
            f"{source}: unknown key {unknown[0]!r}; expected only {', '.join(LAYOUT_KEYS)}"
        )
    for key in ("title", "summary"):
        if not isinstance(raw.get(key, ""), str):
            raise DataError(f"{source}: {key!r} must be text")
    return Layout(
        title=raw.get("title") or experiment,
        summary=raw.get("summary", ""),
        answers=_answers(source, raw.get("answers", [])),
        figures=_figures(run, raw),
        tables=_tables(run, raw, max_rows),
        data=_data(source, raw["data"]) if "data" in raw else None,
    )


def _answers(source: Path, listed: object) -> tuple[Answer, ...]:
    """``answers``: a list of objects with exactly :data:`ANSWER_KEYS`, each non-empty text."""
    expected = "expected {" + ", ".join(f"'{k}': TEXT" for k in ANSWER_KEYS) + "}"
    if not isinstance(listed, list):
        raise DataError(f"{source}: 'answers' must be a list of answers; {expected}")
    found = []
    for i, item in enumerate(listed):
        if not isinstance(item, dict):
            raise DataError(f"{source}: answers[{i}] is {item!r}; {expected}")
        unknown = [key for key in item if key not in ANSWER_KEYS]
        missing = [key for key in ANSWER_KEYS if key not in item]
        if unknown or missing:
            what = f"unknown key {unknown[0]!r}" if unknown else f"no {missing[0]!r}"
            raise DataError(f"{source}: answers[{i}] has {what}; {expected}")
        for key in ANSWER_KEYS:
            if not isinstance(item[key], str) or not item[key].strip():
                raise DataError(
                    f"{source}: answers[{i}] {key!r} is {item[key]!r}; expected non-empty text"
                )
        found.append(Answer(**{key: item[key] for key in ANSWER_KEYS}))
    return tuple(found)


def _data(source: Path, data: object) -> Data:
    """``data``: a corpus named in text, whole token counts (other keys, such as a
    fingerprint, are provenance kept in the file)."""
    if not isinstance(data, dict) or not isinstance(data.get("corpus"), str):
        raise DataError(f"{source}: 'data' must be an object naming its 'corpus' in text")
    if not isinstance(data.get("tokenizer", ""), str):
        raise DataError(f"{source}: data 'tokenizer' is {data['tokenizer']!r}; expected text")
    for key in ("train_tokens", "val_tokens"):
        count = data.get(key, 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise DataError(f"{source}: data {key!r} is {count!r}; expected a whole number ≥ 0")
    return Data(
        data["corpus"], data.get("train_tokens"), data.get("val_tokens"), data.get("tokenizer", "")
    )


def _entries(
    run: RunDir, raw: dict[str, Any], kind: str
) -> list[tuple[Path, str, dict[str, Any]]] | None:
    """The ``(file, caption, entry)`` of ``report.json``'s ``kind`` list (None: no such list).

    Every entry must be ``{"file": NAME, "caption": TEXT}`` (tables may add ``columns`` and
    ``mean_se``) with NAME a file inside the run directory: a damaged entry, or one pointing
    elsewhere (``/etc/passwd``, ``../x``, a symlink out of the run), is a :class:`DataError`.
    """
    listed = raw.get(kind)
    if listed is None:
        return None
    source = run.file("report.json")
    if not isinstance(listed, list):
        raise DataError(f"{source}: {kind!r} must be a list of {{file, caption}} entries")
    root = run.path.resolve()
    entries = []
    for i, item in enumerate(listed):
        name = item.get("file") if isinstance(item, dict) else None
        caption = item.get("caption") if isinstance(item, dict) else None
        if not isinstance(name, str) or not isinstance(caption, (str, type(None))):
            raise DataError(
                f"{source}: {kind}[{i}] is {item!r}; expected {{'file': NAME, 'caption': TEXT}}"
            )
        unknown = [key for key in item if key not in ENTRY_KEYS[kind]]
        if unknown:
            raise DataError(
                f"{source}: {kind}[{i}] has unknown key {unknown[0]!r}; expected only "
                f"{', '.join(ENTRY_KEYS[kind])}"
            )
        path = run.file(name)
        if not path.resolve().is_relative_to(root):
            raise DataError(
                f"{source}: {kind}[{i}] points at {name!r}, outside the run directory; "
                "expected a file of the run"
            )
        if not path.is_file():
            raise DataError(f"{path} is listed in report.json but missing; rerun the experiment")
        entries.append((path, caption or path.stem, item))
    return entries


def _figures(run: RunDir, raw: dict[str, Any]) -> tuple[Figure, ...]:
    """The figures to embed: report.json's, or every PNG of the run; each must be a PNG image
    (the HTML embeds it as one)."""
    listed = _entries(run, raw, "figures")
    if listed is None:
        root = run.path.resolve()
        found = sorted(run.path.glob("*.png"))
        figures = [
            Figure(p, p.stem.replace("_", " ")) for p in found if p.resolve().is_relative_to(root)
        ]
    else:
        figures = [Figure(path, caption) for path, caption, _ in listed]
    for figure in figures:
        with open(figure.path, "rb") as handle:
            if handle.read(len(PNG_SIGNATURE)) != PNG_SIGNATURE:
                raise DataError(
                    f"{figure.path} is not a PNG image; expected the figure the run saved"
                )
    return tuple(figures)


def _tables(run: RunDir, raw: dict[str, Any], max_rows: int | None) -> tuple[Table, ...]:
    """Each table ``report.json`` lists, read and checked (:func:`read_table`)."""
    return tuple(
        read_table(path, caption, item, max_rows)
        for path, caption, item in _entries(run, raw, "tables") or []
    )


def read_table(
    path: Path, caption: str, item: dict[str, Any], max_rows: int | None = MAX_TABLE_ROWS
) -> Table:
    """A CSV of a run as the report shows it, checked (CSV text, every row as wide as the
    header; ``item``, its ``report.json`` entry: ``columns`` mapping names of the header or of
    ``mean_se`` to text, ``mean_se`` pairing columns of the header), its first ``max_rows``
    rows (None: every row)."""
    try:
        rows = list(csv.reader(io.StringIO(path.read_text())))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{path} is a table of the run but is not CSV text ({exc})") from None
    header, *body = rows or [[]]
    for i, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise DataError(
                f"{path}: line {i} has {len(row)} cells; expected {len(header)}, as the header"
            )
    columns = item.get("columns", {})
    if not isinstance(columns, dict) or not all(isinstance(v, str) for v in columns.values()):
        raise DataError(f"{path}: report.json 'columns' must map column names to text")
    pairs = _mean_se(path, header, item.get("mean_se", {}))
    stale = [name for name in columns if name not in header and name not in pairs]
    if header and stale:  # an empty CSV (a table of no rows) has no header to check against
        raise DataError(
            f"{path}: report.json 'columns' documents {', '.join(map(repr, stale))}, which is "
            f"not a column of the table; expected names from its header ({', '.join(header)})"
        )
    shown, cells = _merged(header, body[:max_rows], pairs)
    return Table(path.name, caption, shown, cells, len(body), _notes(columns, shown, pairs))


def _notes(
    columns: dict[str, str], shown: tuple[str, ...], pairs: dict[str, tuple[str, str]]
) -> dict[str, str]:
    """The notes of the shown columns: a merged ``mean ± SE`` column's is its own note, else its
    mean column's; an SE column merged away has none."""
    merged_into = {mean: name for name, (mean, _) in pairs.items()}
    notes: dict[str, str] = {}
    for name, text in columns.items():
        target = merged_into.get(name, name)
        if target in shown and (name == target or target not in columns):
            notes[target] = text
    return notes


def _mean_se(path: Path, header: list[str], pairs: object) -> dict[str, tuple[str, str]]:
    """A table's ``mean_se`` checked: shown names mapping to two distinct header columns, each
    column in one pair at most."""
    expected = "expected {'shown name': ['mean column', 'SE column']} with columns of its header"
    if not isinstance(pairs, dict):
        raise DataError(f"{path}: report.json 'mean_se' is {pairs!r}; {expected}")
    used: set[str] = set()
    out = {}
    for name, pair in pairs.items():
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(isinstance(c, str) and c in header for c in pair)
            or pair[0] == pair[1]
            or used & set(pair)
        ):
            raise DataError(f"{path}: report.json 'mean_se' {name!r} is {pair!r}; {expected}")
        used.update(pair)
        out[name] = (pair[0], pair[1])
    return out


def _merged(
    header: list[str], body: list[list[str]], pairs: dict[str, tuple[str, str]]
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """The shown header and rows: each ``mean_se`` pair one column ``mean ± SE`` where its mean
    column stood, its SE column dropped; every number shortened for reading."""
    by_mean = {mean: (name, se) for name, (mean, se) in pairs.items()}
    dropped = {se for _, se in pairs.values()}
    index = {name: i for i, name in enumerate(header)}
    shown = tuple(by_mean[c][0] if c in by_mean else c for c in header if c not in dropped)
    rows = []
    for row in body:
        cells = []
        for column, cell in zip(header, row, strict=True):
            if column in dropped:
                continue
            if column in by_mean:
                cell = _mean_se_text(cell, row[index[by_mean[column][1]]])
            else:
                cell = readable_number(cell)
            cells.append(cell)
        rows.append(tuple(cells))
    return shown, tuple(rows)


def _mean_se_text(mean: str, se: str) -> str:
    """``mean ± SE`` (the mean alone where the SE is empty; ``—`` where the mean is)."""
    if not mean.strip():
        return "—"
    shown = readable_number(mean)
    return shown if not se.strip() else f"{shown} ± {readable_number(se)}"


def readable_number(cell: str) -> str:
    """A long float (``-0.9438772991412437``) shortened to 4 significant digits for reading;
    other cells as they are (the CSV next to the report keeps every digit)."""
    try:
        value = float(cell)
    except ValueError:
        return cell
    digits = sum(ch.isdigit() for ch in cell.split("e")[0].lstrip("-0."))
    if digits <= 5 or "." not in cell:
        return cell
    return f"{value:#.4g}" if abs(value) < 1e4 else f"{value:.0f}"

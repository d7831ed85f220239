"""Table rows as frozen dataclasses whose fields carry their column documentation.

A study's table is a list of rows of one dataclass; each field is declared with :func:`column`,
so a column cannot exist without its explanation, and the report's column notes come from the
same place as the CSV's header (:func:`column_docs`)::

    @dataclass(frozen=True)
    class Row:
        optimizer: str = column("the optimiser on the hidden matrices")
        lag: float | None = column("exposures it needs ÷ Muon's", None)

    rows = [Row("adam", 1.9)]
    Table("board.csv", records(rows), "The board", column_docs(Row))   # tailmem.outputs
    # the CSV header is the fields' names; the report's column notes their docs

A header that is no Python name (``"lag τ 0.5"``, ``"lag_0.5"``) is given as ``name``:
``lag_05: str = column("the lag at τ 0.5", name="lag τ 0.5")``.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable
from typing import Any

DOC = "doc"
"""The field-metadata key holding a column's explanation."""
NAME = "name"
"""The field-metadata key holding a column's header where it is not the field's name."""
_MISSING: Any = dataclasses.MISSING
CellValue = str | int | float | bool | None
"""A CSV cell's value: the type of a record built by hand where its columns depend on the run
(one per frequency group, per arm, per τ) and no row class can name them."""


def column(doc: str, default: Any = _MISSING, name: str | None = None) -> Any:
    """A documented column (a dataclass field), required unless ``default`` is given; headed
    ``name`` in the CSV and the report where given, else by the field's name."""
    metadata = {DOC: doc} if name is None else {DOC: doc, NAME: name}
    if default is _MISSING:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def header(spec: dataclasses.Field[Any]) -> str:
    """The column's header: its ``name`` (:func:`column`) or the field's name."""
    return str(spec.metadata.get(NAME, spec.name))


def column_docs(cls: type) -> dict[str, str]:
    """Every column of the row class ``cls`` with its explanation, in field order; a field
    declared without :func:`column` is a TypeError naming it. A field whose type is itself a row
    class stands for that row's columns, headed by the field's header followed by each of
    theirs; its own explanation is that of the inner column headed ``""`` (its value)."""
    out = {}
    hints = typing.get_type_hints(cls)
    for spec in dataclasses.fields(cls):
        if DOC not in spec.metadata:
            raise TypeError(f"{cls.__qualname__}.{spec.name} has no column documentation")
        doc, inner = str(spec.metadata[DOC]), hints[spec.name]
        if not (isinstance(inner, type) and dataclasses.is_dataclass(inner)):
            out[header(spec)] = doc
            continue
        for suffix, text in column_docs(inner).items():
            out[header(spec) + suffix] = text if suffix else doc
    return out


def records(rows: Iterable[Any]) -> list[dict[str, Any]]:
    """The rows as CSV records (header → value; tuples as space-separated text; a field holding
    a row spread into that row's columns, as :func:`column_docs` heads them)."""
    return [_record(row) for row in rows]


def _record(row: Any, prefix: str = "") -> dict[str, Any]:
    record: dict[str, Any] = {}
    for spec in dataclasses.fields(row):
        value = getattr(row, spec.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            record |= _record(value, prefix + header(spec))
        else:
            shown = " ".join(map(str, value)) if isinstance(value, tuple) else value
            record[prefix + header(spec)] = shown
    return record

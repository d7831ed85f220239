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
``lag_05: str = column("the lag at τ 0.5", name="lag τ 0.5")``. A field holding one value per
item of something the config sizes (a value per frequency group) is spread over one column per
item, headed by ``each`` (``{}``: the item's position counted from ``first``, or its key where
the field is a mapping): ``times: tuple[float, ...] = column("steps to halve", each="group_{}")``;
its columns' notes then need the rows (:func:`column_docs`). A row's field whose type is a row
stands for that row's columns, each headed by the field's header followed by its own (or, where
its own holds ``{}``, with the field's header put there).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

DOC = "doc"
"""The field-metadata key holding a column's explanation."""
NAME = "name"
"""The field-metadata key holding a column's header where it is not the field's name."""
EACH = "each"
"""The field-metadata key holding the header pattern of a field spread over one column per
item, with ``first``, the position its first item is counted as."""
_MISSING: Any = dataclasses.MISSING


def column(
    doc: str, default: Any = _MISSING, name: str | None = None, each: str | None = None,
    first: int = 0,
) -> Any:  # fmt: skip
    """A documented column (a dataclass field), required unless ``default`` is given; headed
    ``name`` in the CSV and the report where given, else by the field's name; with ``each``, a
    tuple (or mapping) spread over one column per item (module docstring)."""
    metadata: dict[str, Any] = {DOC: doc}
    if name is not None:
        metadata[NAME] = name
    if each is not None:
        if "{}" not in each:
            raise ValueError(f"each: got {each!r}; expected a header pattern holding {{}}")
        metadata[EACH] = (each, first)
    if default is _MISSING:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def header(spec: dataclasses.Field[Any]) -> str:
    """The column's header: its ``name`` (:func:`column`) or the field's name."""
    return str(spec.metadata.get(NAME, spec.name))


def column_docs(cls: type, rows: Sequence[Any] = ()) -> dict[str, str]:
    """Every column of the row class ``cls`` with its explanation, in field order; a field
    declared without :func:`column` is a TypeError naming it. A field whose type is itself a row
    class stands for that row's columns, headed by the field's header followed by each of
    theirs; its own explanation is that of the inner column headed ``""`` (its value). A field
    spread over its items (``each``; an item may be a row, spread as above) stands for the
    columns of the items of ``rows``' first row (none without rows)."""
    out: dict[str, str] = {}
    hints = typing.get_type_hints(cls)
    for spec in dataclasses.fields(cls):
        if DOC not in spec.metadata:
            raise TypeError(f"{cls.__qualname__}.{spec.name} has no column documentation")
        doc, inner = str(spec.metadata[DOC]), hints[spec.name]
        if EACH in spec.metadata:
            items = _spread(spec, getattr(rows[0], spec.name)) if rows else {}
            for key, item in items.items():
                inner_docs = column_docs(type(item)) if _is_row(item) else {"": doc}
                out |= {_joined(key, suffix): text if suffix else doc
                        for suffix, text in inner_docs.items()}  # fmt: skip
            continue
        if not (isinstance(inner, type) and dataclasses.is_dataclass(inner)):
            out[header(spec)] = doc
            continue
        for suffix, text in column_docs(inner).items():
            out[_joined(header(spec), suffix)] = text if suffix else doc
    return out


def records(rows: Iterable[Any]) -> list[dict[str, Any]]:
    """The rows as CSV records (header → value; tuples as space-separated text; a field holding
    a row spread into that row's columns, as :func:`column_docs` heads them)."""
    return [_record(row) for row in rows]


def _record(row: Any, prefix: str = "") -> dict[str, Any]:
    record: dict[str, Any] = {}
    for spec in dataclasses.fields(row):
        value = getattr(row, spec.name)
        if EACH in spec.metadata:
            for key, item in _spread(spec, value).items():
                where = _joined(prefix, key)
                record |= _record(item, where) if _is_row(item) else {where: item}
        elif _is_row(value):
            record |= _record(value, _joined(prefix, header(spec)))
        else:
            shown = " ".join(map(str, value)) if isinstance(value, tuple) else value
            record[_joined(prefix, header(spec))] = shown
    return record


def _spread(spec: dataclasses.Field[Any], value: Any) -> dict[str, Any]:
    """A spread field's value by header: a mapping's items by key, a tuple's by position."""
    pattern, first = spec.metadata[EACH]
    pairs = value.items() if isinstance(value, Mapping) else enumerate(value, start=first)
    return {pattern.format(key): item for key, item in pairs}


def _is_row(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _joined(outer: str, inner: str) -> str:
    """An inner column's header under the outer header: the outer one followed by the inner
    one, or put in its ``{}`` (``"paper {}"`` under ``"Muon"``: ``"paper Muon"``)."""
    return inner.replace("{}", outer) if "{}" in inner and outer else outer + inner

"""Typed table rows (tailmem.columns): every column documented, headers that are no Python
name given as ``name``, and the CSV written in field order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from tailmem.columns import column, column_docs, records
from tailmem.outputs import Outputs, Table, write
from tailmem.rundir import RunDir


@dataclass(frozen=True)
class Row:
    arm: str = column("the arm")
    lag_05: float | None = column("the lag at τ 0.5", None, name="lag τ 0.5")
    seeds: tuple[int, ...] = column("the seeds", ())


def test_a_named_column_heads_the_csv_and_its_doc_in_field_order(tmp_path):
    rows = [Row("muon", 1.5, (0, 1)), Row("adam")]
    assert records(rows) == [
        {"arm": "muon", "lag τ 0.5": 1.5, "seeds": "0 1"},
        {"arm": "adam", "lag τ 0.5": None, "seeds": ""},
    ]
    assert list(column_docs(Row).items()) == [
        ("arm", "the arm"), ("lag τ 0.5", "the lag at τ 0.5"), ("seeds", "the seeds")
    ]  # fmt: skip
    write(RunDir(tmp_path), Outputs(tables=(Table("t.csv", records(rows)),)))
    assert (tmp_path / "t.csv").read_text() == "arm,lag τ 0.5,seeds\nmuon,1.5,0 1\nadam,,\n"


def test_a_field_without_documentation_is_refused():
    @dataclass(frozen=True)
    class Bare:
        arm: str

    with pytest.raises(TypeError, match=r"Bare\.arm has no column documentation"):
        column_docs(Bare)


@dataclass(frozen=True)
class _Cells:
    value: float = column("inner value doc", name="")
    low: float = column("its low end", name="_lo")


@dataclass(frozen=True)
class _Lagged:
    name: str = column("the name")
    lag: _Cells = column("the lag at 0.5", name="lag_0.5")


def test_a_field_holding_a_row_spreads_into_that_rows_columns():
    """A row type as a field's type: its columns headed by the field's header plus theirs, the
    value column (headed "") explained by the field's own doc."""
    assert column_docs(_Lagged) == {"name": "the name", "lag_0.5": "the lag at 0.5",
                                    "lag_0.5_lo": "its low end"}  # fmt: skip
    assert records([_Lagged("a", _Cells(1.5, 1.0))]) == [{"name": "a", "lag_0.5": 1.5,
                                                          "lag_0.5_lo": 1.0}]  # fmt: skip


@dataclass(frozen=True)
class _PerGroup:
    arm: str = column("the arm")
    times: tuple[int | None, ...] = column("steps to halve the group's loss", each="group_{}",
                                           first=1)  # fmt: skip
    by_arm: Mapping[str, float] = column("the lag behind that arm", each="lag vs {}")


def test_a_field_spread_over_its_items_heads_one_column_per_item():
    """The number of items is the config's (groups, arms): one column per item, headed by the
    pattern, each explained by the field's doc, read off the rows."""
    rows = [_PerGroup("muon", (3, None), {"adam": 1.5}), _PerGroup("adam", (5, 9), {"adam": 1.0})]
    assert records(rows) == [
        {"arm": "muon", "group_1": 3, "group_2": None, "lag vs adam": 1.5},
        {"arm": "adam", "group_1": 5, "group_2": 9, "lag vs adam": 1.0},
    ]
    docs = column_docs(_PerGroup, rows)
    assert list(docs) == ["arm", "group_1", "group_2", "lag vs adam"]
    assert docs["group_2"] == "steps to halve the group's loss"
    assert list(column_docs(_PerGroup)) == ["arm"]  # no rows, no items to head
    with pytest.raises(ValueError, match="expected a header pattern"):
        column("doc", each="group")


@dataclass(frozen=True)
class _Cells2:
    value: float = column("unused: the field's doc explains the value", name="")
    low: float = column("its low end", name="_lo")


@dataclass(frozen=True)
class _PerTau:
    ratios: Mapping[str, _Cells2] = column("the lag at the suffix's τ", each="lag_{}")


def test_items_that_are_rows_spread_into_their_columns_under_the_items_header():
    rows = [_PerTau({"0.3": _Cells2(1.2, 1.0), "0.5": _Cells2(1.5, 1.1)})]
    assert records(rows) == [{"lag_0.3": 1.2, "lag_0.3_lo": 1.0, "lag_0.5": 1.5, "lag_0.5_lo": 1.1}]
    assert column_docs(_PerTau, rows) == {
        "lag_0.3": "the lag at the suffix's τ", "lag_0.3_lo": "its low end",
        "lag_0.5": "the lag at the suffix's τ", "lag_0.5_lo": "its low end",
    }  # fmt: skip

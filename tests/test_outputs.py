"""The one writer: a run's outputs declared as a value, written by tailmem.outputs.write, and
read back by the report as the same values."""

from __future__ import annotations

import json
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from tailmem.claims.core import ClaimResult
from tailmem.claims.registry import claims_of, read_claims
from tailmem.outputs import Answer, Figure, Outputs, Report, Table, write
from tailmem.plotting import SMOKE_MARK
from tailmem.report.layout import read_layout
from tailmem.rundir import RunDir


def _figure() -> Figure:
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    return Figure("curve", fig, "a falling line")


CLAIM = claims_of("assoc-capacity")[0]
CLAIM_ID = CLAIM.id if CLAIM.variant is None else f"{CLAIM.id}.{CLAIM.variant}"


def _claim(claim_id: str = CLAIM_ID) -> ClaimResult:
    return ClaimResult(claim_id, "s", "src", "pub", "0.5", "rule", "reproduced", seeds=[0, 1, 2])


def test_every_declared_file_is_written_and_the_report_reads_back_what_was_declared(tmp_path):
    answer = Answer("Is the tail learned?", "yes", "FTA 0.9 vs 0.5", "faster")
    shown = Table("rho.csv", [{"k": 10, "rho mean": 0.25, "rho SE": 0.01}], "ρ per K",
                  {"k": "facts"}, {"ρ": ["rho mean", "rho SE"]})  # fmt: skip
    hidden = Table("all.csv", [{"k": 10, "x": 1}, {"k": 20, "y": 2}])
    figure = _figure()
    outputs = Outputs((hidden, shown), (figure,), {"results.json": {"rho": [0.25]}},
                      (_claim(),), Report("Title", "Summary.", (answer,)))  # fmt: skip
    run = RunDir(tmp_path)
    write(run, outputs)

    assert (tmp_path / "rho.csv").read_text() == "k,rho mean,rho SE\n10,0.25,0.01\n"
    assert (tmp_path / "all.csv").read_text() == "k,x,y\n10,1,\n20,,2\n"  # every key a column
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (tmp_path / "curve.svg").read_bytes()[:400]
    assert not plt.fignum_exists(figure.figure.number)  # the figure was closed once saved
    assert json.loads((tmp_path / "results.json").read_text()) == {"rho": [0.25]}
    assert [c.id for c in read_claims(run)] == [CLAIM_ID]
    layout = read_layout(run, "exp")
    assert (layout.title, layout.summary, layout.answers) == ("Title", "Summary.", (answer,))
    assert [(f.path.name, f.caption) for f in layout.figures] == [("curve.png", "a falling line")]
    ((table,),) = (layout.tables,)  # only the captioned table is shown
    assert (table.file, table.caption, table.header) == ("rho.csv", "ρ per K", ("k", "ρ"))
    assert table.columns == {"k": "facts"}


def test_outputs_add_up_and_repeated_claim_ids_are_refused(tmp_path):
    first = Outputs(tables=(Table("a.csv", []),), claims=(_claim("A.x"),))
    second = Outputs(tables=(Table("b.csv", []),), records={"r.json": {}})
    both = first + second
    assert [t.name for t in both.tables] == ["a.csv", "b.csv"]
    assert both.claims == first.claims and both.records == {"r.json": {}}
    with pytest.raises(ValueError, match=r"^duplicate claim ids: A\.x$"):
        write(RunDir(tmp_path), Outputs(claims=(_claim("A.x"), _claim("A.x"))))
    assert not (tmp_path / "claims.json").exists()


@pytest.mark.parametrize("preset", ["smoke", "cpu"])
def test_a_smoke_runs_figures_say_they_are_no_evidence(tmp_path, preset):
    """Every figure a run at the smoke preset writes carries the smoke mark above its axes (in
    the PNG, wherever it is shown); a cpu run's figures carry none."""
    run = RunDir(tmp_path / preset)
    run.write_config("assoc-capacity", preset, _Seeded())
    figure = _figure()
    write(run, Outputs(figures=(figure,)))
    marks = [t for t in figure.figure.texts if t.get_text() == SMOKE_MARK]
    assert len(marks) == (preset == "smoke")
    plain = _figure()
    plain_run = RunDir(tmp_path / f"{preset}-unmarked")
    write(plain_run, Outputs(figures=(plain,)))  # no config.yaml: nothing to say
    assert not plain.figure.texts
    height = plt.imread(run.file("curve.png")).shape[0]
    assert (height > plt.imread(plain_run.file("curve.png")).shape[0]) == (preset == "smoke")


@dataclass
class _Seeded:
    seed: int = 0

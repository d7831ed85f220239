"""tailmem.api: a run directory as typed values (the README's worked example runs the whole
path, training included: tests/test_readme_examples.py)."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from report_fixture import QA_ANSWERS, make_run
from tailmem import api
from tailmem.claims.core import ClaimResult
from tailmem.claims.registry import claims_of
from tailmem.errors import DataError
from tailmem.report.layout import Answer


@pytest.fixture
def qa_run(tmp_path):
    make_run(tmp_path, "knowledge-qa", "cpu", answers=QA_ANSWERS[:2], figures=2, tables=True)
    return tmp_path / "knowledge-qa"


def test_load_gives_the_run_as_typed_values(qa_run):
    view = api.load(qa_run)
    assert (view.experiment, view.preset, view.complete) == ("knowledge-qa", "cpu", True)
    assert view.config == {"seed": 0}
    assert [c.id for c in view.claims] == [c.id for c in claims_of("knowledge-qa")]
    assert all(isinstance(c, ClaimResult) for c in view.claims)
    first = view.claim("A3.plain.tail_muon_vs_adam")
    assert (first.verdict, first.ours, first.seeds) == ("reproduced", "0.500 ± 0.010", [0, 1, 2])
    assert view.answers == tuple(Answer(**a) for a in QA_ANSWERS[:2])
    assert [f.path.name for f in view.figures] == ["figure_0.png", "figure_1.png"]
    assert view.tables == ("final.csv",)
    # Cells as numbers where they read as numbers, whole numbers as int.
    assert view.rows("final.csv") == [
        {"arm": "muon", "fta mean": 0.9012345, "fta SE": 0.008, "n": 3},
        {"arm": "adam", "fta mean": 0.625, "fta SE": 0.0084, "n": 3},
    ]
    assert view.sub_runs() == {}  # a run without training sub-runs


def test_frame_reads_a_table_with_pandas_and_says_what_to_install_without_it(qa_run, monkeypatch):
    pandas = pytest.importorskip("pandas")
    frame = api.load(qa_run).frame("final.csv")
    assert isinstance(frame, pandas.DataFrame)
    assert frame["fta mean"].tolist() == [0.9012345, 0.625]
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    with pytest.raises(ModuleNotFoundError) as info:
        api.load(qa_run).frame("final.csv")
    assert str(info.value) == (
        "RunView.frame needs pandas, which tailmem does not install: pip install pandas "
        "(RunView.rows gives the same table as lists of dicts)"
    )


def test_sub_runs_read_every_result_and_refuse_a_damaged_one(qa_run):
    from tailmem.lm.spec import RunResult

    result = RunResult(
        digest="d", key="muon0.02-seed0", arm="muon", recipe="muon:* adam:embed", ffn="plain",
        lrs={"muon": 0.02}, seed=0, steps=8, status="complete", message="", steps_done=8,
        final_loss=5.5, tokens=256, evals=[{"step": 8, "fta_all": 0.25}],
        final={"step": 8, "fta_all": 0.25}, diverged=None, wall_seconds=1.0,
    )  # fmt: skip
    sub = qa_run / "runs" / "plain" / "muon" / "muon0.02-seed0"
    sub.mkdir(parents=True)
    (sub / "result.json").write_text(json.dumps(result.to_json()))
    view = api.load(qa_run)
    assert view.sub_runs() == {"runs/plain/muon/muon0.02-seed0": result}
    (sub / "result.json").write_text('{"digest": "d"}')
    with pytest.raises(DataError, match=r"result.json is not a training run's result \(KeyError"):
        view.sub_runs()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda v: v.rows("nope.csv"), "no table 'nope.csv'; expected one of: final.csv"),
        (lambda v: v.claim("A9.nothing"), "no claim 'A9.nothing'; expected one of: A3.plain."),
    ],
)
def test_a_missing_table_or_claim_is_one_line_naming_what_there_is(qa_run, call, message):
    with pytest.raises(DataError, match=message):
        call(api.load(qa_run))


def test_load_refuses_what_is_not_a_run_and_a_damaged_run(tmp_path, qa_run):
    with pytest.raises(DataError, match=r"is not a run folder \(no config.yaml\)"):
        api.load(tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()  # nothing made by reading
    (qa_run / "claims.json").write_text("[{")
    with pytest.raises(DataError, match=r"claims\.json is not valid JSON"):
        api.load(qa_run)


def test_run_refuses_bad_input_before_writing(tmp_path):
    from tailmem.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown experiment 'nosuch'"):
        api.run("nosuch", preset="smoke", out=tmp_path / "x")
    with pytest.raises(ConfigError, match="out: got an empty path"):
        api.run("assoc-capacity", preset="smoke", out="")
    assert list(tmp_path.iterdir()) == []


def test_typed_config_is_the_study_config_the_run_ran_with(tmp_path, qa_run):
    from tailmem.config import load_config
    from tailmem.experiments.assoc_capacity import Config

    view = api.run("assoc-capacity", preset="smoke", overrides={"steps": 7}, out=tmp_path / "c")
    typed = view.typed_config()
    assert isinstance(typed, Config)
    assert typed == load_config(Config, "assoc-capacity", "smoke", ["steps=7"]) and typed.steps == 7
    other_version = dataclasses.replace(api.load(qa_run), config={"bogus": 1})
    with pytest.raises(DataError, match=r"unknown config field 'bogus'.* RunView\.config"):
        other_version.typed_config()

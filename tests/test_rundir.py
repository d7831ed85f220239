import json

import pytest
import yaml

from tailmem.claims.core import ClaimResult
from tailmem.claims.registry import read_claims
from tailmem.errors import ConfigError, DataError
from tailmem.outputs import Outputs, write
from tailmem.rundir import FOREIGN, MANIFEST, RunDir, folder_kind
from tailmem.runner import run_experiment


def test_writes_are_atomic_and_leave_no_temp_files(tmp_path):
    run = RunDir(tmp_path / "r")
    run.write_json("a.json", {"x": 1})
    run.write_csv("t.csv", [{"a": 1, "b": 2}, {"a": 3, "c": 4}])
    assert json.loads((tmp_path / "r" / "a.json").read_text()) == {"x": 1}
    assert (tmp_path / "r" / "t.csv").read_text().splitlines() == ["a,b,c", "1,2,", "3,,4"]
    assert not [p for p in (tmp_path / "r").iterdir() if p.name.endswith(".tmp")]


def test_damaged_json_is_a_data_error(tmp_path):
    run = RunDir(tmp_path)
    (tmp_path / "results.json").write_text("{not json")
    with pytest.raises(DataError, match=r"results\.json is not valid JSON"):
        run.read_json("results.json")
    with pytest.raises(DataError, match="missing"):
        run.read_json("absent.json")


def test_claims_round_trip_and_validation(tmp_path):
    run = RunDir(tmp_path)
    claim = ClaimResult(
        "A4.thm53.gd_slope", "a claim", "A4", "1.0", "0.98", "the rule in words", "inconclusive",
        reason="two K only", seeds=[0, 1, 2],
    )  # fmt: skip
    write(run, Outputs(claims=(claim,)))
    assert read_claims(run) == [claim]
    with pytest.raises(ValueError, match="is not one of"):
        ClaimResult("A4.thm53.gd_slope", "c", "A4", "1", "1", "rule", "maybe")  # type: ignore[arg-type]
    (tmp_path / "claims.json").write_text(json.dumps([{"id": "x"}]))
    with pytest.raises(DataError, match="entry 0 lacks the fields"):
        read_claims(run)
    with pytest.raises(ValueError, match="duplicate claim ids"):
        write(run, Outputs(claims=(claim, claim)))


def test_run_records_config_and_skips_identical_rerun(fake_experiment, tmp_path):
    out = tmp_path / "run"
    run, status = run_experiment("fake", "smoke", ["ks=[7]"], out=out)
    assert status == "ran" and run.is_complete
    record = yaml.safe_load((out / "config.yaml").read_text())
    assert record["config"]["ks"] == [7] and record["preset"] == "smoke"
    assert {"torch", "python", "tailmem", "device"} <= set(record["environment"])
    assert "argv" not in record["environment"]  # the caller passes the command in
    assert record["command"] == "fake run"
    first = (out / "results.json").read_text()
    _, status = run_experiment("fake", "smoke", ["ks=[7]"], out=out)
    assert status == "skipped"
    _, status = run_experiment("fake", "smoke", ["ks=[7]"], out=out, force=True,
                               command="fake --preset smoke ks=[7]")  # fmt: skip
    record = yaml.safe_load((out / "config.yaml").read_text())
    assert record["command"] == "fake --preset smoke ks=[7]"
    assert status == "ran" and (out / "results.json").read_text() == first  # seeded


def test_failed_run_is_not_complete_and_other_config_refused(fake_experiment, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(RuntimeError):
        run_experiment("fake", "smoke", ["fail=true"], out=out)
    assert not RunDir(out).is_complete
    with pytest.raises(ConfigError, match="different config"):
        run_experiment("fake", "smoke", ["steps=9"], out=out)


def test_bad_config_writes_nothing(fake_experiment, tmp_path):
    out = tmp_path / "never"
    with pytest.raises(ConfigError):
        run_experiment("fake", "smoke", ["steps=-1"], out=out)
    assert not out.exists()


def test_stale_temp_files_of_killed_writers_are_removed(tmp_path):
    run = RunDir(tmp_path / "r")
    run.write_json("a.json", {"x": 1})
    nested = tmp_path / "r" / "arms" / "adam"
    nested.mkdir(parents=True)
    stale = [tmp_path / "r" / ".a.json.k3j1.tmp", nested / ".initial.json._063het0.tmp"]
    for path in stale:
        path.write_text("{half")
    (nested / "notes.tmp").write_text("a user's file, not ours")
    assert sorted(run.remove_stale_temp_files()) == sorted(stale)
    assert not any(p.exists() for p in stale)
    assert (nested / "notes.tmp").exists() and run.read_json("a.json") == {"x": 1}


def _reject(constant: str) -> None:
    raise ValueError(f"non-standard JSON constant {constant}")


def test_json_is_strict_with_a_status_for_non_finite_numbers(tmp_path):
    run = RunDir(tmp_path)
    run.write_json("r.json", {"slope": float("nan"), "xs": [1.0, float("inf")], "ok": 2.5})
    data = json.loads((tmp_path / "r.json").read_text(), parse_constant=_reject)
    assert data == {"slope": None, "slope_status": "nan", "xs": [1.0, None], "ok": 2.5}


def test_rundir_records_what_it_writes_and_complete_lists_only_that(tmp_path):
    run = RunDir(tmp_path / "r")
    run.write_json("a.json", {"x": 1})
    run.write_text("sub/b.txt", "x")  # a file in a sub-folder records the sub-folder
    (run.path / "mine.txt").write_text("a user's file")
    record = json.loads((run.path / MANIFEST).read_text())
    assert record == {"kind": "run", "entries": {"a.json": "run", "sub": "run"}}
    run.mark_complete()
    assert set(json.loads((run.path / "COMPLETE").read_text())["files"]) == {"a.json"}
    assert run.clear() == ["COMPLETE", "a.json", "sub"]
    assert sorted(p.name for p in run.path.iterdir()) == [MANIFEST, "mine.txt"]
    assert json.loads((run.path / MANIFEST).read_text())["entries"] == {}


def test_folder_kinds_and_their_records(tmp_path):
    assert folder_kind(tmp_path / "absent") is None
    (tmp_path / "hidden").mkdir()
    (tmp_path / "hidden" / ".DS_Store").write_text("")
    assert folder_kind(tmp_path / "hidden") is None
    legacy = tmp_path / "legacy"  # a run written before the records: recognised by its files
    legacy.mkdir()
    for name in ("config.yaml", "a.csv", "mine.txt"):
        (legacy / name).write_text("x")
    (legacy / "COMPLETE").write_text(json.dumps({"files": {"config.yaml": "0", "a.csv": "0"}}))
    (legacy / "runs").mkdir()
    assert folder_kind(legacy) == "run" and folder_kind(tmp_path) == "results"
    assert set(RunDir(legacy).entries()) == {"config.yaml", "a.csv", "COMPLETE", "runs"}
    RunDir(legacy).clear()
    assert sorted(p.name for p in legacy.iterdir()) == [MANIFEST, "mine.txt"]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("x")
    assert folder_kind(tmp_path / "other") == FOREIGN
    (legacy / MANIFEST).write_text("[1]")
    with pytest.raises(DataError, match=r"\.tailmem\.json is damaged; expected tailmem's record"):
        folder_kind(legacy)

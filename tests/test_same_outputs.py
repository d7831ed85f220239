"""scripts/same_outputs.py: two run folders compared file by file, timing left out."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

import script_module
from tailmem.cli import expected_failure


def _script() -> ModuleType:
    return script_module.load("scripts/same_outputs.py")


def _folder(root: Path, results: dict, rows: str, png: bytes = b"\x89PNG1") -> Path:
    root.mkdir()
    (root / "results.json").write_text(json.dumps(results))
    (root / "table.csv").write_text(rows)
    (root / "figure.png").write_bytes(png)
    (root / "figure.svg").write_text("<svg><dc:date>today</dc:date></svg>")
    (root / "COMPLETE").write_text("{}")
    return root


def test_the_same_values_in_other_bytes_and_other_timings_are_the_same_outputs(tmp_path, capsys):
    same = _script()
    before = _folder(tmp_path / "a", {"rho": [0.25], "wall_seconds": 3.0, "n": 2},
                     "k,rho,step_seconds\n10,0.25,0.10\n")  # fmt: skip
    after = _folder(tmp_path / "b", {"n": 2, "wall_seconds": 9.5, "rho": [0.25]},
                    "k,rho,step_seconds\n10,0.25,0.31\n")  # fmt: skip
    (after / "figure.svg").write_text("<svg><dc:date>tomorrow</dc:date></svg>")
    assert same.main([str(before), str(after)]) == 0
    assert capsys.readouterr().out.splitlines() == ["3 common files, 0 differing"]


def test_a_changed_number_a_changed_image_and_a_missing_file_are_each_named(tmp_path, capsys):
    same = _script()
    before = _folder(tmp_path / "a", {"rho": [0.25, 0.5]}, "k,rho\n10,0.25\n")
    after = _folder(tmp_path / "b", {"rho": [0.25, 0.51]}, "k,rho\n10,0.26\n", b"\x89PNG2")
    (before / "claims.json").write_text("[]")
    assert same.main([str(before), str(after)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"claims.json: only in {before}",
        "figure.png: other bytes",
        "results.json: /rho[1]: 0.5 vs 0.51",
        "table.csv: [0]/rho: 0.25 vs 0.26",
        "3 common files, 4 differing",
    ]
    with pytest.raises(SystemExit) as usage:
        same.main([str(before)])
    assert usage.value.code == 2
    capsys.readouterr()
    assert same.main([str(before), str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err == (
        f"same_outputs: error: {tmp_path / 'nowhere'}: no such folder; expected a folder of "
        "tailmem run\n"
    )


# Issue 42: nothing compared is not "the same", a damaged file is one line, trackers are skipped.


def test_same_outputs_refuses_empty_folders_and_damaged_files_and_skips_trackers(tmp_path, capsys):
    same = _script()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    assert same.main([str(a), str(b)]) == 2
    assert "holds no output to compare" in capsys.readouterr().err
    (a / "r.json").write_text('{"x": 1')
    (b / "r.json").write_text('{"x": 1}')
    assert same.main([str(a), str(b)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "r.json: not valid JSON" in err[0]
    (a / "r.json").write_bytes(b'{"x": "\xff"}')
    assert same.main([str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "not UTF-8" in err and "--debug" not in err
    undecodable = UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    assert "--debug" not in str(expected_failure(undecodable, debug_flag=False))
    assert "--debug" in str(expected_failure(undecodable))
    (a / "r.json").write_text('{"x": 1}')
    for side, stamp in ((a, "1"), (b, "2")):
        (side / "runs" / "tensorboard").mkdir(parents=True)
        (side / "runs" / "tensorboard" / f"events.out.tfevents.{stamp}").write_text(stamp)
        (side / "runs" / "wandb" / "run").mkdir(parents=True)
        (side / "runs" / "wandb" / "run" / "files.json").write_text(stamp)
    assert same.main([str(a), str(b)]) == 0
    assert capsys.readouterr().out.splitlines() == ["1 common files, 0 differing"]

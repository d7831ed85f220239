"""``tailmem reproduce`` never replaces a run in ``--out`` whose config differs unless told to
(``--force``): another preset, or a preset file changed since, is refused in one line before
anything is written; ``--force`` replaces it; a rerun of the same config still skips or resumes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import tailmem.config
from tailmem import progress
from tailmem.cli import main
from tailmem.errors import ConfigError
from tailmem.progress_display import Board
from tailmem.reproduce import _plan
from tailmem.runner import run_experiment


def digests(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones too) by relative path: its SHA-256."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def reproduce(preset: str, out: Path, *extra: str) -> int:
    return main(["reproduce", "--preset", preset, "--only", "fake", "--out", str(out), *extra])


def one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tailmem: error: "), lines
    return lines[0].removeprefix("tailmem: error: ")


def test_another_preset_is_refused_and_the_complete_run_left_untouched(fake_experiment, tmp_path,
                                                                       capsys):  # fmt: skip
    out = tmp_path / "results"
    assert reproduce("smoke", out) == 0
    before = digests(out)
    assert "fake/COMPLETE" in before and "report.html" in before
    capsys.readouterr()
    assert reproduce("cpu", out) == 2
    assert one_error_line(capsys) == (
        f"{out / 'fake'} holds a complete run of fake with a different config (preset smoke, "
        "not preset cpu; differs in steps 2 → 5, inner.width 8 → 4); choose another --out or "
        "pass --force to replace it"
    )
    assert digests(out) == before  # every byte, the report's and the folder records' too


def test_a_preset_file_changed_since_is_refused_too(fake_experiment, tmp_path, capsys):
    out = tmp_path / "results"
    assert reproduce("smoke", out) == 0
    before = digests(out)
    capsys.readouterr()
    (tailmem.config.CONFIGS_ROOT / "fake" / "smoke.yaml").write_text(
        "steps: 3\ninner:\n  width: 8\n"
    )
    assert reproduce("smoke", out) == 2
    assert one_error_line(capsys) == (
        f"{out / 'fake'} holds a complete run of fake with a different config (preset smoke; "
        "differs in steps 2 → 3); choose another --out or pass --force to replace it"
    )
    assert digests(out) == before


def test_an_unfinished_run_of_another_config_is_refused(fake_experiment, tmp_path, capsys):
    out = tmp_path / "results"
    assert reproduce("smoke", out) == 0
    (out / "fake" / "COMPLETE").unlink()  # killed before it finished: its results stay precious
    before = digests(out)
    capsys.readouterr()
    assert reproduce("cpu", out) == 2
    assert one_error_line(capsys).startswith(f"{out / 'fake'} holds an unfinished run of fake ")
    assert digests(out) == before


def test_force_replaces_the_run_and_the_board_says_so(fake_experiment, tmp_path, capsys):
    out = tmp_path / "results"
    assert reproduce("smoke", out) == 0
    smoke = (out / "fake" / "results.json").read_text()
    plan = _plan("fake", "cpu", out, force=True)  # what reproduce --force shows and updates by
    board = Board(out, {"fake": plan}, parallel=1)
    progress.Tracker(out / "fake" / "progress.json").plan(4, "steps")
    assert plan == "redo" and [row.status for row in board.rows()] == ["replacing"]
    assert reproduce("cpu", out, "--force") == 0
    record = (out / "fake" / "config.yaml").read_text()
    assert "preset: cpu" in record and "steps: 5" in record
    assert (out / "fake" / "COMPLETE").is_file()
    assert (out / "fake" / "results.json").read_text() != smoke  # 5 values now, not 2


def test_force_still_skips_a_complete_run_of_this_config_and_resumes_an_unfinished_one(
    fake_experiment, tmp_path, capsys
):
    out = tmp_path / "results"
    assert reproduce("smoke", out) == 0
    before = digests(out / "fake")
    capsys.readouterr()
    assert reproduce("smoke", out, "--force") == 0
    assert "fake: complete, skipped" in capsys.readouterr().err
    assert digests(out / "fake") == before
    found = []  # whether each start of the study found its earlier results (a resume does)
    study_run = fake_experiment.run
    fake_experiment.run = lambda cfg, run: (
        found.append((run.path / "results.json").is_file()),
        study_run(cfg, run),
    )
    (out / "fake" / "COMPLETE").unlink()
    assert reproduce("smoke", out, "--force") == 0
    assert found == [True] and (out / "fake" / "COMPLETE").is_file()


def test_run_names_what_the_folder_holds_and_how_it_differs(fake_experiment, tmp_path):
    out = tmp_path / "run"
    run_experiment("fake", "cpu", ["ks=[3]"], out=out)
    with pytest.raises(ConfigError) as refusal:
        run_experiment("fake", "cpu", ["ks=[4]"], out=out)
    assert str(refusal.value) == (
        f"{out} holds a complete run of fake with a different config (preset cpu; differs "
        "in ks [3] → [4]); choose another --out or pass --force to replace it"
    )

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tailmem import __version__
from tailmem.cli import main

SRC = str(Path(__file__).resolve().parents[1] / "src")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run(
        [sys.executable, "-m", "tailmem", *args], capture_output=True, text=True, env=env
    )


def test_version_and_help():
    out = run_cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"tailmem {__version__}"
    out = run_cli("--help")
    assert out.returncode == 0 and "run" in out.stdout and "list" in out.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((), "required"),
        (("frobnicate",), "invalid choice"),
        (("run",), "required"),
        (("run", "no-such-experiment"), "unknown experiment 'no-such-experiment'"),
        (("run", "--bogus-flag", "x"), "unrecognized arguments"),
    ],
)
def test_bad_cli_input_is_one_line_exit_2(args, fragment):
    out = run_cli(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tailmem: error:") and fragment in lines[0]


def test_run_and_config_commands(fake_experiment, tmp_path, capsys):
    assert main(["config", "fake", "--preset", "smoke", "steps=4"]) == 0
    assert "steps: 4" in capsys.readouterr().out
    assert main(["run", "fake", "--preset", "smoke", "--out", str(tmp_path / "r")]) == 0
    assert "finished" in capsys.readouterr().out
    assert main(["run", "fake", "--preset", "smoke", "--out", str(tmp_path / "r")]) == 0
    assert "already complete" in capsys.readouterr().out
    assert main(["run", "fake", "--preset", "smoke", "--out", str(tmp_path / "r"), "x=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "tailmem: error: unknown config field 'x'; expected one of: "
        + ", ".join(["seed", "steps", "name", "ks", "mode", "inner", "fail"])
    ]


def test_reproduce_runs_skips_and_reports(fake_experiment, tmp_path, capsys):
    out = tmp_path / "results"
    assert main(["reproduce", "--preset", "smoke", "--only", "fake", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    report = out / "report.html"
    assert f"report: {report.resolve()}" in printed.out
    assert (out / "fake" / "COMPLETE").is_file() and (out / "report.md").is_file()
    before = (out / "fake" / "results.json").stat().st_mtime_ns
    assert main(["reproduce", "--preset", "smoke", "--only", "fake", "--out", str(out)]) == 0
    assert "complete, skipped" in capsys.readouterr().err
    assert (out / "fake" / "results.json").stat().st_mtime_ns == before


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["reproduce", "--preset", "huge"], "--preset: got 'huge'"),
        (["reproduce", "--only", "nope"], "--only: unknown experiment 'nope'"),
        (["reproduce", "--jobs", "0"], "--jobs: got 0"),
        (["report", "/no/such/folder"], "is not a directory"),
    ],
)
def test_reproduce_and_report_bad_input(fake_experiment, tmp_path, capsys, args, fragment):
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0]

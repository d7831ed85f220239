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

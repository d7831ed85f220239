"""The README's examples, run verbatim: the quick start (at smoke: its cpu preset trains for an
hour), the Python API's worked example and the own-optimiser command (at smoke likewise)."""

from __future__ import annotations

import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from readme_blocks import README, block, commands
from tailmem.cli import main

ROOT = README.parent
QUICK_START = "Quick start"
MY_OPTIMIZER = """import torch


class MyOptimizer(torch.optim.SGD):
    def __init__(self, params, lr=1e-3, weight_decay=0.0):
        super().__init__(params, lr=lr, weight_decay=weight_decay)
"""


def _quick_start() -> list[str]:
    """The quick start's first command block: install, then reproduce at cpu."""
    install, reproduce = commands(block(QUICK_START, "bash", "tailmem reproduce"))
    assert install[:3] == ["pip", "install", "torch==2.13.0"] and install[-2:] == ["-e", "."]
    assert reproduce == ["tailmem", "reproduce", "--preset", "cpu"]
    return reproduce


def test_ci_runs_the_quick_starts_test_command_verbatim():
    line = block(QUICK_START, "bash", "pytest").strip()
    assert line == 'pip install torch==2.13.0 -e ".[test]" && python -m pytest -q'
    assert line in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_quick_starts_two_minute_taste_at_smoke_prints_its_report(
    tmp_path, monkeypatch, capsys
):
    """``tailmem reproduce --preset cpu`` with the README's ``--only`` taste, at smoke: the
    report's path is printed, under results/PRESET as the README says."""
    argv = _quick_start()
    text = (ROOT / "README.md").read_text()
    taste = "add `--only assoc-two-group,assoc-scaling`"
    assert taste in text and "(`results/cpu/report.html`)" in text
    monkeypatch.chdir(tmp_path)
    smoke = [*argv[1:3], "smoke", "--only", "assoc-two-group,assoc-scaling"]
    assert main(smoke) == 0
    report = tmp_path / "results" / "smoke" / "report.html"
    assert capsys.readouterr().out.splitlines()[-1] == f"report: {report}"
    assert "Preset smoke</b>: checks the code runs end to end" in report.read_text()


@pytest.mark.slow
def test_the_quick_start_at_smoke_reproduces_every_study(tmp_path, monkeypatch, capsys):
    """The quick start's command, its preset smoke: every study of a plain reproduce."""
    argv = _quick_start()
    monkeypatch.chdir(tmp_path)
    assert main([*argv[1:3], "smoke"]) == 0
    report = tmp_path / "results" / "smoke" / "report.html"
    assert capsys.readouterr().out.splitlines()[-1] == f"report: {report}"


def test_the_python_api_example_runs_verbatim(tmp_path, monkeypatch, capsys):
    code = block("Python API", "python", "from tailmem import api")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
    plt.close("all")
    printed = capsys.readouterr().out.splitlines()
    run = tmp_path / "runs" / "qa-smoke"
    assert (run / "COMPLETE").is_file()
    assert any(
        line.startswith("knowledge-qa smoke ") and line.endswith(" claims") for line in printed
    )
    assert (tmp_path / "runs" / "qa-smoke-tail.png").stat().st_size > 5_000
    (line,) = [line for line in printed if " training runs; first: " in line]
    assert int(line.split()[0]) == len(list(run.rglob("result.json")))


def test_the_own_optimiser_example_runs_at_smoke(tmp_path):
    """The README's own-optimiser command, its preset smoke, from a folder holding ``mypkg``
    (as the README says: found in the folder you run tailmem from)."""
    (argv,) = commands(block("Commands", "bash", "tailmem run knowledge-qa --preset cpu optim"))
    assert argv[:5] == ["tailmem", "run", "knowledge-qa", "--preset", "cpu"]
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "opt.py").write_text(MY_OPTIMIZER)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "tailmem", *argv[1:4], "smoke", *argv[5:]],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    run = tmp_path / "runs" / "knowledge-qa-smoke"
    assert (run / "COMPLETE").is_file()
    specs = [p.read_text() for p in run.rglob("spec.json")]
    assert any("mypkg.opt:MyOptimizer" in spec for spec in specs)
    assert "knowledge-qa (smoke):" in done.stdout

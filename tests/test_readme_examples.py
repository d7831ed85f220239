"""The README's and the documentation's examples, run verbatim: the README's quick start (at
smoke: its cpu preset trains for an hour), the Python API page's worked example as a script, and
the running-studies page's own-optimiser commands of knowledge-qa and optim-bench with its
optimiser template (at smoke likewise). The optimiser library's examples are in
test_examples.py."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import pytest

from readme_blocks import DOCS, README, block, blocks, commands
from tailmem.cli import main

ROOT = README.parent
EXAMPLES = ROOT / "examples"
QUICK_START = "Quick start"
OWN_OPTIMISER = ("Your own optimiser as an arm", DOCS / "running.md")
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg"}


def _tailmem(argv: list[str], cwd) -> subprocess.CompletedProcess[str]:
    """``python -m tailmem ARGV`` run from ``cwd`` with this checkout's package."""
    return subprocess.run(
        [sys.executable, "-m", "tailmem", *argv],
        cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def _with_my_optimizer(folder) -> None:
    """``folder/mypkg/opt.py``: the optimiser template of the running-studies page (the file
    examples/my_optimizer.py, shown there verbatim), copied as a user would."""
    (folder / "mypkg").mkdir()
    (folder / "mypkg" / "__init__.py").write_text("")
    (folder / "mypkg" / "opt.py").write_text((EXAMPLES / "my_optimizer.py").read_text())


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
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == f"report: {report}"
    assert "Preset smoke</b>: checks the code runs end to end" in report.read_text()
    # the results table ends the run: a row per study, then the preset's not-evidence line
    start = printed.index("results:")
    assert sorted(line.split()[0] for line in printed[start + 3 : start + 5]) == [
        "assoc-scaling",
        "assoc-two-group",
    ]
    assert printed[start + 5].endswith("its verdicts are not evidence.")


@pytest.mark.slow
def test_the_quick_start_at_smoke_reproduces_every_study(tmp_path, monkeypatch, capsys):
    """The quick start's command, its preset smoke: every study of a plain reproduce."""
    argv = _quick_start()
    monkeypatch.chdir(tmp_path)
    assert main([*argv[1:3], "smoke"]) == 0
    report = tmp_path / "results" / "smoke" / "report.html"
    assert capsys.readouterr().out.splitlines()[-1] == f"report: {report}"


def test_the_python_api_example_runs_verbatim_as_a_script(tmp_path):
    """``python python_api.py``: its worker processes import the script again, and its
    ``__main__`` guard keeps them from starting runs of their own."""
    text = (DOCS / "python-api.md").read_text()
    (example,) = [b for b in blocks(text, "python") if "from tailmem import api" in b]
    script = tmp_path / "python_api.py"
    script.write_text(example)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    printed = done.stdout.splitlines()
    run = tmp_path / "runs" / "qa-smoke"
    assert (run / "COMPLETE").is_file()
    assert any(
        line.startswith("knowledge-qa smoke ") and line.endswith(" claims") for line in printed
    )
    assert (tmp_path / "runs" / "qa-smoke-tail.png").stat().st_size > 5_000
    (line,) = [line for line in printed if " training runs; first: " in line]
    assert int(line.split()[0]) == len(list(run.rglob("result.json")))


def _own_optimiser_at_smoke(folder, experiment: str) -> str:
    """The running-studies page's own-optimiser command for ``experiment``, its preset smoke,
    run from ``folder`` holding the template as ``mypkg`` (as the page says: found in the folder
    you run tailmem from); its stdout, once the run is complete and records the user's
    factory."""
    heading, page = OWN_OPTIMISER
    (argv,) = commands(block(heading, "bash", f"tailmem run {experiment} --preset cpu ", page))
    assert argv[:5] == ["tailmem", "run", experiment, "--preset", "cpu"]
    _with_my_optimizer(folder)
    done = _tailmem([*argv[1:4], "smoke", *argv[5:]], folder)
    assert done.returncode == 0, done.stderr[-2000:]
    run = folder / "runs" / f"{experiment}-smoke"
    assert (run / "COMPLETE").is_file()
    specs = [p.read_text() for p in run.rglob("spec.json")]
    assert any("mypkg.opt:MyOptimizer" in spec for spec in specs)
    return done.stdout


def test_the_own_optimiser_example_runs_at_smoke(tmp_path):
    printed = _own_optimiser_at_smoke(tmp_path, "knowledge-qa").splitlines()
    (row,) = [line.split() for line in printed if line.startswith("  knowledge-qa ")]
    assert row[:2] == ["knowledge-qa", "smoke"] and "results:" in printed


def test_the_optimiser_template_runs_in_optim_benchs_smoke(tmp_path):
    """The page's optim-bench command with the template: it is tuned over the command's grid
    and gets a leaderboard row at each level."""
    _own_optimiser_at_smoke(tmp_path, "optim-bench")
    with (tmp_path / "runs" / "optim-bench-smoke" / "leaderboard.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["optimizer"] == "mine"]
    assert [r["level"] for r in rows] == ["bpe", "one token per answer"]
    assert int(rows[0]["tuning_trials"]) >= 3 and float(rows[0]["lr"]) > 0

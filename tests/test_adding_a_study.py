"""Adding a study is one package exporting ``STUDY`` plus its presets: nothing else registers it.

The toy study below is written as a user would write it, into a temporary folder on the
registry package's path, with its presets in a copy of the packaged preset folder; ``tailmem
list``, ``run`` (its preflight and config checks included), ``config`` and ``report`` then find
it by its module alone, end to end through the CLI.
"""

from __future__ import annotations

import json
import shutil
import sys
import textwrap

import pytest

import tailmem.config
import tailmem.experiments
from tailmem.cli import main

TOY = '''
"""A toy study: the squares of 0 .. n-1 and their sum."""

from __future__ import annotations

from dataclasses import dataclass

from tailmem.columns import column, column_docs, records
from tailmem.errors import ConfigError
from tailmem.outputs import Answer, Outputs, Report, Table, write
from tailmem.rundir import RunDir
from tailmem.studies import Preset, Provenance, Study

QUESTION = "what is the sum of the squares below n?"


@dataclass(frozen=True)
class Config:
    seed: int = 0
    n: int = 3

    def validate(self) -> None:
        if self.n < 1:
            raise ConfigError(f"n: got {self.n}; expected a positive integer")


@dataclass(frozen=True)
class Row:
    i: int = column("the integer")
    square: int = column("its square")


def preflight(cfg: Config) -> None:
    if cfg.n > 1000:
        raise ConfigError(f"n: got {cfg.n}; expected at most 1000 on this machine")


def run(cfg: Config, run: RunDir, provenance: Provenance) -> None:
    rows = [Row(i, i * i) for i in range(cfg.n)]
    total = sum(r.square for r in rows)
    answer = Answer(QUESTION, str(total), "squares.csv", "exact")
    write(run, Outputs(
        tables=(Table("squares.csv", records(rows), "The squares", column_docs(Row)),),
        records={"results.json": {"total": total, "preset": provenance.preset,
                                  "command": provenance.command}},
        report=Report("Toy squares", f"The squares below {cfg.n}.", (answer,)),
    ))


STUDY = Study(
    name="toy-squares",
    config=Config,
    run=run,
    preflight=preflight,
    reproduces="a toy study of the tests",
    presets=(Preset("smoke", "", 0.5), Preset("cpu", "n = 100", None)),
    question=QUESTION,
)
'''


@pytest.fixture
def toy_study(tmp_path, monkeypatch):
    """The toy study's package in a temp folder on the registry's path, its presets beside the
    packaged ones (in a copy)."""
    folder = tmp_path / "added"
    (folder / "toy_squares").mkdir(parents=True)
    (folder / "toy_squares" / "__init__.py").write_text(textwrap.dedent(TOY))
    path = [*tailmem.experiments.__path__, str(folder)]
    monkeypatch.setattr(tailmem.experiments, "__path__", path)
    monkeypatch.delitem(sys.modules, "tailmem.experiments.toy_squares", raising=False)
    configs = tmp_path / "configs"
    shutil.copytree(tailmem.config.CONFIGS_ROOT, configs)
    (configs / "toy-squares").mkdir()
    (configs / "toy-squares" / "smoke.yaml").write_text("n: 5\n")
    (configs / "toy-squares" / "cpu.yaml").write_text("n: 100\n")
    monkeypatch.setattr(tailmem.config, "CONFIGS_ROOT", configs)
    yield
    sys.modules.pop("tailmem.experiments.toy_squares", None)


def test_a_study_added_as_one_package_lists_runs_and_reports(toy_study, tmp_path, capsys):
    assert main(["list"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("toy-squares")]
    assert "a toy study of the tests" in line and "smoke <1s · cpu n = 100" in line

    assert main(["config", "toy-squares", "--preset", "cpu"]) == 0
    assert capsys.readouterr().out == "seed: 0\nn: 100\n"

    out = tmp_path / "run"
    argv = ["run", "toy-squares", "--preset", "smoke", "--out", str(out)]
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results == {"total": 0 + 1 + 4 + 9 + 16, "preset": "smoke", "command": " ".join(argv)}
    assert (out / "squares.csv").read_text().splitlines() == [
        "i,square", "0,0", "1,1", "2,4", "3,9", "4,16"
    ]  # fmt: skip
    assert (out / "COMPLETE").is_file()

    assert main(["report", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "what is the sum of the squares below n?" in report and "| 30 |" in report


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("n=0", "n: got 0; expected a positive integer"),  # the config's validate()
        ("n=5000", "n: got 5000; expected at most 1000 on this machine"),  # its preflight
    ],
)
def test_an_added_studys_checks_refuse_before_anything_is_written(
    toy_study, tmp_path, capsys, override, message
):
    out = tmp_path / "refused"
    assert main(["run", "toy-squares", "--preset", "smoke", "--out", str(out), override]) == 2
    assert message in capsys.readouterr().err and not out.exists()

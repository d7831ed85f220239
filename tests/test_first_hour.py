"""What a new user meets first: reproduce's overall ETA, the summary ``tailmem run`` ends with,
``tailmem list`` and the studies page's experiment list, and ``diagnose`` on a file that is not a
checkpoint."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from tailmem.cli import main
from tailmem.config import available_presets
from tailmem.experiments import get_study, study_names
from tailmem.progress_display import SPEED_PRIOR_SECONDS, Board, PlainLines
from tailmem.rundir import RunDir

README = Path(__file__).resolve().parents[1] / "README.md"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def snapshot(out: Path, name: str, done: float, total: float, started: float, updated: float):
    """A progress.json as an experiment writes it (declared its total at ``started``)."""
    (out / name).mkdir(parents=True, exist_ok=True)
    state = {"done": done, "skipped": 0, "total": total, "unit": "steps", "started": started}
    state |= {"planned": started, "updated": updated}
    (out / name / "progress.json").write_text(json.dumps(state))


def test_overall_eta_counts_queued_experiments_and_moves(tmp_path):
    clock = Clock(1000.0)
    expected = {"a": 10.0, "b": 20.0, "c": 40.0}
    board = Board(tmp_path, dict.fromkeys(expected, "run"), clock=clock, expected=expected)
    # Nothing started: the measured times of all three, one after another.
    assert board.overall() == "0/3 finished, elapsed 0s, ETA 1m10s"
    # a started 4 s ago and has no rate yet: 10 - 4 s of it left, then b and c.
    clock.now = 1004.0
    snapshot(tmp_path, "a", done=0, total=100, started=1000.0, updated=1000.0)
    assert board.remaining(board.rows()) == (pytest.approx(66.0), 0)
    # a did 30 of 100 steps in 6 s: its own ETA is 14 s, its prior 10 - 6 = 4 s; 30% done,
    # so 0.3 * 14 + 0.7 * 4 = 7 s.
    clock.now = 1006.0
    snapshot(tmp_path, "a", done=30, total=100, started=1000.0, updated=1006.0)
    assert board.rows()[0].eta == pytest.approx(14.0)
    assert board.overall() == "0/3 finished, elapsed 6s, ETA 1m07s"
    clock.now = 1008.0  # two seconds on, no new snapshot: 0.3 * 12 + 0.7 * 2 = 5 s for a
    assert board.overall() == "0/3 finished, elapsed 8s, ETA 1m05s"
    # a finished after 20 s where 10 were expected: ten seconds of evidence, weighed against
    # SPEED_PRIOR_SECONDS (60) at the measured pace: speed (20 + 60) / (10 + 60) = 8/7. b did
    # half its steps in 5 s: 0.5 * 5 + 0.5 * (8/7 * 20 - 5) = 11.93 s, then c 8/7 * 40 s.
    snapshot(tmp_path, "a", done=100, total=100, started=1000.0, updated=1020.0)
    board.finish("a", ok=True)
    clock.now = 1025.0
    snapshot(tmp_path, "b", done=50, total=100, started=1020.0, updated=1025.0)
    assert SPEED_PRIOR_SECONDS == 60.0
    assert board.speed(board.rows()) == pytest.approx(8 / 7)
    assert board.remaining(board.rows()) == (pytest.approx(2.5 + 0.5 * (160 / 7 - 5) + 320 / 7), 0)
    assert board.overall() == "1/3 finished, elapsed 25s, ETA 57s"


def test_a_short_experiments_fixed_cost_does_not_scale_the_rest_but_a_slow_machine_does(tmp_path):
    """The smoke reproduce that showed it, at its sixth of eleven experiments: the finished
    ones took 62 s where the measured times said 18.4 (3.4x: knowledge-qa's 2.5 s entry was
    17 s), the rest 102 s where it said 84.5. Scaled by 3.4 the ETA was 4m46s; it is now
    within 1.6x of the 102 s. Ten minutes of experiments at twice their time still make the
    machine 1.9x."""
    clock = Clock(0.0)
    finished = {"a": (18.4, 62.0)}
    queued = {"b": 84.5}
    expected = {**{n: e for n, (e, _) in finished.items()}, **queued}
    board = Board(tmp_path, dict.fromkeys(expected, "run"), clock=clock, expected=expected)
    snapshot(tmp_path, "a", done=1, total=1, started=0.0, updated=62.0)
    board.finish("a", ok=True)
    clock.now = 62.0
    eta, unknown = board.remaining(board.rows())
    assert unknown == 0 and eta == pytest.approx(84.5 * (62 + 60) / (18.4 + 60))
    assert 102 / 1.6 < eta < 102 * 1.6  # was 84.5 * 62 / 18.4 = 285 s
    slow = Board(tmp_path / "slow", {"a": "run", "b": "run"}, clock=Clock(1200.0),
                 expected={"a": 600.0, "b": 600.0})  # fmt: skip
    snapshot(tmp_path / "slow", "a", done=1, total=1, started=0.0, updated=1200.0)
    slow.finish("a", ok=True)
    assert slow.speed(slow.rows()) == pytest.approx(1260 / 660)


def test_overall_eta_with_parallel_runs_and_an_untimed_experiment(tmp_path):
    clock = Clock(100.0)
    expected = {"a": 30.0, "b": 30.0, "c": 30.0, "d": None}
    plans = dict.fromkeys(expected, "run")
    board = Board(tmp_path, plans, parallel=2, clock=clock, expected=expected)
    snapshot(tmp_path, "a", done=50, total=100, started=90.0, updated=100.0)  # own ETA 10 s
    snapshot(tmp_path, "b", done=10, total=100, started=90.0, updated=100.0)  # own ETA 90 s
    # a: 0.5 * 10 + 0.5 * 20 = 15 s; b: 0.1 * 90 + 0.9 * 20 = 27 s; c (30 s) takes a's slot
    # when it frees at 15 s: done at 45 s. d was never timed: not estimated.
    assert board.remaining(board.rows()) == (pytest.approx(45.0), 1)
    assert board.overall() == "0/4 finished, elapsed 0s, ETA 45s (+1 not estimated yet)"


def test_plain_lines_repeat_the_overall_eta_with_every_progress_line(tmp_path, monkeypatch):
    clock = Clock(100.0)
    board = Board(tmp_path, {"a": "run", "b": "run"}, clock=clock, expected={"a": 8, "b": 30})
    stream = io.StringIO()
    lines = PlainLines(board, stream, every=30.0)
    monotonic = Clock(0.0)
    monkeypatch.setattr("tailmem.progress_display.time.monotonic", monotonic)
    # a did 1 of 4 steps in 4 s: own ETA 12 s, prior 8 - 4 = 4 s: 0.25 * 12 + 0.75 * 4 = 6 s.
    snapshot(tmp_path, "a", done=1, total=4, started=96.0, updated=100.0)
    lines.poll()
    monotonic.now, clock.now = 30.0, 105.0  # a's line is due: 0.25 * 7 + 0.75 * 0 = 1.75 s
    lines.poll()
    overall = [line for line in stream.getvalue().splitlines() if "finished" in line]
    assert overall == [
        "[reproduce] 0/2 finished, elapsed 0s, ETA 36s",
        "[reproduce] 0/2 finished, elapsed 5s, ETA 32s",
    ]


def test_run_ends_with_the_claims_that_did_not_reproduce(tmp_path, capsys):
    out = tmp_path / "capacity"
    args = ["run", "assoc-capacity", "--preset", "cpu", "dims=[4,8]", "steps=50", "facts=100"]
    assert main([*args, "--out", str(out)]) == 0
    claims = json.loads((out / "claims.json").read_text())
    # Make the outcome known whatever the run measured: the first claim not reproduced, the
    # rest reproduced; rerunning finds the run complete and summarises the file as it stands.
    for i, claim in enumerate(claims):
        claim["verdict"] = "not reproduced" if i == 0 else "reproduced"
    (out / "claims.json").write_text(json.dumps(claims))
    RunDir(out).mark_complete()  # COMPLETE records file hashes: re-record the edited claims.json
    capsys.readouterr()
    assert main([*args, "--out", str(out)]) == 0
    text = capsys.readouterr().out.splitlines()
    n = len(claims)
    assert text[1:4] == [
        "results:",
        "  study           preset  reproduced  not reproduced  inconclusive  not measured",
        "  --------------  ------  ----------  --------------  ------------  ------------",
    ]
    assert text[4].split() == ["assoc-capacity", "cpu", str(n - 1), "1", "0", "0"]
    assert text[5].startswith("Preset cpu: a laptop-scale reproduction")
    assert text[6] == "  160M scale."  # the banner wrapped to fit a screen
    assert text[7] == "claims not reproduced:"
    full = f"  not reproduced  {claims[0]['claim']} ({claims[0]['source']})"
    assert text[8] == (full if len(full) <= 110 else full[:109] + "…")  # cut to fit a screen
    second = f"  {'':<16}published {claims[0]['published']}; ours {claims[0]['ours']}"
    assert text[9] == (second if len(second) <= 110 else second[:109] + "…")
    assert text[10] == f"run directory: {out} (claims.json: every rule and number)"
    assert len(text) == 11 and max(len(line) for line in text[1:10]) <= 110


def test_run_at_smoke_says_it_cannot_judge_claims(tmp_path, capsys):
    """A smoke run's table ends with the preset's line: its verdicts are not evidence; no
    claim is listed as not reproduced."""
    out = tmp_path / "smoke"
    assert main(["run", "assoc-capacity", "--preset", "smoke", "--out", str(out)]) == 0
    text = capsys.readouterr().out.splitlines()
    verdicts = [c["verdict"] for c in json.loads((out / "claims.json").read_text())]
    counts = [str(verdicts.count(v)) for v in ("reproduced", "not reproduced", "inconclusive")]
    assert text[4].split() == ["assoc-capacity", "smoke", *counts, "0"]
    assert text[5] == (
        "Preset smoke: checks the code runs end to end; its verdicts are not evidence."
    )
    assert text[6].startswith("run directory: ") and len(text) == 7


def test_list_says_what_each_experiment_reproduces_and_what_its_presets_cost(capsys):
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == study_names()
    for name, line in zip(study_names(), lines, strict=False):
        study = get_study(name)
        assert [p.name for p in study.presets] == available_presets(name)
        assert study.reproduces in line and re.search(r"\bsmoke [<\d]", line)
        assert re.search(r"paper [AB]\b|beyond the papers", line)


def test_reproduce_runs_the_default_set_and_only_adds_the_others(monkeypatch, capsys):
    """A long study beyond the papers (``in_reproduce=False`` in its record) is left out of a
    plain ``tailmem reproduce`` and is said so by ``tailmem list``; ``--only`` still selects
    it."""
    import sys
    from dataclasses import replace

    from tailmem.reproduce import run_order, select_experiments

    name = "ablation"  # one a plain reproduce runs, made one of the others here
    study = get_study(name)
    assert study.in_reproduce and name in select_experiments(None)
    monkeypatch.setattr(
        sys.modules[study.run.__module__], "STUDY", replace(study, in_reproduce=False)
    )
    assert name not in select_experiments(None)
    chosen = select_experiments(None)
    assert chosen == [n for n in run_order(study_names(), "cpu") if get_study(n).in_reproduce]
    times = [get_study(n).seconds("cpu") for n in chosen]
    assert [s for s in times if s is not None] == sorted(s for s in times if s is not None)
    assert select_experiments([name]) == [name]
    assert main(["list"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith(name)]
    assert line.endswith("| --only")


def test_the_studies_page_names_every_experiment():
    text = (README.parent / "docs" / "studies.md").read_text()
    paragraph = text[text.index("\nExperiments (") :].split("\n\n")[0]
    assert [name for name in study_names() if f"`{name}`" not in paragraph] == []


@pytest.mark.parametrize("kind", ["the README", "a JSON file"])
def test_diagnose_on_a_file_that_is_not_a_checkpoint_says_what_it_expected(tmp_path, capsys, kind):
    path = README if kind == "the README" else tmp_path / "results.json"
    if kind == "a JSON file":  # JSON that even looks like a checkpoint's contents
        path.write_text(json.dumps({"format": "tailmem-checkpoint", "step": 3, "model": {}}))
    assert main(["diagnose", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"tailmem: error: {path} is not a checkpoint")
    expected = line.split("; expected ", 1)[1]
    assert "checkpoint (step_*.pt)" in expected and "run directory" in expected
    assert expected.endswith("Hugging Face model folder")
    assert "delete" not in line

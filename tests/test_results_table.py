"""What ``tailmem run`` and ``tailmem reproduce`` print when they end (the results table), and
a smoke run marked as no evidence in every section of the report."""

from __future__ import annotations

import csv

from report_fixture import QA_ANSWERS, cpu_style_folder, make_run
from tailmem.claims.core import VERDICTS
from tailmem.experiments import headline_questions
from tailmem.report.reader import read_run
from tailmem.report.render import write_report
from tailmem.report.summary import edge_rates, folder_summary, run_summary
from tailmem.rundir import RunDir


def _tuning(run: RunDir, name: str, rows: list[dict[str, object]]) -> None:
    path = run.path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_a_folders_table_counts_each_study_and_lists_answers_and_rates_at_a_grid_edge(tmp_path):
    cpu_style_folder(tmp_path)
    qa = RunDir(tmp_path / "knowledge-qa")
    row = {"ffn": "plain", "arm": "muon", "chosen": 0.96, "edge": "highest", "trials": 6}
    _tuning(qa, "tuning.csv", [row, {**row, "arm": "adam", "chosen": 0.001, "edge": ""}])
    _tuning(qa, "points/bpe/tuning.csv", [{**row, "arm": "mine", "edge": "lowest"}])
    _tuning(qa, "runs/plain/muon/x/tuning.csv", [row])  # a training run's folder: not a table
    lines = folder_summary(tmp_path).splitlines()
    assert lines[0] == "results:"
    assert lines[1].split() == ["study", "preset", *" ".join(VERDICTS).split()]
    table = {line.split()[0]: line.split()[1:] for line in lines[3:7]}
    assert set(table) == {"assoc-two-group", "knowledge-qa", "spectra", "optim-bench"}
    for name, cells in table.items():  # every claim of the study, not only the run's
        claims = RunDir(tmp_path / name).read_json("claims.json")
        counts = [sum(c["verdict"] == v for c in claims) for v in VERDICTS[:3]]
        assert cells[0] == "cpu" and [int(c) for c in cells[1:4]] == counts
    assert lines[7].startswith("Preset cpu: a laptop-scale reproduction")
    text = "\n".join(lines)
    for answer in QA_ANSWERS:  # the number behind each answer, its interval included
        evidence = " ".join(answer["evidence"].split())
        assert evidence in " ".join(text.split())
    assert "  knowledge-qa: plain/muon 0.96, the highest tried (tuning.csv)" in lines
    assert "  knowledge-qa: plain/mine 0.96, the lowest tried (points/bpe/tuning.csv)" in lines
    assert len(edge_rates(read_run(tmp_path / "knowledge-qa"))) == 2
    assert max(len(line) for line in lines) <= 110


def test_a_smoke_runs_table_says_its_verdicts_are_not_evidence(tmp_path):
    make_run(tmp_path, "assoc-two-group", "smoke", claims=4)
    lines = run_summary(tmp_path / "assoc-two-group").splitlines()
    assert lines[3].split()[:2] == ["assoc-two-group", "smoke"]
    assert (
        lines[4] == "Preset smoke: checks the code runs end to end; its verdicts are not evidence."
    )
    assert "claims not reproduced:" not in lines  # smoke verdicts say nothing about the papers
    assert len(lines) == 6


def test_every_section_claim_and_figure_of_a_smoke_report_says_smoke(tmp_path):
    """The banner on the first screen, again at the head of every study's section; no green
    "reproduced" row; every figure caption marked (and its PNG: test_outputs)."""
    cpu_style_folder(tmp_path, preset="smoke")
    write_report(tmp_path, headline_questions())
    html = (tmp_path / "report.html").read_text()
    sections = html.split('<section id="run-')[1:]
    assert len(sections) == 4
    banner = '<p class="banner preset-smoke"><b>Preset smoke</b>: checks the code runs end to end'
    assert all(banner in section for section in sections)
    assert 'class="v-reproduced"' not in html and '<tr class="v-smoke">' in html
    captions = html.count("<figcaption>")
    assert captions == 15 and html.count(" (smoke: not evidence)</figcaption>") == captions
    md = (tmp_path / "report.md").read_text()
    assert md.count("> **Preset smoke: checks the code runs end to end") == 1 + 4
    assert "| reproduced (smoke: not evidence) |" in md

"""``tailmem export RUN``: a run's results table as LaTeX or CSV, every row, a finished run only."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from report_fixture import QA_ANSWERS, make_run
from tailmem.claims.registry import claims_of
from tailmem.cli import main
from tailmem.report.export import latex_escape
from tailmem.rundir import RunDir


def _export(capsys, *argv: str) -> str:
    assert main(["export", *argv]) == 0
    return capsys.readouterr().out


def _body(tex: str) -> list[str]:
    """The data rows of an exported tabular."""
    return tex.split("\\midrule\n", 1)[1].split("\\bottomrule", 1)[0].splitlines()


def test_the_claims_as_csv_are_every_claim_of_the_experiment_as_the_run_wrote_it(tmp_path, capsys):
    run = make_run(tmp_path, "assoc-two-group", claims=4)
    text = _export(capsys, str(run.path), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    written = {c["id"]: c for c in json.loads(run.file("claims.json").read_text())}
    assert len(rows) == len(claims_of("assoc-two-group"))  # the others as not measured
    for row in rows[:4]:
        claim = written[row["claim"].rsplit("(", 1)[1].rstrip(")")]
        assert (row["ours"], row["verdict"]) == (claim["ours"], claim["verdict"])
        assert row["seeds"] == "0, 1, 2 (n = 3)"
    assert {row["verdict"] for row in rows[4:]} == {"not measured"}


def test_a_table_as_latex_has_every_row_mean_and_se_merged_and_escapes(tmp_path, capsys):
    run = make_run(tmp_path, "knowledge-qa", tables=True, answers=QA_ANSWERS)
    tex = _export(capsys, str(run.path), "--table", "final.csv")
    assert "\\caption{knowledge-qa (cpu): final FTA of the rarest group}" in tex
    assert "\\label{tab:knowledge-qa-final}" in tex
    assert "\\begin{tabular}{lrr}" in tex  # text left, numbers right
    assert _body(tex) == [r"muon & 0.9012 $\pm$ 0.008 & 3 \\", r"adam & 0.625 $\pm$ 0.0084 & 3 \\"]
    # a CSV the report does not show, longer than the report's 40 rows: every row, raw as CSV
    rows = [{"arm": f"a_{i}", "x": i / 7} for i in range(55)]
    RunDir(run.path).write_csv("long.csv", rows)
    RunDir(run.path).mark_complete()
    tex = _export(capsys, str(run.path), "--table", "long")
    assert len(_body(tex)) == 55 and _body(tex)[54] == r"a\_54 & 7.714 \\"
    text = _export(capsys, str(run.path), "--table", "long.csv", "--format", "csv")
    assert list(csv.DictReader(io.StringIO(text)))[54] == {"arm": "a_54", "x": str(54 / 7)}
    answers = _export(capsys, str(run.path), "--table", "answers")
    assert len(_body(answers)) == len(QA_ANSWERS)
    assert "1.01 [0.95, 1.08] $\\times$ Muon's exposures" in answers
    for source in (tex, answers):  # balanced environments and braces
        assert source.count("\\begin{") == source.count("\\end{") == 2
        assert source.replace("\\{", "").count("{") == source.replace("\\}", "").count("}")


def test_latex_escape_writes_special_characters_and_symbols_pdflatex_reads():
    assert latex_escape("a_b & 50% #1 $x {y} ~^\\") == (
        r"a\_b \& 50\% \#1 \$x \{y\} \textasciitilde{}\textasciicircum{}\textbackslash{}"
    )
    assert latex_escape("0.9 ± 0.01, τ ≥ 0.5 — ×1.25") == (
        r"0.9 $\pm$ 0.01, $\tau$ $\geq$ 0.5 --- $\times$1.25"
    )
    assert latex_escape("ρ²") == r"$\rho ^{2}$"


def test_a_smoke_runs_caption_says_it_is_not_evidence(tmp_path, capsys):
    run = make_run(tmp_path, "assoc-two-group", "smoke", claims=2)
    tex = _export(capsys, str(run.path))
    assert re.search(r"\\caption\{assoc-two-group \(smoke\): .*not evidence\)\}", tex)


@pytest.mark.parametrize(
    ("damage", "argv", "message"),
    [
        (lambda run: run.file("COMPLETE").unlink(), [],
         "{run} is not a finished run (it has no COMPLETE marker); expected a complete run: "
         "rerun it"),
        (lambda run: run.file("claims.json").write_text("[]"), [],
         "{run} is not a finished run ({run}/claims.json does not match the hash recorded in "
         "COMPLETE); expected a complete run: rerun it"),
        (lambda run: None, ["--table", "nope"],
         "--table: {run} has no table 'nope'; expected one of: claims, final.csv"),
        (lambda run: None, ["--table", "../x"],
         "--table: {run} has no table '../x'; expected one of: claims, final.csv"),
    ],
)  # fmt: skip
def test_refusals_are_one_line_exit_2(tmp_path, capsys, damage, argv, message):
    run = make_run(tmp_path, "assoc-two-group", claims=2, tables=True)
    damage(run)
    assert main(["export", str(run.path), *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"tailmem: error: {message.format(run=run.path)}\n"


def test_a_results_folder_is_not_a_run(tmp_path, capsys):
    make_run(tmp_path, "assoc-two-group")
    assert main(["export", str(tmp_path)]) == 2
    assert "is not a run folder (no config.yaml)" in capsys.readouterr().err

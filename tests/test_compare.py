"""``tailmem compare``: runs of one experiment side by side, refused in one line otherwise."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from readme_blocks import block, commands
from report_fixture import make_run
from tailmem.claims.registry import claims_of
from tailmem.cli import main
from tailmem.compare import compare


@pytest.fixture(scope="module")
def readme_comparison(tmp_path_factory) -> Path:
    """The README's comparison run verbatim in a fresh folder: two smoke runs of knowledge-qa
    that differ in one key (train.steps 8 and 12), then ``tailmem compare`` into runs/qa-compare.
    Returns the folder; the compare command's printed summary is in ``printed.txt``."""
    root = tmp_path_factory.mktemp("readme")
    argvs = commands(block("Commands", "bash", "tailmem compare"))
    assert [argv[:2] for argv in argvs] == [["tailmem", "run"]] * 2 + [["tailmem", "compare"]]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        for argv in argvs[:2]:
            assert main(argv[1:]) == 0
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            assert main(argvs[2][1:]) == 0
    (root / "printed.txt").write_text(printed.getvalue())
    return root


def test_two_runs_differing_in_one_key_show_that_key_and_both_verdict_columns(readme_comparison):
    root = readme_comparison
    a, b, out = root / "runs" / "qa8", root / "runs" / "qa12", root / "runs" / "qa-compare"
    lines = (root / "printed.txt").read_text().splitlines()
    assert lines[0] == "compare knowledge-qa: qa8 (smoke) vs qa12 (smoke)"
    assert lines[1:3] == ["config: 1 key differs", "  train.steps: 8 | 12"]
    assert lines[-1] == "written: runs/qa-compare/compare.md, runs/qa-compare/compare.html"

    md = (out / "compare.md").read_text()
    config = "| key | qa8 (smoke) | qa12 (smoke) |\n|---|---|---|\n| train.steps | 8 | 12 |\n"
    assert config in md
    header = ("| claim | published | verdict (qa8 (smoke)) | ours (qa8 (smoke)) | "
              "verdict (qa12 (smoke)) | ours (qa12 (smoke)) |")  # fmt: skip
    assert header in md
    # One row per claim of the experiment, each run's verdict in its own column, as each run's
    # claims.json says.
    table = md.split(header, 1)[1].split("\n\n", 1)[0].strip().splitlines()[1:]
    assert len(table) == len(claims_of("knowledge-qa"))
    verdicts = {}
    for run in (a, b):
        written = json.loads((run / "claims.json").read_text())
        verdicts[run.name] = {c["id"]: c["verdict"] for c in written}
    for line, claim in zip(table, claims_of("knowledge-qa"), strict=True):
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        assert cells[0].endswith(f"({claim.id})")
        for column, run in ((2, a), (4, b)):
            assert cells[column] == verdicts[run.name].get(claim.id, "not measured")
    html = (out / "compare.html").read_text()
    assert "<td>train.steps</td><td>8</td><td>12</td>" in html
    assert "<th>verdict (qa8 (smoke))</th><th>ours (qa8 (smoke))</th>" in html
    assert "<th>verdict (qa12 (smoke))</th><th>ours (qa12 (smoke))</th>" in html
    figures = len(json.loads((a / "report.json").read_text())["figures"])
    assert figures > 4 and html.count("<img ") == 2 * figures  # every figure of both runs
    assert html.split("<details>")[0].count("<img ") == 2 * 4  # the key ones open, side by side


def test_runs_of_different_presets_name_their_preset_and_are_never_added_up(tmp_path, capsys):
    make_run(tmp_path, "assoc-two-group", "smoke", name="small", claims=4)
    make_run(tmp_path, "assoc-two-group", "cpu", name="laptop", claims=2)
    found = compare([tmp_path / "small", tmp_path / "laptop"])
    assert found.labels == ("small (smoke)", "laptop (cpu)")
    rest = len(claims_of("assoc-two-group"))
    assert [found.counts(r) for r in found.runs] == [[2, 1, 1, rest - 4], [1, 1, 0, rest - 2]]
    assert main(["compare", str(tmp_path / "small"), str(tmp_path / "laptop")]) == 0
    printed = capsys.readouterr().out
    assert (
        "These runs were made at different presets (smoke, cpu): each column is one run at its "
        "own preset; nothing is added up across them. Smoke verdicts are not evidence."
    ) in printed
    assert "  preset: smoke | cpu" in printed
    assert f"  small (smoke): 2 reproduced, 1 not reproduced, 1 inconclusive, {rest - 4}" in printed
    assert f"  laptop (cpu): 1 reproduced, 1 not reproduced, 0 inconclusive, {rest - 2}" in printed
    differ = [row.id for row in found.claims if not row.agree]
    assert f"claims whose verdict differs: {len(differ)} of {rest}" in printed
    assert differ == [c.id for c in claims_of("assoc-two-group")[2:4]]  # measured in one only


def test_the_config_difference_is_key_by_key_with_missing_keys_shown(tmp_path):
    make_run(tmp_path, "assoc-two-group", name="a")
    make_run(tmp_path, "assoc-two-group", name="b")
    config = tmp_path / "b" / "config.yaml"
    text = config.read_text().replace("config:\n  seed: 0\n", "config:\n  seed: 3\n  ks: [1, 2]\n")
    config.write_text(text)
    found = compare([tmp_path / "a", tmp_path / "b"])
    assert [(d.key, d.values) for d in found.config] == [
        ("seed", ("0", "3")),
        ("ks", ("—", "[1, 2]")),
    ]


@pytest.mark.parametrize(
    ("make", "args", "message"),
    [
        (
            lambda root: (make_run(root, "assoc-two-group", name="a"),
                          make_run(root, "spectra", name="b")),
            ["a", "b"],
            "compare: {root}/a is a run of assoc-two-group but {root}/b of spectra; expected "
            "runs of one experiment",
        ),
        (lambda root: make_run(root, "spectra", name="a"), ["a", "a"],
         "compare: {root}/a is given twice; expected each run once"),
        (lambda root: make_run(root, "spectra", name="a"), ["a"],
         "compare: got 1 run; expected two or more run folders"),
        (lambda root: make_run(root, "spectra", name="a"), ["a", ""],
         "compare: got an empty path; expected a run folder ('.' for this one)"),
        (lambda root: (make_run(root, "spectra", name="a"), (root / "b").mkdir()), ["a", "b"],
         "compare: {root}/b is not a run folder (no config.yaml); expected one written by "
         "tailmem run or reproduce"),
        (
            lambda root: (make_run(root, "spectra", name="a"), make_run(root, "spectra", name="b")),
            ["a", "b", "--out", "a/cmp"],
            "{root}/a/cmp lies inside the run folder {root}/a; expected a new or empty folder, "
            "or a compare folder (written by tailmem compare --out) outside any run folder",
        ),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, make, args, message):
    make(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    argv = [str(tmp_path / a) if a and not a.startswith("-") else a for a in args]
    assert main(["compare", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"tailmem: error: {message.format(root=tmp_path)}\n"
    assert captured.out == ""
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before

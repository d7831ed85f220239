"""``tailmem compare``: runs of one experiment side by side, refused in one line otherwise."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
from pathlib import Path

import pytest
from scipy import stats

from readme_blocks import DOCS, block, commands
from report_fixture import make_run
from tailmem.claims.registry import claims_of
from tailmem.cli import main
from tailmem.compare import NO_CURVES, compare, render_markdown, summary
from tailmem.compare_curves import curves
from tailmem.rundir import RunDir

SMOKE_BANNER = "Preset smoke: checks the code runs end to end; its verdicts are not evidence."


@pytest.fixture(scope="module")
def readme_comparison(tmp_path_factory) -> Path:
    """The reading-results page's comparison run verbatim in a fresh folder: two smoke runs of
    knowledge-qa that differ in one key (train.steps 8 and 12), then ``tailmem compare`` into
    runs/qa-compare.
    Returns the folder; the compare command's printed summary is in ``printed.txt``."""
    root = tmp_path_factory.mktemp("readme")
    page = DOCS / "reading-results.md"
    argvs = commands(block("Comparing runs", "bash", "tailmem compare", page))
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
    assert lines[1] == SMOKE_BANNER
    assert lines[2:4] == ["config: 1 key differs", "  train.steps: 8 | 12"]
    assert lines[-1] == (
        "written: runs/qa-compare/compare_curves.png, runs/qa-compare/compare_curves.svg, "
        "runs/qa-compare/compare.md, runs/qa-compare/compare.html"
    )

    md = (out / "compare.md").read_text()
    config = "| key | qa8 (smoke) | qa12 (smoke) |\n|---|---|---|\n| train.steps | 8 | 12 |\n"
    assert config in md
    header = ("| claim | published | verdict (qa8 (smoke)) | ours (qa8 (smoke)) | "
              "verdict (qa12 (smoke)) | ours (qa12 (smoke)) | "
              "difference (qa12 (smoke) − qa8 (smoke)) |")  # fmt: skip
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
    # every figure of both runs, and the overlaid training curves
    assert figures > 4 and html.count("<img ") == 2 * figures + 1
    assert html.split("<details>")[0].count("<img ") == 2 * 4 + 1  # the key ones open


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


def _two_runs(root: Path) -> tuple[Path, Path]:
    make_run(root, "assoc-two-group", name="a", claims=4)
    make_run(root, "assoc-two-group", name="b", claims=4)
    return root / "a", root / "b"


def test_a_killed_run_and_a_run_edited_after_it_finished_are_labelled(tmp_path, capsys):
    """As the report does: a run without COMPLETE (killed) is incomplete, and one whose
    claims.json no longer matches COMPLETE's hash changed after it finished; every header and a
    note say so, and the numbers stay shown (labelled, not hidden)."""
    a, b = _two_runs(tmp_path)
    (a / "COMPLETE").unlink()  # killed before it finished
    claims = json.loads((b / "claims.json").read_text())
    claims[0]["verdict"] = "reproduced" if claims[0]["verdict"] != "reproduced" else "inconclusive"
    (b / "claims.json").write_text(json.dumps(claims))  # edited after COMPLETE
    out = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == (
        "compare assoc-two-group: a (cpu, incomplete) vs b (cpu, changed after it finished)"
    )
    assert printed[2] == (
        "a (cpu, incomplete): incomplete (it has no COMPLETE marker); it stopped before finishing "
        "(killed, or failed): its claims are what it had written, not a finished run's; rerun it "
        "to finish it"
    )
    assert printed[3].startswith(
        f"b (cpu, changed after it finished): changed after it finished ({b / 'claims.json'} does "
        "not match the hash recorded in COMPLETE); its files are not what the run wrote"
    )
    md = (out / "compare.md").read_text()
    assert "| verdict (a (cpu, incomplete)) | ours (a (cpu, incomplete)) |" in md
    assert "- *b (cpu, changed after it finished): changed after it finished (" in md
    html = (out / "compare.html").read_text()
    assert html.count('<p class="incomplete">') == 2


def test_a_run_still_being_written_is_refused_in_one_line(tmp_path, capsys):
    a, b = _two_runs(tmp_path)
    with RunDir(b).lock():  # a tailmem process writing b
        assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp")]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"tailmem: error: compare: {b} is being written by a tailmem process (pid {os.getpid()}); "
        "expected a finished run: wait for it to finish, then compare\n"
    )
    assert captured.out == "" and not (tmp_path / "cmp").exists()
    assert RunDir(b).writer() is None  # the probe left no lock behind
    assert main(["compare", str(a), str(b)]) == 0


@pytest.mark.parametrize("where", ["run", "out"])
def test_a_symbolic_link_loop_is_one_line_exit_2(tmp_path, capsys, where):
    a, b = _two_runs(tmp_path)
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    loop = str(tmp_path / "loop1")
    argv = [a, loop] if where == "run" else [a, b, "--out", loop]
    assert main(["compare", *map(str, argv)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    assert captured.err.startswith("tailmem: error: ")
    assert "symbolic-link loop" in captured.err


def test_the_difference_column_is_each_measure_minus_the_first_runs_with_its_interval(tmp_path):
    """b's first claim measures 0.530 ± 0.020 over 3 seeds, a's 0.500 ± 0.010: the difference
    is +0.03 with the 95 % t interval of Welch's df (scipy's quantile, computed here)."""
    a, b = _two_runs(tmp_path)
    claims = json.loads((b / "claims.json").read_text())
    claims[0]["ours"] = "0.530 ± 0.020"
    (b / "claims.json").write_text(json.dumps(claims))
    RunDir(b).mark_complete()
    found = compare([a, b])
    (delta,) = found.claims[0].differences[0]
    se_a, se_b = 0.010, 0.020
    df = (se_a**2 + se_b**2) ** 2 / (se_a**4 / 2 + se_b**4 / 2)
    half = stats.t.ppf(0.975, df) * math.hypot(se_a, se_b)
    assert delta.estimate == pytest.approx(0.03)
    assert delta.interval == pytest.approx((0.03 - half, 0.03 + half))
    assert [d.estimate for d in found.claims[1].differences[0]] == [0.0]
    md = render_markdown(found, tmp_path)
    assert f"| +0.03 [{0.03 - half:+.3g}, {0.03 + half:+.3g}] |" in md
    printed = summary(found)
    assert f"  {found.claims[0].id} (b (cpu)): +0.03 [{0.03 - half:+.3g}" in printed


def test_the_overlaid_curves_are_each_arms_seed_mean_of_the_rarest_group(readme_comparison):
    """The curves drawn for the page's two runs are, per arm, the rarest group's FTA at each
    evaluation of its result.json; the page embeds them and compare.md links them."""
    root = readme_comparison
    runs = [root / "runs" / "qa8", root / "runs" / "qa12"]
    drawn = curves(compare(runs))
    assert drawn is not None and drawn.metric == "fta"
    for index, run in enumerate(runs):
        for result_file in (run / "runs" / "plain").glob("*/*/result.json"):
            result = json.loads(result_file.read_text())
            arm = f"plain/{result_file.parent.parent.name}"
            (curve,) = [c for c in drawn.curves if c.run == index and c.arm == arm]
            assert curve.steps == tuple(e["step"] for e in result["evals"])
            assert curve.values == tuple(e["fta"][-1] for e in result["evals"])
    assert (
        "![The runs' training curves overlaid"
        in (root / "runs" / "qa-compare" / "compare.md").read_text()
    )
    assert (root / "runs" / "qa-compare" / "compare_curves.png").stat().st_size > 10_000


def test_runs_without_training_curves_say_so(tmp_path):
    a, b = _two_runs(tmp_path)
    found = compare([a, b])
    assert curves(found) is None
    assert NO_CURVES in render_markdown(found, tmp_path)


def test_the_summary_counts_config_keys_and_environment_facts_apart(readme_comparison):
    """The count line names what the listed lines are: config keys, then environment facts."""
    import dataclasses

    from tailmem.compare import Difference

    runs = readme_comparison / "runs"
    c = compare([runs / "qa8", runs / "qa12"])
    facts = (Difference("git_commit", ("abc", "def")), Difference("torch", ("2.12", "2.13")))
    lines = summary(dataclasses.replace(c, environment=facts)).splitlines()
    assert lines[2:6] == [
        "config: 1 key differs; environment: 2 facts",
        "  train.steps: 8 | 12",
        "  environment git_commit: abc | def",
        "  environment torch: 2.12 | 2.13",
    ]

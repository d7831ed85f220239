import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from tailmem.claims.core import VERDICTS, ClaimResult
from tailmem.claims.listing import EXPERIMENTS
from tailmem.claims.registry import CLAIMS, claims_of, write_claims
from tailmem.errors import DataError
from tailmem.report.render import write_report
from tailmem.rundir import RunDir

OPTIMIZERS = ("gd", "adam", "signgd", "muon")


def _make_run(root, name, verdicts, figure=True, complete=True):
    """A run of assoc-capacity whose claims (one optimizer each) carry ``verdicts``."""
    from dataclasses import dataclass

    @dataclass
    class C:
        seed: int = 0

    run = RunDir(root / name)
    run.write_config("assoc-capacity", "smoke", C())
    claims = [
        ClaimResult(f"cabannes.capacity.{OPTIMIZERS[i]}", f"claim {i}", "A4", "1", "1", "rule", v)
        for i, v in enumerate(verdicts)
    ]
    write_claims(run, claims)
    if figure:
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        run.save_figure(fig, "curve")
    if complete:
        run.mark_complete(1.5)
    return run


def test_report_counts_verdicts_and_embeds_figures(tmp_path):
    _make_run(tmp_path, "exp-a", ["reproduced", "not reproduced"])
    _make_run(tmp_path, "exp-b", ["not measured"], figure=False, complete=False)
    html_path = write_report(tmp_path)
    text = html_path.read_text()
    assert text.count("data:image/png;base64,") == 1
    # The summary counts every registry claim: the runs' results, the claims of experiments
    # not in the folder and the claims no experiment measures.
    others = sum(len(claims_of(e)) for e in EXPERIMENTS if e != "assoc-capacity")
    not_measured = 1 + others + len(claims_of(None))
    assert "<b>1</b> reproduced" in text and f"<b>{not_measured}</b> not measured" in text
    assert 3 + others + len(claims_of(None)) == len(CLAIMS) + 2  # a family gives 3 results
    assert all(f"</b> {v}" in text for v in VERDICTS)
    assert "incomplete" in text
    md = (tmp_path / "report.md").read_text()
    assert "![curve](exp-a/curve.png)" in md and "| claim 1 |" in md
    verdicts = json.loads((tmp_path / "verdicts.json").read_text())
    assert [c["verdict"] for c in verdicts["exp-a"]] == ["reproduced", "not reproduced"]


@pytest.mark.parametrize(
    ("damage", "fragment"),
    [
        (lambda r: (r / "claims.json").write_text("[{"), "claims.json is not valid JSON"),
        (lambda r: (r / "claims.json").write_text('{"a": 1}'), "expected a list of claims"),
        (lambda r: (r / "config.yaml").write_text("- 1\n"), "lacks the experiment/config"),
        (lambda r: (r / "report.json").write_text('{"figures": [{"file": "x.png"}]}'), "missing"),
    ],
)
def test_damaged_results_are_one_clear_error(tmp_path, damage, fragment):
    _make_run(tmp_path, "exp", ["reproduced"])
    damage(tmp_path / "exp")
    with pytest.raises(DataError) as info:
        write_report(tmp_path)
    assert fragment in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "report.html").exists()


def test_empty_folder_is_an_error(tmp_path):
    with pytest.raises(DataError, match="holds no run directories"):
        write_report(tmp_path)


def test_tables_show_long_floats_to_four_significant_digits(tmp_path):
    run = _make_run(tmp_path, "exp-a", ["reproduced"])
    rows = [
        {"name": "slope", "value": -0.9438772991412437, "k": 3000000, "p": 0.591},
        {"name": "ratio", "value": 0.9999999999999996, "k": 99, "p": 7.284505333274612e-16},
        {"name": "big", "value": 12345.678901, "k": 1, "p": 0.0012353776397090606},
    ]
    run.write_csv("t.csv", rows)
    run.write_json("report.json", {"tables": [{"file": "t.csv", "caption": "numbers"}]})
    write_report(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| slope | -0.9439 | 3000000 | 0.591 |" in md
    assert "| ratio | 1.000 | 99 | 7.285e-16 |" in md
    assert "| big | 12346 | 1 | 0.001235 |" in md
    assert "-0.9438772991412437" in (tmp_path / "exp-a" / "t.csv").read_text()  # CSV keeps all


def test_claims_show_rule_seeds_reason_and_column_notes(tmp_path):
    run = RunDir(tmp_path / "cap")
    _make_run(tmp_path, "cap", [])
    claim = ClaimResult(
        "cabannes.capacity.gd", "c", "Related", "p", "o", "the rule in words", "inconclusive",
        reason="model at chance", seeds=[0, 1, 2],
    )  # fmt: skip
    write_claims(run, [claim])
    run.write_csv("t.csv", [{"d": 4, "error": 0.5}])
    columns = {"d": "embedding dimension", "absent": "not a column"}
    run.write_json("report.json", {"tables": [{"file": "t.csv", "columns": columns}]})
    write_report(tmp_path)
    md = (tmp_path / "report.md").read_text()
    why = CLAIMS["cabannes.capacity"].why
    cells = f"| the rule in words — why: {why} | 0, 1, 2 (n = 3) | inconclusive: model at chance |"
    assert cells in md
    assert "Columns: **d** embedding dimension" in md and "absent" not in md
    html = (tmp_path / "report.html").read_text()
    assert '<tr class="v-inconclusive">' in html
    # Every table sits in a horizontally scrolling box, so none is clipped at any width.
    assert html.count('<div class="scroll"><table') == html.count("<table")


def test_the_data_behind_a_study_is_printed_under_its_summary(tmp_path):
    run = _make_run(tmp_path, "exp-a", ["reproduced"])
    data = {"corpus": "the embedded Python standard-library documentation corpus",
            "train_tokens": 1234567, "val_tokens": 4321,
            "tokenizer": "byte-level BPE trained on the corpus, 2048 ids"}  # fmt: skip
    run.write_json("report.json", {"summary": "s", "data": data})
    write_report(tmp_path)
    line = ("**Data**: the embedded Python standard-library documentation corpus; 1,234,567 "
            "training tokens, 4,321 validation tokens; tokenizer: byte-level BPE trained on the "
            "corpus, 2048 ids")  # fmt: skip
    assert line in (tmp_path / "report.md").read_text()
    assert "<b>Data</b>: the embedded Python" in (tmp_path / "report.html").read_text()

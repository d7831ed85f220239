import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from tailmem.errors import DataError
from tailmem.report.claims import ClaimResult, write_claims
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
    assert "<b>1</b> reproduced" in text and "<b>1</b> not measured" in text
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

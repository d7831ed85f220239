"""The cross-implementation page (docs/two-implementations.md) is its results file rendered
(scripts/reference_check.py), and the collector refuses what is not a finished reference run or
an output file of the other implementation, in one line."""

from __future__ import annotations

import json

import pytest

import script_module
from tailmem.errors import DataError


def _script():
    return script_module.load("scripts/reference_check.py")


def test_the_page_is_the_results_file_rendered():
    script = _script()
    data = json.loads(script.VALUES.read_text())
    page = script.PAGE.read_text()
    assert script.page_block(page) == script.tables(data)
    assert script.page_block(page, script.PROBES) == script.probe_table(data["probes"])
    assert all(p["config"].startswith("examples/gated/") for p in data["probes"])
    assert {"d 128 plain", "d 256 gated"} <= set(data["settings"])
    for run in data["tailmem_runs"]:
        assert run["commit"] and run["digest"] and run["setting"] in data["settings"]


def test_the_tables_pool_every_draw_and_difference_the_means(tmp_path):
    script = _script()
    data = {"settings": {"d 8 plain": {
        "tailmem": {"muon": {"0": {"0": 0.5, "1": 0.7}, "1": {"0": 0.3}}},
        "reference": {"muon": {"9": {"0": 0.4, "1": 0.4, "2": 0.4}}},
    }}, "tailmem_runs": []}  # fmt: skip
    text = script.tables(data)
    assert "0.600 [" in text and "(n 2)" in text  # tailmem's first draw: 0.5 and 0.7
    assert "0.500 [" in text and "(n 3)" in text  # every draw pooled: 0.5, 0.7, 0.3
    assert "+0.100 [" in text  # 0.5 − 0.4
    assert "tailmem 1: 0.30" in text and "reference 9: 0.40" in text


def test_collect_refuses_a_folder_that_is_no_run_and_a_file_that_is_no_output(tmp_path):
    script = _script()
    with pytest.raises(DataError, match="is not a run folder; expected a finished knowledge-qa"):
        script.collect([tmp_path], [])
    bad = tmp_path / "out.json"
    bad.write_text('{"arm": "muon"}')
    with pytest.raises(DataError, match="is not an output file of the independent"):
        script.collect([], [f"1234={bad}"])
    with pytest.raises(DataError, match="expected DRAW=FILE"):
        script.collect([], [str(bad)])


def test_a_probe_row_pairs_muon_and_adam_by_seed():
    script = _script()
    probe = {"config": "examples/gated/x.yaml", "rates": {"muon": "7.68", "adam": "0.0005"},
             "fta": {"muon": {"0": 0.55, "1": 0.50, "2": 0.52},
                     "adam": {"0": 0.77, "1": 0.72, "2": 0.77, "3": 0.9}}}  # fmt: skip
    text = script.probe_table([probe])
    assert "`examples/gated/x.yaml` | 7.68 | 0.0005 | 0.523 [" in text
    assert "-0.230 [" in text and text.count("(n 3)") == 2  # seed 3 has no Muon run to pair

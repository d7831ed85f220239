"""The documentation's results page (docs/results.md) is the template filled from the results
file of the runs it names (``scripts/readme_results.py``): a number edited by hand, or a run
re-done without re-rendering, fails here."""

from __future__ import annotations

import json

import script_module


def _script():
    return script_module.load("scripts/readme_results.py")


def test_the_results_page_is_the_template_filled_from_the_results_file():
    script = _script()
    data = json.loads(script.VALUES.read_text())
    rendered = script.render(script.TEMPLATE.read_text(), data["values"]).strip("\n")
    assert script.results_block(script.PAGE.read_text()) == rendered


def test_the_results_file_names_every_run_it_read_and_its_commit():
    data = json.loads(_script().VALUES.read_text())
    for name, run in data["runs"].items():
        assert run["experiment"] == name and run["preset"] == "cpu"
        assert run["git_commit"] and run["digest"] and run["wall_seconds"] > 0
    commits = {run["git_commit"][:10] for run in data["runs"].values()}
    assert set(data["values"]["commit"].split(", ")) == commits
    for name, run in data["runs"].items():
        assert data["values"][f"{name}.commit"] == run["git_commit"][:10]


def test_a_value_the_template_names_but_the_runs_did_not_give_is_an_error():
    script = _script()
    try:
        script.render("{{no.such.value}}", {})
    except KeyError as exc:
        assert "no.such.value" in str(exc)
    else:
        raise AssertionError("render accepted a value no run gave")


def test_parts_and_assemble_are_inverse_so_an_update_keeps_every_other_study_as_collected():
    script = _script()
    data = json.loads(script.VALUES.read_text())
    assert script.assemble(script.parts_of(data)) == data
    parts = script.parts_of(data)
    name = next(iter(parts))
    parts[name]["values"] = {f"{name}.commit": "abcdef1234", f"{name}.wall": "1 s"}
    again = script.assemble(parts)
    assert again["values"][f"{name}.commit"] == "abcdef1234"
    others = {k: v for k, v in data["values"].items() if not k.startswith(f"{name}.")
              and k.split(".")[0] in parts and k.split(".")[0] != name}  # fmt: skip
    assert all(again["values"][k] == v for k, v in others.items())


def test_the_walk_table_gives_each_arm_its_interval_and_a_share_without_one_as_not_defined():
    base = {"walk": "d 128 plain", "step": "0", "factor": "start", "adam_shared": "0.04",
            "adam_shared_low": "0.01", "adam_shared_high": "0.07", "adam_own": "0.07",
            "adam_own_low": "0.05", "adam_own_high": "0.09", "muon_own": "0.37",
            "muon_own_low": "0.30", "muon_own_high": "0.44", "lead": "0.30", "lead_low": "0.22",
            "lead_high": "0.38", "share": "0.09", "share_low": "0.03", "share_high": "0.16",
            "paper_distance": "1.05", "edges": ""}  # fmt: skip
    unresolved = base | {"step": "1", "share": "0.5", "share_low": "", "share_high": "",
                         "edges": "Muon-own: lowest"}  # fmt: skip
    table = _script().walk_table([base, unresolved]).splitlines()
    assert table[2].split(" | ")[3:9] == ["0.04 [0.01, 0.07]", "0.07 [0.05, 0.09]",
                                          "0.37 [0.30, 0.44]", "0.30 [0.22, 0.38]",
                                          "0.09 [0.03, 0.16]", "1.05"]  # fmt: skip
    assert "0.50 (not defined)" in table[3] and "Muon-own: lowest" in table[3]
    assert table[2].endswith("| none |")


def test_a_rate_at_an_end_of_its_grid_is_marked_where_the_table_uses_it():
    cell = _script().rate_cell
    assert cell({"chosen": "0.96", "edge": "highest"}) == "0.96 (grid's highest)"
    assert cell({"chosen": "0.00025", "edge": ""}) == "0.00025"
    assert cell({"chosen": "failed", "edge": ""}) == "failed"

"""The documentation's results page (docs/results.md) is the template filled from the results
file of the runs it names (``scripts/readme_results.py``): a number edited by hand, or a run
re-done without re-rendering, fails here."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("readme_results", ROOT / "scripts" /
                                                  "readme_results.py")  # fmt: skip
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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

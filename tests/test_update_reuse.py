"""A run whose config changed is redone keeping what it can reuse (``update``, as ``tailmem
reproduce`` does after a preset changed): only sub-runs whose own spec changed train again, and
those no run of the new config owns are gone at its end; ``--force`` trains everything again."""

from __future__ import annotations

import json

from tailmem.runner import run_experiment


def _results(out):
    return {
        p.parent.relative_to(out).as_posix(): (p.stat().st_mtime_ns, json.loads(p.read_text()))
        for p in out.glob("runs/*/*/*/result.json")
    }


def test_an_update_reuses_unchanged_sub_runs_and_drops_the_rest(tmp_path):
    out = tmp_path / "run"
    base = ["workers=1", "seeds=2"]
    run_experiment("knowledge-qa", "smoke", base, out=out)
    first = _results(out)
    assert len(first) == 5  # Muon's 2-point sweep (its winner is seed 0) + seed 1; Adam's 1 + 1
    # a table setting changes the study's config but no sub-run's spec; one seed fewer drops one
    run, status = run_experiment("knowledge-qa", "smoke", ["workers=1", "seeds=1",
                                 "table_fracs=[0.5, 1.0]"], out=out, update=True)  # fmt: skip
    assert status == "ran" and run.is_complete
    second = _results(out)
    assert set(second) < set(first) and len(second) == 3  # the seed-1 runs are gone
    assert all(second[key][0] == first[key][0] for key in second)  # not trained again
    assert json.loads((out / "results.json").read_text())["tail_table"]
    run_experiment("knowledge-qa", "smoke", ["workers=1", "seeds=1", "table_fracs=[0.5, 1.0]"],
                   out=out, force=True)  # fmt: skip
    third = _results(out)
    assert set(third) == set(second)
    assert all(third[key][0] != second[key][0] for key in third)  # --force: trained again
    assert all(third[k][1]["final_loss"] == second[k][1]["final_loss"] for k in third)

"""A run whose config changed is redone keeping what it can reuse (``update``, as ``tailmem
reproduce`` does after a preset changed): only sub-runs whose own spec changed train again, and
those no run of the new config owns are gone at its end; an update of a run of the same config
makes its outputs again without training; ``--force`` trains everything again."""

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
    arms = "arms=[muon, adam]"
    run_experiment("knowledge-qa", "smoke", [arms, "workers=1", "seeds=2"], out=out)
    first = _results(out)
    assert len(first) == 4  # the smoke preset's rates are set: 2 seed runs per arm, no trial
    # a table setting changes the study's config but no sub-run's spec; one seed fewer drops one
    changed = [arms, "workers=1", "seeds=1", "table_fracs=[0.5, 1.0]"]
    run, status = run_experiment("knowledge-qa", "smoke", changed, out=out, update=True)
    assert status == "ran" and run.is_complete
    second = _results(out)
    assert set(second) < set(first) and len(second) == 2  # the seed-1 runs are gone
    assert all(key.endswith("-seed0-steps40") for key in second)
    assert all(second[key][0] == first[key][0] for key in second)  # not trained again
    assert json.loads((out / "results.json").read_text())["tail_table"]
    # the same config again: its outputs are made again by this code, nothing is trained again
    made = (out / "results.json").stat().st_mtime_ns
    run, status = run_experiment("knowledge-qa", "smoke", changed, out=out, update=True)
    assert status == "ran" and run.is_complete and (out / "results.json").stat().st_mtime_ns > made
    assert {k: v[0] for k, v in _results(out).items()} == {k: v[0] for k, v in second.items()}
    run_experiment("knowledge-qa", "smoke", changed, out=out, force=True)
    third = _results(out)
    assert set(third) == set(second)
    assert all(third[key][0] != second[key][0] for key in third)  # --force: trained again
    assert all(third[k][1]["final_loss"] == second[k][1]["final_loss"] for k in third)


def test_an_update_with_fewer_evaluation_seeds_keeps_the_tuning_trials(tmp_path):
    """The tuning trials do not depend on the evaluation seed count: an update that drops a
    seed reuses every trial and the choice, and trains nothing again."""
    out = tmp_path / "run"
    tuned = ["arms=[adam]", "optim.adam.lr=[1e-3, 3e-3]", "tuning.steps=4",
             "tuning.max_extend=0", "workers=1"]  # fmt: skip
    run_experiment("knowledge-qa", "smoke", [*tuned, "seeds=2"], out=out)
    first = _results(out)
    trials = {key for key in first if key.endswith("-steps4")}
    assert len(trials) == 2 * 2 and len(first) == 4 + 2  # 2 points x 2 tuning seeds, 2 seeds
    assert {key.rsplit("-", 2)[1] for key in trials} == {"seed1000", "seed1001"}
    run, status = run_experiment("knowledge-qa", "smoke", [*tuned, "seeds=1"], out=out, update=True)
    assert status == "ran" and run.is_complete
    second = _results(out)
    assert set(second) == set(first) - {k for k in first if k.endswith("-seed1-steps40")}
    assert all(second[key][0] == first[key][0] for key in second)  # nothing trained again
    results = json.loads((out / "results.json").read_text())
    assert len(results["tuning"]["trials"]) == 4 and len(results["runs"]) == 1

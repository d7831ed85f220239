"""No optimiser setting is silently ignored: every key of every kind a preset can set reaches the
recorded spec of every run that uses the kind, or is refused in one line.

The plans are walked with a stand-in trainer (each run "finishes" at once, scored by its
learning rates), so every tuning trial and every seed run's :class:`~tailmem.lm.spec.RunSpec` is
built exactly as a real run builds it — its :meth:`~tailmem.lm.spec.RunSpec.record` is what
``spec.json`` stores.
"""

from __future__ import annotations

import dataclasses

import pytest

from tailmem.config import available_presets, load_config
from tailmem.errors import ConfigError
from tailmem.experiments import get_study
from tailmem.lm.config import LMConfig
from tailmem.lm.plan import Plan, run_plan
from tailmem.lm.spec import RunResult, RunSpec
from tailmem.lm.subrun import RunContext, RunTemplate
from tailmem.optim.registry import BOUNDS, CHOICES, OptimizerKind

LM_STUDIES = ("knowledge-qa", "ablation", "spectra", "icl-regression")


def other_value(kind: OptimizerKind, name: str) -> object:
    """A valid value of hyper-parameter ``name`` of ``kind`` that differs from its default."""
    spec = next(f for f in dataclasses.fields(kind.hparams) if f.name == name)
    default = spec.default
    if CHOICES in spec.metadata:
        return next(c for c in spec.metadata[CHOICES] if c != default)
    if isinstance(default, bool):
        return not default
    bounds = spec.metadata[BOUNDS]
    if isinstance(default, tuple):
        return [round(v * 0.9, 6) for v in default]
    if bounds.lt is not None:
        return round((default + bounds.lt) / 2, 6)
    return default * 2 if default else 0.01


def finished(spec: RunSpec) -> RunResult:
    """A complete run scored by its learning rates (so each sweep picks a definite point)."""
    score = sum(spec.lrs.values())
    evals = [{"step": spec.steps, "fta_all": score, "fta": [score], "val_loss": 1 / score,
              "nmse_mix": 1 / score, "loss_train": 1 / score}]  # fmt: skip
    return RunResult(spec.digest, spec.key, spec.arm.name, spec.arm.recipe, spec.ffn, spec.lrs,
                     spec.seed, spec.steps, "complete", "", spec.steps, 0.0, 0, evals, evals[-1],
                     None, 0.0)  # fmt: skip


def every_spec(cfg: LMConfig, tmp_path) -> list[RunSpec]:
    """The spec of every run ``cfg``'s plan trains (tuning trials and seed runs), without
    training: every rate given as a grid is tuned here, even where the preset reads stored
    rates (a trial's spec is built as a seed run's is)."""
    ffns = getattr(cfg, "ffns", None) or [getattr(cfg, "ffn", "plain")]
    models = {ffn: cfg.model.build(256, ffn, cfg.train.seq_len) for ffn in ffns}
    template = RunTemplate(models, cfg.train, cfg.optim, {}, True)
    plan = Plan(tuple(cfg.entries()), tuple(cfg.seed_list), cfg.train.steps, template,
                lambda r: float(r.final["fta_all"]))  # fmt: skip
    trained = run_plan(plan, RunContext(str(tmp_path), data=None), 1, lambda r: "",
                       train=lambda spec, ctx, sink: finished(spec))  # fmt: skip
    return list(trained.results)


def tunes(cfg: LMConfig) -> bool:
    return any(entry.sweep is not None for entry in cfg.entries())


def cases() -> list[tuple[str, str, str, str]]:
    """(study, preset, kind, hyper-parameter) for every kind of every preset's optim section."""
    out = []
    for study in LM_STUDIES:
        record = get_study(study)
        for preset in available_presets(study):
            cfg = load_config(record.config, study, preset)
            for name, section in cfg.optim.items():
                out += [(study, preset, name, f.name) for f in dataclasses.fields(section.hparams)]
                out.append((study, preset, name, "lr"))
    return out


@pytest.mark.parametrize(("study", "preset", "kind", "key"), cases())
def test_every_optimiser_key_reaches_every_run_of_its_kind(study, preset, kind, key, tmp_path):
    record = get_study(study)
    base = load_config(record.config, study, preset)
    section = base.optim[kind]
    value = section.grid[0] * 0.5 if key == "lr" else other_value(section.kind, key)
    # One seed, and no widening beyond the grids (the trials' specs are built alike).
    overrides = ["seeds=1", "tuning.max_extend=0"] if tunes(base) else ["seeds=1"]
    try:
        cfg = load_config(record.config, study, preset, [*overrides, f"optim.{kind}.{key}={value}"])
    except ConfigError as exc:  # refused: one line naming the key
        assert f"optim.{kind}" in str(exc) and "\n" not in str(exc)
        return
    specs = every_spec(cfg, tmp_path)
    using = [s for s in specs if kind in s.arm.kinds]
    assert using, f"no run of {study}/{preset} uses {kind}, yet optim.{kind}.{key} was accepted"
    for spec in using:
        recorded = spec.record()["hparams"][kind][key]
        assert recorded == pytest.approx(value), (spec.label, key, recorded, value)


def test_muon_lr_on_the_default_knowledge_qa_arms_is_used_by_every_muon_run(tmp_path):
    record = get_study("knowledge-qa")
    cfg = load_config(record.config, "knowledge-qa", "cpu", ["optim.muon.lr=0.1"])
    specs = every_spec(cfg, tmp_path)
    muon_runs = [s for s in specs if "muon" in s.arm.kinds]
    assert {s.arm.name for s in muon_runs} == {"muon", "muon_vo_ffn", "muon_qk"}
    assert all(s.lrs["muon"] == 0.1 for s in muon_runs)
    assert all(s.record()["hparams"]["muon"]["lr"] == 0.1 for s in muon_runs)


@pytest.mark.parametrize(
    ("study", "override", "needle"),
    [
        ("knowledge-qa", "optim.adamw.lr=1e-3", "optim.adamw.lr: no arm of this run uses adamw"),
        ("ablation", "optim.sgd.momentum=0.5", "optim.sgd.momentum: no arm of this run uses sgd"),
        ("ablation", "optim.muon.lr=[0.01,0.02]", "optim.muon.lr: got a list"),
        ("spectra", "optim.adam.lr=[1e-3,3e-3]", "optim.adam.lr: got a list"),
        ("ablation", "tune_factors=[0.5]", "tune_factors: tune_lr is off"),
        ("knowledge-qa", "optim.muon.momentum=1.5", "optim.muon.momentum: got 1.5"),
        ("knowledge-qa", "optim.muon.method=ns7", "optim.muon.method: got 'ns7'"),
        ("knowledge-qa", "optim.adam.lr=[]", "optim.adam.lr: got []"),
        ("knowledge-qa", "optim.nosuch.lr=1e-4", "unknown optimiser kind 'nosuch'"),
        ("knowledge-qa", "optim.lion.lr=1e-4", "optim.lion.lr: no arm of this run uses lion"),
    ],
)
def test_a_setting_that_would_reach_no_run_or_is_invalid_is_refused(study, override, needle):
    record = get_study(study)
    with pytest.raises(ConfigError) as err:
        load_config(record.config, study, "smoke", [override])
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_knowledge_qa_tuning_keys_are_refused_when_nothing_is_tuned():
    record = get_study("knowledge-qa")
    cfg = load_config(record.config, "knowledge-qa", "smoke")
    assert not tunes(cfg)  # the smoke preset's rates are set
    with pytest.raises(ConfigError, match=r"tuning\.steps: no learning rate of this run is tuned"):
        load_config(record.config, "knowledge-qa", "smoke", ["tuning.steps=10"])
    with pytest.raises(ConfigError, match=r"unknown config field 'sweep'"):  # the old section
        load_config(record.config, "knowledge-qa", "smoke", ["sweep.steps=10"])
    # A grid makes them reach its sweep.
    grid = load_config(record.config, "knowledge-qa", "smoke",
                       ["optim.adam.lr=[1e-3,3e-3]", "tuning.steps=10"])  # fmt: skip
    assert {e.sweep.steps for e in grid.entries() if e.sweep is not None} == {10}

"""Studies that drive knowledge-QA build its configs as values (typed replacement of fields),
never as ``key=value`` text: every config equals the one the loader builds from the same
settings written as overrides (so the same runs and the same sub-run digests), and a setting
the study makes itself cannot be given twice."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pytest

from tailmem.config import load_config
from tailmem.errors import ConfigError
from tailmem.experiments import knowledge_qa as kqa
from tailmem.experiments import optim_bench, qa_map, qa_sensitivity
from tailmem.experiments.knowledge_qa import grid
from tailmem.experiments.qa_map import points
from tailmem.experiments.rule_or_rate import config as rule_or_rate
from tailmem.lm.config import OptimSection
from tailmem.typecheck import replaced


def loaded(preset: str, *overrides: Mapping[str, Any]) -> kqa.Config:
    """The knowledge-QA config the loader builds from ``overrides`` as ``key=json`` text, later
    mappings winning: the oracle."""
    merged: dict[str, Any] = {}
    for mapping in overrides:
        merged |= grid.dotted(mapping)
    text = [f"{key}={json.dumps(value)}" for key, value in merged.items()]
    return load_config(kqa.Config, "knowledge-qa", preset, text)


def test_a_typed_replacement_equals_the_overrides_and_checks_them_alike():
    base = load_config(kqa.Config, "knowledge-qa", "smoke")
    changes = {"model.d_model": 48, "optim.adam.betas": [0.9, 0.99], "optim.muon.lr": [0.1, 0.2],
               "tuning.max_extend": 1, "loss_on": "all"}  # fmt: skip
    assert replaced(base, changes) == loaded("smoke", changes)
    assert replaced(base, changes).optim["adam"].hparams.betas == (0.9, 0.99)
    assert base.model.d_model != 48 and base.loss_on == "answer"  # the base is left as it was
    for bad in [{"model.d_modle": 48}, {"model.d_model": "wide"}, {"optim.adam.betaz": 0.9},
                {"optim.signgd.lr": 0.1}]:  # fmt: skip
        with pytest.raises(ConfigError) as typed:
            replaced(base, bad).check_overrides(list(bad))
        with pytest.raises(ConfigError) as text:
            loaded("smoke", bad)
        assert str(typed.value) == str(text.value)
    with pytest.raises(ConfigError, match=r"^loss_on.x: loss_on is not a nested section"):
        replaced(base, {"loss_on.x": 1})
    with pytest.raises(ConfigError, match=r"^model.d_model: given beside model itself"):
        replaced(base, {"model": {}, "model.d_model": 48})


def test_the_optimiser_section_merges_and_sets_rates_as_the_loader_does():
    base = load_config(kqa.Config, "knowledge-qa", "smoke").optim
    mine = OptimSection.from_config({"adam": {"lr": 0.01, "eps": 1e-6}, "adam_split": {"lr": 0.02}},
                                    "optim")  # fmt: skip
    merged = base.updated(mine)
    assert merged["adam_split"].hparams.eps == 1e-6 == merged["adam"].hparams.eps  # twins synced
    assert merged["muon"] == base["muon"]
    rated = merged.with_rates({"adam": [0.1, 0.2], "signgd": 0.5})
    assert rated["adam"].grid == (0.1, 0.2) and rated["signgd"].lr == 0.5
    with pytest.raises(ConfigError, match=r"^optim.adam.lr: got -1"):
        merged.with_rates({"adam": -1})


@pytest.mark.parametrize("preset", ["smoke", "cpu", "paper"])
def test_qa_sensitivity_points_equal_their_overrides(preset):
    cfg = load_config(qa_sensitivity.Config, "qa-sensitivity", preset)
    own = {"seed": cfg.seed, "workers": cfg.workers}
    for point, qa in cfg.configure().values():
        assert qa == loaded(cfg.preset, cfg.common, own, point.overrides), point.label


@pytest.mark.parametrize("preset", ["smoke", "cpu", "paper"])
def test_optim_bench_levels_equal_their_overrides(preset):
    cfg = load_config(optim_bench.Config, "optim-bench", preset)
    optim = {f"optim.{name}": section.to_config() for name, section in cfg.optim.items()}
    own = {"seed": cfg.seed, "workers": cfg.workers, "arms": cfg.arms(), **optim}
    for point, qa in cfg.qa_configs().values():
        assert qa == loaded(cfg.preset, cfg.common, own, point.overrides), point.label
    chosen = {name: 0.0125 for name in cfg.optimizers}
    rates = {f"optim.{name}.lr": lr for name, lr in chosen.items()}
    untuned = {k: v for k, v in grid.dotted(cfg.common).items() if not k.startswith("tuning.")}
    for point, qa in cfg.qa_configs("base", chosen).values():
        assert qa == loaded(cfg.preset, untuned, own, rates, point.overrides), point.label


def test_optim_bench_tuning_sweeps_and_refuses_where_nothing_is_tuned():
    cfg = load_config(optim_bench.Config, "optim-bench", "cpu", ["tune_only=true"])
    ((_, qa),) = cfg.qa_configs().values()
    assert (qa.tuning.rates, qa.tuning.only) == ("sweep", True)
    with pytest.raises(ConfigError, match=r"tuning.rates: no learning rate of this run is tuned"):
        load_config(optim_bench.Config, "optim-bench", "smoke", ["tune_only=true"])


@pytest.mark.parametrize("preset", ["smoke", "cpu", "paper"])
def test_rule_or_rate_points_equal_their_overrides(preset):
    cfg = load_config(rule_or_rate.Config, "rule-or-rate", preset)
    qa = cfg.settle(load_config(kqa.Config, "knowledge-qa", cfg.preset))
    rates = {f"optim.{name}.lr": list(section.grid) for name, section in qa.optim.items()
             if name in ("adam", *(r.kind for r in cfg.rules.values()))}  # fmt: skip
    own = {"seed": cfg.seed, "workers": cfg.workers, "arms": qa.arms, **rates}
    for point, built in cfg.configs().values():
        # a point with ``epochs`` set trains whole epochs of its own data (its steps derived)
        expected = kqa.at_epochs(loaded(cfg.preset, cfg.common, own, point.overrides))
        sweep = dataclasses.replace(expected.tuning, rates="sweep")  # the study's, never stored
        assert built == dataclasses.replace(expected, tuning=sweep), point.label


def test_a_maps_point_equals_its_overrides():
    cfg = load_config(qa_map.Config, "qa-map", "cpu")
    point = points.GridPoint(128, 2, 3.0, 7, 1.0)
    built = qa_map.point_config(cfg, qa_map.base_config(cfg), point, 214)
    keys = {"model.d_model": 128, "model.n_head": 2, "model.n_layer": 2, "model.d_ff": 512,
            "data.m": 7, "data.frequency_exponent": 1.0, "train.steps": 214,
            "train.eval_every": 21, "train.log_every": 21, "train.warmup_steps": 4}  # fmt: skip
    own = {"seed": cfg.seed, "workers": cfg.workers, "arms": ["muon", "adam"]}
    assert built == loaded("cpu", {"ffn": "plain"}, cfg.common, own, keys)
    assert (built.model.n_head, built.train.warmup_steps, built.arms) == (2, 4, ["muon", "adam"])


@pytest.mark.parametrize(
    ("study", "cls", "override", "owned"),
    [
        ("qa-sensitivity", qa_sensitivity.Config, "common.seed=3", "seed"),
        ("optim-bench", optim_bench.Config, "common.optim.adam.lr=0.1", "optim"),
        ("optim-bench", optim_bench.Config, "common={arms: [muon]}", "arms"),
        ("rule-or-rate", rule_or_rate.Config, "common.optim.adam_split.lr=[0.1]",
         "optim.adam_split.lr"),
        ("rule-or-rate", rule_or_rate.Config, "common.tuning.rates=stored", "tuning.rates"),
        ("qa-map", qa_map.Config, "common={data.m: 5}", "data.m"),
    ],
)  # fmt: skip
def test_a_setting_the_study_makes_itself_is_refused_in_common(study, cls, override, owned):
    key = override.split("=")[0].removeprefix("common.")
    if key == "common":
        key = owned
    with pytest.raises(ConfigError, match=rf"^common.{key}: {study} sets {owned} itself"):
        load_config(cls, study, "smoke", [override])

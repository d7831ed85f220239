"""The benchmark's associative memory at toy size: every pace run, the step matched on a tuning
draw apart from the evaluation draws, and the claims' inputs built from the result."""

import math

import pytest

from tailmem.claims.related import BenchMemory
from tailmem.config import load_config
from tailmem.errors import ConfigError
from tailmem.experiments import optim_bench
from tailmem.experiments.optim_bench.memory import MemorySection, bench_memory, run_memory


def _settings(*names):
    """The smoke benchmark's memory settings of ``names`` (the QA hyper-parameters)."""
    cfg = load_config(optim_bench.Config, "optim-bench", "smoke")
    return {name: s for name, s in cfg.memory_settings().items() if name in names}


def test_every_pace_is_matched_on_a_tuning_draw_and_given_to_the_claims():
    section = MemorySection(facts=12, dim=8, groups=3, steps=24, head_steps=4, paces=[2, 8],
                            lrs=[0.1, 0.3, 1.0, 3.0], seeds=3)  # fmt: skip
    section.validate()
    result = run_memory(section, _settings("sgd", "adam"), seed=5)
    assert result.draws == (5, 6, 7) and result.tuning_draw == 8
    assert [p.pace for p in result.paces] == [2, 4, 8]  # the paces and the board's
    assert [p.steps for p in result.paces] == [12, 24, 48]  # 6 paces each
    assert result.board is result.paces[1] and result.board.pace == section.head_steps
    for pace in result.paces:
        assert {r.seed for r in pace.runs} == {5, 6, 7}
        assert all(len(r.times) == section.groups for r in pace.runs)
        assert set(pace.chosen) == {"sgd", "adam"}  # each optimiser's grid, one after another
        assert [(p.optimizer, p.lr) for p in pace.sweep] == [
            (name, lr) for name in pace.chosen for lr in section.lrs]  # fmt: skip
        for name, lr in pace.chosen.items():  # the smallest miss, the smaller step on a tie
            misses = [(math.inf if p.head_miss is None else p.head_miss, p.lr)
                      for p in pace.sweep if p.optimizer == name]  # fmt: skip
            assert lr == min(misses)[1]
    inputs = bench_memory(result)
    assert isinstance(inputs, BenchMemory) and list(inputs.seeds) == [5, 6, 7]
    assert [p.pace for p in inputs.paces] == [2, 4, 8]
    assert len(inputs.paces[0].times["sgd"]) == 3
    grid_ends = (min(section.lrs), max(section.lrs))
    for raw, pace in zip(result.paces, inputs.paces, strict=True):
        assert set(pace.edges) == {n for n, lr in raw.chosen.items() if lr in grid_ends}


def test_paces_must_be_positive():
    with pytest.raises(ConfigError, match=r"memory\.paces"):
        MemorySection(paces=[0, 10]).validate()

"""The ablation and spectra train one given rate per optimiser for every arm, as paper A does. At
the cpu preset those rates are the choices `tailmem tune ablation` stored, made on tuning seeds
apart from the evaluation seeds and interior to the grid tried; spectra trains the same model the
same way, so it takes the same two rates."""

from __future__ import annotations

import dataclasses

import pytest

from tailmem.config import load_config
from tailmem.experiments import ablation, spectra
from tailmem.lm.store import StoredRate, load_store
from tailmem.lm.tuning import TUNING_SEED_OFFSET

TUNED = {"adam": "adam", "full": "muon"}
"""The arm each kind's rate was tuned on: Adam on all-Adam, then Muon on full Muon."""


def stored_choice(arm: str) -> StoredRate:
    found = [e for e in load_store().values()
             if (e.study, e.preset, e.arm) == ("ablation", "cpu", arm)]  # fmt: skip
    assert len(found) == 1, f"one stored ablation cpu choice for {arm}, found {len(found)}"
    return found[0]


@pytest.mark.parametrize("arm", sorted(TUNED))
def test_the_stored_choice_was_made_on_tuning_seeds_and_is_interior(arm):
    choice = stored_choice(arm)
    assert choice.edge is None
    assert {t.seed for t in choice.trials} == {TUNING_SEED_OFFSET, TUNING_SEED_OFFSET + 1}
    points = {t.point for t in choice.trials}
    assert len(points) >= 3 and min(points) < choice.point < max(points)
    # the choice is the best mean score over the tuning seeds
    mean = {p: sum(t.score for t in choice.trials if t.point == p) / 2 for p in points}
    assert max(mean, key=mean.__getitem__) == choice.point


@pytest.mark.parametrize("study", [ablation, spectra])
def test_the_cpu_rates_are_the_stored_choices(study):
    cfg = load_config(study.Config, study.NAME, "cpu")
    for arm, kind in TUNED.items():
        assert cfg.fixed_rates(study.NAME)[kind] == pytest.approx(stored_choice(arm).lrs[kind])


def test_spectra_trains_as_the_ablation_does_so_the_rates_carry_over():
    abl = load_config(ablation.Config, ablation.NAME, "cpu")
    spe = load_config(spectra.Config, spectra.NAME, "cpu")
    assert spe.model == abl.model and spe.data == abl.data and spe.ffn == abl.ffn
    # everything that shapes a trajectory; evaluation and checkpoint cadence do not
    apart = {"eval_every", "ckpt_every", "keep_checkpoints"}
    train = {f.name for f in dataclasses.fields(abl.train)} - apart
    assert {n: getattr(spe.train, n) for n in train} == {n: getattr(abl.train, n) for n in train}

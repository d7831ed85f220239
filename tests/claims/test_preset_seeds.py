"""Every preset meant to decide has the seeds its claims' rules need: a claim's ``min_seeds``
(≥ 3 where a rule compares arms over seeds) against the seeds each cpu and paper preset runs."""

import pytest

from tailmem.claims.core import MIN_SEEDS
from tailmem.claims.registry import CLAIMS, claims_of
from tailmem.config import load_config
from tailmem.experiments import get_study, study_names

DECIDING = ("cpu", "paper")
"""The presets whose verdicts are reported; smoke presets are toy sizes that only check that
nothing crashes (one seed is fine there: its comparisons are inconclusive by construction)."""
EXACT = ("assoc-two-group", "assoc-scaling", "assoc-capacity")
"""Experiments that compute exact population losses: no seed behind any verdict."""


def preset_seeds(experiment: str, preset: str) -> int:
    """The seeds (or independent draws) per arm that ``experiment`` runs at ``preset``."""
    cfg = load_config(get_study(experiment).config, experiment, preset)
    if experiment == "optim-bench":  # its claims rest on the memory's embedding draws
        return cfg.memory.seeds
    if experiment in ("qa-sensitivity", "qa-map", "rule-or-rate"):  # knowledge-qa points
        base = cfg.base if experiment == "qa-map" else cfg.preset
        fallback = load_config(get_study("knowledge-qa").config, "knowledge-qa", base).seeds
        return cfg.common.get("seeds", fallback)
    return cfg.seeds


@pytest.mark.parametrize("preset", DECIDING)
@pytest.mark.parametrize("experiment", [e for e in study_names() if e not in EXACT])
def test_each_deciding_preset_runs_the_seeds_its_claims_need(experiment, preset):
    needed = {c.id: c.min_seeds for c in claims_of(experiment)}
    assert needed, experiment
    seeds = preset_seeds(experiment, preset)
    short = {cid: n for cid, n in needed.items() if n > seeds}
    assert not short, f"{experiment} {preset} runs {seeds} seed(s); {short} need more"


def test_comparisons_over_seeds_declare_the_seeds_they_need_and_exact_claims_none():
    for claim in CLAIMS.values():
        if claim.experiment in EXACT or claim.experiment is None:
            assert claim.min_seeds == 0, claim.id
        else:
            assert claim.min_seeds >= MIN_SEEDS, claim.id


def test_a_preset_with_one_seed_is_caught():
    """The check is not vacuous: the ablation's smoke preset runs one seed, which every A1
    comparison flags."""
    seeds = preset_seeds("ablation", "smoke")
    assert seeds < MIN_SEEDS
    assert "A1.full_beats_adam" in [c.id for c in claims_of("ablation") if c.min_seeds > seeds]

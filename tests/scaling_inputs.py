"""The B claims' typed inputs for tests: one whole :class:`~tailmem.claims.b.BInputs` of an
unremarkable run (numbers of the smoke preset's size), with the parts a test is about replaced.

Each builder takes the fields to change as keywords (:func:`dataclasses.replace`), so a test
names only what its rule reads, and a field the rule does not read still has a real value.
"""

import dataclasses

from tailmem.claims.b import BInputs
from tailmem.claims.b_measured import (
    BlockSymmetry,
    Matching,
    Noiseless,
    Settings,
    TargetFit,
)

SETTINGS = Settings(
    curve_steps=300, gd_groups=20, gd_lr_p1=1.0, horizons=[25, 50, 100], gd_lr_grid_p1=[1.0, 2.0],
    muon_lr_grid=[0.01, 0.1], target_excess=1e-4, target_max_steps=300, symmetry_steps=10,
)  # fmt: skip
NOISELESS = Noiseless(
    K=40, lrs={"gd": 2.0, "muon": 0.01}, gd_total_ratio=1.0, gd_total_slope=-1.0,
    gd_group_ratio=[1.0, 1.0], gd_group_eta_p_t=[200.0, 50.0], gd_group_ratio_learned=[1.0],
    muon_rate_over_eta=1.0, muon_prefactor_over_k=1.0, muon_group_rates_over_eta=[1.0, 1.0],
    gd_group_slopes=[-1.0, -1.0], muon_final_gap=1e-12, gd_final_gap=0.5,
    group_item_p=[0.1, 0.025], gd_group_half_times=[5, 20], muon_group_half_times=[30, 30],
)  # fmt: skip
MATCHING = Matching(
    tra_noiseless=0.01, tra_noisy=0.01, signgd_grid=[0.001, 0.01, 0.1],
    signgd_vs_muon_2eta=[1.0, 0.5, 1.0], refined_lrs=[0.005], refined_mismatch=[0.4],
    best_lr=0.005, best_mismatch=0.4, signgd_final_gap=[0.1, 0.1, 0.1], muon_final_gap=1e-12,
    steps=100,
)  # fmt: skip
INPUTS = BInputs(
    settings=SETTINGS, noiseless=NOISELESS, matching=MATCHING, noisy_fits=[], target_rows=[],
    target_fit=TargetFit(ratio_tuned=None, ratio_gd_lr_p1_1=None, reached_all=False),
    gd_stability=[], block_symmetry=BlockSymmetry(muon=1e-16, signgd=0.5, K=40),
)  # fmt: skip


def settings(**changes: object) -> Settings:
    return dataclasses.replace(SETTINGS, **changes)


def noiseless(**changes: object) -> Noiseless:
    return dataclasses.replace(NOISELESS, **changes)


def matching(**changes: object) -> Matching:
    return dataclasses.replace(MATCHING, **changes)


def b_inputs(**changes: object) -> BInputs:
    return dataclasses.replace(INPUTS, **changes)

"""Tables over seeds, the head–tail gap and the claims of the knowledge-QA experiment (A3).

All functions read the finished :class:`~tailmem.experiments.qa.schedule.Plan` only. FTA values
are means over seeds with the sample standard deviation (``ddof = 1``; 0 for a single seed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tailmem.experiments.qa.arms import ARMS
from tailmem.experiments.qa.schedule import Plan
from tailmem.report.claims import ClaimResult, verdict

# Paper A, Tables 3-8 (PAPERS.md A3): FTA of the tail groups of the m = 15 run, by the group's
# distance from the rarest group (0 = group 15, 2 = group 13, 4 = group 11) and the fraction
# of the 10k steps (0.2 = 2k, 0.5 = 5k, 1.0 = 10k). Gated FFN: only the rarest group at 10k.
PUBLISHED: dict[str, dict[tuple[float, int], dict[str, float]]] = {
    "plain": {
        (0.2, 4): {
            "muon": 0.854,
            "adam": 0.312,
            "sgd": 0.156,
            "muon_vo_ffn": 0.814,
            "muon_qk": 0.472,
        },
        (0.2, 2): {
            "muon": 0.386,
            "adam": 0.146,
            "sgd": 0.120,
            "muon_vo_ffn": 0.256,
            "muon_qk": 0.154,
        },
        (0.2, 0): {
            "muon": 0.140,
            "adam": 0.090,
            "sgd": 0.082,
            "muon_vo_ffn": 0.114,
            "muon_qk": 0.086,
        },
        (0.5, 4): {
            "muon": 0.996,
            "adam": 0.936,
            "sgd": 0.314,
            "muon_vo_ffn": 0.992,
            "muon_qk": 0.970,
        },
        (0.5, 2): {
            "muon": 0.964,
            "adam": 0.298,
            "sgd": 0.148,
            "muon_vo_ffn": 0.934,
            "muon_qk": 0.354,
        },
        (0.5, 0): {
            "muon": 0.320,
            "adam": 0.110,
            "sgd": 0.084,
            "muon_vo_ffn": 0.254,
            "muon_qk": 0.118,
        },
        (1.0, 4): {
            "muon": 1.000,
            "adam": 1.000,
            "sgd": 0.422,
            "muon_vo_ffn": 1.000,
            "muon_qk": 1.000,
        },
        (1.0, 2): {
            "muon": 1.000,
            "adam": 0.890,
            "sgd": 0.294,
            "muon_vo_ffn": 0.998,
            "muon_qk": 0.940,
        },
        (1.0, 0): {
            "muon": 0.976,
            "adam": 0.264,
            "sgd": 0.126,
            "muon_vo_ffn": 0.954,
            "muon_qk": 0.286,
        },
    },
    "gated": {
        (1.0, 0): {
            "muon": 0.994,
            "adam": 0.244,
            "sgd": 0.148,
            "muon_vo_ffn": 0.990,
            "muon_qk": 0.274,
        },
    },
}

TAIL_GAP = 0.3
"""Claim rule: Muon's rarest-group FTA must exceed Adam's by at least this (paper: 0.712)."""
HEAD_FLOOR = 0.9
"""Claim rule: every arm's head groups must reach at least this FTA (paper: ≈ 1.0)."""
MIN_SPREAD = 0.1
"""Hybrid claims are placed on the Adam→Muon line only if Muon and Adam differ by this much."""
NEAR_MUON, NEAR_ADAM = 0.75, 0.25
"""Hybrid rules: position t = (x − Adam)/(Muon − Adam) ≥ 0.75 (≈ Muon) or ≤ 0.25 (≈ Adam)."""
SGD_TOLERANCE = 0.02


def seed_results(plan: Plan, ffn: str, arm: str) -> list[dict[str, Any]]:
    """The finished seed runs of ``arm`` (empty if it was not run)."""
    return [plan.results[s] for s in plan.seed_runs.get((ffn, arm), [])]


def history(results: Sequence[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Eval steps ``(E,)`` and FTA ``(seeds, E, groups)`` over the steps all seeds evaluated."""
    steps = sorted(set.intersection(*({e["step"] for e in r["evals"]} for r in results)))
    fta = np.array(
        [[next(e["fta"] for e in r["evals"] if e["step"] == s) for s in steps] for r in results],
        dtype=np.float64,
    )
    return np.array(steps), fta


def mean_std(values: Sequence[float] | np.ndarray, axis: int = 0) -> tuple[Any, Any]:
    """Mean and sample standard deviation (0 for one value) along ``axis``."""
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[axis]
    std = values.std(axis=axis, ddof=1) if n > 1 else np.zeros_like(values.mean(axis=axis))
    return values.mean(axis=axis), std


def fta_at(results: Sequence[dict[str, Any]], step: int) -> np.ndarray:
    """FTA per seed and group at ``step``: ``(seeds, groups)``."""
    steps, fta = history(results)
    index = np.flatnonzero(steps == step)
    if not len(index):
        raise ValueError(f"step {step} was not evaluated; evaluated steps: {steps.tolist()}")
    return fta[:, index[0]]


def fmt(mean: float, std: float) -> str:
    return f"{mean:.3f} ± {std:.3f}"


def tail_table(
    plan: Plan, ffn: str, fracs: Sequence[float], offsets: Sequence[int], m: int
) -> list[dict[str, Any]]:
    """Rows like the paper's Tables 3–8: one per (fraction of training, tail group), one column
    per arm (mean ± std over seeds) and the published value of that arm where there is one."""
    rows = []
    for frac in fracs:
        step = round(frac * plan.steps)
        for offset in offsets:
            group = m - offset
            if group < 0:
                continue
            row: dict[str, Any] = {"step": step, "fraction": frac, "group": group}
            published = PUBLISHED.get(ffn, {}).get((frac, offset), {})
            for arm in plan.arms:
                results = seed_results(plan, ffn, arm)
                mean, std = mean_std(fta_at(results, step)[:, group])
                row[ARMS[arm].label] = fmt(mean, std)
                row[f"paper {ARMS[arm].label}"] = (
                    f"{published[arm]:.3f}" if arm in published else "—"
                )
            rows.append(row)
    return rows


def tail_table_long(
    plan: Plan, ffn: str, fracs: Sequence[float], offsets: Sequence[int], m: int
) -> list[dict[str, Any]]:
    """The numbers of :func:`tail_table`, one row per (fraction, group, arm), for analysis."""
    rows = []
    for frac in fracs:
        step = round(frac * plan.steps)
        for offset in offsets:
            group = m - offset
            if group < 0:
                continue
            published = PUBLISHED.get(ffn, {}).get((frac, offset), {})
            for arm in plan.arms:
                values = fta_at(seed_results(plan, ffn, arm), step)[:, group]
                mean, std = mean_std(values)
                rows.append(
                    {
                        "ffn": ffn,
                        "step": step,
                        "fraction": frac,
                        "group": group,
                        "arm": arm,
                        "mean": float(mean),
                        "std": float(std),
                        "n_seeds": len(values),
                        "published_m15": published.get(arm),
                    }
                )
    return rows


def gap_rows(plan: Plan, ffn: str, head_groups: int) -> list[dict[str, Any]]:
    """Per arm at the end: head FTA (the ``head_groups`` most frequent groups), rarest-group FTA,
    and the head–tail gap (head minus rarest), each mean ± std over seeds."""
    rows = []
    for arm in plan.arms:
        final = fta_at(seed_results(plan, ffn, arm), plan.steps)
        head = final[:, :head_groups].mean(axis=1)
        rare = final[:, -1]
        row = {"ffn": ffn, "arm": arm, "label": ARMS[arm].label}
        for name, values in (("head", head), ("rarest", rare), ("gap", head - rare)):
            mean, std = mean_std(values)
            row[f"{name}_mean"], row[f"{name}_std"] = round(float(mean), 4), round(float(std), 4)
        finals = [r["evals"][-1]["fta_mean"] for r in seed_results(plan, ffn, arm)]
        row["fta_mean_all"] = round(float(np.mean(finals)), 4)
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- claims


def _final(plan: Plan, ffn: str, arm: str, group: int, step: int | None = None) -> float | None:
    results = seed_results(plan, ffn, arm)
    if not results:
        return None
    return float(fta_at(results, plan.steps if step is None else step)[:, group].mean())


def claims(plan: Plan, m: int, head_groups: int) -> list[ClaimResult]:
    """Every claim of A3 with its rule, for each FFN type of the plan (ids carry the FFN)."""
    out = []
    for ffn in ("plain", "gated"):
        measured = ffn in plan.ffns
        out.append(_claim_tail(plan, ffn, m, measured))
        if ffn == "plain":
            out.append(_claim_midtail(plan, ffn, m, measured))
        out.append(_claim_head(plan, ffn, head_groups, measured))
        out.append(_claim_hybrid(plan, ffn, m, "muon_vo_ffn", measured))
        out.append(_claim_hybrid(plan, ffn, m, "muon_qk", measured))
        out.append(_claim_sgd(plan, ffn, m, measured))
    return out


def _pub(ffn: str, frac: float, offset: int, arm: str) -> float:
    return PUBLISHED[ffn][(frac, offset)][arm]


def _claim_tail(plan: Plan, ffn: str, m: int, measured: bool) -> ClaimResult:
    muon, adam = (_final(plan, ffn, a, m) if measured else None for a in ("muon", "adam"))
    ok = None if muon is None or adam is None else muon - adam >= TAIL_GAP
    return ClaimResult(
        id=f"A3.{ffn}.tail_muon_vs_adam",
        claim=f"Muon learns the rarest group far better than Adam by the end ({ffn} FFN)",
        source="A3, Tables 3-8 (group 15 at 10k)",
        published=f"Muon {_pub(ffn, 1.0, 0, 'muon'):.3f} vs Adam {_pub(ffn, 1.0, 0, 'adam'):.3f}",
        ours="—" if ok is None else f"Muon {muon:.3f} vs Adam {adam:.3f} (group {m})",
        rule=f"mean over seeds of FTA(rarest group) at the last step: Muon − Adam ≥ {TAIL_GAP}",
        verdict=verdict(ok),
        details={"muon": muon, "adam": adam, "group": m},
    )


def _claim_midtail(plan: Plan, ffn: str, m: int, measured: bool) -> ClaimResult:
    step = round(0.5 * plan.steps)
    group = m - 2
    ok = muon = adam = None
    if measured and group >= 0:
        try:
            muon, adam = (_final(plan, ffn, a, group, step) for a in ("muon", "adam"))
        except ValueError:
            muon = adam = None
        ok = None if muon is None or adam is None else muon - adam >= TAIL_GAP
    return ClaimResult(
        id=f"A3.{ffn}.midtail_halfway",
        claim="Halfway through training Muon has learned the second-rarest-but-one group, Adam not",
        source="A3, Tables 3-8 (group 13 at 5k)",
        published=f"Muon {_pub(ffn, 0.5, 2, 'muon'):.3f} vs Adam {_pub(ffn, 0.5, 2, 'adam'):.3f}",
        ours="—" if ok is None else f"Muon {muon:.3f} vs Adam {adam:.3f} (group {group})",
        rule=f"FTA(group m−2) at 50% of the steps: Muon − Adam ≥ {TAIL_GAP}",
        verdict=verdict(ok),
        details={"muon": muon, "adam": adam, "group": group, "step": step},
    )


def _claim_head(plan: Plan, ffn: str, head_groups: int, measured: bool) -> ClaimResult:
    heads = {}
    if measured:
        for arm in plan.arms:
            final = fta_at(seed_results(plan, ffn, arm), plan.steps)
            heads[arm] = float(final[:, :head_groups].mean())
    ok = None if not heads else min(heads.values()) >= HEAD_FLOOR
    ours = ", ".join(f"{ARMS[a].label} {v:.3f}" for a, v in heads.items())
    return ClaimResult(
        id=f"A3.{ffn}.head_all_optimisers",
        claim=f"Every optimiser, SGD included, learns the head groups ({ffn} FFN)",
        source="A3 (head groups reach ≈ 1.0 with every optimiser)",
        published="≈ 1.0 for every arm",
        ours=ours or "—",
        rule=f"mean FTA of groups 0..{head_groups - 1} at the last step ≥ {HEAD_FLOOR}, every arm",
        verdict=verdict(ok),
        details=heads,
    )


def _claim_hybrid(plan: Plan, ffn: str, m: int, arm: str, measured: bool) -> ClaimResult:
    near_muon = arm == "muon_vo_ffn"
    values = {a: _final(plan, ffn, a, m) if measured else None for a in ("muon", "adam", arm)}
    ok = position = None
    if None not in values.values() and abs(values["muon"] - values["adam"]) >= MIN_SPREAD:
        position = (values[arm] - values["adam"]) / (values["muon"] - values["adam"])
        ok = position >= NEAR_MUON if near_muon else position <= NEAR_ADAM
    target = "Muon" if near_muon else "Adam"
    pub = {a: _pub(ffn, 1.0, 0, a) for a in ("muon", "adam", arm)}
    ours = "—"
    if None not in values.values():
        ours = f"{values[arm]:.3f} (Muon {values['muon']:.3f}, Adam {values['adam']:.3f})"
        if position is not None:
            ours += f", t = {position:.2f}"
    rule = "t = (x − Adam)/(Muon − Adam) of the rarest-group FTA at the last step; "
    rule += f"t ≥ {NEAR_MUON}" if near_muon else f"t ≤ {NEAR_ADAM}"
    rule += f"; not measured unless |Muon − Adam| ≥ {MIN_SPREAD}"
    return ClaimResult(
        id=f"A3.{ffn}.{arm}_like_{target.lower()}",
        claim=f"{ARMS[arm].label} behaves like {target} in the tail ({ffn} FFN)",
        source="A3, Tables 3-8 (group 15 at 10k)",
        published=f"{pub[arm]:.3f} (Muon {pub['muon']:.3f}, Adam {pub['adam']:.3f})",
        ours=ours,
        rule=rule,
        verdict=verdict(ok),
        details={**values, "t": position},
    )


def _claim_sgd(plan: Plan, ffn: str, m: int, measured: bool) -> ClaimResult:
    sgd, adam = (_final(plan, ffn, a, m) if measured else None for a in ("sgd", "adam"))
    ok = None if sgd is None or adam is None else sgd <= adam + SGD_TOLERANCE
    return ClaimResult(
        id=f"A3.{ffn}.sgd_below_adam",
        claim=f"SGD+momentum learns the rarest group no better than Adam ({ffn} FFN)",
        source="A3, Tables 3-8 (group 15 at 10k)",
        published=f"SGD+M {_pub(ffn, 1.0, 0, 'sgd'):.3f} vs Adam {_pub(ffn, 1.0, 0, 'adam'):.3f}",
        ours="—" if ok is None else f"SGD+M {sgd:.3f} vs Adam {adam:.3f}",
        rule=f"rarest-group FTA at the last step: SGD+M ≤ Adam + {SGD_TOLERANCE}",
        verdict=verdict(ok),
        details={"sgd": sgd, "adam": adam},
    )

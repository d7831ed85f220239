"""How far one optimiser leads another on the heavy-tailed knowledge QA: peak gaps and lag ratios.

Inputs (:class:`FTACurves`): first-token accuracy per arm, seed, group and evaluation step, the
evaluation steps, and the *exposures* of every group at every step — how many times one fact
(person, attribute) of that group has been trained by then (:func:`exposures_per_group`).

Peak gap
    For a pair ``(lead, lag)``: the gap ``FTA_lead - FTA_lag`` averaged over seeds (seeds are
    paired: the same seed gives both arms the same data order), its largest value over the
    steps of each group and the step where it occurs, and the largest over all groups. A single
    ``(group, step)`` cell mixes *where* the lead is largest with *how large* it is: the peak
    moves to rarer groups as training goes on.

Exposure-lag ratio
    The scale-free measure: ``exposures the lag arm needs to bring a group to FTA tau ÷
    exposures the lead arm needs``, for tau in :data:`TAUS` (2.0 = the lag arm needs twice the
    training on each fact). Each arm's crossing is the first evaluation where FTA >= tau,
    interpolated *linearly in exposures* with the evaluation before it. Linear, not
    log-exposures: both are unchanged by the unit of exposures (so the paper's tables, whose
    epochs are unknown, give exact ratios), linear admits the step-0 evaluation (zero
    exposures) that anchors our curves, and it is how the published tables' ratios were
    derived, so ours and theirs are computed alike; with evaluations every few percent of
    training the two differ little. Per group, and "pooled": every (group, step) point of an
    arm as one curve of FTA against exposures alone.

    When a crossing is not bracketed the ratio is a bound, never a made-up number: an arm
    already at tau at its first evaluation crossed at or before it; an arm that never reaches
    tau crosses after its last. Each result has ``status`` "measured", "lower bound", "upper
    bound", "not reached" (an arm never reaches tau; bounds given where they exist) or
    "undetermined", a ``ratio`` only when measured, and ``lower`` / ``upper`` bounds. Outputs
    are JSON-ready: no NaN or infinity anywhere, ``None`` where a number does not exist.

Like for like with the paper
    The paper's tables hold three groups (m − 4, m − 2, m) at three steps (20%, 50% and 100% of
    training) and no step-0 evaluation; ours hold every group at every evaluation from step 0.
    Pooled over so different cells the two "pooled" ratios measure different things (the
    paper's 4.13 at τ 0.5 compares Muon's crossing from group 13 to 15 with Adam's from group
    11 to 13, exceeds every per-group ratio, and falls to 1.16 when one cell changes).
    :func:`paper_cells` cuts our curves to the paper's cells, so that per-group and pooled
    ratios computed from them (:func:`cells_lag_ratios`) are computed exactly as the paper's
    are; the ratios of all our groups and evaluations are kept beside them.

Seed spread
    Ratios and gaps are computed per seed (paired) and summarised as mean ± standard error
    (``std(ddof=1) / sqrt(n)``, ``None`` for fewer than two seeds) over the seeds where they
    exist; the ratio of the seed-mean curves is given beside them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tailmem.claims import core
from tailmem.claims import paper_a_qa_tables as tables
from tailmem.metrics.curves import first_crossing

TAUS = (0.3, 0.5, 0.8)
"""FTA levels at which the exposure-lag ratio is read."""

POOLED = "pooled"
"""Group label of the lag ratio of all groups' points taken together."""

PAPER_OFFSETS = tuple(tables.M - g for g in tables.GROUPS)
"""The groups of the paper's tables counted from the rarest: m − 4, m − 2 and m."""
PAPER_FRACTIONS = tuple(step / tables.STEPS[-1] for step in tables.STEPS)
"""The steps of the paper's tables as fractions of training: 20%, 50% and 100%."""


@dataclass(frozen=True)
class FTACurves:
    """FTA of several arms over training, with the exposures of each group at each step.

    ``fta[arm]`` has shape ``(n_seeds, n_groups, n_steps)`` (the same ``n_seeds`` for every
    arm, seed ``i`` of one arm paired with seed ``i`` of another); ``steps`` has ``n_steps``
    increasing entries; ``exposures`` has shape ``(n_groups, n_steps)``, non-decreasing along
    the steps; ``groups`` labels the group axis (default ``0 .. n_groups - 1``).
    """

    fta: Mapping[str, np.ndarray]
    steps: np.ndarray
    exposures: np.ndarray
    groups: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        steps = np.asarray(self.steps, dtype=np.float64)
        exposures = np.asarray(self.exposures, dtype=np.float64)
        fta = {arm: np.asarray(values, dtype=np.float64) for arm, values in self.fta.items()}
        if not fta:
            raise ValueError("need the FTA of at least one arm")
        if steps.ndim != 1 or not np.all(np.diff(steps) > 0):
            raise ValueError(f"steps must be a strictly increasing 1-D array, got {steps}")
        if exposures.shape[1:] != steps.shape or exposures.ndim != 2:
            raise ValueError(
                f"exposures must have shape (n_groups, {len(steps)}), got {exposures.shape}"
            )
        if not np.isfinite(exposures).all() or np.any(np.diff(exposures, axis=1) < 0):
            raise ValueError("exposures must be finite and non-decreasing along the steps")
        shape = next(iter(fta.values())).shape
        for arm, values in fta.items():
            if values.ndim != 3 or values.shape[1:] != exposures.shape or values.shape != shape:
                raise ValueError(
                    f"fta[{arm!r}] must have shape (n_seeds, {exposures.shape[0]}, "
                    f"{len(steps)}) like every other arm, got {values.shape}"
                )
            if not np.isfinite(values).all():
                raise ValueError(f"fta[{arm!r}] holds non-finite values")
        groups = tuple(int(g) for g in self.groups) or tuple(range(exposures.shape[0]))
        if len(groups) != exposures.shape[0]:
            raise ValueError(f"groups has {len(groups)} labels for {exposures.shape[0]} groups")
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "exposures", exposures)
        object.__setattr__(self, "fta", fta)
        object.__setattr__(self, "groups", groups)

    @property
    def arms(self) -> list[str]:
        return list(self.fta)

    @property
    def n_seeds(self) -> int:
        return next(iter(self.fta.values())).shape[0]


def exposures_per_group(
    selections: Sequence[int] | np.ndarray,
    steps: Sequence[float] | np.ndarray,
    steps_per_epoch: float,
    qa_per_selection: int = 1,
) -> np.ndarray:
    """Exposures of one fact of each group by each step, shape ``(n_groups, n_steps)``.

    An epoch trains every fact of group ``g`` ``selections[g] * qa_per_selection`` times (the
    data set's ``S_g`` and ``n_qa / 6`` QA samples per attribute and selection); the stream
    spreads an epoch's items uniformly at random over its ``steps_per_epoch`` steps, so by step
    ``s`` a fact has been trained ``S_g * qa_per_selection * s / steps_per_epoch`` times in
    expectation (exactly, at whole epochs).
    """
    selections = np.asarray(selections, dtype=np.float64)
    steps = np.asarray(steps, dtype=np.float64)
    if not steps_per_epoch > 0:
        raise ValueError(f"steps_per_epoch must be positive, got {steps_per_epoch}")
    return selections[:, None] * qa_per_selection * steps[None, :] / steps_per_epoch


def mean_se(values: Sequence[float | None] | np.ndarray) -> tuple[float | None, float | None]:
    """Mean and standard error (:func:`tailmem.claims.core.mean_se`) of the values that are
    not ``None``; ``None`` where there are none (mean) or fewer than two (standard error)."""
    present = [float(v) for v in values if v is not None]
    if not present:
        return None, None
    summary = core.mean_se(present)
    return summary.mean, summary.se


def band(fta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Seed mean and standard error (0 with one seed) along axis 0: the bands of the figures."""
    fta = np.asarray(fta, dtype=np.float64)
    if len(fta) < 2:
        return fta.mean(axis=0), np.zeros(fta.shape[1:])
    return fta.mean(axis=0), fta.std(axis=0, ddof=1) / math.sqrt(len(fta))


@dataclass(frozen=True)
class Crossing:
    """Where a rising FTA curve first reaches tau: ``status`` "crossed" (``exposure``
    interpolated), "before first" (at or before ``exposure``, the first point) or "not reached"
    (after ``exposure``, the last point)."""

    exposure: float
    status: str


def fta_crossing(exposures: np.ndarray, fta: np.ndarray, tau: float) -> Crossing:
    """First crossing of ``fta >= tau`` along ``exposures`` (non-decreasing), interpolated
    linearly between the evaluation below tau and the first one at or above it."""
    exposures = np.asarray(exposures, dtype=np.float64)
    fta = np.asarray(fta, dtype=np.float64)
    if fta[0] >= tau:
        return Crossing(float(exposures[0]), "before first")
    reached = first_crossing(exposures.tolist(), (-fta).tolist(), -tau)
    if reached is None:
        return Crossing(float(exposures[-1]), "not reached")
    return Crossing(float(reached), "crossed")


def _quotient(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def lag_ratio(lead: Crossing, lag: Crossing) -> dict[str, Any]:
    """``lag.exposure / lead.exposure`` as a measured value or as bounds (see module doc)."""
    value = _quotient(lag.exposure, lead.exposure)
    statuses = (lead.status, lag.status)
    if statuses == ("crossed", "crossed"):
        return {"ratio": value, "status": "measured", "lower": value, "upper": value}
    # the lead crossed at or before its point -> the ratio is at least value; after -> at most
    lower_ok = lead.status in ("crossed", "before first") and lag.status in (
        "crossed",
        "not reached",
    )
    upper_ok = lead.status in ("crossed", "not reached") and lag.status in (
        "crossed",
        "before first",
    )
    if "not reached" in statuses:
        status = "not reached"
    elif lower_ok or upper_ok:
        status = "lower bound" if lower_ok else "upper bound"
    else:
        status = "undetermined"
    return {
        "ratio": None,
        "status": status,
        "lower": value if lower_ok else None,
        "upper": value if upper_ok else None,
    }


def _pooled(exposures: np.ndarray, fta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All (group, step) points as one curve of FTA against exposures, sorted by exposures."""
    order = np.argsort(exposures.ravel(), kind="stable")
    return exposures.ravel()[order], fta.ravel()[order]


def _summary(per_seed: list[dict[str, Any]], of_mean: dict[str, Any]) -> dict[str, Any]:
    mean, se = mean_se([r["ratio"] for r in per_seed])
    statuses = [r["status"] for r in per_seed]
    return {
        "mean": mean,
        "se": se,
        "n_measured": statuses.count("measured"),
        "n_seeds": len(per_seed),
        "statuses": {s: statuses.count(s) for s in dict.fromkeys(statuses)},
        "of_mean": of_mean,
        "seeds": per_seed,
    }


def lag_ratios(
    curves: FTACurves, lead: str, lag: str, taus: Sequence[float] = TAUS
) -> list[dict[str, Any]]:
    """Exposure-lag ratio of ``lag`` behind ``lead`` per group (and pooled) and tau."""
    out = []
    a, b = curves.fta[lead], curves.fta[lag]
    labels: list[int | str] = [*curves.groups, POOLED]
    for k, label in enumerate(labels):

        def points(fta: np.ndarray, k: int = k) -> tuple[np.ndarray, np.ndarray]:
            if k < len(curves.groups):
                return curves.exposures[k], fta[k]
            return _pooled(curves.exposures, fta)

        for tau in taus:
            seeds = [
                lag_ratio(fta_crossing(*points(x), tau), fta_crossing(*points(y), tau))
                for x, y in zip(a, b, strict=True)
            ]
            of_mean = lag_ratio(
                fta_crossing(*points(a.mean(axis=0)), tau),
                fta_crossing(*points(b.mean(axis=0)), tau),
            )
            out.append({"group": label, "tau": float(tau), **_summary(seeds, of_mean)})
    return out


def paper_cells(curves: FTACurves, total_steps: float) -> FTACurves | None:
    """``curves`` cut to the cells of the paper's tables: the groups :data:`PAPER_OFFSETS`
    from the rarest at the evaluations nearest :data:`PAPER_FRACTIONS` of ``total_steps``
    (ties: the earlier), without the step-0 anchor the paper does not have. None where the
    run has fewer groups, or too few evaluations for three distinct steps after step 0."""
    rarest = max(curves.groups)
    wanted = [rarest - offset for offset in sorted(PAPER_OFFSETS, reverse=True)]
    if any(g not in curves.groups for g in wanted):
        return None
    later = [i for i, step in enumerate(curves.steps) if step > 0]
    if not later:
        return None

    def nearest(fraction: float) -> int:
        target = fraction * total_steps
        return min(later, key=lambda i: (abs(curves.steps[i] - target), curves.steps[i]))

    picked = [nearest(f) for f in PAPER_FRACTIONS]
    if len(set(picked)) < len(picked):
        return None
    rows = [curves.groups.index(g) for g in wanted]
    return FTACurves(
        {arm: fta[:, rows][:, :, picked] for arm, fta in curves.fta.items()},
        curves.steps[picked],
        curves.exposures[rows][:, picked],
        tuple(wanted),
    )


def cells_lag_ratios(
    curves: FTACurves, total_steps: float, lead: str, lag: str, taus: Sequence[float] = TAUS
) -> list[dict[str, Any]]:
    """:func:`lag_ratios` on :func:`paper_cells` of ``curves``: per group (m − 4, m − 2, m)
    and pooled, computed as the paper's tables are; empty where the cells do not exist."""
    cells = paper_cells(curves, total_steps)
    return [] if cells is None else lag_ratios(cells, lead, lag, taus)


def peak_gaps(curves: FTACurves, lead: str, lag: str) -> dict[str, Any]:
    """Per group, the largest seed-mean gap ``FTA_lead - FTA_lag`` over the steps, where it
    occurs and its seed spread; and the largest over all groups ("overall")."""
    diff = curves.fta[lead] - curves.fta[lag]  # (seeds, groups, steps), paired by seed
    mean = diff.mean(axis=0)
    per_group = []
    for k, group in enumerate(curves.groups):
        j = int(np.argmax(mean[k]))
        _, se = mean_se(diff[:, k, j])
        per_group.append(
            {"group": group, "step": float(curves.steps[j]), "gap": float(mean[k, j]), "se": se}
        )
    overall = max(per_group, key=lambda row: row["gap"])
    return {"overall": overall, "per_group": per_group}


def gap_measures(
    curves: FTACurves,
    taus: Sequence[float] = TAUS,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """Peak gaps and lag ratios for every pair of arms (JSON-ready).

    ``pairs`` defaults to every ``(lead, lag)`` with ``lead`` listed before ``lag`` in
    ``curves.fta`` (list Muon first to read "Adam needs x times Muon's exposures").
    """
    chosen = list(pairs) if pairs is not None else list(itertools.combinations(curves.arms, 2))
    for pair in chosen:
        missing = [arm for arm in pair if arm not in curves.fta]
        if missing:
            raise ValueError(f"pair {pair}: no FTA for {missing}; arms are {curves.arms}")
    return {
        "taus": [float(t) for t in taus],
        "groups": list(curves.groups),
        "n_seeds": curves.n_seeds,
        "pairs": [
            {
                "lead": lead,
                "lag": lag,
                "peak_gap": peak_gaps(curves, lead, lag),
                "lag_ratio": lag_ratios(curves, lead, lag, taus),
            }
            for lead, lag in chosen
        ],
    }


def paper_curves(version: tables.Version = "arxiv-v2", ffn: str = "plain") -> FTACurves:
    """Paper A's published table (:mod:`tailmem.claims.paper_a_qa_tables`, ``version``
    "arxiv-v2" or "iclr") as :class:`FTACurves`: one "seed" (the published means), groups 11, 13
    and 15 at 2k, 5k and 10k steps (gated FFN: group 15 at 10k).

    Group ``g`` has ``S_g = 2**(15 - g)`` selections, so by step ``s`` one of its facts has been
    trained ``S_g * s / steps_per_epoch`` times. The paper's batch size, hence its epoch
    length, is not published; ratios of exposures do not depend on it, so exposures are counted
    with ``steps_per_epoch = 1``.
    """
    table = tables.published_fta(version)
    cells = [key for key in table if key[0] == ffn]
    if not cells:
        raise ValueError(f"ffn: got {ffn!r}; expected 'plain' or 'gated'")
    steps = sorted({step for _, step, _ in cells})
    groups = sorted({group for _, _, group in cells})
    fta = {
        arm: np.array([[[table[ffn, s, g][arm] for s in steps] for g in groups]])
        for arm in tables.ARMS
    }
    selections = [2 ** (tables.M - g) for g in groups]
    exposures = exposures_per_group(selections, steps, steps_per_epoch=1.0)
    return FTACurves(fta, np.array(steps), exposures, tuple(groups))

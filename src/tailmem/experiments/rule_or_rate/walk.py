"""The walks' table and figure: every arm's rarest-group FTA along each one-factor walk.

A walk (:class:`~.config.Walk`) goes from a starting configuration to the base one factor a
step, every point tuned and trained for the same epochs. For each point the table gives, per
arm (Adam at one rate, Adam at its own rate on the hidden matrices, Muon at its own), the
rarest group's final FTA with its 95 % t interval over the evaluation seeds; Muon's remaining
lead over Adam-own in that group (paired seeds, 95 % t interval); the share of Muon's lead over
Adam-shared that Adam's own rate closes there, with Fieller's interval (:mod:`tailmem.metrics.
share`; "not defined" where that lead is not resolved); the rates each arm chose, and which sit
at an end of the candidates tried. Which factor moves which arm is read off consecutive rows.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy import stats

from tailmem.claims.a3 import A3_PUBLISHED_FTA
from tailmem.claims.core import holm, t_quantile
from tailmem.columns import column
from tailmem.experiments.knowledge_qa import grid, tables
from tailmem.experiments.rule_or_rate.arms import ADAM_SHARED, REST
from tailmem.experiments.rule_or_rate.config import Config, Walk
from tailmem.lm.spec import per_group
from tailmem.metrics.share import Share, share
from tailmem.outputs import Answer
from tailmem.plotting import legend_outside, pyplot

MUON_OWN, ADAM_OWN = "muon_own", "adam_own"
ARMS = (ADAM_SHARED, ADAM_OWN, MUON_OWN)
"""The arms of every walk point, in the table's order."""
LABELS = {ADAM_SHARED: "Adam, one rate", ADAM_OWN: "Adam, own rate", MUON_OWN: "Muon, own rate"}


@dataclass(frozen=True)
class Interval:
    """Per-seed ``values``, their mean and its 95 % t interval (``low``/``high`` None for one
    seed)."""

    values: tuple[float, ...]
    mean: float
    low: float | None
    high: float | None

    @staticmethod
    def of(values: Sequence[float]) -> Interval:
        """The mean of ``values`` and its two-sided 95 % Student-t interval."""
        mean = statistics.fmean(values)
        if len(values) < 2:
            return Interval(tuple(values), mean, None, None)
        half = t_quantile(len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
        return Interval(tuple(values), mean, mean - half, mean + half)

    def text(self) -> str:
        if self.low is None or self.high is None:
            return f"{self.mean:.2f}"
        return f"{self.mean:.2f} [{self.low:.2f}, {self.high:.2f}]"


def rarest_by_seed(point: grid.PointResult, arm: str, group: int = -1) -> dict[int, float]:
    """The final FTA of ``group`` (default: the rarest) per evaluation seed of ``arm``."""
    results = tables.seed_results(point.plan, point.config.ffns[0], arm)
    return {r.seed: per_group(r.evals[-1], "fta")[group] for r in results if r.evals}


def head_fta(point: grid.PointResult, arm: str, groups: int) -> float | None:
    """The final FTA over the ``groups`` most frequent groups, mean over seeds and groups."""
    results = tables.seed_results(point.plan, point.config.ffns[0], arm)
    values = [v for r in results if r.evals for v in per_group(r.evals[-1], "fta")[:groups]]
    return statistics.fmean(values) if values else None


def paired(a: Mapping[int, float], b: Mapping[int, float]) -> tuple[list[float], list[float]]:
    """The values of ``a`` and ``b`` on the seeds both have, in seed order."""
    seeds = sorted(set(a) & set(b))
    return [a[s] for s in seeds], [b[s] for s in seeds]


@dataclass(frozen=True)
class WalkPoint:
    """One point of a walk, measured: every arm's rarest-group FTA, Muon's lead over Adam-own,
    the share of Muon's lead that Adam's own rate closes, and the arms' chosen rates."""

    walk: str
    index: int
    factor: str
    label: str
    ffn: str
    train_steps: int
    by_seed: Mapping[str, Mapping[int, float]]
    share: Share
    rates: Mapping[str, Mapping[str, float]]
    edges: Mapping[str, str]
    head_adam: float | None

    @property
    def rarest(self) -> dict[str, Interval]:
        """Every arm's rarest-group final FTA over its seeds."""
        return {arm: Interval.of(list(v.values())) for arm, v in self.by_seed.items() if v}

    def paper_distance(self) -> float | None:
        """How far this point is from paper A's pattern in its FFN type (arXiv v2, the end of
        training): ``|Adam − Adam_A| + |Muon − Muon_A|`` in the rarest group's FTA (Adam at
        one rate, Muon at its own) plus ``1 − Adam's head-group FTA`` (the paper's head groups
        reach ≈ 1.0 with every optimiser). 0: the paper's pattern; a description, not a test."""
        rarest = self.rarest
        if ADAM_SHARED not in rarest or MUON_OWN not in rarest or self.head_adam is None:
            return None
        paper = A3_PUBLISHED_FTA[self.ffn][(1.0, 0)]
        return (abs(rarest[ADAM_SHARED].mean - paper["adam"])
                + abs(rarest[MUON_OWN].mean - paper["muon"]) + 1.0 - self.head_adam)  # fmt: skip

    def lead(self, arm: str = MUON_OWN, over: str = ADAM_OWN) -> Interval | None:
        """``arm`` − ``over`` in the rarest group's final FTA over the seeds both finished."""
        a, b = paired(self.by_seed.get(arm, {}), self.by_seed.get(over, {}))
        return Interval.of([x - y for x, y in zip(a, b, strict=True)]) if a else None


def measure(walk: Walk, index: int, label: str, point: grid.PointResult, heads: int) -> WalkPoint:
    """The :class:`WalkPoint` of point ``label``, the ``index``-th of ``walk``."""
    by_seed = {arm: rarest_by_seed(point, arm) for arm in ARMS}
    seeds = sorted(set(by_seed[ADAM_SHARED]) & set(by_seed[ADAM_OWN]) & set(by_seed[MUON_OWN]))
    closed = [by_seed[ADAM_OWN][s] - by_seed[ADAM_SHARED][s] for s in seeds]
    whole = [by_seed[MUON_OWN][s] - by_seed[ADAM_SHARED][s] for s in seeds]
    ffn = point.config.ffns[0]
    plan = point.plan
    factor = "start" if index == 0 else walk.steps[index - 1].label
    return WalkPoint(
        walk.name, index, factor, label, ffn, point.config.train.steps, by_seed,
        share(closed, whole),
        {arm: dict(plan.best.get((ffn, arm), {})) for arm in ARMS},
        {arm: plan.edge((ffn, arm)) or "" for arm in ARMS},
        head_fta(point, ADAM_SHARED, heads),
    )  # fmt: skip


def walk_points(cfg: Config, points: Mapping[str, grid.PointResult]) -> list[WalkPoint]:
    """Every walk's points in order (the base where a walk ends at it)."""
    out = []
    for walk in cfg.walks:
        for index, label in enumerate(walk.labels()):
            if label in points:
                qa = points[label].config
                out.append(measure(walk, index, label, points[label], qa.head_groups))
    return out


@dataclass(frozen=True)
class WalkRow:
    """One point of a walk (a row of ``walk.csv``)."""

    walk: str = column("the walk: its width and FFN type")
    step: int = column("0: the starting configuration; k: after the walk's k-th factor")
    factor: str = column("the factor this step changes toward the base (all earlier ones too)")
    point: str = column("the point's label (its folder under points/)")
    train_steps: int = column("updates in its epochs (the same exposures per fact everywhere)")
    adam_shared: float | None = column("rarest group's final FTA, Adam at one rate, seed mean")
    adam_shared_low: float | None = column("its 95 % t interval, low end")
    adam_shared_high: float | None = column("its 95 % t interval, high end")
    adam_own: float | None = column("the same, Adam on the hidden matrices at its own rate")
    adam_own_low: float | None = column("its 95 % t interval, low end")
    adam_own_high: float | None = column("its 95 % t interval, high end")
    muon_own: float | None = column("the same, Muon on the hidden matrices at its own rate")
    muon_own_low: float | None = column("its 95 % t interval, low end")
    muon_own_high: float | None = column("its 95 % t interval, high end")
    lead: float | None = column("Muon-own − Adam-own in that FTA, mean over paired seeds")
    lead_low: float | None = column("its 95 % t interval, low end")
    lead_high: float | None = column("its 95 % t interval, high end")
    share: float | None = column(
        "(Adam-own − Adam-shared) ÷ (Muon-own − Adam-shared) in that FTA: the share of Muon's "
        "lead that Adam's own rate closes (0: the update rule, 1: the learning rate)"
    )
    share_low: float | None = column("Fieller's 95 % interval, low end (empty: not defined)")
    share_high: float | None = column("Fieller's 95 % interval, high end (empty: not defined)")
    adam_shared_head: float | None = column("Adam-shared's final FTA over the head groups")
    paper_distance: float | None = column(
        "distance to paper A's pattern (arXiv v2): |Adam-shared − paper's Adam| + |Muon-own − "
        "paper's Muon| in the rarest group's final FTA, + 1 − Adam-shared's head FTA"
    )
    lr_adam_shared: float | None = column("the rate Adam-shared chose (every parameter)")
    lr_adam_own: float | None = column("the hidden matrices' rate Adam-own chose")
    lr_muon_own: float | None = column("the hidden matrices' rate Muon-own chose")
    lr_rest: float | None = column("the rate of the rest (embedding, head, norms) in the own arms")
    edges: str = column("arms whose chosen rate sits at an end of the candidates tried")


def row(p: WalkPoint) -> WalkRow:
    """The table row of a measured walk point."""
    rarest = p.rarest
    cells: dict[str, float | None] = {}
    for arm in ARMS:
        found = rarest.get(arm)
        cells |= {arm: None if found is None else found.mean,
                  f"{arm}_low": None if found is None else found.low,
                  f"{arm}_high": None if found is None else found.high}  # fmt: skip
    lead = p.lead()
    hidden = {arm: next((v for k, v in p.rates[arm].items() if k != REST), None) for arm in ARMS}
    return WalkRow(
        walk=p.walk,
        step=p.index,
        factor=p.factor,
        point=p.label,
        train_steps=p.train_steps,
        adam_shared=cells[ADAM_SHARED],
        adam_shared_low=cells[f"{ADAM_SHARED}_low"],
        adam_shared_high=cells[f"{ADAM_SHARED}_high"],
        adam_own=cells[ADAM_OWN],
        adam_own_low=cells[f"{ADAM_OWN}_low"],
        adam_own_high=cells[f"{ADAM_OWN}_high"],
        muon_own=cells[MUON_OWN],
        muon_own_low=cells[f"{MUON_OWN}_low"],
        muon_own_high=cells[f"{MUON_OWN}_high"],
        lead=None if lead is None else lead.mean,
        lead_low=None if lead is None else lead.low,
        lead_high=None if lead is None else lead.high,
        share=p.share.share,
        share_low=p.share.low,
        share_high=p.share.high,
        adam_shared_head=p.head_adam,
        paper_distance=p.paper_distance(),
        lr_adam_shared=p.rates[ADAM_SHARED].get(REST),
        lr_adam_own=hidden[ADAM_OWN],
        lr_muon_own=hidden[MUON_OWN],
        lr_rest=p.rates[MUON_OWN].get(REST),
        edges=", ".join(f"{LABELS[a]}: {e}" for a, e in p.edges.items() if e),
    )


def walk_figure(points: Sequence[WalkPoint]) -> Any:
    """One panel per walk: each arm's rarest-group final FTA (95 % interval) at every step."""
    plt = pyplot()
    walks = list(dict.fromkeys(p.walk for p in points))
    fig, axes = plt.subplots(len(walks), 1, figsize=(9.0, 3.4 * len(walks)), squeeze=False)
    colours = {ADAM_SHARED: "tab:orange", ADAM_OWN: "tab:green", MUON_OWN: "tab:blue"}
    for ax, name in zip(axes[:, 0], walks, strict=True):
        mine = [p for p in points if p.walk == name]
        for shift, arm in zip((-0.15, 0.0, 0.15), ARMS, strict=True):
            xs: list[float] = []
            ys: list[float] = []
            errs: tuple[list[float], list[float]] = ([], [])
            for p in mine:
                found = p.rarest.get(arm)
                if found is None:
                    continue
                xs.append(p.index + shift)
                ys.append(found.mean)
                errs[0].append(found.mean - (found.mean if found.low is None else found.low))
                errs[1].append((found.mean if found.high is None else found.high) - found.mean)
            ax.errorbar(xs, ys, yerr=errs, fmt="o-", color=colours[arm], capsize=3,
                        label=LABELS[arm])  # fmt: skip
        ax.set_xticks([p.index for p in mine], [_short(p) for p in mine], rotation=30,
                      ha="right", fontsize=7)  # fmt: skip
        ax.set_ylim(-0.03, 1.03)
        ax.set(ylabel="rarest group's final FTA", title=f"Walk at {name}: start → base, one "
               "factor a step (95 % intervals over seeds)")  # fmt: skip
        ax.grid(alpha=0.3)
        legend_outside(ax)
    fig.tight_layout()
    return fig


def _short(p: WalkPoint) -> str:
    text = p.factor if len(p.factor) <= 34 else p.factor[:32] + "…"
    return f"{p.index}: {text}"


@dataclass(frozen=True)
class Move:
    """An arm's rarest-group FTA from one walk point to the next: the change, Welch's two-sided
    p-value, and whether Holm's correction over the walk's steps (per arm) keeps it."""

    walk: str
    arm: str
    index: int
    factor: str
    change: float
    p: float
    beyond_noise: bool


def moves(points: Sequence[WalkPoint]) -> list[Move]:
    """Every arm's change at every step of every walk, tested against the previous point (a
    family per walk and arm, Holm-corrected: a walk asks "which factor moves this arm?")."""
    out = []
    for name in dict.fromkeys(p.walk for p in points):
        mine = sorted((p for p in points if p.walk == name), key=lambda p: p.index)
        for arm in ARMS:
            found = []
            for before, after in itertools.pairwise(mine):
                a, b = before.rarest.get(arm), after.rarest.get(arm)
                if a is None or b is None or min(len(a.values), len(b.values)) < 2:
                    continue
                test = stats.ttest_ind(b.values, a.values, equal_var=False)
                p = float(test.pvalue) if math.isfinite(test.pvalue) else 1.0
                found.append((after, b.mean - a.mean, p))
            kept = holm([p for _, _, p in found])
            out += [Move(name, arm, after.index, after.factor, change, p, keep)
                    for (after, change, p), keep in zip(found, kept, strict=True)]  # fmt: skip
    return out


def lead_verdict(lead: Interval | None) -> str:
    """``Muon ahead`` / ``Muon behind`` when the 95 % interval of a lead excludes 0, else ``not
    distinguished`` (within the noise of the seeds)."""
    if lead is None or lead.low is None or lead.high is None:
        return "not distinguished"
    if lead.low > 0:
        return "Muon ahead"
    if lead.high < 0:
        return "Muon behind"
    return "not distinguished"


def _nearest(near: Sequence[tuple[float, WalkPoint]]) -> str:
    if not near:
        return ""
    distance, p = min(near, key=lambda x: x[0])
    return (
        f". Closest to paper A's pattern (Adam at one rate, Muon, Adam's head groups; the "
        f"walk's distance column): step {p.index} ({p.factor}), distance {distance:.2f}"
    )


def _text(found: Interval | None) -> str:
    return "—" if found is None else found.text()


def _tails(p: WalkPoint) -> str:
    return ", ".join(f"{LABELS[a]} {p.rarest[a].text()}" for a in ARMS if a in p.rarest)


def _moved(found: Sequence[Move], walk: str) -> str:
    kept = [m for m in found if m.walk == walk and m.beyond_noise]
    if not kept:
        return "no single step moves an arm beyond noise (Holm over the walk's steps, per arm)"
    said = [f"{LABELS[m.arm]} {m.change:+.2f} at step {m.index} ({m.factor}; p {m.p:.2g})"
            for m in sorted(kept, key=lambda m: (m.index, m.arm))]  # fmt: skip
    return "beyond noise (Welch, Holm over the walk's steps per arm): " + "; ".join(said)


def answers(points: Sequence[WalkPoint], found: Sequence[Move]) -> list[Answer]:
    """The report's first-screen answers, stated with their conditions: per walk, the update
    rule or the learning rate at its start and at its end (the share Adam's own rate closes,
    Fieller's interval, and Muon's remaining lead over Adam-own, 95 % t interval), which steps
    move which arm, and whether Muon leads Adam at one rate (paper A's comparison)."""
    out = []
    for name in dict.fromkeys(p.walk for p in points):
        mine = sorted((p for p in points if p.walk == name), key=lambda p: p.index)
        start, end = mine[0], mine[-1]
        near = [(d, p) for p in mine if (d := p.paper_distance()) is not None]
        verdicts = [f"{p.share.verdict()} at {'its start' if p is start else 'the base'}"
                    for p in (start, end)]  # fmt: skip
        evidence = "; ".join(
            f"{'start (the independent implementation’s settings)' if p is start else 'base'}: "
            f"{_tails(p)}; Adam's own rate closes {p.share.text()} of Muon's lead over Adam at "
            f"one rate, Muon keeps {_text(p.lead())} over Adam-own"
            for p in (start, end)
        )
        out.append(Answer(
            f"Is Muon's tail edge its update rule or its learning rate? (walk at {name})",
            f"{verdicts[0]}; {verdicts[1]}",
            f"{evidence}. Along the walk, {_moved(found, name)}" + _nearest(near),
            verdicts[1].split(" at ")[0],
        ))  # fmt: skip
        paper = [(p, p.lead(MUON_OWN, ADAM_SHARED)) for p in (start, end)]
        out.append(Answer(
            f"Does Muon learn the rarest facts better than Adam at one rate (paper A's "
            f"comparison)? (walk at {name})",
            "; ".join(f"{lead_verdict(lead)} at {'its start' if p is start else 'the base'}"
                      for p, lead in paper),
            "; ".join(f"{'start' if p is start else 'base'}: Muon − Adam-shared "
                      f"{_text(lead)} (paired seeds, 95 % t interval)" for p, lead in paper),
            lead_verdict(paper[-1][1]),
        ))  # fmt: skip
    return out

"""The benchmark's leaderboard: tail learning against cost, one row per optimiser and level.

Everything is read from the finished QA points (:class:`~.knowledge_qa.grid.PointResult`) and
the memory result (:func:`.memory.run_memory`). Each row is a :class:`LeaderboardRow` (its
fields document the columns); the place of every optimiser comes from :mod:`.places` on the
primary statistic declared in :mod:`tailmem.claims.bench` — the rarest group's final FTA,
paired by seed (t tests, equivalence tests with the declared FTA margin, Holm across the level),
behind a positive control — with the area under the rarest group's FTA-against-exposures curve
as the second statistic; the pooled exposure lag is descriptive.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailmem.claims.bench import FTA_MARGIN
from tailmem.claims.core import Bound, ClaimResult, t_quantile
from tailmem.claims.related import BenchMemory
from tailmem.columns import column, column_docs, records
from tailmem.data.bios import N_ATTRIBUTES, group_sizes
from tailmem.diagnose import diagnose
from tailmem.errors import DataError
from tailmem.experiments.knowledge_qa import grid, tables
from tailmem.experiments.optim_bench.memory import (
    MemoryResult,
    MemoryRow,
    SweepPoint,
    bench_memory,
    memory_rows,
    tail_head_ratio,
)
from tailmem.experiments.optim_bench.places import (
    ADAM,
    ALL_ADAM,
    HEADLINE_TAU,
    MUON,
    LevelStats,
    PositiveControl,
    Power,
    ReferenceFinding,
    TailValues,
    decide_level,
    paired,
    tail_values,
)
from tailmem.lm.plan import EntryStatus
from tailmem.metrics.qa_gaps import POOLED, TAUS, LagRatio
from tailmem.optim.registry import get_kind, source
from tailmem.outputs import Figure, Outputs, Report, Table
from tailmem.plotting import MIN_FONT, legend_outside, note_no_data, pyplot
from tailmem.rundir import RunDir
from tailmem.train import read_metrics

ISOTROPY = {"v": "v", "o": "o", "ffn": ("w_in", "w_gate", "w_out")}
"""The matrices whose isotropy the board reports (FFN: the mean over its matrices)."""
FAMILY_COLOURS = {
    "orthogonalised": "tab:blue",
    "whitening": "tab:green",
    "sign": "tab:red",
    "elementwise": "tab:orange",
    "plain": "tab:grey",
    "yours": "tab:purple",
}


@dataclass(frozen=True)
class LeaderboardRow:
    """One optimiser at one QA level (each field is a column of ``leaderboard.csv``)."""

    level: str = column("the QA level (the base: BPE answers; then one token per answer value)")
    optimizer: str = column("the optimiser on the hidden matrices (Adam on embedding, head, norms)")
    label: str = column("its name for people")
    family: str = column("what kind of update it is (orthogonalised, whitening, sign, …)")
    source: str = column("the implementation and its version")
    role: str = column(
        "reference (Muon; Adam on the hidden matrices at its own rate), challenger, or the "
        "extra row: Adam everywhere at one rate (paper A's reference)"
    )
    placement: str = column(
        "where it sits between Muon and Adam (own rate) on the primary statistic, the rarest "
        "group's final FTA paired by seed: ahead of Muon, equivalent to Muon, between, "
        "equivalent to Adam, behind Adam, not distinguished (t tests and equivalence tests at "
        "0.05, Holm across the level), or undecided where the positive control did not separate "
        "or the order rests on a rate at an end of its grid (widening spent)"
    )
    placement_auc: str = column(
        "the same on the second statistic: the area under the rarest group's FTA-against-"
        "exposures curve (its own family)"
    )
    lr: float | None = column("its chosen rate on the hidden matrices")
    rest_lr: float | None = column("the rate of Adam on the rest (the Adam row's choice)")
    lr_edge: str = column("lowest/highest: the chosen rate sits at an end of the candidates tried")
    tuned_rates: int = column("rates its own tuning chose (1 in every row: equal tuning freedom)")
    tuning_trials: int = column("trials its tuning ran (candidates × tuning seeds): its cost")
    tuning_budget: int = column("the most trials the widening rule allows (the same for all)")
    tuning_seeds: tuple[int, ...] = column("the seeds its candidates trained on")
    eval_seeds: tuple[int, ...] = column("the seeds it was scored on (none a tuning seed)")
    n_seeds: int = column("evaluation seeds that finished")
    margin: float = column(
        "the equivalence margin on an FTA difference (declared once: tailmem.claims.bench)"
    )
    lag_vs_muon: float | None = column(
        f"exposures it needs ÷ Muon's to bring FTA to τ {HEADLINE_TAU:g}, geometric mean over "
        "paired seeds, pooled over groups (1: Muon's pace; lower is better)"
    )
    lag_vs_muon_low: float | None = column("95 % t interval of lag_vs_muon, low end")
    lag_vs_muon_high: float | None = column("95 % t interval of lag_vs_muon, high end")
    lag_vs_adam: float | None = column(
        f"Adam (own rate)'s exposures ÷ its own at τ {HEADLINE_TAU:g}, pooled over every group, "
        "the head groups included (its speed-up over Adam; higher is better)"
    )
    lag_vs_adam_low: float | None = column("95 % t interval of lag_vs_adam, low end")
    lag_vs_adam_high: float | None = column("95 % t interval of lag_vs_adam, high end")
    rarest_gap_vs_muon: float | None = column(
        "the primary statistic: its rarest-group final FTA minus Muon's, mean over paired seeds"
    )
    rarest_gap_vs_muon_se: float | None = column("its SE over paired seeds (floored: as decided)")
    p_vs_muon: float | None = column("p-value of a difference from Muon (primary; before Holm)")
    p_equivalent_muon: float | None = column("p-value of equivalence with Muon (before Holm)")
    p_vs_adam: float | None = column("p-value of a difference from Adam (own rate), before Holm")
    p_equivalent_adam: float | None = column("p-value of equivalence with Adam (own rate)")
    rarest_auc: float | None = column(
        "the second statistic: the rarest group's area under FTA against exposures ÷ the "
        "exposures trained (its mean FTA over training), mean over seeds"
    )
    rarest_auc_se: float | None = column("its SE over seeds")
    auc_gap_vs_muon: float | None = column("its rarest_auc minus Muon's, mean over paired seeds")
    auc_gap_vs_adam: float | None = column("its rarest_auc minus Adam (own rate)'s, paired")
    rarest_lag_vs_muon: float | None = column(
        f"descriptive: exposures it needs ÷ Muon's to bring the rarest group to FTA "
        f"{HEADLINE_TAU:g}, geometric mean over seeds with censored seeds at their bound"
    )
    rarest_lag_censored: str = column(
        "seeds whose crossing is censored (kept as a bound: ≥ lower, ≤ upper), e.g. '2 ≥'"
    )
    lag_vs_muon_03: float | None = column("lag_vs_muon at τ 0.3 (geometric mean)")
    lag_vs_muon_08: float | None = column("lag_vs_muon at τ 0.8 (geometric mean)")
    lag_vs_adam_03: float | None = column("lag_vs_adam at τ 0.3 (geometric mean)")
    lag_vs_adam_08: float | None = column("lag_vs_adam at τ 0.8 (geometric mean)")
    rarest_fta: float | None = column("final FTA of the rarest group, mean over seeds")
    rarest_fta_se: float | None = column("its SE over seeds")
    second_fta: float | None = column("final FTA of the second-rarest group, mean over seeds")
    second_fta_se: float | None = column("its SE over seeds")
    rarest_em: float | None = column("final whole-answer exact match of the rarest group")
    rarest_em_se: float | None = column("its SE over seeds")
    tail_gap_vs_adam: float | None = column(
        "the pre-specified cell: its rarest-group FTA minus Adam (own rate)'s at the end, mean "
        "over paired seeds"
    )
    tail_gap_vs_adam_se: float | None = column("its SE over paired seeds")
    peak_gap_vs_adam: float | None = column(
        "descriptive only: the largest seed-mean FTA gap over Adam (own rate), any group and "
        "evaluation (a maximum of many cells: in no place)"
    )
    erank_v: float | None = column("effective rank of V at the end (first seed)")
    erank_o: float | None = column("effective rank of O at the end (first seed)")
    erank_ffn: float | None = column("effective rank of the FFN matrices (mean) at the end")
    entropy_v: float | None = column("normalised singular-value entropy of V at the end")
    entropy_o: float | None = column("normalised singular-value entropy of O at the end")
    entropy_ffn: float | None = column("the same of the FFN matrices (mean)")
    step_seconds: float | None = column("median training-step time in this run")
    step_time_vs_adam: float | None = column("its step time ÷ Adam (own rate)'s, same run")
    memory_lr: float | None = column("the associative memory's matched step size")
    memory_head_steps: float | None = column(
        "steps the memory's most frequent group takes to halve its loss (mean over draws)"
    )
    memory_tail_steps: float | None = column(
        "steps the memory's rarest group takes to halve its loss (censored at the run's end)"
    )
    memory_tail_censored: bool | None = column("a draw's rarest group never halved its loss")
    memory_tail_head_ratio: float | None = column("rarest ÷ most frequent group's time, mean")
    memory_rho: float | None = column("one-step balance ϱ^ε of the memory's first update")


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def isotropy(path: Path) -> dict[str, float | None]:
    """eRank and entropy of V, O and the FFN matrices of the model saved under ``path`` (a
    sub-run folder with its final checkpoint), averaged over layers; None without one."""
    try:
        _, rows = diagnose(path)
    except DataError:
        return {f"{m}_{name}": None for name in ISOTROPY for m in ("erank", "entropy")}
    out: dict[str, float | None] = {}
    for name, matrices in ISOTROPY.items():
        chosen = (matrices,) if isinstance(matrices, str) else matrices
        for metric, key in (("erank", "erank"), ("entropy", "svd_entropy")):
            values = [r[key] for r in rows if r["matrix"] in chosen and r.get(key) is not None]
            out[f"{metric}_{name}"] = round(statistics.fmean(values), 4) if values else None
    return out


def step_seconds(paths: Sequence[Path], tokens_per_step: int) -> float | None:
    """Median training-step time over the logged windows of the runs under ``paths``."""
    rates = [
        row["tokens_per_s"]
        for path in paths
        for row in read_metrics(path / "metrics.jsonl")
        if row.get("tokens_per_s")
    ]
    return tokens_per_step / statistics.median(rates) if rates else None


def _pooled(point: grid.PointResult, lead: str, lag: str, tau: float) -> LagRatio | None:
    return _pooled_group(point, lead, lag, tau, POOLED)


def _pooled_group(
    point: grid.PointResult, lead: str, lag: str, tau: float, group: int | str
) -> LagRatio | None:
    """The lag ratio of ``lag`` behind ``lead`` at ``tau`` for ``group`` (or pooled)."""
    measures = point.measures.get(point.config.ffns[0])
    pair = None if measures is None else measures.pair(lead, lag)
    return None if pair is None else pair.ratio(tau, group)


def vs_muon(point: grid.PointResult, arm: str, tau: float = HEADLINE_TAU) -> LagRatio | None:
    """The pooled lag of ``arm`` behind Muon (None for Muon itself or when not measured)."""
    return None if arm == MUON else _pooled(point, MUON, arm, tau)


def vs_adam(point: grid.PointResult, arm: str, tau: float = HEADLINE_TAU) -> LagRatio | None:
    """The pooled lag of Adam (own rate) behind ``arm`` (None for that Adam itself)."""
    return None if arm == ADAM else _pooled(point, arm, ADAM, tau)


def level_stats(point: grid.PointResult) -> tuple[LevelStats, dict[str, TailValues]]:
    """The tests of one level (:func:`.places.decide_level`) and every optimiser's tail per
    seed (:func:`.places.tail_values`), from the finished evaluation runs."""
    ffn = point.config.ffns[0]
    values: dict[str, TailValues] = {arm: {} for arm in point.plan.arms}  # {}: none finished
    for arm in point.plan.arms:
        curve = point.curves.arm(ffn, arm).complete()
        if curve.runs:
            steps, fta = curve.history()
            exposures = point.exposures.at(steps)[-1]  # the rarest group's
            values[arm] = tail_values(list(curve.seeds), fta[:, :, -1], exposures)
    rarest = float((N_ATTRIBUTES * group_sizes(point.config.data.m))[-1])
    edges = {arm: edge for arm in point.plan.arms if (edge := point.plan.edge((ffn, arm)))}
    return decide_level(values, point.plan.seeds, 1.0 / rarest, edges), values


def censored_lag(ratio: LagRatio | None) -> tuple[float | None, str]:
    """A rarest-group lag over seeds, censored seeds kept at their bound: the geometric mean
    and the count of bounds with their side (``"2 ≥"``); None where a seed has neither."""
    if ratio is None:
        return None, ""
    found = [r.value for r in ratio.seeds]
    if not found or any(v is None for v in found):
        return None, ""
    logs = [math.log(v.value if isinstance(v, Bound) else v) for v in found if v is not None]
    sides = [("≥" if v.side == "lower" else "≤") for v in found if isinstance(v, Bound)]
    marks = " ".join(f"{sides.count(m)} {m}" for m in dict.fromkeys(sides))
    return _round(math.exp(statistics.fmean(logs))), marks


def _interval(ratio: LagRatio | None) -> tuple[float | None, float | None, float | None]:
    value, low, high = (None, None, None) if ratio is None else ratio.summary()
    return _round(value), _round(low), _round(high)


def level_rows(
    point: grid.PointResult,
    root: Path,
    labels: Mapping[str, str],
    memory: Mapping[str, MemorySummary],
) -> list[LeaderboardRow]:
    """The leaderboard rows of one QA level."""
    cfg, plan = point.config, point.plan
    ffn = cfg.ffns[0]
    level_root = root / "points" / grid.slug(point.point.label)
    tokens = cfg.train.batch_size * cfg.train.seq_len
    times = {}
    for arm in plan.arms:
        runs = [level_root / spec.key for spec in plan.seed_runs.get((ffn, arm), [])]
        times[arm] = step_seconds([p for p in runs if (p / "metrics.jsonl").is_file()], tokens)
    found, values = level_stats(point)
    placed, finding = found.placed, found.finding
    measures = point.measures.get(ffn)
    groups = () if measures is None else measures.ours.groups
    rarest_group = max(groups) if groups else None
    rows = []
    every = [state.entry.arm.name for (f, _), state in plan.states.items() if f == ffn]
    for arm in every:  # an optimiser without a finished seed is a row that says why
        kind = get_kind(arm, cfg.optim.kinds())
        curve = point.curves.arm(ffn, arm)
        best = plan.best.get((ffn, arm), {})
        trials, budget = plan.tuning_cost((ffn, arm))
        entry = plan.states[(ffn, arm)].entry
        sweep = entry.sweep
        m, m_low, m_high = _interval(vs_muon(point, arm))
        a, a_low, a_high = _interval(vs_adam(point, arm))
        place = placed.get(arm)
        tests = (finding.test, None) if arm == ADAM else (
            (place.vs_muon, place.vs_adam) if place is not None else (None, None))  # fmt: skip
        if arm == MUON:
            role, where = "reference", "reference (Muon)"
        elif arm == ADAM:
            role, where = "reference", f"reference (Adam, own rate): {finding.finding}"
        else:
            role = "extra: Adam everywhere (paper A)" if arm == ALL_ADAM else "challenger"
            where = place.described if place is not None else "not distinguished"
        second = found.placed_auc.get(arm)
        where_auc = second.described if second is not None else ""
        if arm not in plan.arms:
            where = where_auc = not_measured(plan.states[(ffn, arm)], role)
        own = values.get(arm, {})
        auc = [v[1] for v in own.values()]
        auc_m = None if arm == MUON else paired(own, values.get(MUON, {}), 1, plan.seeds)
        auc_a = None if arm == ADAM else paired(own, values.get(ADAM, {}), 1, plan.seeds)
        primary = tests[0] if arm != ADAM else finding.test
        lag_rarest, censored = censored_lag(
            None if arm == MUON or rarest_group is None
            else _pooled_group(point, MUON, arm, HEADLINE_TAU, rarest_group)
        )  # fmt: skip
        finals: dict[str, tuple[float | None, float | None]] = {}
        for metric, name, group in (("fta", "rarest_fta", -1), ("fta", "second_fta", -2),
                                    ("em", "rarest_em", -1)):  # fmt: skip
            finals[name] = tables.final_mean_se(curve, plan.steps, metric, group)
        gap = None if measures is None else measures.pair(arm, ADAM)
        first = plan.seed_runs.get((ffn, arm), [])
        iso = isotropy(level_root / first[0].key) if first else isotropy(level_root / "none")
        base, mine = times.get(ADAM), times.get(arm)
        extra = memory.get(arm, NO_MEMORY)
        rows.append(LeaderboardRow(
            level=point.point.label, optimizer=arm, label=labels.get(arm, arm),
            family=kind.family, source=source(kind), role=role, placement=where,
            placement_auc=where_auc,
            lr=best.get(entry.arm.tuned), rest_lr=best.get("adam") if arm != ALL_ADAM else None,
            lr_edge=plan.edge((ffn, arm)) or "", tuned_rates=1 if sweep is not None else 0,
            tuning_trials=trials, tuning_budget=budget,
            tuning_seeds=() if sweep is None else sweep.seeds, eval_seeds=plan.seeds,
            n_seeds=len(curve.runs), margin=FTA_MARGIN,
            lag_vs_muon=m, lag_vs_muon_low=m_low, lag_vs_muon_high=m_high,
            lag_vs_adam=a, lag_vs_adam_low=a_low, lag_vs_adam_high=a_high,
            rarest_gap_vs_muon=None if primary is None else _round(-primary.mean),
            rarest_gap_vs_muon_se=None if primary is None else _round(primary.se),
            p_vs_muon=None if tests[0] is None else _round(tests[0].p_different, 6),
            p_equivalent_muon=None if tests[0] is None else _round(tests[0].p_equivalent, 6),
            p_vs_adam=None if tests[1] is None else _round(tests[1].p_different, 6),
            p_equivalent_adam=None if tests[1] is None else _round(tests[1].p_equivalent, 6),
            lag_vs_muon_03=_interval(vs_muon(point, arm, TAUS[0]))[0],
            lag_vs_muon_08=_interval(vs_muon(point, arm, TAUS[-1]))[0],
            lag_vs_adam_03=_interval(vs_adam(point, arm, TAUS[0]))[0],
            lag_vs_adam_08=_interval(vs_adam(point, arm, TAUS[-1]))[0],
            rarest_fta=finals["rarest_fta"][0], rarest_fta_se=finals["rarest_fta"][1],
            second_fta=finals["second_fta"][0], second_fta_se=finals["second_fta"][1],
            rarest_em=finals["rarest_em"][0], rarest_em_se=finals["rarest_em"][1],
            rarest_auc=_round(statistics.fmean(auc)) if auc else None,
            rarest_auc_se=_round(statistics.stdev(auc) / math.sqrt(len(auc)))
            if len(auc) > 1 else None,
            auc_gap_vs_muon=_round(statistics.fmean(auc_m)) if auc_m else None,
            auc_gap_vs_adam=_round(statistics.fmean(auc_a)) if auc_a else None,
            rarest_lag_vs_muon=lag_rarest, rarest_lag_censored=censored,
            tail_gap_vs_adam=None if gap is None else _round(gap.tail_gap.gap),
            tail_gap_vs_adam_se=None if gap is None else _round(gap.tail_gap.se),
            peak_gap_vs_adam=None if gap is None else _round(gap.peak_gap.gap),
            erank_v=iso["erank_v"], erank_o=iso["erank_o"], erank_ffn=iso["erank_ffn"],
            entropy_v=iso["entropy_v"], entropy_o=iso["entropy_o"],
            entropy_ffn=iso["entropy_ffn"], step_seconds=_round(mine),
            step_time_vs_adam=None if mine is None or not base else round(mine / base, 3),
            memory_lr=extra.lr, memory_head_steps=extra.head_steps,
            memory_tail_steps=extra.tail_steps, memory_tail_censored=extra.tail_censored,
            memory_tail_head_ratio=extra.tail_head_ratio, memory_rho=extra.rho,
        ))  # fmt: skip
    return rows


def not_measured(state: EntryStatus, role: str) -> str:
    """The placement of an optimiser no seed of which finished: why."""
    what = "reference: " if role == "reference" else ""
    if state.failed:
        return f"{what}diverged in every tuning trial (no rate chosen; not evaluated)"
    if state.seed_runs:
        return f"{what}diverged in every evaluation seed"
    return f"{what}not run (a rate it borrows was not chosen: its lender diverged in tuning)"


@dataclass(frozen=True)
class MemorySummary:
    """One optimiser's memory numbers on the leaderboard (its ``memory_*`` columns; all None
    for an optimiser the memory did not run)."""

    lr: float | None = None
    head_steps: float | None = None
    tail_steps: float | None = None
    tail_censored: bool | None = None
    tail_head_ratio: float | None = None
    rho: float | None = None


NO_MEMORY = MemorySummary()


def memory_summary(result: MemoryResult, steps: int) -> dict[str, MemorySummary]:
    """Per optimiser, the memory's numbers the board shows: the steps the most frequent and
    the rarest group take to halve their loss (mean over draws; ``≥`` where censored), their
    ratio and ϱ^ε."""
    out: dict[str, MemorySummary] = {}
    runs = result.board.runs
    for name in dict.fromkeys(r.optimizer for r in runs):
        mine = [r for r in runs if r.optimizer == name]
        tails = [steps if r.times[-1] is None else r.times[-1] for r in mine]
        heads = [r.times[0] for r in mine if r.times[0] is not None]
        ratios = [tail_head_ratio(r, steps)[0] for r in mine]
        rhos = [r.rho for r in mine if r.rho is not None]
        out[name] = MemorySummary(
            lr=mine[0].lr,
            head_steps=round(statistics.fmean(heads), 2) if heads else None,
            tail_steps=round(statistics.fmean(tails), 2),
            tail_censored=any(r.times[-1] is None for r in mine),
            tail_head_ratio=round(statistics.fmean(ratios), 3)
            if all(math.isfinite(x) for x in ratios) else None,
            rho=round(statistics.fmean(rhos), 4) if len(rhos) == len(mine) else None,
        )  # fmt: skip
    return out


@dataclass(frozen=True)
class Board:
    """The benchmark's tables: the leaderboard, every lag ratio, the memory and its sweep, and
    per level the pre-specified finding on Adam (own rate) against Muon."""

    rows: tuple[LeaderboardRow, ...]
    ratios: tuple[grid.PointLagRatio, ...]
    memory: tuple[MemoryRow, ...]
    memory_sweep: tuple[SweepPoint, ...]
    memory_edges: tuple[str, ...]
    findings: Mapping[str, ReferenceFinding]
    controls: Mapping[str, PositiveControl]
    power: Mapping[str, Power]


def build(
    cfg: Any,
    run: RunDir,
    points: Mapping[str, grid.PointResult],
    memory: MemoryResult,
    labels: Mapping[str, str],
) -> Board:
    """Every table of the benchmark (written by :func:`write`)."""
    summary = memory_summary(memory, cfg.memory.steps)
    rows = [row for p in points.values() for row in level_rows(p, run.path, labels, summary)]
    ratios = grid.lag_ratio_rows(points, by="level")
    stats = {label: level_stats(point)[0] for label, point in points.items()}
    return Board(tuple(rows), tuple(ratios), tuple(memory_rows(memory, cfg.memory.steps)),
                 memory.board.sweep, memory.board.edges,
                 {label: st.finding for label, st in stats.items()},
                 {label: st.control for label, st in stats.items()},
                 {label: st.power for label, st in stats.items()})  # fmt: skip


def claim_inputs(cfg: Any, memory: MemoryResult) -> BenchMemory:
    """The memory's times per optimiser, draw and matching pace, for
    :mod:`tailmem.claims.related` (:func:`.memory.bench_memory`)."""
    return bench_memory(memory)


PRIMARY = "rarest group's final FTA\n(mean over evaluation seeds; higher: learns the tail)"
"""The figures' name for the primary statistic (module docstring of :mod:`.places`)."""


def primary_interval(row: LeaderboardRow) -> tuple[float, float, float] | None:
    """The row's rarest-group final FTA and its 95 % t interval over its evaluation seeds (the
    mean alone where fewer than 2 seeds finished); None where it was not measured."""
    if row.rarest_fta is None:
        return None
    if row.rarest_fta_se is None or not row.n_seeds or row.n_seeds < 2:
        return row.rarest_fta, row.rarest_fta, row.rarest_fta
    half = t_quantile(row.n_seeds - 1) * row.rarest_fta_se
    return row.rarest_fta, row.rarest_fta - half, row.rarest_fta + half


def _place_name(row: LeaderboardRow) -> str:
    """``label — place``, a reference's place one word (its finding is in the table)."""
    return f"{row.label} — {'reference' if row.role == 'reference' else row.placement}"


def ranked_figure(rows: Sequence[LeaderboardRow], level: str) -> Any:
    """The leaderboard at a glance, on the statistic that places it: one line per optimiser,
    ranked by the rarest group's final FTA, with its 95 % t interval over seeds, named with its
    place and coloured by family; dotted lines at Muon's and Adam (own rate)'s. With no
    optimiser measured (a smoke run's few steps), the axes say so."""
    plt = pyplot()
    measured = {r.optimizer: primary_interval(r) for r in rows}
    shown = sorted((r for r in rows if measured[r.optimizer] is not None),
                   key=lambda r: measured[r.optimizer] or (0.0,))  # fmt: skip
    names = [_place_name(r) for r in shown]
    wide = 4.5 + 0.07 * max(map(len, names), default=0)  # the names at MIN_FONT beside the axes
    fig, ax = plt.subplots(figsize=(max(6.4, wide), 1.4 + 0.32 * max(len(shown), 3)))
    for y, row in enumerate(shown):
        mean, low, high = measured[row.optimizer] or (0.0, 0.0, 0.0)
        colour = FAMILY_COLOURS.get(row.family, "black")
        ax.plot([low, high], [y, y], color=colour, linewidth=2, alpha=0.6)
        ax.plot([mean], [y], "o", color=colour, label=row.family)
    ax.set_yticks(range(len(shown)), names, fontsize=MIN_FONT)
    for reference, colour in ((MUON, "tab:blue"), (ADAM, "tab:orange")):
        found = measured.get(reference)
        if found is not None:
            ax.axvline(found[0], color=colour, linestyle=":", linewidth=1)
    ax.set(xlabel=PRIMARY,
           title=f"Which optimisers learn the tail ({level}); bars: 95 % interval")  # fmt: skip
    ax.grid(alpha=0.3, axis="x")
    if not shown:
        note_no_data(ax, "no optimiser's rarest group was measured in every seed")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    if unique:
        legend_outside(ax, handles=list(unique.values()), labels=list(unique))
    fig.tight_layout()
    return fig


def figure(rows: Sequence[LeaderboardRow], level: str) -> Any:
    """Tail learning (the rarest group's final FTA, 95 % t interval over seeds) against cost
    (step time ÷ Adam (own rate)'s, same run), one point per optimiser by family; with fewer
    than two optimisers measured, the axes say so."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    points: list[tuple[float, float, str]] = []
    for row in rows:
        found, x = primary_interval(row), row.step_time_vs_adam
        if found is None or x is None:
            continue
        y, low, high = found
        colour = FAMILY_COLOURS.get(row.family, "black")
        ax.errorbar([x], [y], yerr=[[y - low], [high - y]], fmt="o", color=colour, capsize=3,
                    label=row.family)  # fmt: skip
        points.append((x, y, row.label))
    ax.margins(x=0.15)  # room for the rightmost point's name
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.set(xlabel="step time ÷ Adam (own rate)'s (same run)", ylabel=PRIMARY,
           title=f"Tail learning against cost ({level}); bars: 95 % interval")  # fmt: skip
    ax.grid(alpha=0.3)
    if len(points) < 2:
        note_no_data(ax, "fewer than two optimisers measured in every seed")
    if unique:
        legend_outside(ax, handles=list(unique.values()), labels=list(unique))
    fig.tight_layout()
    _label_points(ax, points)
    return fig


def _label_points(ax: Any, points: Sequence[tuple[float, float, str]], size: float = 7) -> None:
    """Name each point beside it; a label that would cover one already placed moves down a line
    (with a leader line to its point), so a cluster of optimisers at the same cost stays
    readable. Placement is in points on the page, after the axes' limits are final."""
    to_page = ax.transData.transform
    line, char = size * 1.25, size * 0.55
    placed: list[tuple[float, float, float]] = []  # left, bottom, right, in page points
    for x, y, label in sorted(points, key=lambda p: -p[1]):
        px, py = to_page((x, y)) * 72.0 / ax.figure.dpi
        left, bottom, width = px + 5, py + 3, char * len(label)
        while any(
            left < r and left + width > lft and abs(bottom - b) < line for lft, b, r in placed
        ):
            bottom -= line
        placed.append((left, bottom, left + width))
        shifted = bottom != py + 3
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(left - px, bottom - py),
                    fontsize=size, arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5}
                    if shifted else None)  # fmt: skip


def _ratio_text(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" + ("" if low is None or high is None else f" [{low:.2f}, {high:.2f}]")


def _gap_text(value: float | None, se: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:+.3f}" + ("" if se is None else f" ± {se:.2g}")


@dataclass(frozen=True)
class ViewRow:
    """One optimiser at one QA level in the report's curated leaderboard (a row of
    ``leaderboard_view.csv``), every number as text."""

    level: str = column("the QA level (the base: BPE answers; then one token per answer value)")
    optimizer: str = column("the optimiser on the hidden matrices, by its name for people")
    family: str = column("what kind of update it is (orthogonalised, whitening, sign, …)")
    behind_muon: str = column(
        "descriptive: exposures it needs ÷ Muon's (τ 0.5, pooled), geometric mean [95 % interval]",
        name="behind Muon",
    )
    ahead_of_adam: str = column(
        "Adam (own rate)'s exposures ÷ its own, pooled over all groups", name="ahead of Adam"
    )
    rarest_fta: str = column("final FTA of the rarest group, mean over seeds", name="rarest FTA")
    rarest_gap: str = column(
        "the primary statistic: its rarest-group final FTA minus Muon's, mean ± SE over paired "
        "seeds (the SE decided on)",
        name="rarest FTA − Muon's",
    )
    step_time: str = column("its training-step time ÷ Adam's", name="step time")
    tuning: str = column("tuning trials used / budget (the same budget for every optimiser)")
    place: str = column("where it sits (leaderboard.csv: the tests and p-values behind it)")


def view_rows(rows: Sequence[LeaderboardRow]) -> list[ViewRow]:
    """The report's curated leaderboard: optimiser, family, the descriptive pooled lags behind
    Muon and of Adam behind it with their intervals, rarest-group FTA and the primary statistic
    (its gap to Muon's), cost, tuning cost and place."""
    return [ViewRow(
        level=r.level, optimizer=r.label, family=r.family,
        behind_muon=_ratio_text(r.lag_vs_muon, r.lag_vs_muon_low, r.lag_vs_muon_high),
        ahead_of_adam=_ratio_text(r.lag_vs_adam, r.lag_vs_adam_low, r.lag_vs_adam_high),
        rarest_fta="—" if r.rarest_fta is None else f"{r.rarest_fta:.3f}",
        rarest_gap=_gap_text(r.rarest_gap_vs_muon, r.rarest_gap_vs_muon_se),
        step_time="—" if r.step_time_vs_adam is None else f"{r.step_time_vs_adam:.2f}×",
        tuning=f"{r.tuning_trials}/{r.tuning_budget}", place=r.placement,
    ) for r in rows]  # fmt: skip


def summary_text(cfg: Any, board: Board, claims: Sequence[ClaimResult]) -> str:
    """The report's paragraph: the setting, the pre-specified answer on Adam (own rate) against
    Muon, each optimiser's place with its evidence at the base level, and the claims."""
    base = cfg.levels[0].label
    parts = [
        f"{len(cfg.optimizers)} optimisers on the hidden matrices (Adam on embedding, head and "
        f"norms at the Adam row's rate), knowledge QA from the {cfg.preset} preset at levels "
        f"{', '.join(level.label for level in cfg.levels)}; every optimiser tunes one rate by "
        f"the same rule and budget on tuning seeds apart from its evaluation seeds. The memory: "
        f"K = {cfg.memory.facts} facts in d = {cfg.memory.dim}, Zipf {cfg.memory.exponent:g}."
    ]
    for level, finding in board.findings.items():
        parts.append(f"{level}: {board.controls[level].text()}.")
        test = finding.test
        if test is not None:
            parts.append(
                f"Does Adam on the hidden matrices at its own rate share Muon's tail edge "
                f"({level})? In the rarest group's final FTA Muon − it is {test.mean:+.3f} ± "
                f"{test.se:.2g} (paired seeds): {finding.finding} (equivalence margin "
                f"±{FTA_MARGIN:g} FTA)."
            )
        power = board.power[level]
        if power.sd is not None:
            parts.append(
                f"Power ({level}): at the seed SD observed of the paired rarest-FTA differences "
                f"({power.sd:.3g}), a difference of {power.margin:g} is decided at "
                f"{power.target:.0%} power at Holm's most stringent level "
                f"({power.alpha_per_test:.2g}) with {power.seeds_needed} evaluation seeds "
                f"(this run: {power.seeds_run})."
            )
    groups: dict[str, list[str]] = {}
    for row in board.rows:
        if row.level != base or row.role == "reference":
            continue
        gap = _gap_text(row.rarest_gap_vs_muon, row.rarest_gap_vs_muon_se)
        behind = _ratio_text(row.lag_vs_muon, row.lag_vs_muon_low, row.lag_vs_muon_high)
        evidence = f"{row.label} (rarest FTA − Muon's {gap}; pooled lag behind Muon {behind})"
        groups.setdefault(row.placement, []).append(evidence)
    for place, names in groups.items():
        parts.append(f"{place[0].upper()}{place[1:]} ({base}): {'; '.join(names)}.")
    parts += [f"{c.id}: {c.verdict} — {c.ours}." for c in claims]
    if cfg.note:
        parts.append(cfg.note.strip())
    return " ".join(parts)


def outputs(cfg: Any, board: Board, claims: Sequence[ClaimResult]) -> Outputs:
    """CSVs, figures, ``results.json``, the claims and the report."""
    rows = records(board.rows)
    csvs = (
        Table("leaderboard.csv", rows, columns=column_docs(LeaderboardRow)),
        Table("leaderboard_view.csv", records(view_rows(board.rows)), "The leaderboard: one row "
              "per optimiser and QA level (every number and test: leaderboard.csv)",
              column_docs(ViewRow)),
        Table("lag_ratio.csv", records(board.ratios),
              columns=column_docs(grid.PointLagRatio, board.ratios)),
        Table("memory.csv", records(board.memory), "The associative memory: steps each "
              "frequency group takes to halve its loss, per optimiser and embedding draw",
              column_docs(MemoryRow, board.memory)),
        Table("memory_sweep.csv", records(board.memory_sweep)),
    )  # fmt: skip
    figures = []
    for level in cfg.levels:
        mine = [r for r in board.rows if r.level == level.label]
        stem = grid.slug(level.label)
        figures.append(Figure(
            f"leaderboard_{stem}", ranked_figure(mine, level.label),
            f"Which optimisers learn the tail, {level.label}: each optimiser's speed-up over "
            f"Adam on the hidden matrices at its own rate (Adam's exposures ÷ its own to bring "
            f"the FTA to τ {HEADLINE_TAU:g}, pooled over all groups, the head groups included; "
            "geometric mean over seeds, 95 % interval), ranked, with its place; coloured by "
            "family",
        ))  # fmt: skip
        figures.append(Figure(
            f"cost_{stem}", figure(mine, level.label),
            f"Tail learning against cost, {level.label}: the speed-up over Adam (own rate), "
            "pooled over all groups, against the step time ÷ Adam's",
        ))  # fmt: skip
    results = {
        "optimizers": list(cfg.optimizers), "levels": [lv.label for lv in cfg.levels],
        "leaderboard": rows, "memory_edges": list(board.memory_edges),
        "memory": records(board.memory), "memory_sweep": records(board.memory_sweep),
        "reference_findings": {level: f.finding for level, f in board.findings.items()},
        "positive_controls": {level: {"separated": c.separated, "text": c.text()}
                              for level, c in board.controls.items()},
        "power": {level: dataclasses.asdict(p) for level, p in board.power.items()},
    }  # fmt: skip
    report = Report("Which optimisers learn the tail? (a benchmark beyond the papers)",
                    summary_text(cfg, board, claims))  # fmt: skip
    return Outputs(csvs, tuple(figures), {"results.json": results}, tuple(claims), report)

"""Knowledge-QA at many points, on one pool: the engine of ``qa-sensitivity`` and of the map.

A *point* is a label plus dotted-key changes of the knowledge-QA :class:`~.Config`, made on a
knowledge-QA preset after the changes common to every point (the user's, then the driving
study's own, a function of the config) — all as values (:func:`~tailmem.typecheck.replaced`,
:func:`dataclasses.replace`), never as ``key=value`` text::

    points = [Point("base"), Point("β1 0.9", {"optim.adam.betas": [0.9, 0.95]})]
    seeds = lambda qa: dataclasses.replace(qa, seed=7)
    configs = configure(points, preset="cpu", common={"arms": ["muon", "adam"]}, study=seeds)
    results = run_points(configs, root, workers=2)      # {label: PointResult}
    results["β1 0.9"].measures["plain"]                 # .gaps.measure of that point

:func:`configure` builds and validates every point's config before anything is written (a bad
key or value is one :class:`~tailmem.errors.ConfigError` naming the point). :func:`run_points`
prepares each point as knowledge-QA does (:func:`~tailmem.experiments.knowledge_qa.prepare`:
its data set, its plan with each arm at its own LR, the grid widened until the choice is
interior) under ``root/points/<slug of the label>`` (data sets cached once in ``root/data``),
trains every point's runs on one pool (:func:`~tailmem.lm.plan.run_plans`) and returns each
point's finished plan and gap measures (:func:`.gaps.measure`, per FFN type).

``Point.shared_lr``: one learning rate for both arms instead of each its own — the Adam arm
sweeps its grid (widened as usual) and the Muon arm trains every parameter (its Muon and its
Adam kinds) at the rate Adam chose, the way one hands an AdamW rate to Muon under an update
scale meant for it (``optim.muon.scale: match_rms_adamw``).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tailmem.columns import column
from tailmem.config import load_config
from tailmem.data.bios import DataSummary
from tailmem.errors import ConfigError
from tailmem.experiments import knowledge_qa as kqa
from tailmem.experiments.knowledge_qa import gaps
from tailmem.experiments.knowledge_qa.curves import PlanCurves
from tailmem.lm.entries import Entry, Rates
from tailmem.lm.plan import Train, TrainedPlan, run_plans, tidy
from tailmem.lm.subrun import run_job
from tailmem.names import check_distinct, folder_name
from tailmem.outputs import write
from tailmem.resources import check_devices
from tailmem.rundir import RunDir
from tailmem.studies import Provenance
from tailmem.train import distributed as D
from tailmem.typecheck import replaced

EXPERIMENT = "knowledge-qa"


@dataclass(frozen=True)
class Point:
    """One configuration: ``label`` (unique; names its folder), dotted-key ``overrides`` of the
    knowledge-QA config (a key may be set to any value its field accepts, several keys at
    once), and whether both arms share one learning rate (see the module docstring)."""

    label: str
    overrides: Mapping[str, Any] = field(default_factory=dict)
    shared_lr: bool = False


@dataclass(frozen=True)
class PointResult:
    """A finished point: its config, trained plan (diverged seed runs left out,
    :meth:`~tailmem.lm.plan.TrainedPlan.completed`), exposures, chance FTA, data summary,
    gap measures by FFN type and its arms' curves (read once, for every reader of the point)."""

    point: Point
    config: kqa.Config
    plan: TrainedPlan
    exposures: gaps.Exposures
    chance: float
    data_summary: DataSummary
    measures: dict[str, gaps.QAGaps]
    curves: PlanCurves


def slug(label: str) -> str:
    """The folder name of a point: ``label`` with every run of other characters than letters,
    digits, ``.``, ``_`` and ``-`` made one ``_``, never ``..``, bounded in length
    (:func:`tailmem.names.folder_name`)."""
    return folder_name(label)


def dotted(overrides: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``overrides`` with every nested mapping spelled as dotted keys, later keys winning:
    ``{"tuning.max_extend": 3, "tuning": {"rates": "sweep"}}`` (a preset's dotted key, then a
    command line's ``common.tuning.rates=sweep``) is ``{"tuning.max_extend": 3, "tuning.rates":
    "sweep"}``, one override per field. An empty mapping stays a value."""
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out |= dotted(value, f"{name}.")
        else:
            out[name] = value
    return out


def refuse_owned(
    overrides: Mapping[str, object], owned: Sequence[str], study: str, where: str = "common"
) -> None:
    """Refuse a key of ``overrides`` (the user's, at ``where``) that the driving ``study`` sets
    itself (one of ``owned``, or a key inside or around one): one value would silently
    replace the other."""
    for key in dotted(overrides):
        for mine in owned:
            if key == mine or key.startswith(f"{mine}.") or mine.startswith(f"{key}."):
                raise ConfigError(
                    f"{where}.{key}: {study} sets {mine} itself; expected it left out of "
                    f"{where} (the study's own fields set it)"
                )


def configure(
    points: Sequence[Point],
    preset: str,
    common: Mapping[str, Any] | None = None,
    study: Callable[[kqa.Config], kqa.Config] | None = None,
) -> dict[str, tuple[Point, kqa.Config]]:
    """Every point's knowledge-QA config, by label, built as a value: the ``preset``, with the
    user's ``common`` changes (dotted keys, for every point), then the driving ``study``'s own
    fields (a function of the config: its arms, rates, seed...), then the point's overrides —
    each change typed and checked (:func:`~tailmem.typecheck.replaced`), the user's keys refused
    where they would reach no run. A point with ``epochs`` set trains that many whole epochs of
    its own data (:func:`~tailmem.experiments.knowledge_qa.at_epochs` sets its steps and
    cadences), so every point sees each rarest fact equally often. Refuses repeated labels or
    folders and a ``shared_lr`` point without both Muon and Adam arms."""
    user = dotted(common or {})
    try:
        start = replaced(load_config(kqa.Config, EXPERIMENT, preset), user)
        start = start if study is None else study(start)
    except ConfigError as exc:
        raise ConfigError(f"common: {exc}") from None
    out: dict[str, tuple[Point, kqa.Config]] = {}
    check_distinct("points", [point.label for point in points])
    for point in points:
        where = f"point {point.label!r}"
        own = dotted(point.overrides)
        try:
            cfg = kqa.at_epochs(replaced(start, own))
            cfg.check_overrides([*user, *own])
            if point.shared_lr and not {"muon", "adam"} <= {arm.name for arm in cfg.run_arms()}:
                raise ConfigError(f"arms: got {cfg.arms}; shared_lr needs muon and adam")
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        out[point.label] = (point, cfg)
    threads = {cfg.train.threads for _, cfg in out.values()}
    if len(threads) > 1:  # one pool: its workers run with one thread count
        raise ConfigError(
            f"train.threads: got {sorted(threads, key=str)} across points; expected one value "
            "for every point (all points train on one pool)"
        )
    return out


def preflight(configs: Mapping[str, tuple[Point, kqa.Config]], common: Mapping[str, Any]) -> None:
    """The runner's device check and knowledge-QA's checks (rows hold an item, this machine can
    train the model, data and cache folders) per point; ``common`` is the study's own mapping
    of overrides for every point, through which the device hint sets the device."""
    for label, (_, cfg) in configs.items():
        try:
            check_devices(cfg, within=("common", common))
            kqa.preflight(cfg)
        except ConfigError as exc:
            raise ConfigError(f"point {label!r}: {exc}") from None


def shared_lr_entries(entries: Sequence[Entry]) -> tuple[Entry, ...]:
    """``entries`` with the Muon arm running, for every kind it uses, at the rate the Adam arm
    of its FFN type chose (no sweep of its own)."""

    def shared(entry: Entry) -> Entry:
        rates = Rates(borrowed={kind: ("adam", "adam") for kind in entry.arm.kinds})
        return Entry(entry.ffn, entry.arm, rates)

    return tuple(shared(e) if e.arm.name == "muon" else e for e in entries)


def run_points(
    configs: Mapping[str, tuple[Point, kqa.Config]],
    root: Path,
    workers: int,
    train: Train = run_job,
    pairs: Callable[[TrainedPlan], Sequence[tuple[str, str]]] | None = None,
    more: bool = False,
    *,
    provenance: Provenance,
) -> dict[str, PointResult]:
    """Train every point of ``configs`` (from :func:`configure`) on one pool of ``workers``;
    their runs under ``root/points/<slug>``. Returns each point's :class:`PointResult`, its
    gap measures over ``pairs(plan)`` (default: every pair of arms). ``more``: the runs add to
    progress already declared (:func:`~tailmem.lm.plan.run_plans`); ``provenance``: the
    study's run's, which each point's tuned rates record."""
    prepared: dict[str, kqa.Prepared] = {}
    for label, (point, cfg) in configs.items():
        if cfg.cache_dir is None:
            cfg = dataclasses.replace(cfg, cache_dir=str(root / "data"))
        study = kqa.prepare(cfg, root / "points" / slug(label))
        if point.shared_lr:
            shared = dataclasses.replace(study.plan, entries=shared_lr_entries(study.plan.entries))
            study = dataclasses.replace(study, plan=shared)
        prepared[label] = study
    trained = run_plans({label: (s.plan, s.context) for label, s in prepared.items()}, workers,
                        kqa.summary, train, more)  # fmt: skip
    out = {}
    for label, study in prepared.items():
        point, cfg = configs[label]
        tidy(trained[label], study.context.root, cfg.train.keep_checkpoints)
        if D.is_main_process():
            folder = RunDir(study.context.root)
            write(folder, kqa.tuning_outputs(cfg, trained[label], provenance))
        out[label] = point_result(point, cfg, study, trained[label], pairs)
    return out


def point_result(
    point: Point,
    cfg: kqa.Config,
    study: kqa.Prepared,
    trained: TrainedPlan,
    pairs: Callable[[TrainedPlan], Sequence[tuple[str, str]]] | None = None,
) -> PointResult:
    """A trained point as its readers see it: diverged seed runs left out, the arms' curves
    read once and the gap measures over ``pairs(plan)`` (default: every pair of arms)."""
    plan = trained.completed()
    curves = PlanCurves.read(plan)
    chosen = None if pairs is None else pairs(plan)
    measures = {ffn: gaps.measure(plan, curves, ffn, study.exposures, chosen=chosen)[0]
                for ffn in plan.ffns}  # fmt: skip
    return PointResult(
        point, cfg, plan, study.exposures, study.chance, study.data_summary, measures, curves
    )


def prune_points(root: Path, labels: Sequence[str]) -> None:
    """Delete the folders under ``root/points`` of points not among ``labels`` (an earlier
    config's, left by an update that kept the sub-runs it could reuse)."""
    keep = {slug(label) for label in labels}
    for folder in sorted((root / "points").glob("*")):
        if folder.is_dir() and folder.name not in keep:
            shutil.rmtree(folder)


def chosen_edge(plan: TrainedPlan, ffn: str, arm: str) -> str | None:
    """``"lowest"``/``"highest"`` when the arm's chosen learning rate sits at an end of the
    candidates it tried (or the stored tuning tried), None when it is interior or the arm tuned
    nothing."""
    return plan.edge((ffn, arm)) if (ffn, arm) in plan.states else None


@dataclass(frozen=True)
class PointLagRatio:
    """One measured Muon–Adam lag ratio of one grid point (its first FFN type): a row of a grid
    study's ``lag_ratio.csv``."""

    where: Mapping[str, str] = column(
        "the grid point: its label, headed point (or level, optim-bench's name for a point)",
        each="{}",
    )
    lead: str = column("the arm ahead: the ratio is exposures lag needs ÷ lead's")
    lag: str = column("the arm behind")
    group: int | str = column("frequency group; pooled = the geometric mean over the groups "
                              "measured in every seed")  # fmt: skip
    tau: float = column("the FTA level τ the exposures are read at")
    ratio: float | None = column("geometric mean of the per-seed lag ratios")
    ci_low: float | None = column("its 95 % two-sided Student-t interval, low end")
    ci_high: float | None = column("the interval's high end")
    se_log: float | None = column("SE of the mean log ratio, floored at the resolution")
    n_measured: int = column("seeds in which the ratio was measured")
    n_seeds: int = column("seeds")


def lag_ratio_rows(points: Mapping[str, PointResult], by: str = "point") -> list[PointLagRatio]:
    """Every measured lag ratio of every point (first FFN type), one row each, the point's
    label headed ``by``."""
    rows = []
    for label, point in points.items():
        measures = point.measures.get(point.config.ffns[0])
        for pair in [] if measures is None else measures.ours.measured:
            for r in pair.lag_ratios:
                low, high = r.interval() or (None, None)
                rows.append(PointLagRatio({by: label}, pair.lead, pair.lag, r.group, r.tau,
                                          r.ratio, low, high, r.se_log, r.n_measured,
                                          r.n_seeds))  # fmt: skip
    return rows

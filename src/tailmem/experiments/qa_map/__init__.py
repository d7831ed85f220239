"""The map of Muon's tail edge over Adam on the heavy-tailed knowledge QA (issue 12, item 3).

Neither paper says where the effect appears. This study measures Muon vs Adam on paper A's
knowledge QA (:mod:`tailmem.experiments.knowledge_qa`) over a grid of

- ``width``: ``d_model``, with heads of ``head_dim`` (64, the 160M model's) where the width
  allows (one head of the whole width below it) and ``d_ff = ffn_mult · width``;
- ``depth``: layers;
- ``exposures``: how many times each fact of the rarest group is trained (= epochs × QA samples
  per attribute and selection); the steps follow from the data set's epoch length;
- ``m``: the number of frequency groups (``2**m`` people);
- ``frequency_exponent``: ``data.frequency_exponent``, 1 = the paper's power law, 0 = uniform
  (the reviewers' question: does the gap shrink as the data become uniform?).

Every point of the cartesian product is a knowledge-QA run of the Muon and Adam arms, each
tuning its own learning rate the way knowledge-QA does (:mod:`tailmem.lm.tuning`: on tuning
seeds apart from the evaluation seeds, ranked by the declared ``tuning.score``, widened by up to
``tuning.max_extend`` points), ``seeds`` evaluation seeds each, on the knowledge-QA preset
``base`` with ``common`` overrides. All points train on one worker pool
(:mod:`tailmem.experiments.knowledge_qa.grid`).

Measures per point (:mod:`tailmem.metrics.qa_gaps`, :mod:`.measures`): the exposure-lag ratio
of Adam behind Muon at FTA 0.3 / 0.5 / 0.8, pooled over groups (per seed the geometric mean over
the groups measured in every seed) and of group m − 2 on the paper's cells (geometric mean over
seeds with its 95 % t interval, or a bound when a crossing is not bracketed); the tail gap (FTA
Muon − Adam of the rarest group at the end, the pre-specified cell); Muon's *edge* there — shown,
absent (equivalent to none within declared margins) or not distinguished, from the lag ratio
and the tail gap with Holm's correction across the points; and the peak gap, descriptive only.

Trend (:mod:`tailmem.metrics.lag_trend`): the lag ratio at ``trend.tau`` (reading
``trend.reading``: pooled by default) of the points at the paper's frequency exponent is fitted
as a power law of ``trend.features`` (width, facts per parameter, depth; collinear ones are
dropped in order) and extrapolated to the paper's point — the 160M model (12 × 768) at m = 15 —
with its confidence and prediction intervals.

*Facts* are ``6 · 2**m`` (people × attributes); *parameters* are those of the transformer blocks
(:func:`hidden_params`: no token embedding, no output head). The blocks hold the associative
memories (attention V/O and the FFN) that Muon trains and paper A's mechanism is about; the
embedding and head are trained by Adam in both arms and their size follows the vocabulary (ours
~1–2k BPE tokens, the paper's 50,304), which would make the ratio incomparable across the two.

Outputs: ``map.csv`` (a row per point), heat maps of the lag ratio and the tail gap over each
pair of ``heat_maps`` (the other axes at the first value of their lists), the trend figure,
``results.json`` (rows, per-seed lag ratios, fit, extrapolation, the paper's values),
``claims.json`` (``A3.map.uniform``: the camera-ready's "the advantage shrinks as data become
uniform", judged where the grid varies the exponent) and ``report.json``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from tailmem.data.bios import N_ATTRIBUTES, build_dataset
from tailmem.data.stream import QATrainStream
from tailmem.errors import ConfigError
from tailmem.experiments import knowledge_qa as kqa
from tailmem.experiments.knowledge_qa import grid
from tailmem.experiments.qa_map import outputs
from tailmem.experiments.qa_map.config import (
    NAME,
    Config,
    Planned,
    TrendSection,
)
from tailmem.experiments.qa_map.points import (
    LAG,
    LEAD,
    AxesSection,
    GridPoint,
    facts,
    grid_points,
    hidden_params,
    model_shape,
    schedule,
    steps_for,
)
from tailmem.outputs import write
from tailmem.rundir import RunDir
from tailmem.studies import Preset, Provenance, Study
from tailmem.train import distributed as D

__all__ = ["NAME", "STUDY", "AxesSection", "Config", "Planned", "TrendSection", "base_config",
           "configure", "plan_points", "point_config", "preflight", "run"]  # fmt: skip


def base_config(cfg: Config) -> kqa.Config:
    """The knowledge-QA config every point starts from: the ``base`` preset with the plain FFN
    (unless ``common`` says otherwise), ``common``, then the map's seed, workers and two arms."""

    def settle(qa: kqa.Config) -> kqa.Config:
        return dataclasses.replace(qa, seed=cfg.seed, workers=cfg.workers, arms=[LEAD, LAG])

    common = {"ffn": "plain", **cfg.common}
    ((_, base),) = grid.configure([grid.Point("base")], cfg.base, common, settle).values()
    return base


def point_config(cfg: Config, base: kqa.Config, point: GridPoint, steps: int | None) -> kqa.Config:
    """A point's knowledge-QA config as a value: ``base`` with the point's model shape and data
    set and, given its ``steps``, its schedule (:func:`~.points.schedule`), validated; a
    refused value names the point."""
    model = model_shape(point, cfg.head_dim, cfg.ffn_mult).of(base.model)
    data = dataclasses.replace(base.data, m=point.m, frequency_exponent=point.frequency_exponent)
    train = base.train
    if steps is not None:
        train = schedule(steps, cfg.evals, cfg.warmup_frac).of(train)
    found = dataclasses.replace(base, model=model, data=data, train=train)
    try:
        found.validate()
    except ConfigError as exc:
        raise ConfigError(f"point {point.label!r}: {exc}") from None
    return found


def plan_points(cfg: Config, root: Path) -> list[Planned]:
    """Every point's knowledge-QA config, its steps computed from its data set's epoch (the
    data sets are built, once each, in ``common.cache_dir`` or else ``root/data``, where the
    engine finds them)."""
    base = base_config(cfg)
    out = []
    epochs: dict[str, float] = {}
    for point in grid_points(cfg.axes):
        first = point_config(cfg, base, point, None)
        key = repr((dataclasses.asdict(first.data), first.train.batch_size, first.train.seq_len,
                    first.loss_on))  # fmt: skip
        if key not in epochs:
            dataset = build_dataset(first.data, Path(first.cache_dir or root / "data"))
            stream = QATrainStream(dataset, first.train.batch_size, first.train.seq_len,
                                   first.seed, first.loss_on)  # fmt: skip
            epochs[key] = stream.steps_per_epoch
        steps = steps_for(point.exposures, epochs[key], first.data.n_qa // N_ATTRIBUTES)
        model = first.model.build(1, first.ffns[0], first.train.seq_len)
        out.append(Planned(point, point_config(cfg, base, point, steps), hidden_params(model),
                           facts(point.m), steps, epochs[key]))  # fmt: skip
    return out


def configure(planned: Sequence[Planned]) -> dict[str, tuple[grid.Point, kqa.Config]]:
    """The engine's configs of every planned point, by label (:func:`.grid.run_points`)."""
    return {p.point.label: (grid.Point(p.point.label), p.config) for p in planned}


def preflight(cfg: Config) -> None:
    """Refuse a grid the engine would refuse (bad width, model too big for this machine) before
    anything is written: every point is configured with the base preset's steps."""
    base = base_config(cfg)
    if base.ffn == "both":
        raise ConfigError("common.ffn: got 'both'; expected plain or gated (the map measures one)")
    points = grid_points(cfg.axes)
    configs = {p.label: (grid.Point(p.label), point_config(cfg, base, p, None)) for p in points}
    grid.preflight(configs, cfg.common)


def run(cfg: Config, run: RunDir, provenance: Provenance) -> None:
    """Plan every point, train them all on one pool, then write the map, figures and report."""
    planned = plan_points(cfg, run.path)
    results = grid.run_points(configure(planned), run.path, cfg.workers, provenance=provenance)
    grid.prune_points(run.path, list(results))
    if D.is_main_process():
        rows = [outputs.point_row(p, results[p.point.label], cfg.tau) for p in planned]
        write(run, outputs.outputs(cfg, rows))


STUDY = Study(
    name=NAME,
    config=Config,
    run=run,
    preflight=preflight,
    reproduces=(
        "beyond the papers: where Muon's QA tail edge appears (width, exposures, m, exponent)"
    ),
    presets=(
        Preset("smoke", "", 26.1),
        Preset("cpu", "3 widths × 2 exposures", 979.0),
        Preset("paper", "up to 160M", None),
    ),
    in_reproduce=False,
)
"""This study's record (:class:`~tailmem.studies.Study`)."""

"""The tuning phase of a trained plan as tables: every trial, and every arm's choice and cost.

Both tables read a :class:`~tailmem.lm.plan.TrainedPlan` only: the trials this run trained
(with their scores) or, for an arm decided by a stored rate, the trials of the stored tuning
(:class:`~tailmem.lm.store.StoredRate`, with its provenance in ``source``). Their columns are
documented by their rows' fields (:class:`TrialRow`, :class:`ChoiceRow`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailmem.columns import column, column_docs, records
from tailmem.lm.plan import EntryStatus, TrainedPlan
from tailmem.lm.store import STORE_NAME, gather, store_body
from tailmem.outputs import Outputs, Table
from tailmem.studies import Provenance

THIS_RUN = "this run"


def _source(state: EntryStatus) -> str:
    stored = state.stored
    if stored is None:
        return THIS_RUN
    commit = (stored.commit or "unknown commit")[:10]
    return f"stored ({stored.preset}, {commit}, {stored.date})"


@dataclass(frozen=True)
class TrialRow:
    """One trial of one arm's sweep (a row of ``lr_sweep.csv``): every kind of the plan's rate
    in a column of its own (``lr_<kind>``)."""

    ffn: str = column("the FFN type")
    arm: str = column("the arm")
    swept: str = column("the optimiser kind whose learning rate (or factor) the arm tunes")
    point: float = column("the candidate: the swept rate (or the factor of the base rates)")
    seed: int = column("the tuning seed (apart from every evaluation seed)")
    lrs: Mapping[str, float | None] = column(
        "learning rate of the kind at this point (empty: the arm does not use it)", each="lr_{}"
    )
    score: float | None = column(
        "the trial's tuning score (higher is better; empty: the run failed)"
    )
    point_score: float | None = column(
        "the candidate's mean score over the tuning seeds (what ranks it)"
    )
    status: str = column("the trial run's status: complete, or how it failed")
    chosen: bool = column("the arm's chosen candidate")
    extended: bool = column(
        "a candidate added beyond an end of the declared grid because the winner sat there (the "
        "widening rule, up to tuning.max_extend)"
    )
    source: str = column("tuned in this run, or stored with its provenance (preset, commit, date)")

    @property
    def rate(self) -> float:
        """The swept kind's learning rate at this point."""
        rate = self.lrs[self.swept]
        if rate is None:
            raise ValueError(f"{self.arm} tunes {self.swept} but has no rate of it")
        return rate


def _chosen_point(state: EntryStatus) -> float | None:
    if state.stored is not None:
        return state.stored.point
    return None if state.choice is None or state.choice.failed else state.choice.point


FAILED = "every trial failed"
"""A sweep's outcome when every candidate had a failed trial: no rate chosen, none evaluated."""


def _swept(state: EntryStatus) -> str:
    rates = state.entry.rates
    return rates.swept[0] if rates.swept else state.entry.arm.tuned


def _mean(scores: list[float | None]) -> float | None:
    """The mean of a candidate's scores; None when a trial failed."""
    if any(s is None for s in scores) or not scores:
        return None
    return sum(s for s in scores if s is not None) / len(scores)


def trial_rows(trained: TrainedPlan) -> list[TrialRow]:
    """Every trial of every tuned arm, in the order tried, with a rate for every kind of the
    plan (None where the arm does not use it)."""
    rows: list[TrialRow] = []
    for state in trained.states.values():
        entry, sweep, chosen = state.entry, state.entry.sweep, _chosen_point(state)
        if sweep is None or (chosen is None and not state.failed):
            continue
        if state.stored is not None:
            trials = [(t.point, t.seed, t.score, "complete" if t.score is not None else "failed")
                      for t in state.stored.trials]  # fmt: skip
        else:
            assert state.choice is not None
            status = {(p, s): trained.results[spec].status for p, s, spec in state.trials}
            trials = [(t.point, t.seed, t.score, status[t.point, t.seed])
                      for t in state.choice.trials]  # fmt: skip
        lenders = {arm: trained.best[entry.ffn, arm] for arm in entry.rates.lenders}
        points = list(dict.fromkeys(p for p, _, _, _ in trials))
        for point, seed, score, status_ in trials:
            rows.append(TrialRow(
                ffn=entry.ffn, arm=entry.arm.name, swept=_swept(state), point=point, seed=seed,
                lrs=_every_kind(entry.rates.at(point, lenders), trained.kinds), score=score,
                point_score=_mean([s for p, _, s, _ in trials if p == point]), status=status_,
                chosen=point == chosen, extended=points.index(point) >= len(sweep.grid),
                source=_source(state),
            ))  # fmt: skip
    return rows


def _every_kind(lrs: Mapping[str, float], kinds: Sequence[str]) -> dict[str, float | None]:
    return {kind: lrs.get(kind) for kind in kinds}


@dataclass(frozen=True)
class ChoiceRow:
    """One arm's tuning outcome (a row of ``tuning.csv``)."""

    ffn: str = column("the FFN type")
    arm: str = column("the arm")
    swept: str = column(
        "the kind whose rate (or factor) the arm tunes; every other rate is set or borrowed"
    )
    chosen: float | str = column(
        f"the chosen candidate ('{FAILED}': every candidate diverged or scored non-finite on a "
        "tuning seed, so none is chosen and the arm is not evaluated)"
    )
    edge: str = column(
        "lowest/highest: the choice sits at an end of the candidates tried (the budget ran out "
        "before it became interior; it may not be the optimum)"
    )
    trials: int = column("trials run (candidates × tuning seeds): the arm's tuning cost")
    budget: int = column("the most trials the widening rule allows: the same for every arm")
    tuning_seeds: tuple[int, ...] = column(
        "the seeds every candidate trained on (none is an evaluation seed)"
    )
    score: str = column("what ranked the candidates (tuning.score)")
    source: str = column("tuned in this run, or stored with its provenance")

    def record(self) -> dict[str, Any]:
        """The CSV row (:func:`~tailmem.columns.records`)."""
        return records([self])[0]


def choice_rows(trained: TrainedPlan) -> list[ChoiceRow]:
    """Every tuned arm's choice, cost and budget."""
    rows = []
    for entry_id, state in trained.states.items():
        sweep, point = state.entry.sweep, _chosen_point(state)
        if sweep is None or (point is None and not state.failed):
            continue
        trials, budget = trained.tuning_cost(entry_id)
        rows.append(ChoiceRow(
            ffn=state.entry.ffn, arm=state.entry.arm.name, swept=_swept(state),
            chosen=FAILED if point is None else point, edge=trained.edge(entry_id) or "",
            trials=trials, budget=budget, tuning_seeds=sweep.seeds, score=sweep.score,
            source=_source(state),
        ))  # fmt: skip
    return rows


def tuning_tables(
    trained: TrainedPlan, captions: tuple[str, str] | None = None
) -> tuple[Table, Table]:
    """A trained plan's tuning tables: ``tuning.csv`` (every arm's choice, cost and budget) and
    ``lr_sweep.csv`` (every trial), shown in the report with ``captions`` (choice, trials)."""
    choices, trials = captions or (None, None)
    rows = trial_rows(trained)
    return (
        Table("tuning.csv", records(choice_rows(trained)), choices, column_docs(ChoiceRow)),
        Table("lr_sweep.csv", records(rows), trials, column_docs(TrialRow, rows)),
    )  # fmt: skip


def store_outputs(
    trained: TrainedPlan, record: Mapping[str, Any], study: str, provenance: Provenance
) -> Outputs:
    """The choices made in a run as ``tuned_rates.json`` (a rate store,
    :mod:`tailmem.lm.store`) of the tuning problem ``record``, under the run's preset and
    command (``provenance``, passed in by the runner; nothing where no choice was made)."""
    tuned = trained.tuned_rates(record, study, provenance.preset, provenance.command)
    return Outputs(records={STORE_NAME: store_body(tuned)} if tuned else {})


def gathered_outputs(root: Path) -> Outputs:
    """Every choice under ``root`` — the run's own and its grid points' — merged into the run's
    ``tuned_rates.json`` (:func:`~tailmem.lm.store.gather`; nothing where none was made): what
    a grid run that stops after tuning writes last, before it completes."""
    rates = gather(root)
    return Outputs(records={STORE_NAME: store_body(rates)} if rates else {})


def tuning_outputs(
    trained: TrainedPlan, record: Mapping[str, Any], study: str, provenance: Provenance
) -> Outputs:
    """What a run that stops after tuning writes: its tuning tables and its choices
    (:func:`tuning_tables`, :func:`store_outputs`)."""
    stored = store_outputs(trained, record, study, provenance)
    return Outputs(tables=tuning_tables(trained)) + stored

"""The tuning phase of a trained plan as tables: every trial, and every arm's choice and cost.

Both tables read a :class:`~tailmem.lm.plan.TrainedPlan` only: the trials this run trained
(with their scores) or, for an arm decided by a stored rate, the trials of the stored tuning
(:class:`~tailmem.lm.store.StoredRate`, with its provenance in ``source``). Their column
documentation is :data:`TRIAL_COLUMNS` and :data:`CHOICE_COLUMNS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    """One trial of one arm's sweep (a row of ``lr_sweep.csv``)."""

    ffn: str
    arm: str
    swept: str
    point: float
    seed: int
    lrs: Mapping[str, float]
    score: float | None
    point_score: float | None
    status: str
    chosen: bool
    extended: bool
    source: str

    def record(self, kinds: list[str]) -> dict[str, Any]:
        """The CSV row: every kind's rate in its own column (``lr_<kind>``, empty where the arm
        does not use it)."""
        lrs = {f"lr_{k}": self.lrs.get(k) for k in kinds}
        return {"ffn": self.ffn, "arm": self.arm, "swept": self.swept, "point": self.point,
                "seed": self.seed, **lrs, "score": self.score, "point_score": self.point_score,
                "status": self.status, "chosen": self.chosen, "extended": self.extended,
                "source": self.source}  # fmt: skip


TRIAL_COLUMNS = {
    "swept": "the optimiser kind whose learning rate (or factor) the arm tunes",
    "point": "the candidate: the swept rate (or the factor of the base rates)",
    "seed": "the tuning seed (apart from every evaluation seed)",
    "lr_muon": "learning rate of each kind at this point (lr_adam, lr_sgd alike; empty: unused)",
    "score": "the trial's tuning score (higher is better; empty: the run failed)",
    "point_score": "the candidate's mean score over the tuning seeds (what ranks it)",
    "chosen": "the arm's chosen candidate",
    "extended": "a candidate added beyond an end of the declared grid because the winner sat "
    "there (the widening rule, up to tuning.max_extend)",
    "source": "tuned in this run, or stored with its provenance (preset, commit, date)",
}


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
    """Every trial of every tuned arm, in the order tried."""
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
                entry.ffn, entry.arm.name, _swept(state), point, seed,
                entry.rates.at(point, lenders), score,
                _mean([s for p, _, s, _ in trials if p == point]), status_, point == chosen,
                points.index(point) >= len(sweep.grid), _source(state),
            ))  # fmt: skip
    return rows


@dataclass(frozen=True)
class ChoiceRow:
    """One arm's tuning outcome (a row of ``tuning.csv``)."""

    ffn: str
    arm: str
    swept: str
    chosen: float | None
    edge: str | None
    trials: int
    budget: int
    tuning_seeds: tuple[int, ...]
    score: str
    source: str

    def record(self) -> dict[str, Any]:
        chosen = FAILED if self.chosen is None else self.chosen
        return {"ffn": self.ffn, "arm": self.arm, "swept": self.swept, "chosen": chosen,
                "edge": self.edge or "", "trials": self.trials, "budget": self.budget,
                "tuning_seeds": " ".join(map(str, self.tuning_seeds)), "score": self.score,
                "source": self.source}  # fmt: skip


CHOICE_COLUMNS = {
    "swept": "the kind whose rate (or factor) the arm tunes; every other rate is set or borrowed",
    "chosen": f"the chosen candidate ('{FAILED}': every candidate diverged or scored "
    "non-finite on a tuning seed, so none is chosen and the arm is not evaluated)",
    "edge": "lowest/highest: the choice sits at an end of the candidates tried (the budget ran "
    "out before it became interior; it may not be the optimum)",
    "trials": "trials run (candidates × tuning seeds): the arm's tuning cost",
    "budget": "the most trials the widening rule allows: the same for every arm",
    "tuning_seeds": "the seeds every candidate trained on (none is an evaluation seed)",
    "score": "what ranked the candidates (tuning.score)",
    "source": "tuned in this run, or stored with its provenance",
}


def choice_rows(trained: TrainedPlan) -> list[ChoiceRow]:
    """Every tuned arm's choice, cost and budget."""
    rows = []
    for entry_id, state in trained.states.items():
        sweep, point = state.entry.sweep, _chosen_point(state)
        if sweep is None or (point is None and not state.failed):
            continue
        trials, budget = trained.tuning_cost(entry_id)
        rows.append(ChoiceRow(
            state.entry.ffn, state.entry.arm.name, _swept(state), point, trained.edge(entry_id),
            trials, budget, sweep.seeds, sweep.score, _source(state),
        ))  # fmt: skip
    return rows


def tuning_tables(
    trained: TrainedPlan, captions: tuple[str, str] | None = None
) -> tuple[Table, Table]:
    """A trained plan's tuning tables: ``tuning.csv`` (every arm's choice, cost and budget) and
    ``lr_sweep.csv`` (every trial), shown in the report with ``captions`` (choice, trials)."""
    choices, trials = captions or (None, None)
    return (
        Table("tuning.csv", [r.record() for r in choice_rows(trained)], choices, CHOICE_COLUMNS),
        Table("lr_sweep.csv", [r.record(trained.kinds) for r in trial_rows(trained)], trials,
              TRIAL_COLUMNS),
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

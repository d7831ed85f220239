"""Each arm's learning rates, from one field per optimiser kind: ``optim.<kind>.lr``.

A kind's rate is one number (every arm uses it) or a grid (a list of two or more: tuned; a
one-point list is that number). An arm *tunes* the
kind that trains most of its hidden matrices (:attr:`~tailmem.lm.arms.Arm.tuned`): its plan
entry sweeps that kind's grid (:class:`~tailmem.lm.tuning.Sweep`; no sweep when the rate is a
number). Every other kind of the arm takes the number, or — when that kind is swept — borrows
the rate chosen for the kind's *base arm*: the arm among those run that trains every hidden
matrix with it (Adam's arm for the Adam embedding and head of a Muon arm; Muon's for the Q and
K of ``muon_qk``). So every arm tunes exactly one rate by the same rule and budget, and the rate
of the parameters it shares with the base arm is that arm's: Muon on the hidden matrices and
``adam_split`` (Adam at its own rate there) tune the same one rate over the same Adam-trained
embedding, head and norms — equal tuning freedom. A swept kind with no base arm among those run
is refused: set its rate to a number, or add the arm. ``tuning.rest_lr`` fixes instead the rate
of a kind that trains only an arm's rest (embedding, head, norms): every arm's rest then trains
at that one number while the all-Adam arm still tunes its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from tailmem.errors import ConfigError
from tailmem.lm.arms import Arm
from tailmem.lm.config import OptimSection
from tailmem.lm.entries import Entry, Rates
from tailmem.lm.tuning import TuningSection


def base_arm(kind: str, arms: Sequence[Arm]) -> Arm | None:
    """The first of ``arms`` that trains every hidden matrix with ``kind`` (None: none does)."""
    return next((arm for arm in arms if arm.trains_every_hidden(kind)), None)


def lenders(arm: Arm, arms: Sequence[Arm], optim: OptimSection) -> dict[str, Arm]:
    """Per swept kind ``arm`` uses but does not tune: the arm whose chosen rate it borrows."""
    out = {}
    for kind in arm.kinds:
        if kind == arm.tuned or not optim[kind].tuned:
            continue
        base = base_arm(kind, arms)
        if base is None:
            raise ConfigError(
                f"arm {arm.name} borrows optim.{kind}.lr from the arm that trains every hidden "
                f"matrix with {kind}, and none is run; expected that arm in arms, or "
                f"optim.{kind}.lr set to one number"
            )
        out[kind] = base
    return out


def rate_entries(
    ffns: Sequence[str],
    arms: Sequence[Arm],
    optim: OptimSection,
    tuning: TuningSection,
    seed: int,
    steps: int,
    scores: Mapping[str, str],
) -> list[Entry]:
    """One plan entry per FFN type and arm (see the module docstring); its sweep's trials on
    ``tuning``'s seeds (from ``seed``), ``steps`` long unless ``tuning.steps`` says otherwise,
    ranked by the declared score of ``scores``. Refuses a cycle of borrowed rates."""
    borrowed = {arm.name: lenders(arm, arms, optim) for arm in arms}
    _refuse_cycles(borrowed)

    def entry(ffn: str, arm: Arm) -> Entry:
        rest = {} if tuning.rest_lr is None else rest_rates(arm, borrowed[arm.name], tuning.rest_lr)
        sources = {k: lender for k, lender in borrowed[arm.name].items() if k not in rest}
        section = optim[arm.tuned]
        fixed = {k: optim[k].grid[0] for k in arm.kinds if k != arm.tuned and k not in sources}
        fixed |= rest
        if not section.tuned:
            fixed[arm.tuned] = section.grid[0]
        rates = Rates(
            fixed=fixed,
            borrowed={kind: (lender.name, kind) for kind, lender in sources.items()},
            swept=(arm.tuned,) if section.tuned else (),
        )
        sweep = tuning.sweep(section.grid, seed, steps, scores) if section.tuned else None
        return Entry(ffn, arm, rates, sweep)

    entries = [entry(ffn, arm) for ffn in ffns for arm in arms]
    equal_budgets(entries)
    return entries


def rest_rates(arm: Arm, kinds: Iterable[str], rest_lr: float) -> dict[str, float]:
    """``rest_lr`` for each of ``kinds`` that trains only ``arm``'s rest (``tuning.rest_lr``)."""
    return {kind: rest_lr for kind in kinds if arm.trains_rest_only(kind)}


def equal_budgets(entries: Sequence[Entry]) -> None:
    """Refuse arms that would tune with different budgets (candidates × tuning seeds, widening
    included): a comparison gives every arm the same tuning freedom."""
    budgets = {e.arm.name: len(e.sweep.grid) for e in entries if e.sweep is not None}
    if len(set(budgets.values())) > 1:
        shown = ", ".join(f"{arm} {n}" for arm, n in budgets.items())
        raise ConfigError(
            f"optim.<kind>.lr: the tuned arms' grids differ in length ({shown} candidates); "
            "expected the same number for every tuned arm (equal tuning freedom)"
        )


def _refuse_cycles(borrowed: Mapping[str, Mapping[str, Arm]]) -> None:
    """Refuse arms that wait on each other's chosen rates (none could start)."""

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            loop = " -> ".join((*path[path.index(name) :], name))
            raise ConfigError(f"arms borrow learning rates in a cycle ({loop}); expected a number "
                              "for one of their optim.<kind>.lr")  # fmt: skip
        for lender in borrowed.get(name, {}).values():
            if lender.name != name:
                visit(lender.name, (*path, name))

    for name in borrowed:
        visit(name, ())

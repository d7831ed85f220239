"""The factorial's arms: update rule × whose rate trains the hidden matrices.

Every arm trains the hidden matrices (Q, K, V, O, W_in, W_gate, W_out) with one update rule and
the rest (embedding, head, norms) with Adam, at one of two rate structures:

- **shared** — one learning rate for every parameter, tuned (paper A's Adam baseline is Adam's
  shared arm; Muon shared needs an update scale that makes one rate fit both, Moonlight's
  ``match_rms_adamw``, which this study gives Muon in every arm);
- **own** — the hidden matrices at a rate of their own, tuned, over the rest at the rate the
  Adam-shared arm chose (paper A's Muon arm is Muon's own arm; ``adam_split`` is Adam's).

Every arm tunes exactly one rate by the same rule and budget (:mod:`tailmem.lm.tuning`), so the
rule axis compares update rules at equal tuning freedom and the rate axis measures what the
second rate is worth. :func:`factorial_entries` builds a point's plan entries; at a regime level
that reuses the base's rates (``rates: base``) every arm is set to the rates its base arm chose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tailmem.errors import ConfigError
from tailmem.lm.arms import Arm, matrix_recipe
from tailmem.lm.entries import Entry, Rates
from tailmem.lm.rates import equal_budgets
from tailmem.lm.tuning import TuningSection
from tailmem.names import check_distinct

REST = "adam"
"""The kind that trains the rest (embedding, head, norms) in every arm."""
SHARED, OWN = "shared", "own"
STRUCTURES = (SHARED, OWN)
ADAM_SHARED = "adam_shared"
"""Adam everywhere at one rate: paper A's baseline, and the lender of every own arm's rest."""


@dataclass(frozen=True)
class FactorialArm:
    """One arm: its update ``rule`` (a key of the study's ``rules``), the ``kind`` on the
    hidden matrices, its rate ``structure`` and the :class:`~tailmem.lm.arms.Arm` it trains."""

    rule: str
    kind: str
    structure: str
    arm: Arm

    @property
    def name(self) -> str:
        return self.arm.name


def arm_name(rule: str, structure: str) -> str:
    return f"{rule}_{structure}"


def factorial_arm(rule: str, kind: str, label: str, structure: str) -> FactorialArm:
    """The arm of ``rule`` (training the hidden matrices with ``kind``) at ``structure``;
    Adam's shared arm is Adam everywhere."""
    name = arm_name(rule, structure)
    if kind in (REST, "adam_split") and structure == SHARED:
        return FactorialArm(rule, REST, SHARED, Arm(name, "Adam, one rate", f"{REST}:*"))
    text = f"{label}, {'one rate with the rest' if structure == SHARED else 'its own rate'}"
    return FactorialArm(rule, kind, structure, Arm(name, text, matrix_recipe(kind)))


def factorial_arms(
    rules: Mapping[str, tuple[str, str]], structures: Sequence[str] = STRUCTURES
) -> list[FactorialArm]:
    """Every rule (name → (kind, label)) at every structure, Adam's shared arm first (the
    others borrow its rate for the rest)."""
    arms = [factorial_arm(r, k, label, s) for r, (k, label) in rules.items() for s in structures]
    check_distinct("rules", [a.name for a in arms])
    if not any(a.name == ADAM_SHARED for a in arms):
        raise ConfigError(f"rules: expected an adam rule (its shared arm, {ADAM_SHARED}, sets "
                          "the rate of the rest in every own arm)")  # fmt: skip
    return sorted(arms, key=lambda a: a.name != ADAM_SHARED)


def factorial_entries(
    ffn: str,
    arms: Sequence[FactorialArm],
    grids: Mapping[str, Sequence[float]],
    tuning: TuningSection,
    seed: int,
    steps: int,
    scores: Mapping[str, str],
) -> tuple[Entry, ...]:
    """One plan entry per arm: each tunes one rate over ``grids[arm name]`` — a shared arm
    the rate of every parameter, an own arm its hidden matrices' rate with the rest at the
    Adam-shared arm's choice, or at ``tuning.rest_lr`` when that is set (a one-point grid is
    that rate, tuned by no trial)."""
    out = []
    for a in arms:
        grid = tuple(grids[a.name])
        kinds = tuple(dict.fromkeys((a.kind, REST))) if a.structure == SHARED else (a.kind,)
        own = a.structure != SHARED
        rest = {REST: tuning.rest_lr} if own and tuning.rest_lr is not None else {}
        borrowed = {REST: (ADAM_SHARED, REST)} if own and not rest else {}
        if len(grid) == 1:
            rates = Rates(fixed=dict.fromkeys(kinds, grid[0]) | rest, borrowed=borrowed)
            out.append(Entry(ffn, a.arm, rates))
            continue
        rates = Rates(fixed=rest, borrowed=borrowed, swept=kinds)
        out.append(Entry(ffn, a.arm, rates, tuning.sweep(grid, seed, steps, scores)))
    equal_budgets(out)
    return tuple(out)


def fixed_entries(
    ffn: str, arms: Sequence[FactorialArm], chosen: Mapping[str, Mapping[str, float]]
) -> tuple[Entry, ...]:
    """The arms at the rates the base point chose (``chosen``: arm name → every kind's rate):
    no tuning."""
    return tuple(Entry(ffn, a.arm, Rates(fixed=dict(chosen[a.name]))) for a in arms)

"""One arm of a study's plan: how its learning rates follow from a sweep point (:class:`Rates`)
and what it tunes (:class:`Entry`).

Kept apart from :mod:`tailmem.lm.plan` (which trains the entries) so that the config that
declares the entries and the rate store that keys them read the type without importing the
trainer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tailmem.lm.arms import Arm
from tailmem.lm.tuning import Sweep

EntryId = tuple[str, str]
"""(FFN type, arm name)."""


@dataclass(frozen=True)
class Rates:
    """How an entry's learning rates follow from its sweep point: ``fixed`` kinds at a set
    rate; ``borrowed`` kinds at the rate another arm chose (kind → (lender arm, lender's
    kind)); ``swept`` kinds at the point itself, or at ``base[kind] × point`` when ``base``
    names them (a sweep of a factor of the base rates)."""

    fixed: Mapping[str, float] = field(default_factory=dict)
    borrowed: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    swept: tuple[str, ...] = ()
    base: Mapping[str, float] = field(default_factory=dict)

    @property
    def lenders(self) -> tuple[str, ...]:
        """The arms whose chosen rates this entry waits for."""
        return tuple(dict.fromkeys(arm for arm, _ in self.borrowed.values()))

    def at(self, point: float, chosen: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        """Every kind's rate at ``point``, borrowed rates read from ``chosen`` (arm → its
        chosen rates)."""
        taken = {kind: chosen[arm][theirs] for kind, (arm, theirs) in self.borrowed.items()}
        swept = {k: self.base.get(k, 1.0) * point for k in self.swept}
        return {**self.fixed, **taken, **swept}


@dataclass(frozen=True)
class Entry:
    """One arm of one FFN type: its :class:`Rates` and its :class:`~tailmem.lm.tuning.Sweep`
    (None: nothing to tune — the rates at point 1.0 are its rates)."""

    ffn: str
    arm: Arm
    rates: Rates
    sweep: Sweep | None = None

    @property
    def id(self) -> EntryId:
        return (self.ffn, self.arm.name)

"""What ``assoc-capacity`` measures, in the types its claim reads
(:class:`~tailmem.claims.related.CapacityInputs`).

The row is also the study's CSV table (each field a documented column, :mod:`tailmem.columns`)
and, with the error at every step size, the record of its ``results.json``: one type serves the
table, the file and the claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tailmem.columns import column, records


@dataclass(frozen=True)
class CapacityRow:
    """One (d, optimiser) of ``capacity.csv``: the best final error over the step-size grid."""

    d: int = column("embedding dimension")
    optimizer: str = column("the update rule")
    error: float = column("best final top-1 error over the step-size grid")
    best_lr: float = column("the step size that gave it")
    lr_grid_edge: str = column("set where that step size is an end of the grid")
    loss: float = column("the final training loss at that step size")
    tail_mass_beyond_d: float = column("probability mass of the facts ranked beyond d")


@dataclass(frozen=True)
class Trained:
    """One (d, optimiser) trained: its table row and the final error at every step size of the
    grid (in the grid's order)."""

    row: CapacityRow
    errors_per_lr: Sequence[float]

    def record(self) -> dict[str, object]:
        """Its ``results.json`` row: the table row and ``errors_per_lr``."""
        return {**records([self.row])[0], "errors_per_lr": self.errors_per_lr}

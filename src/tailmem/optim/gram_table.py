"""Where Gram Newton–Schulz pays, measured per kind of device: the table ``method="auto"`` reads.

The Gram form of the Polar Express iteration ("gram_ns", see
:func:`tailmem.optim.orthogonalize._gram_ns`) needs fewer FLOPs than the X-space iteration exactly
when a wide ``m × n`` matrix has ``n > 1.5·m``, but fewer FLOPs are not less time: its ``m × m``
products are smaller (a lower matmul rate on small ``m``), it runs in at least float32, and it
converts between dtypes. ``method="auto"`` therefore takes the Gram form only where a row of
:data:`GRAM_TABLE` for the tensor's device kind (``tensor.device.type``) says it was measured
faster; a device kind without a row always runs the X-space iteration. Both forms evaluate the
same polynomial, so the choice changes speed and float rounding, not the maths.

Rows are measured by ``benchmarks/gram_table.py``, which prints them in this file's format.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GramRule:
    """The Gram form pays for a wide ``m × n`` matrix (``m <= n``) with ``m >= min_rows`` and
    ``n >= min_aspect·m``."""

    min_rows: int
    min_aspect: float


GRAM_TABLE: dict[str, tuple[GramRule, ...]] = {
    "cpu": (GramRule(min_rows=64, min_aspect=2.0), GramRule(min_rows=32, min_aspect=3.0)),
}
"""Per device kind, the rules of which any one suffices. "cpu": a 2-core AMD EPYC (AVX-512),
torch 2.13, one thread, float32, 5 steps (``benchmarks/gram_table.py``): the Gram form was
1.15-1.2x faster at ``n = 2m`` for every ``m`` from 64 to 768, 1.4-1.5x at ``3m``, 1.65-1.8x at
``4m`` and 2.35-2.6x at ``8m``; below ``m = 64`` it paid only from ``n = 3m`` (from 32 rows) and
lost at ``m = 8``-``32`` with ``n = 2m`` (0.86-1.0x)."""


def gram_pays(m: int, n: int, device_type: str) -> bool:
    """Whether :data:`GRAM_TABLE` says the Gram form is the faster for an ``m × n`` matrix (either
    orientation) on a device of kind ``device_type`` ("cpu", "cuda", ...)."""
    rows, cols = min(m, n), max(m, n)
    return any(
        rows >= rule.min_rows and cols >= rule.min_aspect * rows
        for rule in GRAM_TABLE.get(device_type, ())
    )

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
    "cpu": (GramRule(min_rows=64, min_aspect=3.0), GramRule(min_rows=256, min_aspect=2.0)),
}
"""Per device kind, the rules of which any one suffices. "cpu": a 2-core AMD EPYC (Zen 4,
AVX-512), torch 2.13, one thread, float32, 5 steps (``benchmarks/gram_table.py``)."""


def gram_pays(m: int, n: int, device_type: str) -> bool:
    """Whether :data:`GRAM_TABLE` says the Gram form is the faster for an ``m × n`` matrix (either
    orientation) on a device of kind ``device_type`` ("cpu", "cuda", ...)."""
    rows, cols = min(m, n), max(m, n)
    return any(
        rows >= rule.min_rows and cols >= rule.min_aspect * rows
        for rule in GRAM_TABLE.get(device_type, ())
    )

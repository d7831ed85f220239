"""Verdicts that depend on the host: measured, not assumed.

The cpu verdicts were computed twice on this machine kind with only the floating-point
arithmetic changed: fp32, then bf16 (forward and loss autocast to bfloat16, the same stored
rates, seeds and data). One thread against two is no second order here: on the AMD EPYC hosts of
this kind the products of every shape the cpu models use are bit-identical with 1 and 2 threads,
and so were whole training runs. A claim whose verdict differed between the two is listed here
with both verdicts: its rule decides inside what rounding can move, so the report and the README
mark it "decided per host" — the verdict is this host's, not a fact about the optimisers. An
empty mapping means no verdict moved.
"""

from __future__ import annotations

HOST_SENSITIVE: dict[str, str] = {}
"""Claim id (a family's variant id too) → the two verdicts and the runs that gave them."""


def host_note(claim_id: str) -> str:
    """The "decided per host" note of a claim ("" where its verdict held across reduction
    orders)."""
    found = HOST_SENSITIVE.get(claim_id)
    return "" if found is None else f"decided per host ({found})"

"""Verdicts that depend on the host: measured, not assumed.

The cpu verdicts were computed twice on this machine kind with only the floating-point reduction
order changed (each run on one thread, then on two: the same numbers up to rounding; the
closing note and README say which commits and runs). A claim whose verdict differed between the
two is listed here with both verdicts: its rule decides inside what rounding can move, so the
report and the README mark it "decided per host" — the verdict is this host's, not a fact about
the optimisers. An empty entry list means no verdict moved.
"""

from __future__ import annotations

HOST_SENSITIVE: dict[str, str] = {}
"""Claim id (a family's variant id too) → the two verdicts and the runs that gave them."""


def host_note(claim_id: str) -> str:
    """The "decided per host" note of a claim ("" where its verdict held across reduction
    orders)."""
    found = HOST_SENSITIVE.get(claim_id)
    return "" if found is None else f"decided per host ({found})"

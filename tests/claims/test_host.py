"""A verdict that moved when only the floating-point reduction order changed is marked
"decided per host" wherever the report shows it; every listed id is a claim of the registry."""

from __future__ import annotations

from tailmem.claims import host
from tailmem.claims.core import ClaimResult
from tailmem.claims.registry import CLAIMS
from tailmem.report.content import verdict_text


def _result(claim_id: str) -> ClaimResult:
    return ClaimResult(claim_id, "c", "A3", "p", "ours", "rule", "inconclusive", reason="noise")


def test_a_host_sensitive_verdict_is_marked_and_others_are_not(monkeypatch):
    monkeypatch.setitem(host.HOST_SENSITIVE, "A1.qk_gain_small", "bf16: reproduced")
    assert verdict_text(_result("A1.qk_gain_small")).endswith("decided per host (bf16: reproduced)")
    assert "per host" not in verdict_text(_result("A1.full_beats_adam"))


def test_every_host_sensitive_entry_names_a_registered_claim():
    families = {c.id for c in CLAIMS.values() if c.variant}
    for claim_id in host.HOST_SENSITIVE:
        assert claim_id in CLAIMS or any(claim_id.startswith(f"{f}.") for f in families)

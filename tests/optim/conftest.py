"""Shared fixtures of the optimiser tests."""

import pytest
import torch.optim._muon as torch_muon


def _ns5_float32(grad, ns_coefficients, ns_steps, eps):
    """torch.optim.Muon's Newton–Schulz with its bfloat16 cast replaced by float32."""
    a, b, c = ns_coefficients
    X = grad.float()
    if grad.size(0) > grad.size(1):
        X = X.T
    X = X / X.norm().clamp(min=eps)
    for _ in range(ns_steps):
        A = X @ X.T
        X = a * X + (b * A + c * A @ A) @ X
    return X.T if grad.size(0) > grad.size(1) else X


@pytest.fixture
def float32_torch_muon(monkeypatch):
    """torch.optim.Muon orthogonalising in float32 (its own code casts to bfloat16), so it can be
    compared with tailmem's Muon to float32 precision."""
    monkeypatch.setattr(torch_muon, "_zeropower_via_newtonschulz", _ns5_float32)

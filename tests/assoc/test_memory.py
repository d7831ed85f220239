"""Exact population loss and gradient: dense closed form vs autograd, structured vs dense."""

import math

import pytest
import torch

import tailmem.assoc as A
from tailmem.assoc.memory import DenseMemory, StructuredMemory, fact_losses, logits, loss_floor


def _problem(K: int = 12, d: int | None = None, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    d = d or K
    E = torch.randn(d, K, generator=gen, dtype=torch.float64)
    Et = torch.randn(d, K, generator=gen, dtype=torch.float64)
    W = torch.randn(d, d, generator=gen, dtype=torch.float64)
    p = torch.rand(K, generator=gen, dtype=torch.float64) + 0.1
    return W, E, Et, p / p.sum()


@pytest.mark.parametrize("label_noise", [0.0, 0.3])
@pytest.mark.parametrize("d", [12, 5])
def test_gradient_matches_autograd(label_noise: float, d: int) -> None:
    W, E, Et, p = _problem(12, d)
    W.requires_grad_(True)
    loss = A.population_loss(W, E, Et, p, label_noise)
    (auto,) = torch.autograd.grad(loss, W)
    closed = A.population_grad(W.detach(), E, Et, p, label_noise)
    assert torch.allclose(closed, auto, atol=1e-12, rtol=1e-10)


def test_paper_gradient_formula_noiseless() -> None:
    """∇L = −Σ_k p_k [(1 − s_kk) Ẽ_k E_kᵀ − Σ_{k'≠k} s_k'k Ẽ_k' E_kᵀ] (PAPERS.md A4)."""
    W, E, Et, p = _problem(7)
    S = torch.softmax(logits(W, E, Et), dim=0)
    expected = torch.zeros_like(W)
    for k in range(7):
        expected -= p[k] * (1 - S[k, k]) * torch.outer(Et[:, k], E[:, k])
        for j in range(7):
            if j != k:
                expected += p[k] * S[j, k] * torch.outer(Et[:, j], E[:, k])
    assert torch.allclose(A.population_grad(W, E, Et, p), expected, atol=1e-13)


def test_loss_floor_is_the_minimum_with_label_noise() -> None:
    K, a = 6, 0.25
    best = math.log((1 - a + a / K) / (a / K))  # logit margin of the Bayes-optimal memory
    Z = best * torch.eye(K, dtype=torch.float64)
    assert fact_losses(Z, a).allclose(torch.full((K,), loss_floor(K, a), dtype=torch.float64))
    assert (fact_losses(Z * 1.1, a) > loss_floor(K, a)).all()
    assert loss_floor(K, 0.0) == 0.0


@pytest.mark.parametrize("embedding", ["decoupled", "coupled"])
@pytest.mark.parametrize("label_noise", [0.0, 0.2])
def test_structured_backend_equals_dense(embedding: str, label_noise: float) -> None:
    K = 24
    emb = A.make_embedding(embedding, K)
    spec = A.two_group(K, 0.7, 0.3, rounding="nearest")  # L = 7: a block straddles for coupled
    dense = DenseMemory(spec, emb, label_noise)
    fast = StructuredMemory(spec, emb, label_noise)
    gen = torch.Generator().manual_seed(3)
    W = fast.zeros()
    W = type(W)(
        torch.randn(W.A.shape, generator=gen, dtype=torch.float64)
        * (fast.layout.counts > 1)[:, None, None],
        torch.randn(W.B.shape, generator=gen, dtype=torch.float64),
        fast.layout,
    )
    a, b = fast.evaluate(W), dense.evaluate(W.dense())
    assert torch.allclose(a.loss, b.loss, atol=1e-12)
    assert torch.allclose(a.fact_loss, b.fact_loss, atol=1e-12)
    assert torch.allclose(a.correct_prob, b.correct_prob, atol=1e-12)
    assert torch.allclose(a.grad.dense(), b.grad, atol=1e-12)


def test_max_gap_and_probabilities() -> None:
    W, E, Et, _ = _problem(5)
    probs = A.correct_probabilities(W, E, Et)
    manual = torch.stack([torch.softmax(Et.T @ W @ E[:, k], 0)[k] for k in range(5)])
    assert torch.allclose(probs, manual, atol=1e-14)
    assert float(A.max_gap(probs)) == pytest.approx(float(manual.max() - manual.min()))

"""Shared objects (labels y = x mod M), low-rank polar, mini-batch sampling, fits."""

import math

import pytest
import torch

import tailmem.assoc as A
from tailmem.assoc.fits import exponential_rate, linear_fit, loglog_slope
from tailmem.assoc.memory import DenseMemory
from tailmem.errors import ConfigError
from tailmem.optim.orthogonalize import orthogonalize


def _labelled(K: int = 40, d: int = 12, M: int = 5, noise: float = 0.0) -> DenseMemory:
    emb = A.gaussian(K, d, seed=4, n_objects=M)
    return DenseMemory(A.zipf(K, 1.5), emb, noise, torch.arange(K) % M)


@pytest.mark.parametrize("noise", [0.0, 0.2])
def test_shared_objects_gradient_matches_autograd(noise: float) -> None:
    memory = _labelled(noise=noise)
    W = torch.randn(12, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    W.requires_grad_(True)
    ev = memory.evaluate(W)
    (auto,) = torch.autograd.grad(ev.loss, W)
    assert torch.allclose(memory.evaluate(W.detach()).grad, auto, atol=1e-12)
    Z = memory.Et.T @ W.detach() @ memory.E
    manual = -torch.log_softmax(Z, 0)[torch.arange(40) % 5, torch.arange(40)]
    if noise == 0.0:
        assert torch.allclose(ev.fact_loss.detach(), manual, atol=1e-12)
    wrong = Z.argmax(0) != torch.arange(40) % 5
    assert float(memory.errors(W.detach())) == pytest.approx(float(memory.p[wrong].sum()))


def test_low_rank_polar_equals_full_svd_polar() -> None:
    memory = _labelled()
    W = torch.randn(12, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    G = memory.evaluate(W).grad
    assert memory._obj_basis is not None and torch.linalg.matrix_rank(G) <= 5
    assert torch.allclose(memory.polar(G), orthogonalize(G, "svd"), atol=1e-10)


def test_minibatch_gradient_is_seeded_and_unbiased() -> None:
    memory = _labelled()
    lrs = A.lr_schedule("constant", 5, 40, lr=0.5)
    a = A.train(memory, "gd", lrs, batch_size=16, seed=3)
    b = A.train(memory, "gd", lrs, batch_size=16, seed=3)
    c = A.train(memory, "gd", lrs, batch_size=16, seed=4)
    assert torch.equal(a.final, b.final) and not torch.equal(a.final, c.final)
    full = A.train(memory, "gd", lrs).final
    big = A.train(memory, "gd", lrs, batch_size=200_000, seed=0).final
    assert float((big - full).norm()) < 0.02 * float(full.norm())
    structured = A.build_memory(A.uniform(6), A.decoupled(6), "gd")
    with pytest.raises(ConfigError, match="dense backend"):
        A.train(structured, "gd", lrs[:2], batch_size=4)


def test_fits() -> None:
    x = torch.tensor([1.0, 2.0, 4.0, 8.0], dtype=torch.float64)
    assert loglog_slope(x, 3 * x.pow(-1.5)) == pytest.approx(-1.5)
    assert linear_fit([0, 1, 2], [1, 3, 5]) == pytest.approx((2.0, 1.0))
    rate, pref = exponential_rate(x, 7 * torch.exp(-0.3 * x))
    assert rate == pytest.approx(0.3) and pref == pytest.approx(7.0)
    with pytest.raises(ValueError):
        loglog_slope([1.0, 2.0], [1.0, -1.0])
    assert math.isfinite(loglog_slope([1, 10], [5, 5]))

"""First update directions at W₀ = 0: Muon, SignGD, TRA-SignGD against dense references."""

import pytest
import torch

import tailmem.assoc as A
from tailmem.assoc.memory import DenseMemory, StructuredMemory
from tailmem.assoc.optimizers import OptimizerSpec
from tailmem.errors import ConfigError
from tailmem.optim.orthogonalize import orthogonalize


def _svd_polar(G: torch.Tensor) -> torch.Tensor:
    """Reference U_r V_rᵀ over singular values above 1e-10 σ_max."""
    U, s, Vh = torch.linalg.svd(G)
    r = int((s > 1e-10 * s[0]).sum())
    return U[:, :r] @ Vh[:r]


@pytest.mark.parametrize("embedding", ["decoupled", "coupled", "orthonormal"])
def test_muon_first_direction_is_the_exact_polar_factor(embedding: str) -> None:
    K = 30
    emb = A.make_embedding(embedding, K, seed=2)
    spec = A.two_group(K, 0.8, 0.2)
    fast = A.build_memory(spec, emb, "muon")
    assert isinstance(fast, StructuredMemory)
    U = fast.dense(A.first_direction(fast, "muon"))
    E, Et = emb.dense()
    grad = A.population_grad(torch.zeros(K, K, dtype=torch.float64), E, Et, spec.p)
    expected = _svd_polar(grad)
    if fast.basis.startswith("task"):
        expected = Et.T @ expected @ E  # the structured backend runs in the task basis
    assert torch.allclose(U, expected, atol=1e-10)
    assert torch.linalg.matrix_rank(grad) == K - 1  # rows of softmax gradients sum to zero


@pytest.mark.parametrize("K", [30, 99, 300, 999])
def test_muon_first_update_is_minus_identity_plus_order_one_over_k(K: int) -> None:
    """Theorem 5.3: the Muon update is −ẼEᵀ + O(1/K)·ẼJEᵀ, i.e. −I + O(1/K) in the task basis."""
    memory = A.build_memory(A.two_group(K, 0.8, 0.2), A.decoupled(K), "muon")
    U = memory.dense(A.first_direction(memory, "muon"))
    eye = torch.eye(K, dtype=torch.float64)
    assert K * float((U + eye).abs().max()) < 1.5
    off = (U + eye)[~eye.bool()]
    assert float(off.abs().max()) * K < 1.5
    s = memory.singular_values(A.first_direction(memory, "muon"))
    assert torch.allclose(s[:-1], torch.ones(K - 1, dtype=torch.float64), atol=1e-12)
    assert float(s[-1]) < 1e-12


def test_muon_first_update_dense_orthonormal_embedding() -> None:
    K = 60
    emb = A.orthonormal(K, seed=5)
    memory = DenseMemory(A.two_group(K, 0.8, 0.2), emb)
    U = A.first_direction(memory, "muon")
    E, Et = emb.dense()
    task = Et.T @ U @ E
    assert K * float((task + torch.eye(K, dtype=torch.float64)).abs().max()) < 1.5


@pytest.mark.parametrize("K", [5, 50, 300])
def test_signgd_decoupled_first_update(K: int) -> None:
    """sign(∇L(W₀)) = J − 2I = −(2I − J) for the decoupled embedding."""
    memory = A.build_memory(A.two_group(K, 0.8, 0.2), A.decoupled(K), "signgd")
    U = memory.dense(A.first_direction(memory, "signgd"))
    J = torch.ones(K, K, dtype=torch.float64)
    assert torch.equal(U, -(2 * torch.eye(K, dtype=torch.float64) - J))


def test_signgd_coupled_differs_from_task_basis_sign() -> None:
    K = 30
    emb = A.coupled(K)
    spec = A.two_group(K, 0.8, 0.2)
    sign = A.build_memory(spec, emb, "signgd")
    tra = A.build_memory(spec, emb, "tra_signgd")
    E, Et = emb.dense()
    grad = A.population_grad(torch.zeros(K, K, dtype=torch.float64), E, Et, spec.p)
    assert torch.equal(sign.dense(A.first_direction(sign, "signgd")), torch.sign(grad))
    expected_tra = Et @ torch.sign(Et.T @ grad @ E) @ E.T
    assert torch.allclose(tra.dense(A.first_direction(tra, "tra_signgd")), expected_tra, atol=1e-12)


def test_muon_ns5_matches_dense_newton_schulz() -> None:
    K = 24
    spec = A.two_group(K, 0.8, 0.2)
    fast = A.build_memory(spec, A.coupled(K), "muon_ns5")
    U = fast.dense(A.first_direction(fast, "muon_ns5"))
    dense = DenseMemory(spec, A.coupled(K))
    G = dense.evaluate(dense.zeros()).grad
    expected = orthogonalize(G, "ns5")
    assert torch.allclose(U, expected, atol=1e-10)
    s = torch.linalg.svdvals(U)[:-1]
    assert float(s.min()) > 0.6 and float(s.max()) < 1.25  # NS5 is only roughly orthogonal


def test_adam_first_step_is_almost_sign() -> None:
    K = 12
    memory = A.build_memory(A.two_group(K, 0.8, 0.2), A.decoupled(K), "adam")
    U = memory.dense(A.first_direction(memory, OptimizerSpec("adam", adam_eps=1e-12)))
    J = torch.ones(K, K, dtype=torch.float64)
    assert torch.allclose(U, J - 2 * torch.eye(K, dtype=torch.float64), atol=1e-6)


def test_unknown_optimizer() -> None:
    with pytest.raises(ConfigError, match="unknown optimizer 'lion'"):
        OptimizerSpec("lion")

"""Multi-step dynamics: structured backend = dense backend, basis invariance, schedules."""

import math

import pytest
import torch

import tailmem.assoc as A
from tailmem.assoc.memory import DenseMemory
from tailmem.assoc.optimizers import OptimizerSpec
from tailmem.errors import ConfigError

SPECS = [
    OptimizerSpec("gd"),
    OptimizerSpec("gd", momentum=0.9),
    OptimizerSpec("signgd"),
    OptimizerSpec("muon"),
    OptimizerSpec("muon", momentum=0.95),
    OptimizerSpec("muon_ns5"),
    OptimizerSpec("tra_signgd"),
    OptimizerSpec("adam", beta1=0.9, beta2=0.95),
]
LRS = {"gd": 20.0, "signgd": 0.05, "muon": 0.3, "muon_ns5": 0.3, "tra_signgd": 0.1, "adam": 0.05}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.name}-m{s.momentum}")
@pytest.mark.parametrize("embedding", ["decoupled", "coupled"])
def test_structured_trajectory_equals_dense(spec: OptimizerSpec, embedding: str) -> None:
    K = 18
    spectrum = A.two_group(K, 0.75, 0.3, rounding="nearest")
    emb = A.make_embedding(embedding, K)
    lrs = A.lr_schedule("constant", 6, K, lr=LRS[spec.name])
    fast = A.train(A.build_memory(spectrum, emb, spec, label_noise=0.1), spec, lrs)
    slow = A.train(DenseMemory(spectrum, emb, 0.1), spec, lrs)
    assert torch.allclose(fast.loss, slow.loss, atol=1e-10)
    assert torch.allclose(fast.gap, slow.gap, atol=1e-10)
    assert torch.allclose(fast.group_loss, slow.group_loss, atol=1e-10)
    assert fast.loss[-1] < fast.loss[0]


@pytest.mark.parametrize("name", ["gd", "muon", "tra_signgd"])
def test_basis_invariant_optimisers_ignore_the_orthonormal_basis(name: str) -> None:
    K = 15
    spectrum = A.hierarchical(groups=3, group_size=5, spectrum_exponent=2.0)
    lrs = A.lr_schedule("constant", 5, K, lr=LRS[name])
    fast = A.train(A.build_memory(spectrum, A.orthonormal(K, seed=3), name), name, lrs)
    slow = A.train(DenseMemory(spectrum, A.orthonormal(K, seed=3)), name, lrs)
    assert A.build_memory(spectrum, A.orthonormal(K), name).basis.startswith("task")
    assert torch.allclose(fast.loss, slow.loss, atol=1e-10)
    assert torch.allclose(fast.group_prob, slow.group_prob, atol=1e-10)


def test_signgd_is_not_basis_invariant() -> None:
    K = 15
    spectrum = A.hierarchical(groups=3, group_size=5, spectrum_exponent=2.0)
    lrs = A.lr_schedule("constant", 5, K, lr=0.05)
    memory = A.build_memory(spectrum, A.orthonormal(K, seed=3), "signgd")
    assert isinstance(memory, DenseMemory)
    rotated = A.train(memory, "signgd", lrs).loss
    plain = A.train(A.build_memory(spectrum, A.decoupled(K), "signgd"), "signgd", lrs).loss
    assert (rotated - plain).abs().max() > 1e-3


def test_batched_step_sizes_equal_separate_runs() -> None:
    K = 30
    memory = A.build_memory(A.two_group(K, 0.8, 0.2), A.coupled(K), "signgd")
    lrs = torch.tensor([[0.01, 0.05, 0.2]], dtype=torch.float64).expand(8, 3)
    batched = A.train(memory, "signgd", lrs, record=[0, 4, 8])
    assert batched.steps == [0, 4, 8] and batched.gap.shape == (3, 3)
    for i in range(3):
        single = A.train(memory, "signgd", lrs[:, i], record=[0, 4, 8])
        assert torch.allclose(batched.loss[:, i], single.loss, atol=1e-13)
        assert torch.allclose(batched.gap[:, i], single.gap, atol=1e-13)


def test_dense_batched_step_sizes() -> None:
    K = 10
    memory = A.build_memory(A.zipf(K, 1.0), A.gaussian(K, 6, seed=1), "adam")
    lrs = torch.tensor([[0.01, 0.1]], dtype=torch.float64).expand(4, 2)
    batched = A.train(memory, "adam", lrs)
    single = A.train(memory, "adam", lrs[:, 1])
    assert torch.allclose(batched.loss[:, 1], single.loss, atol=1e-13)


def test_muon_stays_balanced_at_every_step() -> None:
    """Theorem 5.4: along a multi-step Muon run the gap stays O(ε log K / K) with ε = 1 − max f."""
    K = 999
    memory = A.build_memory(A.two_group(K, 0.8, 0.2), A.decoupled(K), "muon")
    traj = A.train(memory, "muon", A.lr_schedule("constant", 60, K, lr=0.2))
    eps = 1 - traj.max_prob
    assert float(traj.max_prob[-1]) > 0.99
    assert bool((traj.gap <= eps * 2 * math.log(K) / K).all())


def test_schedules() -> None:
    lrs = A.lr_schedule("log_k_over_t", 50, 1000, c=2.0)
    assert lrs.shape == (50,) and float(lrs[0]) == pytest.approx(2 * math.log(1000) / 50)
    assert A.lr_schedule("constant", 3, 10, lr=0.5).tolist() == [0.5, 0.5, 0.5]
    with pytest.raises(ConfigError, match="unknown schedule"):
        A.lr_schedule("cosine", 3, 10, lr=0.5)
    with pytest.raises(ConfigError, match="label_noise"):
        A.build_memory(A.uniform(4), A.decoupled(4), "gd", label_noise=1.0)

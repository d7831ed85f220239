"""A registry optimiser on the associative memory (``OptimizerSpec(setting=...)``): stepped at
learning rate 1 from a zeroed copy of ``W``, its displacement is the direction, so the lab's own
maps are special cases — registry SGD is the lab's GD (with and without heavy-ball momentum),
registry SignGD the lab's sign map, registry Muon without momentum the lab's Newton–Schulz map —
over whole trajectories, not only the first step."""

from __future__ import annotations

import pytest
import torch

import tailmem.assoc as A
from tailmem.assoc.optimizers import OptimizerSpec
from tailmem.errors import ConfigError
from tailmem.optim.registry import REGISTRY, MuonHParams, SGDHParams, SignGDHParams

K = 12
STEPS = 8


@pytest.fixture(scope="module")
def memory():
    """A dense memory (Gaussian embedding: no structure to exploit) on a Zipf spectrum."""
    embedding = A.make_embedding("gaussian", K, d=8, seed=1)
    return A.build_memory(A.zipf(K, 1.0), embedding, "gd", backend="dense")


def registry(kind: str, hparams=None) -> OptimizerSpec:
    return OptimizerSpec(kind, setting=REGISTRY[kind].setting(hparams=hparams))


@pytest.mark.parametrize(
    ("lab", "ours"),
    [
        (OptimizerSpec("gd"), registry("sgd", SGDHParams(momentum=0.0))),
        (OptimizerSpec("gd", momentum=0.9), registry("sgd")),  # the registry's momentum 0.9
        (OptimizerSpec("signgd"), registry("signgd")),
        # SignGD's buffer is an average, (1 − μ) times the heavy-ball sum: the same signs.
        (OptimizerSpec("signgd", momentum=0.5), registry("signgd", SignGDHParams(momentum=0.5))),
        (OptimizerSpec("muon_ns5"), registry("muon", MuonHParams(momentum=0.0))),
    ],
    ids=["gd", "gd-momentum", "signgd", "signum", "muon-ns5"],
)
def test_a_registry_optimiser_follows_the_labs_own_map(memory, lab, ours):
    lrs = A.lr_schedule("constant", STEPS, K, lr=0.5)
    expected, found = A.train(memory, lab, lrs), A.train(memory, ours, lrs)
    assert found.loss[-1] < found.loss[0] - 0.3  # it learns: the comparison is not vacuous
    torch.testing.assert_close(found.loss, expected.loss, rtol=0, atol=1e-12)
    torch.testing.assert_close(found.final, expected.final, rtol=0, atol=1e-12)
    assert not ours.basis_invariant  # never sent to the task-basis backend


def test_the_first_direction_is_the_gradient_for_sgd_and_its_sign_for_signgd(memory):
    grad = memory.evaluate(memory.zeros()).grad
    sgd = A.first_direction(memory, registry("sgd", SGDHParams(momentum=0.0)))
    torch.testing.assert_close(sgd, grad, rtol=0, atol=0)
    torch.testing.assert_close(A.first_direction(memory, registry("signgd")), grad.sign())


def test_weight_decay_a_structured_memory_and_a_batch_of_step_sizes_are_refused(memory):
    with pytest.raises(ConfigError, match=r"adamw: weight_decay 0\.1; expected 0"):
        registry("adamw")  # AdamW's default decay would not scale with the schedule
    structured = A.build_memory(A.two_group(K, 0.8, 0.2), A.decoupled(K), registry("sgd"))
    assert isinstance(structured, A.StructuredMemory)
    with pytest.raises(ConfigError, match="sgd needs the dense backend with one W"):
        A.first_direction(structured, registry("sgd"))
    batch = torch.full((STEPS, 2), 0.5, dtype=torch.float64)  # two step sizes at once
    with pytest.raises(ConfigError, match="dense backend with one W"):
        A.train(memory, registry("sgd"), batch)

"""Muon's ``batch_dims``: a stacked ``(E, ...)`` parameter steps as E separate parameters.

The reference is the same Muon on E separate parameters (what E single models hold), so every
layout option is compared against a path that ignores batching altogether.
"""

import pytest
import torch

from tailmem.optim import Muon

E = 3


def _separate_and_stacked(shape, steps=4, **options):
    """Train E separate parameters and their stack with the same gradients; return both."""
    torch.manual_seed(0)
    singles = [torch.nn.Parameter(torch.randn(shape)) for _ in range(E)]
    stacked = torch.nn.Parameter(torch.stack([p.detach().clone() for p in singles]))
    opt_single = Muon(singles, lr=0.05, momentum=0.9, dtype=None, **options)
    opt_stacked = Muon([stacked], lr=0.05, momentum=0.9, dtype=None, batch_dims=1, **options)
    for _ in range(steps):
        grads = [torch.randn(shape) for _ in range(E)]
        for p, g in zip(singles, grads, strict=True):
            p.grad = g.clone()
        stacked.grad = torch.stack(grads)
        opt_single.step()
        opt_stacked.step()
    return torch.stack([p.detach() for p in singles]), stacked.detach()


@pytest.mark.parametrize(
    ("shape", "options"),
    [
        ((16, 8), {}),
        ((8, 16), {}),
        ((12, 8), {"num_heads": 3}),
        ((12, 8), {"row_splits": (4, 8)}),
        ((8, 12), {"fan_out_dim": 1}),
        ((12, 8), {"normuon": True}),
        ((12, 8), {"row_splits": (4, 8), "normuon": True}),
        ((6, 4, 2), {}),
    ],
)
def test_a_stacked_parameter_steps_as_its_members_would_alone(shape, options):
    separate, stacked = _separate_and_stacked(shape, **options)
    torch.testing.assert_close(stacked, separate, rtol=1e-5, atol=1e-6)


def test_without_batch_dims_the_stack_is_one_matrix_and_differs():
    """The test above can fail: the same stack stepped as one (E·out, in) matrix moves each
    member differently (its singular directions mix members)."""
    separate, _ = _separate_and_stacked((16, 8))
    torch.manual_seed(0)
    stacked = torch.nn.Parameter(torch.randn(E, 16, 8))
    opt = Muon([stacked], lr=0.05, momentum=0.9, dtype=None)
    stacked.grad = torch.randn(E, 16, 8)
    opt.step()
    assert not torch.allclose(stacked.detach(), separate, atol=1e-3)


def test_batch_dims_are_checked_like_the_other_layout_options():
    with pytest.raises(ValueError, match="batch_dims must be an integer >= 0"):
        Muon([torch.nn.Parameter(torch.zeros(2, 4, 4))], batch_dims=-1)
    with pytest.raises(ValueError, match="after its 1 batch dimension"):
        Muon([torch.nn.Parameter(torch.zeros(3, 4))], batch_dims=1)
    with pytest.raises(ValueError, match="num_heads=3 does not divide the output size 4"):
        Muon([torch.nn.Parameter(torch.zeros(3, 4, 6))], batch_dims=1, num_heads=3)

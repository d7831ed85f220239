"""SignGD: the β1 = β2 = 0, eps -> 0 limit of Adam, momentum, weight decay, state, errors."""

import io

import pytest
import torch

from tailmem.optim import SignGD


def nonzero_grads(shape, steps, seed):
    gen = torch.Generator().manual_seed(seed)
    grads = []
    for _ in range(steps):
        g = torch.randn(*shape, generator=gen, dtype=torch.float64)
        grads.append(g + torch.sign(g) * 1e-3)  # keep every entry away from 0
    return grads


def test_equals_adam_with_zero_betas_and_tiny_eps():
    start = torch.randn(7, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    a = torch.nn.Parameter(start.clone())
    b = torch.nn.Parameter(start.clone())
    sign = SignGD([a], lr=0.01)
    adam = torch.optim.Adam([b], lr=0.01, betas=(0.0, 0.0), eps=1e-30)
    for g in nonzero_grads((7, 5), steps=6, seed=1):
        a.grad, b.grad = g.clone(), g.clone()
        sign.step()
        adam.step()
        torch.testing.assert_close(a.detach(), b.detach(), rtol=0, atol=1e-14)
    assert (a.detach() - start).abs().max() > 0.01


def test_momentum_and_decoupled_weight_decay_follow_the_formula():
    start = torch.randn(4, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    p = torch.nn.Parameter(start.clone())
    lr, mu, wd = 0.1, 0.8, 0.5
    opt = SignGD([p], lr=lr, momentum=mu, weight_decay=wd)
    expected, buf = start.clone(), torch.zeros_like(start)
    for g in nonzero_grads((4, 3), steps=5, seed=3):
        p.grad = g.clone()
        opt.step()
        buf = mu * buf + (1 - mu) * g
        expected = expected * (1 - lr * wd) - lr * torch.sign(buf)
        torch.testing.assert_close(p.detach(), expected, rtol=0, atol=1e-14)
    torch.testing.assert_close(opt.state[p]["momentum_buffer"], buf)


def test_zero_gradient_entries_do_not_move_and_grad_is_untouched():
    p = torch.nn.Parameter(torch.ones(2, 3))
    q = torch.nn.Parameter(torch.ones(3))
    grad = torch.tensor([[0.0, -2.0, 3.0], [0.0, 0.5, -0.1]])
    p.grad = grad.clone()
    SignGD([p, q], lr=0.5).step()
    assert torch.equal(p.detach(), torch.tensor([[1.0, 1.5, 0.5], [1.0, 0.5, 1.5]]))
    assert torch.equal(p.grad, grad)
    assert torch.equal(q.detach(), torch.ones(3))  # no grad: skipped


def test_state_dict_round_trip_continues_bitwise():
    grads = nonzero_grads((5, 4), steps=6, seed=4)
    reference = torch.nn.Parameter(torch.zeros(5, 4, dtype=torch.float64))
    ref_opt = SignGD([reference], lr=0.1, momentum=0.9)
    for g in grads:
        reference.grad = g.clone()
        ref_opt.step()
    p = torch.nn.Parameter(torch.zeros(5, 4, dtype=torch.float64))
    opt = SignGD([p], lr=0.1, momentum=0.9)
    for g in grads[:3]:
        p.grad = g.clone()
        opt.step()
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    buffer.seek(0)
    resumed = SignGD([p], lr=1.0)
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    for g in grads[3:]:
        p.grad = g.clone()
        resumed.step()
    assert torch.equal(p, reference)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": -1.0}, "SignGD lr must be a number finite and >= 0.0"),
        ({"lr": float("inf")}, "SignGD lr must be a number finite and >= 0.0"),
        ({"lr": float("nan")}, "SignGD lr must be a number finite and >= 0.0"),
        (
            {"lr": 0.1, "momentum": float("nan")},
            r"SignGD momentum must be a number in \[0.0, 1.0\)",
        ),
        ({"lr": 0.1, "momentum": 1.0}, r"SignGD momentum must be a number in \[0.0, 1.0\)"),
        (
            {"lr": 0.1, "weight_decay": -0.1},
            "SignGD weight_decay must be a number finite and >= 0.0",
        ),
        (
            {"lr": 0.1, "weight_decay": float("inf")},
            "weight_decay must be a number finite and >= 0.0",
        ),
    ],
)
def test_bad_hyperparameters_raise_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SignGD([torch.nn.Parameter(torch.zeros(2))], **kwargs)

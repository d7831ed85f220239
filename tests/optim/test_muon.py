"""Muon: the update formula, torch.optim.Muon parity, blocks and layouts, state, errors."""

import io
import math

import pytest
import torch

import tailmem.optim.muon_batch as muon_batch
from tailmem.optim import Muon
from tailmem.optim.muon_batch import update_scale


def polar(M: torch.Tensor) -> torch.Tensor:
    """Independent float64 reference: U Vᵀ of a full-rank matrix."""
    U, _, Vh = torch.linalg.svd(M.double(), full_matrices=False)
    return (U @ Vh).to(M.dtype)


def make_params(shapes, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*s, generator=gen, dtype=dtype)) for s in shapes]


def set_grads(params, gen):
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen, dtype=p.dtype)


@pytest.mark.parametrize("nesterov", [False, True])
def test_steps_follow_the_hand_written_formula(nesterov):
    shapes = [(6, 4), (4, 6), (5, 5), (6, 4)]
    params = make_params(shapes)
    lr, mu, wd = 0.05, 0.9, 0.1
    opt = Muon(
        params, lr=lr, momentum=mu, nesterov=nesterov, weight_decay=wd, method="svd", dtype=None
    )
    gen = torch.Generator().manual_seed(1)
    expected = [p.detach().clone() for p in params]
    bufs = [torch.zeros_like(p) for p in params]
    for _ in range(3):
        set_grads(params, gen)
        opt.step()
        for i, p in enumerate(params):
            g = p.grad
            bufs[i] = mu * bufs[i] + (1 - mu) * g
            direction = (1 - mu) * g + mu * bufs[i] if nesterov else bufs[i]
            rows, cols = p.shape
            scale = math.sqrt(max(1.0, rows / cols))
            expected[i] = expected[i] * (1 - lr * wd) - lr * scale * polar(direction)
    for p, e, buf in zip(params, expected, bufs, strict=True):
        torch.testing.assert_close(p.detach(), e, rtol=0, atol=1e-12)
        torch.testing.assert_close(opt.state[p]["momentum_buffer"], buf)


def test_zero_momentum_is_pure_spectral_descent_without_state():
    (p,) = make_params([(7, 3)])
    start = p.detach().clone()
    p.grad = torch.randn(7, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    opt = Muon(
        [p],
        lr=0.1,
        momentum=0.0,
        weight_decay=0.0,
        method="svd",
        scale="match_rms_adamw",
        dtype=None,
    )
    opt.step()
    expected = start - 0.1 * 0.2 * math.sqrt(7) * polar(p.grad)
    torch.testing.assert_close(p.detach(), expected, rtol=0, atol=1e-12)
    assert len(opt.state) == 0


def test_scales():
    assert update_scale(3072, 768, "original") == 2.0
    assert update_scale(768, 3072, "original") == 1.0
    assert update_scale(768, 3072, "match_rms_adamw") == pytest.approx(0.2 * math.sqrt(3072))
    assert update_scale(10, 2, "none") == 1.0
    with pytest.raises(ValueError, match="unknown Muon scale 'rms'"):
        update_scale(2, 2, "rms")


def _run_pair(ours, theirs, params_a, params_b, steps):
    gen = torch.Generator().manual_seed(3)
    worst = 0.0
    for _ in range(steps):
        before = [p.detach().clone() for p in params_a]
        for a, b in zip(params_a, params_b, strict=True):
            a.grad = torch.randn(a.shape, generator=gen)
            b.grad = a.grad.clone()
        ours.step()
        theirs.step()
        for a, b, w in zip(params_a, params_b, before, strict=True):
            worst = max(worst, ((a - b).norm() / (a - w).norm()).item())
            b.data.copy_(a.data)  # compare single steps, not accumulated drift
    return worst


SHAPES_2D = [(48, 24), (24, 48), (32, 32), (48, 24)]


def test_conventions_match_torch_optim_muon_exactly_with_float32_newton_schulz(
    float32_torch_muon,
):
    for nesterov, adjust, scale in [(True, None, "original"), (False, "match_rms_adamw", None)]:
        a, b = (
            make_params(SHAPES_2D, dtype=torch.float32),
            make_params(SHAPES_2D, dtype=torch.float32),
        )
        kwargs = {"lr": 0.02, "momentum": 0.9, "nesterov": nesterov, "weight_decay": 0.1}
        ours = Muon(a, scale=scale or "match_rms_adamw", dtype=torch.float32, **kwargs)
        theirs = torch.optim.Muon(b, adjust_lr_fn=adjust, **kwargs)
        # same float32 arithmetic up to operation order (batched baddbmm vs 2-D matmuls)
        assert _run_pair(ours, theirs, a, b, steps=4) < 1e-5


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_parity_with_torch_optim_muon(dtype):
    a, b = make_params(SHAPES_2D, dtype=torch.float32), make_params(SHAPES_2D, dtype=torch.float32)
    kwargs = {"lr": 0.02, "momentum": 0.95, "nesterov": True, "weight_decay": 0.1}
    ours = Muon(a, method="ns5", scale="original", dtype=dtype, **kwargs)
    theirs = torch.optim.Muon(b, **kwargs)
    # torch.optim.Muon always runs Newton–Schulz in bfloat16 (unit roundoff 2^-8 ≈ 4e-3); 15
    # bfloat16 matmuls leave ≈1.5–2.5% relative error in each step's update (measured), so
    # per-step updates agree to 4% in Frobenius norm, not bitwise; a wrong scale, momentum or
    # weight-decay convention would differ by far more (see the float32 test above for 1e-5).
    assert _run_pair(ours, theirs, a, b, steps=5) < 4e-2


@pytest.mark.parametrize(("momentum", "nesterov"), [(0.0, False), (0.9, False), (0.9, True)])
def test_grad_is_never_modified(momentum, nesterov):
    params = make_params([(8, 5), (8, 5), (3, 9)])
    set_grads(params, torch.Generator().manual_seed(4))
    grads = [p.grad.clone() for p in params]
    opt = Muon(params, momentum=momentum, nesterov=nesterov, weight_decay=0.1)
    opt.step()
    opt.step()
    for p, g in zip(params, grads, strict=True):
        assert torch.equal(p.grad, g)


def test_params_without_grad_are_skipped():
    a, b = make_params([(5, 4), (5, 4)])
    b_before = b.detach().clone()
    a.grad = torch.ones(5, 4, dtype=torch.float64)
    opt = Muon([a, b], weight_decay=0.5)
    opt.step()
    assert torch.equal(b.detach(), b_before)
    assert b not in opt.state and a in opt.state


def test_same_shaped_blocks_are_batched_into_one_call(monkeypatch):
    calls = []
    original = muon_batch.orthogonalize_wide

    def counting(X, *args, **kwargs):
        calls.append(tuple(X.shape))
        return original(X, *args, **kwargs)

    monkeypatch.setattr(muon_batch, "orthogonalize_wide", counting)
    params = make_params([(6, 4), (4, 6), (6, 4), (6, 4), (12, 4)])
    groups = [
        {"params": params[:2], "lr": 0.1},
        {"params": params[2:4], "lr": 0.2},
        {"params": params[4:], "num_heads": 2},
    ]
    opt = Muon(groups)
    set_grads(params, torch.Generator().manual_seed(5))
    opt.step()
    # one call per shape: the (4, 6) param; 3 params + 2 heads of (6, 4), seen wide as (4, 6)
    assert sorted(calls) == [(1, 4, 6), (5, 4, 6)]


def test_conv_weight_is_flattened_and_scaled_on_the_flattened_shape():
    (p,) = make_params([(32, 2, 3, 3)])
    start = p.detach().clone()
    p.grad = torch.randn(
        32, 2, 3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(6)
    )
    Muon([p], lr=0.1, momentum=0.0, weight_decay=0.0, method="svd", dtype=None).step()
    scale = math.sqrt(32 / 18)  # (out, in·kh·kw) = (32, 18); the first two dims would give 4.0
    expected = start - 0.1 * scale * polar(p.grad.reshape(32, 18)).reshape(32, 2, 3, 3)
    torch.testing.assert_close(p.detach(), expected, rtol=0, atol=1e-12)
    update = (start - p.detach()).reshape(32, 18)
    torch.testing.assert_close(
        update.T @ update, (0.1 * scale) ** 2 * torch.eye(18, dtype=torch.float64)
    )


def test_num_heads_orthogonalises_and_scales_each_block():
    (p,) = make_params([(12, 2)])
    start = p.detach().clone()
    p.grad = torch.randn(12, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    Muon([p], lr=0.1, momentum=0.0, weight_decay=0.0, method="svd", num_heads=3, dtype=None).step()
    update = start - p.detach()
    for head in range(3):
        rows = slice(4 * head, 4 * head + 4)
        expected = 0.1 * math.sqrt(4 / 2) * polar(p.grad[rows])
        torch.testing.assert_close(update[rows], expected, rtol=0, atol=1e-12)
    whole = 0.1 * math.sqrt(12 / 2) * polar(p.grad)
    assert (update - whole).abs().max() > 0.01


def test_row_splits_handle_unequal_blocks_like_fused_qkv():
    (p,) = make_params([(16, 6)])
    start = p.detach().clone()
    p.grad = torch.randn(16, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    Muon(
        [p], lr=0.1, momentum=0.0, weight_decay=0.0, method="svd", row_splits=(4, 4, 8), dtype=None
    ).step()
    update = start - p.detach()
    for rows, scale in [(slice(0, 4), 1.0), (slice(4, 8), 1.0), (slice(8, 16), math.sqrt(8 / 6))]:
        torch.testing.assert_close(
            update[rows], 0.1 * scale * polar(p.grad[rows]), rtol=0, atol=1e-12
        )


@pytest.mark.parametrize("heads", [None, 2])
def test_fan_out_dim_1_matches_the_transposed_linear_layout(heads):
    conv1d, linear = make_params([(6, 10), (10, 6)])
    linear.data.copy_(conv1d.data.T)
    gen = torch.Generator().manual_seed(9)
    common = {"lr": 0.1, "num_heads": heads, "scale": "original"}
    a = Muon([conv1d], fan_out_dim=1, **common)
    b = Muon([linear], **common)
    for _ in range(3):
        conv1d.grad = torch.randn(6, 10, generator=gen, dtype=torch.float64)
        linear.grad = conv1d.grad.T.clone()
        a.step()
        b.step()
    torch.testing.assert_close(conv1d.detach(), linear.detach().T, rtol=0, atol=1e-12)


def test_state_dict_round_trip_continues_bitwise():
    shapes = [(12, 8), (8, 12), (12, 8), (4, 2, 3)]
    gen = torch.Generator().manual_seed(10)
    grads = [[torch.randn(*s, generator=gen) for s in shapes] for _ in range(6)]

    def run(params, opt, steps):
        for g in steps:
            for p, grad in zip(params, g, strict=True):
                p.grad = grad.clone()
            opt.step()

    hyper = {"lr": 0.05, "nesterov": True, "weight_decay": 0.01, "method": "polar_express"}
    reference = make_params(shapes, dtype=torch.float32)
    ref_opt = Muon(reference, **hyper)
    run(reference, ref_opt, grads)

    params = make_params(shapes, dtype=torch.float32)
    opt = Muon(params, **hyper)
    run(params, opt, grads[:3])
    buffer = io.BytesIO()
    torch.save({"params": [p.detach() for p in params], "optim": opt.state_dict()}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)
    resumed = make_params(shapes, seed=99, dtype=torch.float32)
    for p, value in zip(resumed, saved["params"], strict=True):
        p.data.copy_(value)
    resumed_opt = Muon(resumed, lr=1.0, method="ns5")  # hyperparameters come from the state dict
    resumed_opt.load_state_dict(saved["optim"])
    assert resumed_opt.param_groups[0]["method"] == "polar_express"
    run(resumed, resumed_opt, grads[3:])
    for a, b in zip(resumed, reference, strict=True):
        assert torch.equal(a, b)


def test_closure_loss_is_returned():
    (p,) = make_params([(3, 3)])

    def closure():
        loss = (p**2).sum()
        p.grad = None
        loss.backward()
        return loss

    opt = Muon([p], lr=0.01)
    before = closure().item()
    assert opt.step(closure).item() == pytest.approx(before)
    assert closure().item() < before


def test_trains_a_least_squares_matrix():
    gen = torch.Generator().manual_seed(11)
    target = torch.randn(16, 8, generator=gen)
    inputs = torch.randn(8, 64, generator=gen)
    W = torch.nn.Parameter(torch.zeros(16, 8))
    opt = Muon([W], lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.0)
    for _ in range(150):
        loss = ((W @ inputs - target @ inputs) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert (W - target).abs().max() < 0.1


@pytest.mark.parametrize(
    ("kwargs", "params_shape", "message"),
    [
        ({}, (5,), "Muon only handles matrices; route 1-D params like norms/biases to Adam"),
        ({"method": "newton"}, (3, 3), "unknown Muon method 'newton'"),
        ({"scale": "rms"}, (3, 3), "unknown Muon adjust_lr_fn/scale 'rms'"),
        ({"lr": -0.1}, (3, 3), r"lr must be a finite number in \[0.0, inf\)"),
        ({"momentum": 1.0}, (3, 3), r"momentum must be a finite number in \[0.0, 1.0\)"),
        ({"weight_decay": -1.0}, (3, 3), r"weight_decay must be a finite number in \[0.0, inf\)"),
        ({"eps": 0.0}, (3, 3), r"eps must be a finite number in \(0.0, inf\)"),
        ({"steps": 0}, (3, 3), "ns_steps must be a positive integer"),
        ({"num_heads": 4}, (6, 3), "num_heads=4 does not divide the output size 6"),
        (
            {"row_splits": (2, 2)},
            (6, 3),
            r"row_splits \(2, 2\) sum to 4, expected the output size 6",
        ),
        ({"num_heads": 2, "row_splits": (3, 3)}, (6, 3), "num_heads or row_splits, not both"),
        ({"fan_out_dim": 2}, (6, 3), "fan_out_dim=2 is out of range"),
    ],
)
def test_bad_hyperparameters_raise_clear_errors(kwargs, params_shape, message):
    with pytest.raises(ValueError, match=message):
        Muon([torch.nn.Parameter(torch.zeros(params_shape))], **kwargs)


def test_bad_dtype_and_rejected_group_leaves_the_optimiser_unchanged():
    with pytest.raises(TypeError, match=r"dtype must be a floating torch\.dtype"):
        Muon([torch.nn.Parameter(torch.zeros(3, 3))], dtype=torch.int32)
    opt = Muon([torch.nn.Parameter(torch.zeros(3, 3))])
    with pytest.raises(ValueError, match="route 1-D params"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(3))]})
    assert len(opt.param_groups) == 1

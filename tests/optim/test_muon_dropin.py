"""tailmem.optim.Muon as a drop-in for torch.optim.Muon: defaults, parity, state_dict exchange,
the functional core, NorMuon, errors as ValueError, non-finite input, and a lean import."""

import copy
import math
import subprocess
import sys

import pytest
import torch

from tailmem.errors import ConfigError
from tailmem.optim import Muon, SignGD, build_optimizer, muon_update, orthogonalize
from tailmem.optim.orthogonalize import NonFiniteInputError

SHAPES = [(48, 24), (24, 48), (32, 32), (48, 24)]
TORCH_KEYS = (
    "lr",
    "weight_decay",
    "momentum",
    "nesterov",
    "ns_coefficients",
    "eps",
    "ns_steps",
    "adjust_lr_fn",
)


def params(seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*s, generator=gen)) for s in SHAPES]


def step_both(pairs, steps, seed=3):
    """Same random grads to every (params, optimiser) pair, ``steps`` times."""
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        grads = [torch.randn(s, generator=gen) for s in SHAPES]
        for ps, opt in pairs:
            for p, g in zip(ps, grads, strict=True):
                p.grad = g.clone()
            opt.step()


def assert_trajectories_close(a, b, rtol):
    for x, y in zip(a, b, strict=True):
        assert ((x - y).norm() / y.norm()).item() < rtol


def test_defaults_are_torch_optim_muons():
    ours, theirs = Muon(params()), torch.optim.Muon(params())
    for key in TORCH_KEYS:
        assert ours.param_groups[0][key] == theirs.param_groups[0][key], key
    assert ours.param_groups[0]["dtype"] == torch.bfloat16  # torch's Newton–Schulz dtype


def test_default_muon_follows_torch_optim_muon_for_several_steps(float32_torch_muon):
    a, b = params(), params()
    ours, theirs = Muon(a, dtype=torch.float32), torch.optim.Muon(b)
    step_both([(a, ours), (b, theirs)], steps=6)
    # same float32 arithmetic up to operation order and ‖D‖+eps vs max(‖D‖, eps): the whole
    # 6-step trajectories agree to 1e-5 relative; a different default (lr, weight decay,
    # nesterov, scale) would be off by > 1e-2
    assert_trajectories_close(a, b, 1e-5)


def test_default_muon_in_bfloat16_follows_torch_optim_muon():
    a, b = params(), params()
    step_both([(a, Muon(a)), (b, torch.optim.Muon(b))], steps=3)
    # both run Newton–Schulz in bfloat16 (unit roundoff 4e-3), in different operation orders
    assert_trajectories_close(a, b, 1e-3)


@pytest.mark.parametrize("direction", ["ours_to_torch", "torch_to_ours"])
def test_state_dict_exchange_with_torch_optim_muon(float32_torch_muon, direction):
    kwargs = {"lr": 0.02, "momentum": 0.9, "weight_decay": 0.05}
    a = params()
    first_cls, second_cls = (
        (Muon, torch.optim.Muon) if direction == "ours_to_torch" else (torch.optim.Muon, Muon)
    )

    def make(cls, ps, **extra):
        return cls(ps, dtype=torch.float32, **extra) if cls is Muon else cls(ps, **extra)

    first = make(first_cls, a, **kwargs)
    step_both([(a, first)], steps=2)
    b_params = [torch.nn.Parameter(p.detach().clone()) for p in a]
    second = make(second_cls, b_params)  # hyperparameters come from the state dict
    second.load_state_dict(copy.deepcopy(first.state_dict()))  # as if saved and loaded
    for key in TORCH_KEYS:
        assert second.param_groups[0][key] == first.param_groups[0][key], key
    for p, q in zip(a, b_params, strict=True):
        torch.testing.assert_close(
            second.state[q]["momentum_buffer"], first.state[p]["momentum_buffer"]
        )
    step_both([(a, first), (b_params, second)], steps=3, seed=4)
    assert_trajectories_close(b_params, a, 1e-5)


def test_class_step_is_the_functional_core():
    kwargs = {"momentum": 0.9, "nesterov": True, "dtype": torch.float32}
    a = params()
    opt = Muon(a, lr=0.03, weight_decay=0.1, **kwargs)
    expected = [p.detach().clone() for p in a]
    bufs = [torch.zeros_like(p) for p in a]
    gen = torch.Generator().manual_seed(5)
    for _ in range(3):
        for i, p in enumerate(a):
            p.grad = torch.randn(p.shape, generator=gen)
            expected[i].mul_(1 - 0.03 * 0.1)
            expected[i].add_(muon_update(p.grad, bufs[i], **kwargs), alpha=-0.03)
        opt.step()
    for p, e in zip(a, expected, strict=True):
        torch.testing.assert_close(p.detach(), e, rtol=0, atol=1e-6)


def test_tailmem_names_are_aliases_of_torchs():
    a = Muon(params(), steps=3, scale="match_rms_adamw").param_groups[0]
    b = Muon(params(), ns_steps=3, adjust_lr_fn="match_rms_adamw").param_groups[0]
    assert (a["ns_steps"], a["adjust_lr_fn"]) == (b["ns_steps"], b["adjust_lr_fn"])
    assert (a["ns_steps"], a["adjust_lr_fn"]) == (3, "match_rms_adamw")
    group = Muon([{"params": params(), "steps": 7}]).param_groups[0]
    assert group["ns_steps"] == 7 and "steps" not in group
    with pytest.raises(ValueError, match="ns_steps=3 and its alias steps=4"):
        Muon(params(), ns_steps=3, steps=4)


def test_normuon_matches_its_definition():
    """Written out: per output row, V <- β₂V + (1-β₂)·mean_j O_ij²; O' = O/√V rescaled to ‖O‖."""
    beta2, lr = 0.9, 0.05
    (p,) = [torch.nn.Parameter(torch.randn(12, 8, generator=torch.Generator().manual_seed(6)))]
    opt = Muon([p], lr=lr, momentum=0.0, weight_decay=0.0, normuon=True, normuon_beta2=beta2,
               num_heads=2, method="svd", dtype=torch.float32)  # fmt: skip
    expected = p.detach().clone()
    V = torch.zeros(12)
    gen = torch.Generator().manual_seed(7)
    for _ in range(3):
        p.grad = torch.randn(12, 8, generator=gen)
        opt.step()
        for rows in (slice(0, 6), slice(6, 12)):
            U, _, Vh = torch.linalg.svd(p.grad[rows].double(), full_matrices=False)
            O = (U @ Vh).float()
            V[rows] = beta2 * V[rows] + (1 - beta2) * (O**2).mean(dim=1)
            normalised = O / V[rows].sqrt()[:, None]
            normalised = normalised * O.norm() / normalised.norm()
            expected[rows] -= lr * 1.0 * normalised  # scale sqrt(max(1, 6/8)) = 1
    torch.testing.assert_close(p.detach(), expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(opt.state[p]["normuon_second_moment"], V)


def _square_blocks_gradient(gen):
    """An (8, 4) gradient of two 4 x 4 blocks, each with singular values spread over three
    decades, so that its (Newton–Schulz) polar factor has rows, and columns, of unequal norms."""
    singular = torch.diag(torch.tensor([1.0, 0.3, 0.03, 0.003], dtype=torch.float64))
    blocks = []
    for _ in range(2):
        u, _ = torch.linalg.qr(torch.randn(4, 4, generator=gen, dtype=torch.float64))
        v, _ = torch.linalg.qr(torch.randn(4, 4, generator=gen, dtype=torch.float64))
        blocks.append(u @ singular @ v.T)
    return torch.cat(blocks).float()


def test_normuon_normalises_each_output_row_of_square_blocks():
    """Square blocks: a per-column second moment has the same shape as the per-row one, so only
    the numbers tell the axis apart. Written out per block and output row i:
    V_i <- β₂V_i + (1-β₂)·mean_j O_ij²; O'_ij = O_ij/√V_i; the block moves by lr·O'·‖O‖/‖O'‖."""
    beta2, lr = 0.8, 0.05
    p = torch.nn.Parameter(torch.randn(8, 4, generator=torch.Generator().manual_seed(2)))
    opt = Muon([p], lr=lr, momentum=0.0, weight_decay=0.0, normuon=True, normuon_beta2=beta2,
               num_heads=2, dtype=torch.float32)  # fmt: skip
    expected = p.detach().double().clone()
    V = [[0.0] * 4 for _ in range(2)]
    gen = torch.Generator().manual_seed(9)
    for _ in range(3):
        p.grad = _square_blocks_gradient(gen)
        O = orthogonalize(p.grad.reshape(2, 4, 4), "ns5", dtype=torch.float32).double()
        by_row, by_col = (O**2).mean(dim=2), (O**2).mean(dim=1)
        assert ((by_row - by_col).abs() > 0.1 * by_row).any()  # the axes differ here
        opt.step()
        for h in range(2):
            rows = []
            for i in range(4):
                V[h][i] = beta2 * V[h][i] + (1 - beta2) * sum(float(x) ** 2 for x in O[h, i]) / 4
                rows.append([float(x) / math.sqrt(V[h][i]) for x in O[h, i]])
            normalised = torch.tensor(rows, dtype=torch.float64)
            normalised *= O[h].norm() / normalised.norm()
            expected[4 * h : 4 * h + 4] -= lr * 1.0 * normalised  # scale sqrt(max(1, 4/4)) = 1
    torch.testing.assert_close(p.detach().double(), expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(
        opt.state[p]["normuon_second_moment"].double(),
        torch.tensor(V[0] + V[1], dtype=torch.float64),
        rtol=1e-5,
        atol=0,
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lr": -0.1},
        {"lr": math.inf},
        {"lr": math.nan},
        {"weight_decay": math.inf},
        {"momentum": math.nan},
        {"eps": math.inf},
        {"eps": 0.0},
        {"normuon_beta2": 1.0},
        {"ns_coefficients": (3.0, math.inf, 1.0)},
        {"distributed": "fsdp"},
    ],
)
def test_bad_hyperparameters_are_value_errors(kwargs):
    with pytest.raises(ValueError, match="Muon"):
        Muon(params(), **kwargs)


@pytest.mark.parametrize("kwargs", [{"lr": math.inf}, {"lr": 1.0, "weight_decay": math.inf}])
def test_signgd_rejects_non_finite_hyperparameters(kwargs):
    with pytest.raises(ValueError, match="SignGD"):
        SignGD(params(), **kwargs)


def test_config_errors_are_value_errors():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    with pytest.raises(ValueError) as caught:
        build_optimizer(model, "muon:* adam:", muon={"lr": -1.0})
    assert isinstance(caught.value, ConfigError)


def test_large_float32_entries_do_not_overflow_the_norm():
    G = torch.randn(24, 40, generator=torch.Generator().manual_seed(8))
    for method in ("ns5", "polar_express", "cubic", "gram_ns", "svd"):
        big = orthogonalize(G * 1e19, method)
        assert torch.isfinite(big).all() and big.abs().max() > 0.1, method
        # the polar factor does not depend on the scale; eps is negligible at both scales
        torch.testing.assert_close(big, orthogonalize(G, method), rtol=0, atol=1e-4)


def test_power_of_two_scaling_leaves_ordinary_results_bit_identical():
    """Dividing by ‖G‖+eps without any rescaling (the reference) gives the very same bits."""
    G = torch.randn(3, 16, 24, generator=torch.Generator().manual_seed(9))
    X = G / (torch.linalg.vector_norm(G, dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(5):
        A = X @ X.mT
        X = (3.4445 * torch.eye(16) + torch.baddbmm(A, A, A, beta=-4.7750, alpha=2.0315)) @ X
    assert torch.equal(orthogonalize(G, "ns5"), X)


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("method", ["ns5", "svd", "cubic"])
def test_non_finite_input_is_a_clear_value_error(bad, method):
    G = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(10))
    G[1, 2, 3] = bad
    with pytest.raises(NonFiniteInputError, match="NaN or infinite entry in matrix 1 of a batch"):
        orthogonalize(G, method)
    assert issubclass(NonFiniteInputError, ValueError)
    p = torch.nn.Parameter(torch.zeros(6, 8))
    p.grad = G[1]
    with pytest.raises(ValueError, match="NaN or infinite"):
        Muon([p]).step()


def test_import_tailmem_optim_loads_only_torch():
    code = (
        "import sys, tailmem.optim; "
        "heavy = {'matplotlib', 'scipy', 'rich', 'tokenizers', 'yaml', 'safetensors', 'datasets'}; "
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"

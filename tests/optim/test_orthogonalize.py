"""orthogonalize against a float64 SVD: exact methods, documented bands, edge cases, properties."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tailmem.optim import METHODS, orthogonalize
from tailmem.optim.orthogonalize import (
    BAND_MIN_SINGULAR,
    BANDS,
    CUBIC_COEFFICIENTS,
    NS5_COEFFICIENTS,
    POLAR_EXPRESS_COEFFICIENTS,
    POLAR_EXPRESS_FIXED_POINT,
    POLAR_EXPRESS_SAFETY,
    orthogonalize_flops,
    polar_express_schedule,
)

POLY_METHODS = ("ns5", "polar_express", "gram_ns")
EXACT_METHODS = ("svd", "cubic")


def schedule(method: str, steps: int = 5) -> tuple[tuple[tuple[float, float, float], ...], float]:
    """Per-step coefficients and input safety factor of a polynomial method."""
    if method == "ns5":
        return (NS5_COEFFICIENTS,) * steps, 1.0
    return polar_express_schedule(steps), POLAR_EXPRESS_SAFETY


def scalar_map(s: np.ndarray, method: str, steps: int = 5) -> np.ndarray:
    """The composite odd polynomial a method applies to each scaled singular value s = σ/‖G‖_F."""
    coefficients, safety = schedule(method, steps)
    s = s / safety
    for a, b, c in coefficients:
        s = a * s + b * s**3 + c * s**5
    return s


def random_matrix(m: int, n: int, cond: float = 1.0, rank: int | None = None, seed: int = 0):
    """float64 U diag(σ) Vᵀ with σ log-spaced from 1 to 1/cond over `rank` values."""
    gen = torch.Generator().manual_seed(seed)
    k = min(m, n) if rank is None else rank
    U, _ = torch.linalg.qr(torch.randn(m, k, generator=gen, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(n, k, generator=gen, dtype=torch.float64))
    sigma = torch.logspace(0.0, -math.log10(cond), k, dtype=torch.float64)
    return (U * sigma) @ V.T


def exact_polar(G: torch.Tensor, rtol: float = 1e-10) -> torch.Tensor:
    """Float64 reference U_r V_rᵀ over singular values above rtol·σ_max."""
    U, sigma, Vh = torch.linalg.svd(G.double(), full_matrices=False)
    keep = (sigma > rtol * sigma[..., :1]).double()
    return (U * keep.unsqueeze(-2)) @ Vh


def gains(G: torch.Tensor, O: torch.Tensor):
    """Scaled singular values s_i of G, the gains d_i = u_iᵀ O v_i, and max off-diagonal |uᵀOv|."""
    U, S, Vh = torch.linalg.svd(G.double(), full_matrices=False)
    M = U.mT @ O.double() @ Vh.mT
    d = torch.diagonal(M, dim1=-2, dim2=-1)
    s = S / torch.linalg.matrix_norm(G.double(), keepdim=True)[..., 0]
    off = (M - torch.diag_embed(d)).abs().amax().item()
    return s, d, off


CASES = {
    "wide": lambda: random_matrix(24, 80, cond=10.0, seed=1),
    "tall": lambda: random_matrix(80, 24, cond=10.0, seed=2),
    "square": lambda: torch.randn(40, 40, generator=torch.Generator().manual_seed(3)).double(),
    "ill_conditioned": lambda: random_matrix(30, 50, cond=1e6, seed=4),
    "row": lambda: random_matrix(1, 33, seed=5),
    "column": lambda: random_matrix(33, 1, seed=6),
    "batched": lambda: torch.stack([random_matrix(12, 20, cond=100.0, seed=i) for i in range(4)]),
}


@pytest.mark.parametrize("method", EXACT_METHODS)
@pytest.mark.parametrize("case", CASES)
def test_exact_methods_match_float64_polar_factor(method, case):
    G = CASES[case]()
    O = orthogonalize(G, method)
    assert O.shape == G.shape and O.dtype == torch.float64
    torch.testing.assert_close(O, exact_polar(G), rtol=0, atol=1e-9)


@pytest.mark.parametrize("method", EXACT_METHODS)
@pytest.mark.parametrize("case", ["wide", "tall", "square", "row", "batched"])
def test_exact_methods_in_float32(method, case):
    G = CASES[case]().float()
    O = orthogonalize(G, method)
    assert O.dtype == torch.float32
    torch.testing.assert_close(O.double(), exact_polar(G), rtol=0, atol=2e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("method", EXACT_METHODS)
def test_rank_deficient_exact_methods_keep_zero_singular_values(method, dtype):
    G = random_matrix(40, 56, cond=10.0, rank=12, seed=7).to(dtype)
    O = orthogonalize(G, method)
    sv = torch.linalg.svdvals(O.double())
    tol = {torch.float64: (1e-10, 1e-8), torch.float32: (1e-5, 1e-3)}[dtype]
    assert (sv[:12] - 1).abs().max().item() < tol[0]
    assert sv[12:].max().item() < tol[1]
    reference = exact_polar(G, rtol=1e-5 if dtype == torch.float32 else 1e-10)
    torch.testing.assert_close(O.double(), reference, rtol=0, atol=tol[0] * 10)


@pytest.mark.parametrize("method", POLY_METHODS)
def test_rank_deficient_polynomial_methods_keep_zero_singular_values(method):
    G = random_matrix(40, 96, cond=10.0, rank=12, seed=8).float()
    sv = torch.linalg.svdvals(orthogonalize(G, method).double())
    lo, hi = BANDS[method]
    assert lo <= sv[11].item() and sv[0].item() <= hi
    # rounding noise (≈1e-7) is amplified at most ≈1000× by five steps
    assert sv[12:].max().item() < 1e-3


def test_band_constants_are_the_measured_extremes_of_the_scalar_map():
    s = np.logspace(math.log10(BAND_MIN_SINGULAR), 0.0, 200_001)
    for method in POLY_METHODS:
        f = scalar_map(s, method)
        lo, hi = BANDS[method]
        assert lo <= f.min() < lo + 0.01, method
        assert hi - 0.01 < f.max() <= hi, method
        small = scalar_map(np.logspace(-9, math.log10(BAND_MIN_SINGULAR), 10_000), method)
        assert small.min() >= 0.0 and small.max() <= hi


@pytest.mark.parametrize("method", POLY_METHODS)
@pytest.mark.parametrize("case", CASES)
def test_polynomial_methods_apply_their_scalar_map_to_each_singular_value(method, case):
    G = CASES[case]().float()
    O = orthogonalize(G, method)
    assert O.shape == G.shape and O.dtype == torch.float32
    s, d, off = gains(G, O)
    # gram_ns squares singular values in its float32 Gram iteration: ≈1e-3 instead of ≈1e-5
    tol = 2e-3 if method == "gram_ns" else 5e-5
    assert (d - torch.from_numpy(scalar_map(s.numpy(), method))).abs().max().item() < tol
    assert off < tol
    lo, hi = BANDS[method]
    in_band = s >= BAND_MIN_SINGULAR
    assert in_band.any()
    assert lo <= d[in_band].min().item() and d.max().item() <= hi


def test_ill_conditioned_input_has_singular_values_below_the_band_floor():
    G = CASES["ill_conditioned"]().float()
    s, d, _ = gains(G, orthogonalize(G, "ns5"))
    assert (s < BAND_MIN_SINGULAR).sum() > 5
    assert d[s < 1e-5].max().item() < 0.01  # 5 steps amplify by ≈484, far from 1


@pytest.mark.parametrize("method", METHODS)
def test_zero_input_returns_zeros(method):
    G = torch.zeros(3, 7, 5)
    G[1] = torch.randn(7, 5, generator=torch.Generator().manual_seed(0))
    O = orthogonalize(G, method)
    assert torch.isfinite(O).all()
    assert torch.equal(O[0], torch.zeros(7, 5)) and torch.equal(O[2], torch.zeros(7, 5))
    assert O[1].abs().max() > 0.1
    assert torch.equal(orthogonalize(torch.zeros(4, 4), method), torch.zeros(4, 4))


@pytest.mark.parametrize("method", METHODS)
def test_batch_equals_matrix_by_matrix(method):
    G = torch.randn(2, 3, 10, 16, generator=torch.Generator().manual_seed(1))
    O = orthogonalize(G, method)
    for i in range(2):
        for j in range(3):
            torch.testing.assert_close(O[i, j], orthogonalize(G[i, j], method), rtol=0, atol=1e-5)


@pytest.mark.parametrize("method", METHODS)
def test_input_is_not_modified(method):
    G = torch.randn(9, 6, generator=torch.Generator().manual_seed(2))
    before = G.clone()
    orthogonalize(G, method)
    assert torch.equal(G, before)


def test_one_step_matches_the_hand_written_formula():
    G = torch.randn(6, 9, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    X = G / (torch.linalg.matrix_norm(G) + 1e-7)
    a, b, c = NS5_COEFFICIENTS
    A = X @ X.T
    torch.testing.assert_close(orthogonalize(G, "ns5", steps=1), a * X + b * A @ X + c * A @ A @ X)
    a, b, _ = CUBIC_COEFFICIENTS
    torch.testing.assert_close(orthogonalize(G, "cubic", steps=1), a * X + b * A @ X)
    Xp = G / (POLAR_EXPRESS_SAFETY * torch.linalg.matrix_norm(G) + 1e-7)
    Ap = Xp @ Xp.T
    a, b, c = POLAR_EXPRESS_COEFFICIENTS[0]
    expected = a * Xp + b * Ap @ Xp + c * Ap @ Ap @ Xp
    torch.testing.assert_close(orthogonalize(G, "polar_express", steps=1), expected)
    torch.testing.assert_close(orthogonalize(G, "gram_ns", steps=1), expected)


def test_polar_express_steps_beyond_five_repeat_the_last_tuple():
    assert polar_express_schedule(7)[5:] == (POLAR_EXPRESS_COEFFICIENTS[-1],) * 2
    assert polar_express_schedule(2) == POLAR_EXPRESS_COEFFICIENTS[:2]
    G = random_matrix(20, 30, cond=50.0, seed=9)
    s, d, _ = gains(G, orthogonalize(G, "polar_express", steps=8))
    expected = torch.from_numpy(scalar_map(s.numpy(), "polar_express", 8))
    torch.testing.assert_close(d, expected, rtol=0, atol=1e-6)
    # many steps converge to the last polynomial's fixed point s* > 1, where a + b·s*² + c·s*⁴ = 1
    sv = torch.linalg.svdvals(orthogonalize(G, "polar_express", steps=40))
    torch.testing.assert_close(
        sv, torch.full_like(sv, POLAR_EXPRESS_FIXED_POINT), rtol=0, atol=1e-4
    )
    a, b, c = POLAR_EXPRESS_COEFFICIENTS[-1]
    fixed = POLAR_EXPRESS_FIXED_POINT
    assert abs(a + b * fixed**2 + c * fixed**4 - 1.0) < 1e-5


def test_gram_ns_is_cheaper_for_wide_matrices_and_not_worse():
    assert orthogonalize_flops(768, 3072, "gram_ns") == 50 * 768**3
    assert orthogonalize_flops(3072, 768, "ns5") == 90 * 768**3
    assert orthogonalize_flops(768, 768, "gram_ns") == orthogonalize_flops(768, 768, "ns5")
    G = torch.randn(64, 256, generator=torch.Generator().manual_seed(4))
    err = {m: (torch.linalg.svdvals(orthogonalize(G, m)) - 1).abs().max() for m in POLY_METHODS}
    assert err["gram_ns"] <= err["ns5"]
    assert err["gram_ns"] < 0.15
    square = torch.randn(30, 30, generator=torch.Generator().manual_seed(5))
    assert torch.equal(orthogonalize(square, "gram_ns"), orthogonalize(square, "polar_express"))


def test_cubic_step_cap_and_convergence():
    G = random_matrix(20, 30, cond=1e3, seed=10)
    capped = orthogonalize(G, "cubic", steps=3)
    assert (torch.linalg.svdvals(capped) - 1).abs().max() > 0.1
    torch.testing.assert_close(orthogonalize(G, "cubic"), exact_polar(G), rtol=0, atol=1e-12)


def test_compute_dtype_is_used_and_result_cast_back():
    G = random_matrix(32, 64, cond=10.0, seed=11).float()
    fp32 = orthogonalize(G, "ns5")
    bf16 = orthogonalize(G, "ns5", dtype=torch.bfloat16)
    assert bf16.dtype == torch.float32
    difference = (bf16 - fp32).abs().max().item()
    assert 1e-4 < difference < 0.05  # bfloat16 rounding, not float32's
    _, d, _ = gains(G, bf16)
    lo, hi = BANDS["ns5"]
    assert lo - 0.05 <= d.min().item() and d.max().item() <= hi + 0.05
    torch.testing.assert_close(
        orthogonalize(G.double(), "svd", dtype=torch.float32), exact_polar(G), rtol=0, atol=1e-5
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "newton"}, "unknown orthogonalisation method 'newton'"),
        ({"steps": 0}, "steps must be a positive integer"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        orthogonalize(torch.ones(3, 3), **kwargs)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="needs a matrix"):
        orthogonalize(torch.ones(5))
    with pytest.raises(TypeError, match="floating-point"):
        orthogonalize(torch.ones(3, 3, dtype=torch.int64))


def test_empty_matrices_pass_through():
    assert orthogonalize(torch.zeros(0, 4, 3)).shape == (0, 4, 3)
    assert orthogonalize(torch.zeros(4, 0)).shape == (4, 0)


shapes = st.tuples(st.integers(1, 9), st.integers(1, 9))


def _matrix(shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@settings(max_examples=40, deadline=None)
@given(shape=shapes, seed=st.integers(0, 10_000))
def test_svd_is_orthogonally_equivariant(shape, seed):
    G = _matrix(shape, seed)
    Q, _ = torch.linalg.qr(_matrix((shape[0], shape[0]), seed + 1))
    R, _ = torch.linalg.qr(_matrix((shape[1], shape[1]), seed + 2))
    torch.testing.assert_close(orthogonalize(Q @ G @ R, "svd"), Q @ orthogonalize(G, "svd") @ R)


@settings(max_examples=25, deadline=None)
@given(shape=shapes, seed=st.integers(0, 10_000), method=st.sampled_from(METHODS))
def test_transpose_and_sign_equivariance(shape, seed, method):
    G = _matrix(shape, seed)
    O = orthogonalize(G, method)
    torch.testing.assert_close(orthogonalize(G.T, method), O.T, rtol=0, atol=1e-10)
    torch.testing.assert_close(orthogonalize(-G, method), -O, rtol=0, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    shape=shapes,
    seed=st.integers(0, 10_000),
    log_scale=st.floats(-1.0, 4.0),
    method=st.sampled_from(METHODS),
)
def test_scale_invariance(shape, seed, log_scale, method):
    G = _matrix(shape, seed)
    G = G / torch.linalg.matrix_norm(G)
    scale = 10.0**log_scale
    scaled = orthogonalize(G * scale, method)
    # eps = 1e-7 is added to the norm: relative input changes of 1e-7/scale and 1e-7 (the
    # reference), which the five-step maps amplify by at most max|f'(s)·s| ≈ 207 (Polar Express)
    atol = 1e-9 + 210 * 1e-7 * (1.0 + 1.0 / scale)
    torch.testing.assert_close(scaled, orthogonalize(G, method), rtol=0, atol=atol)

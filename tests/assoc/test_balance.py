"""One-step balance ϱ^ε (Theorem 5.3) and the coupled construction's printed numbers."""

import math

import pytest
import torch

import tailmem.assoc as A
from tailmem.assoc import theory
from tailmem.assoc.balance import gap_table, one_step_balance, one_step_curve, update_spectrum
from tailmem.assoc.memory import DenseMemory

EPS = 0.1


@pytest.mark.parametrize("K", [99, 300, 999])
@pytest.mark.parametrize("embedding", ["decoupled", "coupled"])
def test_gd_rho_matches_closed_form(K: int, embedding: str) -> None:
    rho = A.one_step_rho(K, embedding, "gd", 0.8, 0.2, EPS)
    assert rho == pytest.approx(theory.gd_one_step_rho(K, 0.8, 0.2, EPS), rel=1e-9)


def test_gd_minimal_step_matches_theorem() -> None:
    K = 1000  # βK = 200 exactly, so the theorem's γ1 = α/(βK) is our head frequency
    memory = A.build_memory(A.two_group(K, 0.8, 0.2), A.decoupled(K), "gd")
    bal = one_step_balance(memory, A.first_direction(memory, "gd"), EPS)
    assert bal.eta == pytest.approx(theory.gd_min_step(K, 0.8, 0.2, EPS), rel=1e-10)
    assert bal.max_prob == pytest.approx(1 - EPS, abs=1e-9)
    assert bal.rho == pytest.approx(1 - EPS - bal.gap, abs=1e-12)
    assert theory.gd_rate_exponent(0.8, 0.2) == pytest.approx(1 / 16)
    assert bal.monotone and bal.rho_literal == pytest.approx(bal.rho, rel=1e-9)


def test_gd_rho_has_slope_r_minus_one() -> None:
    ks = [300, 3000, 30000]
    rhos = [A.one_step_rho(K, "decoupled", "gd", 0.8, 0.2, EPS) for K in ks]
    slope = math.log(rhos[-1] / rhos[0]) / math.log(ks[-1] / ks[0])
    assert slope == pytest.approx(1 / 16 - 1, abs=0.02)


@pytest.mark.parametrize("K", [99, 999, 3000])
def test_signgd_decoupled_and_muon_are_balanced(K: int) -> None:
    assert A.one_step_rho(K, "decoupled", "signgd", 0.8, 0.2, EPS) == pytest.approx(1 - EPS)
    for emb in ("decoupled", "coupled"):
        rho = A.one_step_rho(K, emb, "muon", 0.8, 0.2, EPS)
        assert 1 - EPS * (1 + math.log(K) / K) <= rho < 1 - EPS


@pytest.mark.parametrize("optimizer", ["gd", "signgd", "muon"])
@pytest.mark.parametrize("embedding", ["decoupled", "coupled"])
def test_structured_rho_equals_dense_rho(optimizer: str, embedding: str) -> None:
    K = 30
    spec = A.two_group(K, 0.8, 0.2, rounding="nearest")
    emb = A.make_embedding(embedding, K)
    dense = DenseMemory(spec, emb)
    fast = A.build_memory(spec, emb, optimizer)
    a = one_step_balance(fast, A.first_direction(fast, optimizer), EPS)
    b = one_step_balance(dense, A.first_direction(dense, optimizer), EPS)
    assert a.rho == pytest.approx(b.rho, rel=1e-9)
    assert a.eta == pytest.approx(b.eta, rel=1e-9)
    assert a.monotone == b.monotone


def test_coupled_construction_reproduces_printed_row() -> None:
    check = theory.coupled_construction_check(999)
    assert check.A_plus_B_equals_sign_RoRkT
    assert check.transposed_error < 5e-5  # rows of the transposed reading = printed numbers
    assert check.literal_error > 0.5  # the literal reading in our orientation does not match
    assert torch.allclose(check.transposed[0], check.task_block[:, 0])
    assert torch.equal(check.B, -torch.ones(3, 1, dtype=torch.float64) @ check.B[:1] * -1)


def test_signgd_coupled_update_block_ratio() -> None:
    """Theorem 5.3: σ_min/σ_max of SignGD's update block (the I ⊗ A part) is ≤ 25%."""
    memory = A.build_memory(A.two_group(999, 0.8, 0.2), A.coupled(999), "signgd")
    U = A.first_direction(memory, "signgd")
    s = torch.linalg.svdvals(U.A[0])
    assert 0.24 < float(s[-1] / s[0]) <= 0.25


@pytest.mark.parametrize("optimizer", ["muon", "signgd"])
def test_update_spectrum_against_svd_on_both_backends(optimizer: str) -> None:
    """A first update's statistics read off a dense SVD, the same on either backend; Muon's
    deviation from −ẼEᵀ of order 1/K."""
    K = 30
    spectrum, emb = A.two_group(K, 0.8, 0.2), A.coupled(K)
    stats = []
    for backend in ("structured", "dense"):
        memory = A.build_memory(spectrum, emb, optimizer, backend=backend)
        U = A.first_direction(memory, optimizer)
        s = torch.linalg.svdvals(memory.dense(U))
        nonzero = s[s > K * 1e-15 * s[0]]
        got = update_spectrum(memory, U)
        assert got.sigma_max == pytest.approx(float(s[0]), rel=1e-12)
        assert got.rank == len(nonzero)
        assert got.sigma_min_nonzero == pytest.approx(float(nonzero[-1]), rel=1e-10)
        assert got.ratio == pytest.approx(float(nonzero[-1] / s[0]), rel=1e-10)
        stats.append(got)
    structured, dense = stats
    assert math.isnan(dense.block_ratio) and 0.0 < structured.block_ratio <= 1.0
    assert structured.identity_deviation == pytest.approx(dense.identity_deviation, abs=1e-10)
    if optimizer == "muon":
        assert 0.0 < structured.identity_deviation < 2 / K


def test_signgd_coupled_rate_and_large_k_slope() -> None:
    r = theory.signgd_coupled_rate_exponent()
    assert r == pytest.approx(0.7238, abs=1e-4)
    rhos = [A.one_step_rho(K, "coupled", "signgd", 0.8, 0.2, EPS) for K in (300_000, 3_000_000)]
    slope = math.log(rhos[1] / rhos[0]) / math.log(10)
    assert r - 1 - 0.05 < slope < r - 1 + 0.05


def test_straddling_block_is_non_monotone() -> None:
    memory = A.build_memory(
        A.two_group(999, 0.8, 0.2, rounding="nearest"), A.coupled(999), "signgd"
    )
    bal = one_step_balance(memory, A.first_direction(memory, "signgd"), EPS)
    assert not bal.monotone and bal.rho_literal < 1e-6 < bal.rho


def test_one_step_curve_agrees_with_evaluation() -> None:
    K = 30
    memory = A.build_memory(A.two_group(K, 0.8, 0.2), A.coupled(K), "signgd")
    U = A.first_direction(memory, "signgd")
    etas = torch.tensor([0.1, 1.0, 5.0], dtype=torch.float64)
    curve = one_step_curve(memory, U, etas)
    ev = memory.evaluate(U * -etas)
    assert torch.allclose(curve.loss, ev.loss, atol=1e-12)
    assert torch.allclose(curve.gap, A.max_gap(ev.correct_prob), atol=1e-12)
    assert gap_table(memory, U).count.sum() == K

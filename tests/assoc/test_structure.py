"""The exchangeable-block algebra agrees with dense linear algebra entry by entry."""

import pytest
import torch

from tailmem.assoc.memory import StructuredMemory
from tailmem.assoc.structure import Layout, OrbitMatrix
from tailmem.optim.orthogonalize import orthogonalize


def _random(unit: int, batch: tuple[int, ...] = (2,), seed: int = 0) -> OrbitMatrix:
    p = torch.tensor([4.0] * 6 + [3.0] * 3 + [2.0] * 3 + [1.0] * 6, dtype=torch.float64)
    group = torch.tensor([0] * 9 + [1] * 9)
    layout = Layout.from_frequencies(p / p.sum(), group, unit)
    gen = torch.Generator().manual_seed(seed)
    C, u = layout.n_cells, unit
    A = torch.randn(*batch, C, u, u, generator=gen, dtype=torch.float64)
    A = A * (layout.counts > 1)[:, None, None]
    B = torch.randn(*batch, C, C, u, u, generator=gen, dtype=torch.float64)
    return OrbitMatrix(A, B, layout)


def test_layout_cells() -> None:
    assert _random(1).layout.counts.tolist() == [6, 3, 3, 6]
    assert _random(3).layout.counts.tolist() == [2, 1, 1, 2]


@pytest.mark.parametrize("unit", [1, 3])
def test_dense_expansion_is_exchangeable(unit: int) -> None:
    X = _random(unit)
    D = X.dense()
    perm = torch.arange(18)
    perm[:6] = torch.tensor([3, 4, 5, 0, 1, 2]) if unit == 3 else torch.tensor([5, 4, 3, 2, 1, 0])
    assert torch.equal(D[..., perm[:, None], perm[None, :]], D)


@pytest.mark.parametrize("unit", [1, 3])
def test_entrywise_and_linear_ops(unit: int) -> None:
    X, Y = _random(unit, seed=1), _random(unit, seed=2)
    Dx, Dy = X.dense(), Y.dense()
    assert torch.allclose(X.map(torch.sign).dense(), torch.sign(Dx))
    assert torch.allclose((X * Y).dense(), Dx * Dy)
    assert torch.allclose((X + Y * 2.0).dense(), Dx + 2 * Dy)
    assert torch.allclose((X / Y.map(torch.abs)).dense(), Dx / Dy.abs())
    scale = torch.tensor([0.5, 3.0], dtype=torch.float64)
    assert torch.allclose((X * scale).dense(), Dx * scale[:, None, None])
    p = X.layout.p
    assert torch.allclose(X.scale_columns(p).dense(), Dx * X.layout.expand(p))
    L = torch.randn(unit, unit, dtype=torch.float64)
    R = torch.randn(unit, unit, dtype=torch.float64)
    I = torch.eye(18 // unit, dtype=torch.float64)
    assert torch.allclose(X.sandwich(L, R).dense(), torch.kron(I, L) @ Dx @ torch.kron(I, R))
    assert torch.allclose(X.frobenius(), Dx.flatten(-2).norm(dim=-1))


@pytest.mark.parametrize("unit", [1, 3])
def test_spectral_ops(unit: int) -> None:
    X = _random(unit, seed=4)
    D = X.dense()
    assert torch.allclose(X.singular_values(), torch.linalg.svdvals(D), atol=1e-12)
    assert torch.allclose(X.polar().dense(), orthogonalize(D, "svd"), atol=1e-10)
    ns = StructuredMemory.ns5(X).dense()
    assert torch.allclose(ns, orthogonalize(D, "ns5"), atol=1e-10)


def test_polar_drops_zero_singular_values() -> None:
    X = _random(1, batch=())
    ones = torch.ones(18, dtype=torch.float64) / 18**0.5
    D = X.dense()
    D = D - torch.outer(D @ ones, ones)  # kill the all-ones direction (still exchangeable)
    A, M = X.pieces()
    n = X.layout.counts.double().sqrt()
    v = n / n.norm()
    M = M - torch.outer(M @ v, v)
    Y = OrbitMatrix.from_pieces(A, M, X.layout)
    assert torch.allclose(Y.dense(), D, atol=1e-12)
    P = Y.polar()
    assert torch.allclose(P.dense(), orthogonalize(D, "svd"), atol=1e-10)
    assert int((P.singular_values() > 0.5).sum()) == 17


@pytest.mark.parametrize("unit", [1, 3])
def test_column_softmax(unit: int) -> None:
    X = _random(unit, seed=5)
    S, log_correct, sum_log = X.column_log_softmax()
    ls = torch.log_softmax(X.dense(), dim=-2)
    assert torch.allclose(S.dense(), ls.exp(), atol=1e-14)
    assert torch.allclose(X.layout.expand(log_correct), torch.diagonal(ls, dim1=-2, dim2=-1))
    assert torch.allclose(X.layout.expand(sum_log), ls.sum(dim=-2))


@pytest.mark.parametrize("unit", [1, 3])
def test_projection_is_the_orbit_average(unit: int) -> None:
    from tailmem.assoc.structure import project

    X = _random(unit, batch=(), seed=6)
    assert torch.allclose(project(X.dense(), X.layout).dense(), X.dense(), atol=1e-12)
    noise = torch.randn(18, 18, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    P = project(X.dense() + noise, X.layout)
    assert not torch.allclose(P.dense(), X.dense(), atol=1e-3)
    assert torch.allclose(project(P.dense(), X.layout).dense(), P.dense(), atol=1e-12)
    # the residual is orthogonal to every exchangeable matrix (least-squares projection)
    residual = X.dense() + noise - P.dense()
    assert abs(float((residual * _random(unit, batch=(), seed=9).dense()).sum())) < 1e-9

"""Spectral isotropy metrics against hand-computed spectra, torch.quantile and explicit products."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tailmem.metrics.spectrum import (
    METRICS,
    effective_rank,
    energy_fractions,
    isotropy_metrics,
    isotropy_metrics_many,
    numerical_rank,
    quantile_ratio,
    singular_values,
    spectral_metrics,
    split_vo_heads,
    svd_entropy,
    top_k_energy,
    unit_scaled,
    vo_head_isotropy,
    vo_head_products,
    vo_head_singular_values,
    vo_stacked,
)


def _orthogonal(n: int, gen: torch.Generator) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=torch.float64))
    return q


def _with_spectrum(sigma: list[float], m: int, n: int, seed: int = 0) -> torch.Tensor:
    """An m x n float64 matrix U diag(sigma) V^T with random orthogonal U, V."""
    gen = torch.Generator().manual_seed(seed)
    d = torch.zeros(m, n, dtype=torch.float64)
    d[range(len(sigma)), range(len(sigma))] = torch.tensor(sigma, dtype=torch.float64)
    return _orthogonal(m, gen) @ d @ _orthogonal(n, gen).T


def test_identity_is_perfectly_isotropic():
    big = isotropy_metrics(torch.eye(20))
    assert big["svd_entropy"].item() == pytest.approx(1.0, abs=1e-6)
    assert big["erank"].item() == pytest.approx(20.0, rel=1e-6)
    assert big["topk_energy"].item() == pytest.approx(10 / 20, rel=1e-6)
    assert big["q75_25"].item() == pytest.approx(1.0, abs=1e-6)
    assert big["rank"].item() == 20
    small = isotropy_metrics(torch.eye(5) * 3.0, k=10)  # n < k: all energy is in the top k
    assert small["topk_energy"].item() == pytest.approx(1.0)
    assert small["erank"].item() == pytest.approx(5.0, rel=1e-6)
    assert top_k_energy(torch.ones(20), k=4).item() == pytest.approx(4 / 20)


def test_rank_one_has_no_spread():
    gen = torch.Generator().manual_seed(1)
    w = torch.outer(torch.randn(7, generator=gen), torch.randn(9, generator=gen))
    m = isotropy_metrics(w)
    assert m["rank"].item() == 1
    assert m["svd_entropy"].item() == 0.0
    assert m["erank"].item() == pytest.approx(1.0, abs=1e-6)
    assert m["topk_energy"].item() == pytest.approx(1.0, abs=1e-6)
    assert m["q75_25"].item() == pytest.approx(1.0, abs=1e-6)


def test_known_spectrum_by_hand():
    # sigma = (2, 1, 1, 0): sigma^2 = (4, 1, 1), q = (2/3, 1/6, 1/6), rank 3.
    w = _with_spectrum([2.0, 1.0, 1.0, 0.0], 4, 6)
    entropy = (2 / 3) * math.log(3 / 2) + 2 * (1 / 6) * math.log(6)
    m = isotropy_metrics(w, k=2)
    assert m["rank"].item() == 3
    assert m["svd_entropy"].item() == pytest.approx(entropy / math.log(3), rel=1e-9)
    assert m["erank"].item() == pytest.approx(math.exp(entropy), rel=1e-9)
    assert m["topk_energy"].item() == pytest.approx(5 / 6, rel=1e-9)
    # ascending sigma^2 (1, 1, 4): Q3 at position 1.5 -> 1 + 0.5 * 3 = 2.5; Q1 at 0.5 -> 1
    assert m["q75_25"].item() == pytest.approx(2.5, rel=1e-9)
    q = energy_fractions(torch.linalg.svdvals(w), rtol=1e-10)
    torch.testing.assert_close(q[:3], torch.tensor([2 / 3, 1 / 6, 1 / 6], dtype=torch.float64))
    assert q[3].item() == 0.0


def test_quantile_interpolation_by_hand_and_against_torch():
    # ascending sigma^2 = 1..6: Q3 at 3.75 -> 4.75, Q1 at 1.25 -> 2.25
    s = torch.tensor([6.0, 5.0, 4.0, 3.0, 2.0, 1.0], dtype=torch.float64).sqrt()
    assert quantile_ratio(s).item() == pytest.approx(4.75 / 2.25, rel=1e-12)
    gen = torch.Generator().manual_seed(2)
    for rank in (1, 2, 3, 4, 7, 10):
        nonzero = torch.rand(rank, generator=gen, dtype=torch.float64) + 0.1
        s = torch.cat([nonzero, torch.zeros(10 - rank, dtype=torch.float64)])
        expected = torch.quantile(nonzero**2, 0.75) / torch.quantile(nonzero**2, 0.25)
        assert quantile_ratio(s[torch.randperm(10, generator=gen)]).item() == pytest.approx(
            expected.item(), rel=1e-12
        )
        assert quantile_ratio(s, upper=0.9, lower=0.1).item() == pytest.approx(
            (torch.quantile(nonzero**2, 0.9) / torch.quantile(nonzero**2, 0.1)).item(), rel=1e-12
        )


def test_zero_matrix_follows_the_documented_convention():
    m = isotropy_metrics(torch.zeros(2, 5, 3))
    for key in METRICS:
        assert not torch.isnan(m[key].float()).any()
    assert m["rank"].tolist() == [0, 0]
    assert m["svd_entropy"].tolist() == [0.0, 0.0]
    assert m["erank"].tolist() == [0.0, 0.0]
    assert m["topk_energy"].tolist() == [0.0, 0.0]
    assert m["q75_25"].tolist() == [1.0, 1.0]
    assert energy_fractions(torch.zeros(4)).tolist() == [0.0] * 4


def test_an_empty_matrix_is_the_zero_map():
    """A (32, 0) FFN, a (0, 0) matrix, a head of width 0: rank 0 and the zero-matrix convention,
    like torch.zeros(32, 1) — no error, no NaN."""
    zero = isotropy_metrics(torch.zeros(32, 1))
    for shape in [(32, 0), (0, 32), (0, 0), (3, 8, 0)]:
        m = isotropy_metrics(torch.zeros(shape))
        for key in METRICS:
            assert m[key].shape == shape[:-2]
            assert (m[key] == zero[key]).all(), (shape, key)
    assert spectral_metrics(torch.zeros(2, 0))["rank"].tolist() == [0, 0]
    heads = vo_head_isotropy(torch.zeros(0, 8), torch.zeros(8, 0), num_heads=2)
    assert heads["rank"].tolist() == [0, 0] and heads["q75_25"].tolist() == [1.0, 1.0]


def test_unit_scaling_is_exact_and_keeps_float32_extremes_finite():
    """Each matrix is scaled by a power of two only (exact), so metrics of weights near the
    float32 limit (σ would overflow) or of 1e-25 weights whose VO product underflows to 0 in
    float32 equal those of the same matrix at ordinary scale."""
    gen = torch.Generator().manual_seed(7)
    w = torch.randn(2, 12, 8, generator=gen) * torch.linspace(0.2, 2, 8)
    scaled = unit_scaled(w)
    ratio = w / scaled
    assert torch.equal(ratio, ratio[:, :1, :1].expand_as(ratio))  # one factor per matrix...
    assert set(torch.log2(ratio[:, 0, 0]).tolist()) <= {float(e) for e in range(-4, 5)}  # ...2^e
    assert (scaled.abs().amax(dim=(-2, -1)) >= 0.5).all() and (
        scaled.abs().amax((-2, -1)) < 1
    ).all()
    reference = isotropy_metrics(w[0].double())
    for factor in (3.0e38 / float(w[0].abs().max()), 1e-25):
        m = isotropy_metrics(w[0] * factor)
        for key in METRICS:
            assert m[key].item() == pytest.approx(reference[key].item(), rel=1e-5), (factor, key)
    v, o = torch.randn(8, 8, generator=gen), torch.randn(8, 8, generator=gen)
    normal = vo_head_isotropy(v, o, num_heads=2)
    for factor in (1e20, 1e-25):  # 1e20·1e20 overflows float32, 1e-25·1e-25 underflows
        extreme = vo_head_isotropy(v * factor, o * factor, num_heads=2)
        assert extreme["rank"].tolist() == [4, 4]
        torch.testing.assert_close(extreme["erank"], normal["erank"])
    assert unit_scaled(torch.zeros(3, 3)).abs().sum() == 0


def test_batched_equals_looped():
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(3, 4, 12, 9, generator=gen)
    w[0, 1] = torch.outer(torch.randn(12, generator=gen), torch.randn(9, generator=gen))
    w[1, 2] = 0.0
    w[2, 3, :, 4:] = 0.0  # rank 4
    w[2, 0] *= torch.logspace(0, -3, 9)  # decaying column scales: anisotropic
    batched = isotropy_metrics(w, k=3)
    for i in range(3):
        for j in range(4):
            single = isotropy_metrics(w[i, j], k=3)
            for key in METRICS:
                assert batched[key].shape == (3, 4)
                torch.testing.assert_close(batched[key][i, j], single[key])
    assert batched["rank"][2, 3].item() == 4
    assert batched["svd_entropy"][2, 0] < batched["svd_entropy"][0, 0]


def test_invariant_to_scale_orthogonal_maps_and_transpose():
    gen = torch.Generator().manual_seed(4)
    w = torch.randn(16, 10, generator=gen, dtype=torch.float64) * torch.linspace(0.1, 3, 10)
    base = isotropy_metrics(w)
    rotated = _orthogonal(16, gen) @ (7.5 * w) @ _orthogonal(10, gen)
    for other in (isotropy_metrics(rotated), isotropy_metrics(w.T)):
        for key in METRICS:
            torch.testing.assert_close(other[key], base[key])


def test_singular_value_functions_agree_with_spectral_metrics():
    s = torch.tensor([[3.0, 2.0, 0.5, 0.0], [1.0, 1.0, 1.0, 1.0]])
    m = spectral_metrics(s, k=2)
    torch.testing.assert_close(m["svd_entropy"], svd_entropy(s))
    torch.testing.assert_close(m["erank"], effective_rank(s))
    torch.testing.assert_close(m["topk_energy"], top_k_energy(s, k=2))
    torch.testing.assert_close(m["q75_25"], quantile_ratio(s))
    assert numerical_rank(s).tolist() == [3, 4]
    # unsorted input is sorted first
    torch.testing.assert_close(svd_entropy(s.flip(-1)), svd_entropy(s))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=1, max_size=30),
    st.integers(min_value=1, max_value=12),
)
def test_metric_bounds(values, k):
    s = torch.tensor(values, dtype=torch.float64)
    m = spectral_metrics(s, k=k)
    r = m["rank"].item()
    assert r == len(values)  # min/max >= 1e-6 is far above the n·eps zero tolerance
    assert -1e-12 <= m["svd_entropy"].item() <= 1 + 1e-12
    assert 1 - 1e-9 <= m["erank"].item() <= r + 1e-9
    assert min(k, r) / r - 1e-12 <= m["topk_energy"].item() <= 1 + 1e-12
    assert m["q75_25"].item() >= 1 - 1e-12


def test_half_precision_is_computed_in_float32():
    w = torch.randn(8, 6, dtype=torch.bfloat16)
    m = isotropy_metrics(w)
    assert m["erank"].dtype == torch.float32
    ref = isotropy_metrics(w.float())
    torch.testing.assert_close(m["erank"], ref["erank"])
    assert singular_values(w).dtype == torch.float32


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="non-finite"):
        isotropy_metrics(torch.tensor([[1.0, float("nan")], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="k must be"):
        isotropy_metrics(torch.eye(3), k=0)
    with pytest.raises(ValueError, match="shape"):
        isotropy_metrics(torch.ones(3))
    with pytest.raises(TypeError, match="W_V must be floating point"):
        vo_head_isotropy(torch.ones(4, 4, dtype=torch.int8), torch.eye(4), num_heads=2)
    with pytest.raises(TypeError):
        isotropy_metrics(torch.eye(3, dtype=torch.int64))


def test_many_matrices_grouped_by_shape_match_single_calls():
    gen = torch.Generator().manual_seed(5)
    named = {
        "a": torch.randn(12, 5, generator=gen),
        "b": torch.randn(5, 12, generator=gen),  # joins a's group as its transpose
        "c": torch.randn(6, 6, generator=gen),
        "d": torch.zeros(12, 5),
        "e": torch.randn(6, 6, generator=gen, dtype=torch.float64),
    }
    out = isotropy_metrics_many(named, k=3)
    assert list(out) == list(named)
    for name, w in named.items():
        single = isotropy_metrics(w, k=3)
        for key in METRICS:
            assert out[name][key] == pytest.approx(float(single[key]), rel=1e-6, abs=1e-12)


# --- VO products ---------------------------------------------------------------------------


def _vo(layers: int, d: int, heads: int, seed: int, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    w_v = torch.randn(layers, d, d, generator=gen, dtype=dtype)
    w_o = torch.randn(layers, d, d, generator=gen, dtype=dtype)
    return w_v, w_o


def test_vo_heads_slice_rows_of_v_and_columns_of_o():
    w_v, w_o = _vo(2, 12, 3, seed=6)
    products = vo_head_products(w_v, w_o, 3)
    assert products.shape == (2, 3, 12, 12)
    for h in range(3):
        rows = slice(4 * h, 4 * (h + 1))
        torch.testing.assert_close(products[:, h], w_o[:, :, rows] @ w_v[:, rows, :])
        assert torch.linalg.matrix_rank(products[1, h]).item() == 4
    torch.testing.assert_close(vo_stacked(w_v, w_o), products.sum(dim=1))
    v_heads, o_heads = split_vo_heads(w_v, w_o, 3)
    assert v_heads.shape == (2, 3, 4, 12) and o_heads.shape == (2, 3, 12, 4)


def test_vo_head_singular_values_via_qr_match_the_explicit_product():
    w_v, w_o = _vo(3, 48, 4, seed=7)
    w_v[1, 12:24, 5:] = 0.0  # head 1 of layer 1: W_V block of rank 5 -> product rank 5
    fast = vo_head_singular_values(w_v, w_o, 4)
    direct = torch.linalg.svdvals(vo_head_products(w_v, w_o, 4))
    assert fast.shape == (3, 4, 12)
    torch.testing.assert_close(fast, direct[..., :12], rtol=1e-10, atol=1e-10 * direct.max())
    fast_m = vo_head_isotropy(w_v, w_o, 4)
    direct_m = isotropy_metrics(vo_head_products(w_v, w_o, 4))
    assert fast_m["rank"][1, 1].item() == 5 and direct_m["rank"][1, 1].item() == 5
    assert (fast_m["rank"][0] == 12).all()
    for key in METRICS:
        torch.testing.assert_close(fast_m[key], direct_m[key])


def test_vo_head_float32_rank_matches_the_product_tolerance():
    w_v, w_o = _vo(1, 96, 6, seed=8, dtype=torch.float32)
    fast = vo_head_isotropy(w_v, w_o, 6)
    direct = isotropy_metrics(vo_head_products(w_v, w_o, 6))
    assert (fast["rank"] == 16).all() and (direct["rank"] == 16).all()
    torch.testing.assert_close(fast["erank"], direct["erank"], rtol=1e-4, atol=0)


def test_vo_falls_back_to_the_product_when_heads_are_wide():
    gen = torch.Generator().manual_seed(9)
    w_v = torch.randn(8, 3, generator=gen, dtype=torch.float64)  # 2 heads of d_h = 4 > d_in = 3
    w_o = torch.randn(5, 8, generator=gen, dtype=torch.float64)
    s = vo_head_singular_values(w_v, w_o, 2)
    torch.testing.assert_close(s, torch.linalg.svdvals(vo_head_products(w_v, w_o, 2)))


def test_vo_shape_errors():
    with pytest.raises(ValueError, match="divisible"):
        vo_head_products(torch.ones(10, 4), torch.ones(4, 10), 3)
    with pytest.raises(ValueError, match="inner"):
        vo_stacked(torch.ones(10, 4), torch.ones(4, 9))

"""Spectral isotropy of weight matrices (paper A, Sec. 4.2), batched over leading dimensions.

For a matrix with singular values σ_1 ≥ … ≥ σ_n keep the r *numerically non-zero* ones,
σ_i > rtol · σ_1 (default ``rtol = max(rows, cols) · eps(dtype)``, the rule of
``torch.linalg.matrix_rank``; for bare singular values ``n · eps``), and let
q_i = σ_i² / Σ_{j≤r} σ_j² (the share of energy in direction i). Then

- normalised SVD entropy  H = −(1/log r) Σ q_i log q_i      ∈ [0, 1], higher = more isotropic
- effective rank          eRank = exp(−Σ q_i log q_i)      ∈ [1, r], higher = more isotropic
- top-k energy            TopE_k = Σ_{i≤k} q_i             ∈ [k/r, 1], lower = more isotropic
- quantile ratio          Q75/25 = Q_0.75(σ²) / Q_0.25(σ²)  ≥ 1, lower = more isotropic

Quantiles are over the r non-zero σ_i² with linear interpolation between order statistics
(position p·(r − 1) in the ascending list: ``torch.quantile`` / ``numpy.quantile`` default).

Conventions where the formulas are undefined (no NaN is ever returned):
rank r ≤ 1 gives H = 0 (a single direction has no spread; log r = 0);
r < k gives TopE_k = 1 (all the energy is in the top r ≤ k directions);
the zero matrix (r = 0) gives H = 0, eRank = 0, TopE_k = 0, Q75/25 = 1 — check ``rank`` to tell
it apart (isotropy is undefined there: ``tailmem diagnose`` prints such rows as not measured).
An empty matrix (m or n = 0, e.g. an FFN of width 0) is the zero map: it has r = 0 too, as do
no singular values at all. Metrics are computed in float64 and returned in the input's floating
dtype (float32 for half-precision inputs, whose SVD runs in float32). The metrics are
scale-invariant, so :func:`isotropy_metrics` first scales each matrix by a power of two to a
largest entry in [0.5, 1) (:func:`unit_scaled`, exact): weights near the float32 limits neither
overflow nor underflow in the SVD.

VO matrices (the paper does not say how it forms them; we offer both)
With torch ``Linear`` layout, W_V is (H·d_h, d) and W_O is (d, H·d_h). Head h owns rows
h·d_h:(h+1)·d_h of W_V and the same columns of W_O. The *per-head* VO matrix is
W_O,h · W_V,h (d × d, rank ≤ d_h); the *stacked* VO matrix is W_O · W_V = Σ_h W_O,h · W_V,h
(d × d), the map that the attention output applies to values when all heads attend alike.
For Hugging Face GPT-2 ``Conv1D`` weights, stored (in, out), pass the transposes.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

METRICS = ("svd_entropy", "erank", "topk_energy", "q75_25", "rank")


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _tolerance(n: int, dtype: torch.dtype, rtol: float | None) -> float:
    if rtol is not None:
        if rtol < 0:
            raise ValueError(f"rtol must be non-negative, got {rtol}")
        return rtol
    return n * torch.finfo(_compute_dtype(dtype)).eps


def _prepare(s: Tensor, rtol: float | None) -> tuple[Tensor, Tensor, torch.dtype]:
    """(σ descending in float64, non-zero mask, output dtype); no σ at all (an empty matrix) is
    read as the single σ = 0 of the zero map."""
    if s.ndim < 1:
        raise ValueError(f"singular values need shape (..., n), got {tuple(s.shape)}")
    if not torch.is_floating_point(s):
        raise TypeError(f"singular values must be floating point, got {s.dtype}")
    if s.shape[-1] == 0:
        s = s.new_zeros(*s.shape[:-1], 1)
    out_dtype = _compute_dtype(s.dtype)
    tol = _tolerance(s.shape[-1], s.dtype, rtol)
    sd = s.detach().to(torch.float64).abs().sort(dim=-1, descending=True).values
    mask = sd > tol * sd[..., :1]
    return sd, mask, out_dtype


def _fractions(sd: Tensor, mask: Tensor) -> Tensor:
    energy = torch.where(mask, sd.square(), torch.zeros_like(sd))
    total = energy.sum(dim=-1, keepdim=True)
    return energy / torch.where(total > 0, total, torch.ones_like(total))


def energy_fractions(s: Tensor, rtol: float | None = None) -> Tensor:
    """q_i = σ_i² / Σ_j σ_j² over the non-zero σ, descending (0 elsewhere; all 0 when r = 0)."""
    sd, mask, out = _prepare(s, rtol)
    return _fractions(sd, mask).to(out)


def numerical_rank(s: Tensor, rtol: float | None = None) -> Tensor:
    """Number of singular values above ``rtol · σ_max`` (int64, shape ``s.shape[:-1]``)."""
    _, mask, _ = _prepare(s, rtol)
    return mask.sum(dim=-1)


def _entropy(q: Tensor) -> Tensor:
    return -torch.special.xlogy(q, q).sum(dim=-1)


def _svd_entropy(q: Tensor, rank: Tensor) -> Tensor:
    log_r = torch.log(rank.clamp(min=2).to(q.dtype))
    return torch.where(rank >= 2, _entropy(q) / log_r, torch.zeros_like(log_r))


def _erank(q: Tensor, rank: Tensor) -> Tensor:
    erank = torch.exp(_entropy(q))
    return torch.where(rank >= 1, erank, torch.zeros_like(erank))


def _topk(q: Tensor, k: int) -> Tensor:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return q[..., :k].sum(dim=-1)


def _quantile_desc(values: Tensor, rank: Tensor, p: float) -> Tensor:
    """Quantile ``p`` (linear interpolation) of the first ``rank`` entries of descending values."""
    h = p * (rank - 1).clamp(min=0).to(values.dtype)
    lo, hi = h.floor(), h.ceil()
    last = (rank - 1).clamp(min=0)
    v_lo = values.gather(-1, (last - lo.long()).clamp(min=0).unsqueeze(-1)).squeeze(-1)
    v_hi = values.gather(-1, (last - hi.long()).clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return v_lo + (h - lo) * (v_hi - v_lo)


def _quantile_ratio(sd: Tensor, rank: Tensor, upper: float, lower: float) -> Tensor:
    if not 0.0 <= lower <= upper <= 1.0:
        raise ValueError(f"need 0 <= lower <= upper <= 1, got lower={lower}, upper={upper}")
    sq = sd.square()
    q_up, q_low = _quantile_desc(sq, rank, upper), _quantile_desc(sq, rank, lower)
    ok = rank >= 1
    return torch.where(ok, q_up / torch.where(ok, q_low, torch.ones_like(q_low)), 1.0)


def svd_entropy(s: Tensor, rtol: float | None = None) -> Tensor:
    """Normalised SVD entropy H = −(1/log r) Σ q_i log q_i (0 when r ≤ 1)."""
    sd, mask, out = _prepare(s, rtol)
    return _svd_entropy(_fractions(sd, mask), mask.sum(-1)).to(out)


def effective_rank(s: Tensor, rtol: float | None = None) -> Tensor:
    """Effective rank exp(−Σ q_i log q_i) (0 for the zero matrix)."""
    sd, mask, out = _prepare(s, rtol)
    return _erank(_fractions(sd, mask), mask.sum(-1)).to(out)


def top_k_energy(s: Tensor, k: int = 10, rtol: float | None = None) -> Tensor:
    """TopE_k = Σ_{i≤k} q_i (1 when r ≤ k, 0 for the zero matrix)."""
    sd, mask, out = _prepare(s, rtol)
    return _topk(_fractions(sd, mask), k).to(out)


def quantile_ratio(
    s: Tensor, upper: float = 0.75, lower: float = 0.25, rtol: float | None = None
) -> Tensor:
    """Q_upper(σ²) / Q_lower(σ²) over the non-zero σ (1 for the zero matrix)."""
    sd, mask, out = _prepare(s, rtol)
    return _quantile_ratio(sd, mask.sum(-1), upper, lower).to(out)


def spectral_metrics(s: Tensor, k: int = 10, rtol: float | None = None) -> dict[str, Tensor]:
    """All four metrics (plus ``rank``) from singular values ``(..., n)``; keys :data:`METRICS`."""
    sd, mask, out = _prepare(s, rtol)
    q = _fractions(sd, mask)
    rank = mask.sum(-1)
    return {
        "svd_entropy": _svd_entropy(q, rank).to(out),
        "erank": _erank(q, rank).to(out),
        "topk_energy": _topk(q, k).to(out),
        "q75_25": _quantile_ratio(sd, rank, 0.75, 0.25).to(out),
        "rank": rank,
    }


def _check_matrix(w: Tensor, what: str = "W") -> None:
    if w.ndim < 2:
        raise ValueError(f"{what} needs shape (..., m, n), got {tuple(w.shape)}")
    if not torch.is_floating_point(w):
        raise TypeError(f"{what} must be floating point, got {w.dtype}")
    if not bool(torch.isfinite(w).all()):
        raise ValueError(f"{what} has non-finite entries; spectral metrics need finite weights")


def singular_values(w: Tensor) -> Tensor:
    """``torch.linalg.svdvals`` of ``(..., m, n)``, on the tall orientation (same values, faster).

    LAPACK is several times slower on wide row-major matrices than on their transposes, so wide
    matrices are transposed (a free view). Half-precision inputs are computed in float32.
    """
    _check_matrix(w)
    w = w.detach().to(_compute_dtype(w.dtype))
    return torch.linalg.svdvals(w.mT if w.shape[-2] < w.shape[-1] else w)


def unit_scaled(w: Tensor, what: str = "W") -> Tensor:
    """``w`` (``(..., m, n)``, checked) in its compute dtype, each matrix multiplied by the power
    of two that brings its largest |entry| into [0.5, 1) (zero and empty matrices unchanged).

    Exact (only the exponent changes), and the spectral metrics do not depend on the scale;
    products and SVDs of the scaled matrices then stay far from float32 overflow (entries near
    3e38, or 1e20 · 1e20 in a product) and underflow (1e-25 · 1e-25 rounds to 0).
    """
    _check_matrix(w, what)
    w = w.detach().to(_compute_dtype(w.dtype))
    if w.numel() == 0:
        return w
    _, exponent = torch.frexp(w.abs().amax(dim=(-2, -1), keepdim=True))
    return torch.ldexp(w, -exponent)


def isotropy_metrics(w: Tensor, k: int = 10, rtol: float | None = None) -> dict[str, Tensor]:
    """Spectral metrics of every matrix in ``w`` (``(..., m, n)``) from one ``svdvals`` call.

    The default zero tolerance is ``max(m, n) · eps``; values have shape ``w.shape[:-2]``.
    """
    s = singular_values(unit_scaled(w))
    return spectral_metrics(s, k, _tolerance(max(w.shape[-2:]), w.dtype, rtol))


def isotropy_metrics_many(
    named: Mapping[str, Tensor], k: int = 10, rtol: float | None = None
) -> dict[str, dict[str, float]]:
    """Metrics of many named 2-D matrices, one batched ``svdvals`` call per (shape, dtype) group.

    A wide matrix joins the group of its transpose's shape. Returns
    ``{name: {metric: value}}`` in the order of ``named``.
    """
    groups: dict[tuple[tuple[int, int], torch.dtype], list[str]] = {}
    for name, w in named.items():
        if w.ndim != 2:
            raise ValueError(f"{name}: expected a 2-D matrix, got shape {tuple(w.shape)}")
        tall = (max(w.shape), min(w.shape))
        groups.setdefault((tall, _compute_dtype(w.dtype)), []).append(name)
    results: dict[str, dict[str, float]] = {}
    for (shape, dtype), names in groups.items():
        mats = [named[n] if named[n].shape == shape else named[n].mT for n in names]
        stack = torch.stack([w.detach().to(dtype) for w in mats])
        metrics = isotropy_metrics(stack, k, rtol)
        for i, name in enumerate(names):
            results[name] = {key: float(value[i]) for key, value in metrics.items()}
    return {name: results[name] for name in named}


# ----------------------------------------------------------------------------------------------
# VO products


def split_vo_heads(w_v: Tensor, w_o: Tensor, num_heads: int) -> tuple[Tensor, Tensor]:
    """Per-head blocks: W_V,h ``(..., H, d_h, d_in)`` and W_O,h ``(..., H, d_out, d_h)``.

    ``w_v`` is ``(..., H·d_h, d_in)`` (rows h·d_h:(h+1)·d_h belong to head h) and ``w_o`` is
    ``(..., d_out, H·d_h)`` (the same columns), torch ``Linear`` layout, any leading batch dims.
    """
    if not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")
    inner = w_v.shape[-2]
    if w_o.shape[-1] != inner or inner % num_heads:
        raise ValueError(
            f"W_V {tuple(w_v.shape)} and W_O {tuple(w_o.shape)} must share an inner size "
            f"divisible by num_heads={num_heads}"
        )
    d_h = inner // num_heads
    v_heads = w_v.reshape(*w_v.shape[:-2], num_heads, d_h, w_v.shape[-1])
    o_heads = w_o.reshape(*w_o.shape[:-1], num_heads, d_h).movedim(-2, -3)
    return v_heads, o_heads


def vo_head_products(w_v: Tensor, w_o: Tensor, num_heads: int) -> Tensor:
    """Per-head VO matrices W_O,h · W_V,h, shape ``(..., H, d_out, d_in)``, rank ≤ d_h each."""
    v_heads, o_heads = split_vo_heads(w_v, w_o, num_heads)
    return o_heads @ v_heads


def vo_stacked(w_v: Tensor, w_o: Tensor) -> Tensor:
    """Stacked VO matrix W_O · W_V = Σ_h W_O,h · W_V,h, shape ``(..., d_out, d_in)``."""
    if w_o.shape[-1] != w_v.shape[-2]:
        raise ValueError(f"W_O {tuple(w_o.shape)} @ W_V {tuple(w_v.shape)}: inner sizes differ")
    return w_o @ w_v


def vo_head_singular_values(w_v: Tensor, w_o: Tensor, num_heads: int) -> Tensor:
    """Singular values of every per-head VO product, ``(..., H, d_h)``, without forming it.

    With thin QR factorisations W_O,h = Q_O R_O and W_V,hᵀ = Q_V R_V (Q with orthonormal
    columns), W_O,h W_V,h = Q_O (R_O R_Vᵀ) Q_Vᵀ has the singular values of the d_h × d_h matrix
    R_O R_Vᵀ: two batched thin QRs and one small SVD instead of a d_out × d_in SVD per head.
    Falls back to the explicit product when d_h ≥ min(d_out, d_in).
    """
    _check_matrix(w_v, "W_V")
    _check_matrix(w_o, "W_O")
    v_heads, o_heads = split_vo_heads(w_v, w_o, num_heads)
    dtype = _compute_dtype(torch.promote_types(w_v.dtype, w_o.dtype))
    v_heads, o_heads = v_heads.detach().to(dtype), o_heads.detach().to(dtype)
    d_h = v_heads.shape[-2]
    if d_h >= min(o_heads.shape[-2], v_heads.shape[-1]):
        return singular_values(o_heads @ v_heads)
    r_o = torch.linalg.qr(o_heads, mode="r").R
    r_v = torch.linalg.qr(v_heads.mT, mode="r").R
    return torch.linalg.svdvals(r_o @ r_v.mT)


def vo_head_isotropy(
    w_v: Tensor, w_o: Tensor, num_heads: int, k: int = 10, rtol: float | None = None
) -> dict[str, Tensor]:
    """Spectral metrics of every per-head VO product, shape ``(..., H)``.

    The zero tolerance is that of the full ``d_out × d_in`` product (``max(d_out, d_in)·eps``).
    """
    s = vo_head_singular_values(unit_scaled(w_v, "W_V"), unit_scaled(w_o, "W_O"), num_heads)
    size = max(w_o.shape[-2], w_v.shape[-1])
    return spectral_metrics(s, k, _tolerance(size, s.dtype, rtol))

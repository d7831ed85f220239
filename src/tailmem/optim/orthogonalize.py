"""Orthogonalisation of gradient matrices: the polar factor ``U Vᵀ`` of ``G = U S Vᵀ``.

Muon's update is the orthogonal polar factor of the (momentum-averaged) gradient, i.e. every
non-zero singular value set to 1 (paper A, Sec. 5: "Muon: W -= η U Vᵀ"). :func:`orthogonalize`
computes it exactly ("svd"), iterates to it ("cubic"), or approximates it with a few odd-polynomial
Newton–Schulz steps ("ns5", "polar_express", "gram_ns", "auto").

Every polynomial method maps each singular value ``s`` of the normalised input ``X`` through the
same scalar odd polynomial ``s -> a·s + b·s³ + c·s⁵`` per step, implemented as
``X <- (a·I + b·A + c·A²)·X`` with ``A = X Xᵀ``. The inputs are first transposed so that ``X`` is
wide (``m <= n``), which makes ``A`` the small ``m × m`` Gram matrix. Because the polynomial acts
on singular values one by one, left and right singular vectors are kept and the output is
``U f(S) Vᵀ``; the bands below are bounds on ``f`` for the scaled singular value
``s = σ / ‖G‖_F`` (``/ (1.02·‖G‖_F)`` for Polar Express).
"""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from tailmem.optim.gram_table import gram_pays

NS5_COEFFICIENTS: tuple[float, float, float] = (3.4445, -4.7750, 2.0315)
"""Keller Jordan's quintic: slope 3.4445 at zero, does not converge to 1 but lands in a band."""

POLAR_EXPRESS_COEFFICIENTS: tuple[tuple[float, float, float], ...] = (
    (8.1566, -22.4833, 15.8788),
    (4.0429, -2.8089, 0.5000),
    (3.8917, -2.7725, 0.5061),
    (3.2858, -2.3681, 0.4645),
    (2.3465, -1.7098, 0.4232),
)
"""Per-step Polar Express quintics (one tuple per step); ``steps > 5`` repeats the last tuple."""

POLAR_EXPRESS_FIXED_POINT = 1.035332
"""Fixed point ``s* > 1`` of the last Polar Express step (``a + b·s*² + c·s*⁴ = 1``).

The last tuple does not fix 1, so ``steps > 5`` moves every singular value towards ``s*``:
the band is [0.956, 1.130] at 6 steps, [0.997, 1.082] at 8, and ``s* ± 1e-4`` after ≈40.
"""

POLAR_EXPRESS_SAFETY = 1.02
"""Polar Express divides the input by ``1.02·‖G‖_F`` so that rounding cannot push ``s`` past 1."""

CUBIC_COEFFICIENTS: tuple[float, float, float] = (1.5, -0.5, 0.0)
"""Convergent cubic Newton–Schulz ``X <- 1.5·X - 0.5·X Xᵀ X``: fixes 1, quadratic convergence."""

CUBIC_MAX_STEPS = 100
"""Step cap of the "cubic" iteration; a singular value ``s`` needs ``≈ log(1/s)/log(1.5) + 5``."""

METHODS: tuple[str, ...] = ("ns5", "polar_express", "cubic", "svd", "gram_ns", "auto")
"""The orthogonalisation methods, by name: what ``orthogonalize(G, method=...)`` and
``Muon(..., method=...)`` accept."""

POLYNOMIAL_METHODS: tuple[str, ...] = ("ns5", "polar_express", "gram_ns", "auto")
"""The methods that run a fixed number of polynomial steps (no host sync): these compile."""

DEFAULT_STEPS: dict[str, int] = {"ns5": 5, "polar_express": 5, "gram_ns": 5, "auto": 5}

BAND_MIN_SINGULAR = 2e-3
"""The bands hold for scaled singular values ``s = σ/‖G‖_F >= BAND_MIN_SINGULAR``."""

BANDS: dict[str, tuple[float, float]] = {
    "ns5": (0.675, 1.21),
    "polar_express": (0.855, 1.145),
    "gram_ns": (0.855, 1.145),
    "auto": (0.855, 1.145),
}
"""Output singular values (float32 compute, default 5 steps) for ``s >= BAND_MIN_SINGULAR``.

Measured from the scalar composite polynomial on a dense log grid of ``s`` in
``[2e-3, 1]`` (ns5: [0.6818, 1.2024]; Polar Express: [0.8586, 1.1411]) widened by float32
rounding seen in ``tests/optim/test_orthogonalize.py`` on random, ill-conditioned and batched
inputs. Smaller ``s`` are only amplified (by at most ≈484× for ns5, ≈970× for Polar Express
over 5 steps) and stay below the upper bound. "gram_ns" and "auto" run the Polar Express
polynomial, so they share that band.
"""

GRAM_ASPECT_THRESHOLD = 1.5
""""gram_ns" iterates on the Gram matrix when ``n > 1.5·m`` (``m <= n``); see :func:`_gram_ns`."""


def orthogonalize(
    G: Tensor,
    method: str = "ns5",
    steps: int | None = None,
    dtype: torch.dtype | None = None,
    eps: float = 1e-7,
    coefficients: tuple[float, float, float] | None = None,
) -> Tensor:
    """Orthogonal polar factor of ``G`` (a matrix or a batch ``(..., m, n)``), same shape and dtype.

    Args:
        G: input of at least 2 dimensions; the last two are the matrix. Never modified.
        method: one of :data:`METHODS`:
            ``"ns5"`` 5 Newton–Schulz quintic steps with :data:`NS5_COEFFICIENTS` on
            ``G/(‖G‖_F + eps)`` (per matrix); singular values land in ``BANDS["ns5"]``.
            ``"polar_express"`` the per-step :data:`POLAR_EXPRESS_COEFFICIENTS` on
            ``G/(1.02·‖G‖_F + eps)``; ``steps > 5`` repeats the last tuple (converging to
            :data:`POLAR_EXPRESS_FIXED_POINT`, not 1), ``steps < 5`` uses the first tuples.
            ``"cubic"`` :data:`CUBIC_COEFFICIENTS` iterated to convergence (see :func:`_cubic`);
            lands on the polar factor; ``steps`` caps the iteration (default
            :data:`CUBIC_MAX_STEPS`).
            ``"svd"`` exact ``U_r V_rᵀ`` over the numerical rank ``r`` (singular values above
            ``max(m, n)·eps(dtype)·σ_max``); zero singular values map to zero.
            ``"gram_ns"`` the Polar Express polynomial run on the small Gram matrix (see
            :func:`_gram_ns`): fewer FLOPs for rectangular matrices, same band.
            ``"auto"`` the Polar Express polynomial, run as "gram_ns" where a table measured on
            the input's kind of device says that is faster
            (:func:`~tailmem.optim.gram_table.gram_pays`), else as "polar_express"; same band.
        steps: number of polynomial steps (``None``: :data:`DEFAULT_STEPS`); ignored by "svd".
        dtype: compute dtype (``None``: the input's dtype), e.g. ``torch.bfloat16`` for "ns5" on
            a GPU. "cubic" and "svd" compute in at least float32; "gram_ns" forms its Gram
            matrix and runs its ``m × m`` iteration in at least float32. The result is cast back
            to ``G.dtype``.
        eps: added to the Frobenius norm before dividing, so a zero input returns zeros.
        coefficients: the ``(a, b, c)`` of every "ns5" step (``None``: :data:`NS5_COEFFICIENTS`;
            ``torch.optim.Muon``'s ``ns_coefficients``). Only "ns5" takes them.

    Range: each matrix is divided by the power of two nearest its largest entry before its norm
    is taken (see :func:`_normalise`), so entries up to the dtype's maximum do not overflow the
    sum of squares, and the result is bit-identical to dividing by the unscaled norm. A matrix
    with a NaN or infinite entry raises :class:`NonFiniteInputError` (a ``ValueError``): no
    method has a meaningful polar factor for it.

    Tall inputs (``m > n``) are transposed, processed and transposed back, so the Gram matrix is
    always the smaller one.
    """
    check_arguments(G, method, steps, dtype, eps, coefficients)
    if G.numel() == 0:
        return torch.zeros_like(G)
    wide = widen(G)
    check_finite([wide.finite])
    out = orthogonalize_wide(wide.X, wide.scale, method, steps, dtype, eps, coefficients)
    return narrow(out, wide).reshape(G.shape)


@dataclass(frozen=True)
class Finite:
    """Whether each matrix of a batch is finite: a device tensor, read by :func:`check_finite`."""

    flags: Tensor
    """``(B,)`` bool."""
    shape: tuple[int, int]
    """The (wide) shape of the batch's matrices, for the error message."""


@dataclass(frozen=True)
class Wide:
    """A batch of matrices as the orthogonalisation works on them (see :func:`widen`)."""

    X: Tensor
    """``(B, m, n)`` with ``m <= n``: a view of the input, transposed when it is tall."""
    transposed: bool
    scale: Tensor
    """``(B, 1, 1)``, at least float32: per matrix the power of two ``2^e`` with
    ``max|X| < 2^e`` (1 for an all-zero matrix); see :func:`_normalise`."""
    finite: Finite


def widen(G: Tensor) -> Wide:
    """``G`` (``(..., m, n)``) as a batch of wide matrices with their scales, without a host sync.

    Reading whether every matrix is finite is left to :func:`check_finite`, so that a caller
    with several batches (:class:`~tailmem.optim.Muon`, one batch per shape) waits for the
    device once, not once per batch.
    """
    m, n = G.shape[-2], G.shape[-1]
    X = G.reshape(-1, m, n)
    if m > n:
        X = X.mT
    # max |x| from the largest and the negated smallest entry: two reading passes, no |X| copy
    # (on a CPU 9x faster than X.abs().amax); a NaN propagates through both
    largest = X.amax(dim=(-2, -1), keepdim=True)
    peak = torch.maximum(largest, X.amin(dim=(-2, -1), keepdim=True).neg())
    peak = peak.to(_at_least_float32(X.dtype))
    _, exponent = torch.frexp(peak)
    finite = Finite(torch.isfinite(peak).flatten(), (X.shape[-2], X.shape[-1]))
    return Wide(X, m > n, torch.ldexp(torch.ones_like(peak), exponent), finite)


def check_finite(batches: Sequence[Finite]) -> None:
    """Raise :class:`NonFiniteInputError` naming the first matrix with a NaN or infinite entry.

    One host sync per device for all ``batches`` (none when the sequence is empty); batches on
    the meta device hold no values and pass.
    """
    live = [b for b in batches if b.flags.device.type != "meta"]
    bad = first_false([batch.flags.all() for batch in live])
    if bad is None:
        return
    batch = live[bad]
    index = int((~batch.flags).nonzero()[0])
    raise NonFiniteInputError(
        f"orthogonalize got a NaN or infinite entry in matrix {index} of a batch of "
        f"{batch.flags.shape[0]} matrices of shape {batch.shape}; expected finite values"
    )


def first_false(flags: Sequence[Tensor]) -> int | None:
    """The position of the first False among 0-d bool ``flags`` (None: all True), read with one
    host sync per device the flags live on."""
    by_device: dict[torch.device, list[int]] = {}
    for position, flag in enumerate(flags):
        by_device.setdefault(flag.device, []).append(position)
    bad = []
    for positions in by_device.values():
        stack = torch.stack([flags[k] for k in positions])
        if not bool(stack.all()):
            bad.append(positions[int((~stack).nonzero()[0])])
    return min(bad) if bad else None


def narrow(out: Tensor, wide: Wide) -> Tensor:
    """A result of :func:`orthogonalize_wide` in the input's orientation, ``(B, rows, cols)``."""
    return out.mT if wide.transposed else out


def orthogonalize_wide(
    X: Tensor,
    scale: Tensor,
    method: str,
    steps: int | None,
    dtype: torch.dtype | None,
    eps: float,
    coefficients: tuple[float, float, float] | None,
) -> Tensor:
    """The polar factor of each finite wide matrix of ``X`` (``(B, m, n)``, ``m <= n``), in
    ``X.dtype``: :func:`orthogonalize`'s work after :func:`widen` and :func:`check_finite`.

    ``scale`` is :attr:`Wide.scale`; the other arguments are :func:`orthogonalize`'s (checked
    there). ``X`` is never modified. For :data:`POLYNOMIAL_METHODS` this is straight-line tensor
    code that :func:`compiled` compiles whole.
    """
    compute = dtype or X.dtype
    if method in ("cubic", "svd"):
        compute = _at_least_float32(compute)
    if method == "svd":
        return _svd_polar(X.to(compute)).to(X.dtype)
    m, n = X.shape[-2], X.shape[-1]
    safety = 1.0 if method in ("ns5", "cubic") else POLAR_EXPRESS_SAFETY
    Y = _normalise(X, safety, eps, compute, scale)
    if method == "ns5":
        a, b, c = coefficients if coefficients is not None else NS5_COEFFICIENTS
        out = _polynomial_steps(Y, ((a, b, c),) * (steps or DEFAULT_STEPS["ns5"]))
    elif method == "cubic":
        out = _cubic(Y, steps or CUBIC_MAX_STEPS)
    elif method == "gram_ns" or (method == "auto" and gram_pays(m, n, X.device.type)):
        out = _gram_ns(Y, polar_express_schedule(steps or DEFAULT_STEPS[method]))
    else:  # polar_express, and "auto" where the Gram form does not pay
        out = _polynomial_steps(Y, polar_express_schedule(steps or DEFAULT_STEPS[method]))
    return out.to(X.dtype)


@functools.cache
def compiled(backend: str, group: Hashable) -> Callable[..., Tensor]:
    """:func:`orthogonalize_wide` compiled by ``torch.compile`` with ``backend`` (e.g.
    "inductor") for the shape group ``group`` (any hashable name of it, e.g. matrix shape, dtype,
    device and settings).

    Each group gets its own copy of the function's code: torch keeps the graphs of one code
    object in one cache capped at ``torch._dynamo.config.recompile_limit`` (8), which a model
    with many shape groups, or many optimisers in one process, would exceed. Within a group one
    graph per batch size (``dynamic=False``, ``fullgraph=True``): a later call with the same
    batch size reuses it. Only for :data:`POLYNOMIAL_METHODS` ("cubic" stops on a data-dependent
    test, "svd" is one LAPACK call).
    """
    fn = orthogonalize_wide
    copy = types.FunctionType(
        fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )
    return torch.compile(copy, backend=backend, dynamic=False, fullgraph=True)


def check_arguments(
    G: Tensor,
    method: str,
    steps: int | None,
    dtype: torch.dtype | None,
    eps: float,
    coefficients: tuple[float, float, float] | None,
) -> None:
    """Refuse what :func:`orthogonalize` cannot take, one error naming it (its docstring); also
    :func:`~tailmem.optim.muon_update`'s check of its input."""
    if method not in METHODS:
        raise ValueError(f"unknown orthogonalisation method {method!r}; expected one of {METHODS}")
    if G.ndim < 2:
        raise ValueError(
            f"orthogonalize needs a matrix or a batch of matrices, got shape {tuple(G.shape)}"
        )
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ValueError(f"steps must be a positive integer or None, got {steps!r}")
    if not G.is_floating_point():
        raise TypeError(f"orthogonalize needs a floating-point tensor, got {G.dtype}")
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(
            f"orthogonalize dtype must be a floating torch.dtype or None, got {dtype!r}"
        )
    if coefficients is not None and method != "ns5":
        raise ValueError(f"coefficients are the ns5 polynomial's; method {method!r} takes none")
    if coefficients is not None and (
        len(coefficients) != 3 or not all(math.isfinite(float(c)) for c in coefficients)
    ):
        raise ValueError(f"coefficients must be 3 finite numbers (a, b, c), got {coefficients!r}")
    _check_eps(eps)


def polar_express_schedule(steps: int) -> tuple[tuple[float, float, float], ...]:
    """The Polar Express coefficient tuples for ``steps`` steps (the last tuple repeats)."""
    table = POLAR_EXPRESS_COEFFICIENTS
    return tuple(table[min(i, len(table) - 1)] for i in range(steps))


def orthogonalize_flops(
    m: int, n: int, method: str, steps: int | None = None, device_type: str = "cpu"
) -> int | None:
    """Multiply–add FLOPs (2 per multiply-add) of one ``m × n`` matrix; ``None`` for "svd".

    With ``m <= n`` after transposition, one X-space quintic step costs ``X Xᵀ`` (``2m²n``), the
    ``b·A + c·A²`` product (``2m³``) and ``(…)·X`` (``2m²n``): ``4m²n + 2m³``. The cubic step has
    no ``A²``: ``4m²n`` (its step count is data-dependent; ``steps`` defaults to the cap).
    "gram_ns" is counted as in :func:`_gram_ns`; "auto" as "gram_ns" where
    :func:`~tailmem.optim.gram_table.gram_pays` on ``device_type``, else as "polar_express".
    Element-wise work (``O(mn)``) is not counted.
    """
    m, n = min(m, n), max(m, n)
    if method == "auto":
        method = "gram_ns" if gram_pays(m, n, device_type) else "polar_express"
    if method == "svd":
        return None
    if method == "cubic":
        return (steps or CUBIC_MAX_STEPS) * 4 * m * m * n
    k = steps or DEFAULT_STEPS[method]
    x_space = k * (4 * m * m * n + 2 * m**3)
    if method == "gram_ns" and _use_gram(m, n):
        return 4 * m * m * n + (8 * k - 6) * m**3
    return x_space


def _at_least_float32(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if torch.finfo(dtype).bits < 32 else dtype


class NonFiniteInputError(ValueError):
    """:func:`orthogonalize` was given a matrix with a NaN or infinite entry."""


def _check_eps(eps: float) -> None:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0.0 < eps < math.inf:
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")


def _normalise(X: Tensor, safety: float, eps: float, dtype: torch.dtype, scale: Tensor) -> Tensor:
    """``X / (safety·‖X‖_F + eps)`` per matrix as a new contiguous ``dtype`` tensor.

    The norm is taken of ``X / scale`` (``scale`` a power of two per matrix, from
    :func:`widen`), whose entries are below 1 in magnitude, so the sum of squares cannot
    overflow; every operation commutes exactly with a power-of-two scaling, so
    ``(X/s) / ((safety·‖X‖_F + eps)/s)`` rounds to the same bits as the unscaled quotient. The
    norm is accumulated in at least float32. The quotient overwrites ``X/s`` when that is
    already a contiguous ``dtype`` tensor (one allocation, not two).
    """
    X = X.to(scale.dtype) / scale
    norm = torch.linalg.vector_norm(X, dim=(-2, -1), keepdim=True, dtype=scale.dtype)
    denominator = norm * safety + eps / scale
    if X.dtype == dtype and X.is_contiguous():
        return X.div_(denominator)
    out = torch.empty(X.shape, dtype=dtype, device=X.device)
    return torch.div(X, denominator, out=out)


def _polynomial_steps(X: Tensor, coefficients: tuple[tuple[float, float, float], ...]) -> Tensor:
    """``X <- (a·I + b·A + c·A²)·X`` with ``A = X Xᵀ`` for each ``(a, b, c)``; X is ``(B, m, n)``.

    Per step three batched products and nothing else of size ``m × n``: ``A = X Xᵀ``, then
    ``P = b·A + c·A·A`` in one fused ``baddbmm`` with ``a`` added to its diagonal (``O(m)``), then
    ``P X``. Folding ``a`` into ``P`` avoids the ``a·X`` term, which ``baddbmm`` would implement
    as a full copy of ``X`` per step. Buffers are preallocated and reused (a fresh
    multi-megabyte tensor per step would be page-faulted in again every time).
    """
    batch, m, _ = X.shape
    A = X.new_empty(batch, m, m)
    P = X.new_empty(batch, m, m)
    Y = torch.empty_like(X)
    for coefficient in coefficients:
        torch.bmm(X, X.mT, out=A)
        _quintic_factor(A, coefficient, out=P)
        torch.bmm(P, X, out=Y)
        X, Y = Y, X
    return X


def _quintic_factor(A: Tensor, coefficients: tuple[float, float, float], out: Tensor) -> Tensor:
    """``a·I + b·A + c·A²`` for a batch of symmetric ``m × m`` matrices, written into ``out``."""
    a, b, c = coefficients
    if c != 0.0:
        torch.baddbmm(A, A, A, beta=b, alpha=c, out=out)
    else:
        torch.mul(A, b, out=out)
    out.diagonal(dim1=-2, dim2=-1).add_(a)
    return out


def _cubic(X: Tensor, max_steps: int) -> Tensor:
    """Cubic Newton–Schulz ``X <- 1.5·X - 0.5·X Xᵀ X`` until each matrix is a partial isometry.

    The map ``s -> 1.5·s - 0.5·s³`` sends ``(0, 1]`` into ``(0, 1]``, fixes 0 and 1, and
    converges quadratically near 1 (``1 - s' ≈ 1.5·(1 - s)²``) while small singular values grow by
    1.5 per step; exact zeros stay zero. Convergence criterion (row space, per matrix):
    ``‖X - X Xᵀ X‖_F <= sqrt(eps(dtype))``. Its square is ``Σ s²(1 - s²)²``, so it holds only when
    every singular value is within ``≈ sqrt(eps)/2`` of 1 or below ``≈ sqrt(eps)`` (numerically
    zero; ``X Xᵀ`` is then a projector to that accuracy). The step that first meets it is applied
    once more (taking ``1 - s`` from ``sqrt(eps)`` to ``≈ eps``) and the matrix is then frozen, so
    each matrix's result does not depend on what else is in the batch. Singular values still below
    ``sqrt(eps)`` at that point are left near zero; ``max_steps`` caps the iteration.
    """
    a, b, _ = CUBIC_COEFFICIENTS
    tol = math.sqrt(torch.finfo(X.dtype).eps)
    active = torch.ones(X.shape[0], dtype=torch.bool, device=X.device)
    for _ in range(max_steps):
        A = torch.bmm(X, X.mT)
        X_new = torch.baddbmm(X, A, X, beta=a, alpha=b)
        residual = torch.linalg.matrix_norm(X_new - X) / (a - 1.0)
        X = torch.where(active[:, None, None], X_new, X)
        active = active & (residual > tol)
        if not bool(active.any()):
            break
    return X


def _svd_polar(X: Tensor) -> Tensor:
    """Exact polar factor ``U_r V_rᵀ`` over the numerical rank, per matrix.

    Singular values ``<= max(m, n)·eps(dtype)·σ_max`` (the usual numerical-rank tolerance, as in
    ``numpy.linalg.matrix_rank``) count as zero and map to zero, so a rank-deficient gradient gives
    a rank-deficient update instead of amplified rounding noise.
    """
    # X is wide (m <= n); LAPACK's SVD of the tall transpose is ≈15× faster on CPU (measured
    # 1.0 s against 18 s for 768×3072 in float32), so factor Xᵀ and transpose the result.
    U, sigma, Vh = torch.linalg.svd(X.mT, full_matrices=False)
    tol = max(X.shape[-2:]) * torch.finfo(X.dtype).eps * sigma[..., :1]
    keep = (sigma > tol).to(X.dtype)
    return ((U * keep.unsqueeze(-2)) @ Vh).mT


def _use_gram(m: int, n: int) -> bool:
    return n > GRAM_ASPECT_THRESHOLD * m


def _gram_ns(X: Tensor, coefficients: tuple[tuple[float, float, float], ...]) -> Tensor:
    """Quintic iteration run on the ``m × m`` Gram matrix ``A = X Xᵀ`` (``m <= n``).

    After ``k`` steps ``X_k = Q_k X_0`` where ``Q_k`` is a polynomial in ``A_0``; every matrix
    below is such a polynomial, so all of them commute and are symmetric. With
    ``P_k = a·I + b·A_k + c·A_k²`` (one fused product, as in the X-space step):

    * ``Q_1 = P_0`` (free) and ``Q_{k+1} = P_k Q_k``,
    * ``A_{k+1} = X_{k+1} X_{k+1}ᵀ = P_k A_k P_k``, computed as ``P_k (A_k P_k)``,
    * output ``Q_K X_0``: one ``m × m`` by ``m × n`` product at the end.

    FLOPs for ``K`` steps: ``X Xᵀ`` and ``Q X`` cost ``2m²n`` each; ``P_0`` one product of
    ``2m³``; every later step four (``A P``, ``P (A P)``, ``P`` and ``P Q``):
    ``4m²n + (8K - 6)m³`` against ``K(4m²n + 2m³)`` for the X-space iteration ("ns5", which per
    step forms ``X Xᵀ``, ``P`` and ``P X``). The Gram form is cheaper exactly when ``n > 1.5m``,
    for every ``K >= 2`` (``4(K-1)m²n > 6(K-1)m³``): at ``K = 5`` a 768×3072 matrix costs
    50·768³ instead of 90·768³ (1.8×), 768×2048 44.7·768³ instead of 63.3·768³ (1.42×). For
    ``n <= 1.5m`` (square matrices included) it is no cheaper, and the X-space iteration with
    the same coefficients runs instead, so the result is always the Polar Express polynomial of
    ``X`` (hence the same band).

    Precision: the Gram matrix squares the singular values, so ``X Xᵀ`` and the ``m × m``
    iteration run in at least float32 even when ``X`` is bfloat16 (only ``Q X`` uses ``X``'s
    dtype). In float32 each gain ``f(s)`` is within ≈2e-4 (768×3072) to 1e-3 (small, ill-
    conditioned matrices) of the exact polynomial, against ≈1e-5 in X space; with a bfloat16
    ``X`` it is ≈1e-3, against ≈3e-2 for the X-space iteration in bfloat16.
    """
    m, n = X.shape[-2:]
    if not _use_gram(m, n):
        return _polynomial_steps(X, coefficients)
    inner = _at_least_float32(X.dtype)
    X_inner = X.to(inner)
    A = torch.bmm(X_inner, X_inner.mT)
    P, R, Q = torch.empty_like(A), torch.empty_like(A), torch.empty_like(A)
    _quintic_factor(A, coefficients[0], out=Q)
    P.copy_(Q)
    for coefficient in coefficients[1:]:
        torch.bmm(A, P, out=R)
        torch.bmm(P, R, out=A)
        _quintic_factor(A, coefficient, out=P)
        torch.bmm(P, Q, out=R)
        Q, R = R, Q
    return torch.bmm(Q.to(X.dtype), X)

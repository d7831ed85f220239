"""Spectral isotropy of a transformer's matrices by role and layer (paper A, Sec. 4.2).

Works on named weight tensors plus their :class:`~tailmem.models.roles.ParamRole` (from
``GPT.param_roles()``, :func:`~tailmem.models.roles.resolve_roles` or
:func:`~tailmem.models.roles.resolve_roles_from_names`), so the same table comes out of a live
model during training, one of our checkpoints, or a Hugging Face model folder.

Matrices, each in torch ``Linear`` orientation (out, in): ``q k v o w_in w_gate w_out`` as stored
(Hugging Face ``Conv1D`` weights are transposed; a fused ``q+k+v`` tensor is split by its
``row_splits``), plus two forms of the VO circuit, which the paper does not define:

- ``vo_head``: the per-head products W_O,h · W_V,h (rank ≤ d_head each); its metrics are the
  mean over heads of each head's metrics. Needs the number of attention heads.
- ``vo_stacked``: W_O · W_V = Σ_h W_O,h · W_V,h (d × d).

With grouped-query attention (fewer value heads than query heads) every value head serves
``n_head / n_kv`` consecutive head slots of W_O; the value blocks are repeated to match, as the
attention itself does. The layer of a parameter is the first integer segment of its dotted name
(``blocks.3.attn.q.weight``, ``h.3.attn.c_attn.weight``, ``encoder.layer.3...``,
``model.layers.3...``).

Metrics (``tailmem.metrics.spectrum``): ``svd_entropy`` (H_norm), ``erank``, ``topk_energy``
(TopE_k, k = 10 by default) and ``q75_25``, plus the numerical ``rank``. Each row also has a
``note``: why a matrix of rank 0 (all zero, or empty) has no isotropy (its metrics are the
spectrum module's conventions, not measurements), and, for ``vo_head``, how many heads were
left out of the mean because their product is zero (a pruned or dead head).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from tailmem.errors import DataError
from tailmem.metrics.spectrum import isotropy_metrics_many, unit_scaled, vo_head_isotropy
from tailmem.models.roles import MATRIX_ROLES, ParamRole

MATRICES: tuple[str, ...] = ("q", "k", "v", "o", "vo_head", "vo_stacked", "w_in", "w_gate", "w_out")
"""Every matrix kind reported, in table order."""

ISO_METRICS: tuple[str, ...] = ("svd_entropy", "erank", "topk_energy", "q75_25")
"""The four isotropy metrics of the paper, in its order."""

HIGHER_IS_ISOTROPIC: dict[str, bool] = {
    "svd_entropy": True,
    "erank": True,
    "topk_energy": False,
    "q75_25": False,
}


def metric_label(metric: str, k: int = 10) -> str:
    """The paper's name of a metric: H_norm, eRank, Top10E, Q75/25."""
    labels = {"svd_entropy": "H_norm", "erank": "eRank", "topk_energy": f"Top{k}E"}
    return labels.get(metric, "Q75/25" if metric == "q75_25" else metric)


_LAYER = re.compile(r"(?:^|\.)(\d+)(?:\.|$)")


def layer_index(name: str) -> int | None:
    """The first integer segment of a dotted parameter name, or None."""
    found = _LAYER.search(name)
    return int(found.group(1)) if found else None


def role_matrices(
    weights: Mapping[str, Tensor], roles: Mapping[str, ParamRole]
) -> dict[tuple[int, str], Tensor]:
    """``(layer, role) -> matrix (out, in)`` for every matrix-role weight in ``weights``.

    Weights without a role in ``roles`` or with a non-matrix role are skipped; a matrix without a
    layer index counts as layer 0. Two weights landing on the same (layer, role) raise
    :class:`DataError` (a layout this table cannot describe).
    """
    found: dict[tuple[int, str], Tensor] = {}
    sources: dict[tuple[int, str], str] = {}
    for name, w in weights.items():
        pr = roles.get(name)
        if pr is None or not set(pr.roles) & set(MATRIX_ROLES) or w.ndim != 2:
            continue
        mat = w.detach().mT if pr.fan_out_dim == 1 else w.detach()
        # a fused tensor (ParamRole gives its parts row splits) is one matrix per part
        parts = mat.split(list(pr.row_splits)) if pr.parts and pr.row_splits is not None else (mat,)
        layer = layer_index(name)
        for role, part in zip(pr.roles, parts, strict=True):
            key = (0 if layer is None else layer, role)
            if key in found:
                raise DataError(
                    f"parameters {sources[key]!r} and {name!r} both hold role {role!r} of layer "
                    f"{key[0]}; expected one matrix per role and layer"
                )
            found[key], sources[key] = part, name
    return found


def _full_value_heads(w_v: Tensor, w_o: Tensor, n_head: int) -> Tensor:
    """W_V with grouped value heads repeated so that it has W_O's n_head · d_head rows."""
    inner = w_o.shape[-1]
    if inner % n_head:
        raise DataError(f"W_O has {inner} input columns, not divisible by n_head={n_head}")
    d_head = inner // n_head
    rows = w_v.shape[-2]
    if rows == inner:
        return w_v
    if rows % d_head or n_head % (rows // d_head):
        raise DataError(
            f"W_V has {rows} rows, which is not a whole number of value heads of size {d_head} "
            f"dividing n_head={n_head}"
        )
    n_kv = rows // d_head
    heads = w_v.reshape(n_kv, d_head, w_v.shape[-1])
    return heads.repeat_interleave(n_head // n_kv, dim=0).reshape(inner, w_v.shape[-1])


def isotropy_by_layer(
    matrices: Mapping[tuple[int, str], Tensor], n_head: int | None, k: int = 10
) -> list[dict[str, Any]]:
    """One row ``{layer, matrix, svd_entropy, erank, topk_energy, q75_25, rank, note}`` per
    matrix.

    ``matrices`` comes from :func:`role_matrices`. Layers with both ``v`` and ``o`` also get
    ``vo_stacked`` and, when ``n_head`` is known, ``vo_head`` (metrics averaged over the heads
    whose product is not zero, ``rank`` their mean per-head rank; the note counts the others).
    The product W_O · W_V is formed from power-of-two rescaled factors
    (:func:`~tailmem.metrics.spectrum.unit_scaled`), so it neither overflows nor underflows in
    float32. Rows are ordered by layer, then :data:`MATRICES`.
    """
    named = {f"{layer}/{role}": w for (layer, role), w in matrices.items()}
    layers = sorted({layer for layer, _ in matrices})
    heads: dict[str, dict[str, Any]] = {}
    for layer in layers:
        w_v, w_o = matrices.get((layer, "v")), matrices.get((layer, "o"))
        if w_v is None or w_o is None:
            continue
        full_v = _full_value_heads(w_v, w_o, n_head) if n_head is not None else w_v
        if full_v.shape[0] != w_o.shape[1]:
            continue
        named[f"{layer}/vo_stacked"] = unit_scaled(w_o, "W_O") @ unit_scaled(full_v, "W_V")
        if n_head is not None:
            heads[f"{layer}/vo_head"] = _head_mean(vo_head_isotropy(full_v, w_o, n_head, k=k))
    metrics: dict[str, dict[str, Any]] = {
        name: values | {"note": _zero_note(values["rank"], matrices.get(_key(name)))}
        for name, values in isotropy_metrics_many(named, k=k).items()
    }
    metrics |= heads
    rows = []
    for layer in layers:
        for role in MATRICES:
            values = metrics.get(f"{layer}/{role}")
            if values is not None:
                rows.append({"layer": layer, "matrix": role, **values})
    return rows


def _key(name: str) -> tuple[int, str]:
    layer, role = name.split("/")
    return int(layer), role


ZERO_RANK = "not measured: rank 0 ({what}), where isotropy is undefined"
"""The note of a matrix without a single non-zero singular value (its metrics are the spectrum
module's conventions, not measurements)."""


def _zero_note(rank: float, matrix: Tensor | None) -> str:
    """The note of a matrix of numerical ``rank`` (``matrix``: the weight, None for a product)."""
    if rank > 0:
        return ""
    if matrix is not None and matrix.numel() == 0:
        return ZERO_RANK.format(what=f"an empty matrix, {tuple(matrix.shape)} as (out, in)")
    return ZERO_RANK.format(what="an all-zero matrix" if matrix is not None else "a zero product")


def _head_mean(per_head: dict[str, Tensor]) -> dict[str, Any]:
    """The ``vo_head`` row values: each metric's mean over the heads of rank ≥ 1 (a head whose
    W_O,h · W_V,h is zero has no isotropy to average), with a note counting the others."""
    live = per_head["rank"] >= 1
    n_live, n_heads = int(live.sum()), live.numel()
    if n_live == 0:
        values = {m: float(v[0]) for m, v in per_head.items()}
        return values | {"note": ZERO_RANK.format(what=f"all {n_heads} heads' products are zero")}
    values = {m: float(v[live].double().mean()) for m, v in per_head.items()}
    note = (
        "" if n_live == n_heads else f"mean over {n_live} of {n_heads} heads; the others are zero"
    )
    return values | {"note": note}


def model_isotropy(
    weights: Mapping[str, Tensor], roles: Mapping[str, ParamRole], n_head: int | None, k: int = 10
) -> list[dict[str, Any]]:
    """:func:`isotropy_by_layer` of :func:`role_matrices` (the whole table of one model)."""
    with torch.no_grad():
        return isotropy_by_layer(role_matrices(weights, roles), n_head, k=k)

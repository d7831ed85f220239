"""Loss by token-frequency bucket, curve crossings and the role/layer isotropy table."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tailmem.errors import DataError
from tailmem.metrics.curves import first_crossing
from tailmem.metrics.role_spectra import isotropy_by_layer, layer_index, role_matrices
from tailmem.metrics.spectrum import isotropy_metrics
from tailmem.metrics.token_buckets import bucket_loss_sums, bucket_means, bucket_names
from tailmem.models.roles import ParamRole

torch.set_num_threads(1)


def test_bucket_sums_split_the_cross_entropy_by_target_bucket():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 7, generator=gen)
    targets = torch.randint(0, 7, (2, 5), generator=gen)
    targets[0, 1] = -100
    bucket = torch.tensor([0, 0, 1, 1, 2, 2, 2])
    sums = bucket_loss_sums(logits, targets, bucket, 3)
    per_token = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
    keep = targets.flatten() != -100
    for b in range(3):
        mine = keep & (bucket[targets.flatten().clamp(min=0)] == b)
        assert sums[0, b].item() == pytest.approx(per_token[mine].sum().item(), rel=1e-6)
        assert sums[1, b].item() == mine.sum().item()
    assert sums[1].sum().item() == 9
    means = bucket_means(sums)
    total = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
    assert sum(m * c for m, c in zip(means, sums[1].tolist(), strict=True)) / 9 == pytest.approx(
        total.item(), rel=1e-6
    )
    empty = torch.tensor([[1.0, 0.0], [2.0, 0.0]])
    assert bucket_means(empty)[0] == 0.5 and math.isnan(bucket_means(empty)[1])
    assert bucket_names(3) == ("head", "body", "tail") and bucket_names(4)[-1] == "b3"


def test_first_crossing_interpolates_between_evaluations():
    assert first_crossing([0, 10, 20], [5.0, 4.0, 2.0], 3.0) == pytest.approx(15.0)
    assert first_crossing([0, 10, 20], [5.0, 4.0, 3.5], 3.0) is None
    assert first_crossing([0, 10], [2.0, 1.0], 3.0) == 0.0
    assert first_crossing([0, 10, 20], [5.0, math.nan, 2.0], 3.0) == 20.0  # no line across a NaN
    with pytest.raises(ValueError, match="differ in length"):
        first_crossing([0, 1], [1.0], 0.5)


def _metrics(w: torch.Tensor) -> dict[str, float]:
    return {k: float(v) for k, v in isotropy_metrics(w.double()).items()}


def test_role_table_of_conv1d_fused_and_grouped_query_layouts():
    gen = torch.Generator().manual_seed(1)
    d, n_head, d_head = 8, 4, 2
    qkv = torch.randn(d, 3 * d, generator=gen)  # GPT-2 Conv1D (in, out), q | k | v along out
    proj = torch.randn(d, d, generator=gen)
    gpt2 = role_matrices(
        {"h.0.attn.c_attn.weight": qkv, "h.0.attn.c_proj.weight": proj, "h.0.ln_1.weight": qkv[0]},
        {
            "h.0.attn.c_attn.weight": ParamRole.fused(("q", "k", "v"), (d, d, d), fan_out_dim=1),
            "h.0.attn.c_proj.weight": ParamRole("o", fan_out_dim=1),
            "h.0.ln_1.weight": ParamRole("norm"),
        },
    )
    assert sorted(gpt2) == [(0, "k"), (0, "o"), (0, "q"), (0, "v")]
    assert torch.equal(gpt2[(0, "k")], qkv[:, d : 2 * d].T) and torch.equal(gpt2[(0, "o")], proj.T)
    # Grouped-query attention: one value head serves two query heads (LLaMA's repeat_kv).
    n_kv = 2
    w_v = torch.randn(n_kv * d_head, d, generator=gen)
    w_o = torch.randn(d, n_head * d_head, generator=gen)
    rows = isotropy_by_layer({(3, "v"): w_v, (3, "o"): w_o}, n_head)
    table = {r["matrix"]: r for r in rows}
    assert [r["layer"] for r in rows] == [3, 3, 3, 3]
    v64, o64 = w_v.double(), w_o.double()  # float64 products: rank 2 stays rank 2
    heads = [
        _metrics(
            o64[:, h * d_head : (h + 1) * d_head] @ v64[h // 2 * d_head : (h // 2 + 1) * d_head]
        )
        for h in range(n_head)
    ]
    for metric in ("svd_entropy", "erank", "topk_energy", "q75_25"):
        mean = sum(h[metric] for h in heads) / n_head
        assert table["vo_head"][metric] == pytest.approx(mean, rel=1e-5)
    repeated = v64.reshape(n_kv, d_head, d).repeat_interleave(2, 0).reshape(-1, d)
    assert table["vo_stacked"]["erank"] == pytest.approx(
        _metrics(o64 @ repeated)["erank"], rel=1e-5
    )
    assert "vo_head" not in {
        r["matrix"] for r in isotropy_by_layer({(0, "v"): w_v, (0, "o"): w_o}, None)
    }
    with pytest.raises(DataError, match="both hold role 'q'"):
        role_matrices(
            {"a.0.q": torch.ones(2, 2), "b.0.q": torch.ones(2, 2)},
            {"a.0.q": ParamRole("q"), "b.0.q": ParamRole("q")},
        )
    assert layer_index("model.layers.12.self_attn.q_proj.weight") == 12
    assert layer_index("lm_head.weight") is None

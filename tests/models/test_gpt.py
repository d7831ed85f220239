"""The GPT of tailmem.models.gpt against hand-written formulas, autograd and FLOP counting."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from tailmem.errors import ConfigError
from tailmem.models.gpt import (
    GPT,
    ROLES,
    SIZES,
    GPTConfig,
    apply_rope,
    count_params,
    flops_per_token,
    gpt_config,
    rope_tables,
)

VOCAB = 40


def tiny(**overrides) -> GPT:
    torch.manual_seed(0)
    return GPT(gpt_config("tiny", vocab_size=VOCAB, **overrides))


def hand_rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * weight


def hand_attention(attn, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, qk_norm: bool):
    """Causal attention written out: per-head RMSNorm on q and k, RoPE, masked softmax."""
    b, t, d = x.shape
    h = attn.n_head
    hd = d // h
    q = (x @ attn.q.weight.T).view(b, t, h, hd)
    k = (x @ attn.k.weight.T).view(b, t, h, hd)
    v = (x @ attn.v.weight.T).view(b, t, h, hd).transpose(1, 2)
    if qk_norm:
        q = hand_rms(q, attn.q_norm.weight, attn.q_norm.eps)
        k = hand_rms(k, attn.k_norm.weight, attn.k_norm.eps)
    q, k = q.transpose(1, 2), k.transpose(1, 2)
    half = hd // 2
    c, s = cos[:t], sin[:t]
    q = torch.cat(
        [q[..., :half] * c - q[..., half:] * s, q[..., :half] * s + q[..., half:] * c], -1
    )
    k = torch.cat(
        [k[..., :half] * c - k[..., half:] * s, k[..., :half] * s + k[..., half:] * c], -1
    )
    scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    y = torch.softmax(scores, -1) @ v
    return y.transpose(1, 2).reshape(b, t, d) @ attn.o.weight.T, scores


def test_forward_shapes_and_loss_matches_cross_entropy():
    model = tiny()
    x = torch.randint(0, VOCAB, (3, 17))
    y = torch.randint(0, VOCAB, (3, 17))
    y[0, :5] = -100
    logits, loss = model(x, y)
    assert logits.shape == (3, 17, VOCAB)
    keep = y != -100
    expected = -torch.log_softmax(logits, -1).gather(-1, y.clamp(min=0)[..., None])[..., 0][keep]
    torch.testing.assert_close(loss, expected.mean())
    assert model(x)[1] is None


def test_longer_than_max_seq_len_is_rejected():
    model = tiny()
    with pytest.raises(ValueError, match="max_seq_len"):
        model(torch.zeros(1, model.cfg.max_seq_len + 1, dtype=torch.long))


@pytest.mark.parametrize("ffn", ["plain", "gated"])
def test_causality_future_tokens_do_not_change_past_logits(ffn):
    model = tiny(ffn=ffn).eval()
    x = torch.randint(0, VOCAB, (2, 20))
    x2 = x.clone()
    x2[:, 12] = (x2[:, 12] + 1) % VOCAB
    a, b = model(x)[0], model(x2)[0]
    torch.testing.assert_close(a[:, :12], b[:, :12], rtol=0, atol=1e-6)
    assert (a[:, 12:] - b[:, 12:]).abs().max() > 1e-3


def test_rope_scores_depend_only_on_offset():
    torch.manual_seed(1)
    hd, t = 16, 12
    cos, sin = rope_tables(hd, t, 10000.0)
    q = torch.randn(hd).expand(t, hd)
    k = torch.randn(hd).expand(t, hd)
    scores = apply_rope(q, cos, sin) @ apply_rope(k, cos, sin).T
    # Toeplitz: the score of (m, n) equals that of (m + s, n + s).
    torch.testing.assert_close(scores[1:, 1:], scores[:-1, :-1], rtol=0, atol=1e-5)
    # ...but it does change with the offset, and rotation keeps norms.
    assert (scores[0, 1:] - scores[0, 0]).abs().min() > 1e-4
    torch.testing.assert_close(apply_rope(q, cos, sin).norm(dim=-1), q.norm(dim=-1))


def test_rmsnorm_matches_hand_formula():
    model = tiny()
    norm = model.blocks[0].attn_norm
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 1.5, norm.weight.numel()))
    x = torch.randn(4, 7, model.cfg.d_model) * 3
    torch.testing.assert_close(norm(x), hand_rms(x, norm.weight, model.cfg.norm_eps))


@pytest.mark.parametrize("qk_norm", [True, False])
def test_attention_matches_hand_formula(qk_norm):
    model = tiny(qk_norm=qk_norm)
    attn = model.blocks[0].attn
    if qk_norm:
        with torch.no_grad():
            attn.q_norm.weight.uniform_(0.5, 1.5)
            attn.k_norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(2, 9, model.cfg.d_model)
    expected, _ = hand_attention(attn, x, model.rope_cos, model.rope_sin, qk_norm)
    rope = (model.rope_cos[:9], model.rope_sin[:9])
    torch.testing.assert_close(attn(x, rope), expected)


def test_ffn_matches_hand_formula():
    x = torch.randn(2, 5, 32)
    plain = tiny().blocks[0].ffn
    gated = tiny(ffn="gated").blocks[0].ffn
    torch.testing.assert_close(plain(x), F.gelu(x @ plain.w_in.weight.T) @ plain.w_out.weight.T)
    inner = F.silu(x @ gated.w_in.weight.T) * (x @ gated.w_gate.weight.T)
    torch.testing.assert_close(gated(x), inner @ gated.w_out.weight.T)


def test_attention_logit_max_matches_brute_force():
    model = tiny()
    with torch.no_grad():  # sharpen attention so the maxima differ between heads and layers
        for block in model.blocks:
            block.attn.q_norm.weight.mul_(3.0)
    x = torch.randint(0, VOCAB, (3, 24))
    inputs = []
    hooks = [
        b.attn.register_forward_pre_hook(lambda m, args: inputs.append(args[0]))
        for b in model.blocks
    ]
    logits = model(x)[0]
    for h in hooks:
        h.remove()
    got = model.attention_logit_max(x)
    assert got.shape == (model.cfg.n_layer, model.cfg.n_head)
    for layer, block in enumerate(model.blocks):
        _, scores = hand_attention(block.attn, inputs[layer], model.rope_cos, model.rope_sin, True)
        torch.testing.assert_close(got[layer], scores.amax(dim=(0, 2, 3)))
    # Recording leaves the normal path untouched and switches itself off.
    torch.testing.assert_close(model(x)[0], logits)
    assert all(not b.attn.record_logit_max and b.attn.logit_max is None for b in model.blocks)


@pytest.mark.parametrize("ffn", ["plain", "gated"])
@pytest.mark.parametrize("qk_norm", [True, False])
@pytest.mark.parametrize("tie", [True, False])
def test_param_roles_cover_every_parameter_once(ffn, qk_norm, tie):
    model = tiny(ffn=ffn, qk_norm=qk_norm, tie_weights=tie)
    roles = model.param_roles()
    names = [n for n, _ in model.named_parameters()]
    assert list(roles) == names
    assert set(roles.values()) <= set(ROLES)
    n_layer = model.cfg.n_layer
    counts = {role: list(roles.values()).count(role) for role in ROLES}
    for role in ("q", "k", "v", "o", "w_in", "w_out"):
        assert counts[role] == n_layer
    assert counts["w_gate"] == (n_layer if ffn == "gated" else 0)
    assert counts["norm"] == n_layer * (4 if qk_norm else 2) + 1
    assert counts["embed"] == 1
    assert counts["head"] == (0 if tie else 1)
    assert counts["bias"] == counts["other"] == 0
    assert roles["blocks.1.attn.v.weight"] == "v"
    assert roles["blocks.0.ffn.w_out.weight"] == "w_out"
    if tie:
        assert model.head.weight is model.embed.weight
    else:
        assert roles["head.weight"] == "head"


def test_every_parameter_gets_a_gradient():
    model = tiny(ffn="gated")
    x = torch.randint(0, VOCAB, (2, 10))
    model(x, x)[1].backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def closed_form_params(cfg: GPTConfig) -> int:
    d, f, n = cfg.d_model, cfg.d_ff, cfg.n_layer
    per_block = 4 * d * d + (3 if cfg.ffn == "gated" else 2) * d * f + 2 * d
    if cfg.qk_norm:
        per_block += 2 * cfg.head_dim
    return cfg.vocab_size * d * (1 if cfg.tie_weights else 2) + n * per_block + d


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("ffn", ["plain", "gated"])
def test_param_count_of_named_sizes(size, ffn):
    cfg = gpt_config(size, vocab_size=50304, ffn=ffn)
    assert count_params(cfg) == closed_form_params(cfg)
    assert count_params(cfg, non_embedding=True) == closed_form_params(cfg) - 50304 * cfg.d_model


def test_paper_sizes_are_in_range():
    plain = gpt_config("gpt-160m", vocab_size=50304)
    gated = gpt_config("gpt-160m", vocab_size=50304, ffn="gated")
    assert gated.d_ff == 2048
    assert 155e6 <= count_params(plain) <= 170e6
    assert count_params(gated) == count_params(plain)  # gated width chosen to match
    big = gpt_config("gpt-0.7b", vocab_size=50304)
    blocks = count_params(big, non_embedding=True) - 50304 * big.d_model  # minus the head
    assert 0.65e9 <= blocks <= 0.75e9
    assert 2e5 <= count_params(gpt_config("cpu-small", vocab_size=256)) <= 1e6


def test_meta_count_equals_a_real_model():
    model = tiny(ffn="gated", tie_weights=True)
    assert count_params(model.cfg) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("ffn", ["plain", "gated"])
@pytest.mark.parametrize("tie", [True, False])
def test_flops_per_token_equals_counted_training_flops(ffn, tie):
    model = tiny(ffn=ffn, tie_weights=tie)
    b, t = 2, 16
    x = torch.randint(0, VOCAB, (b, t))
    # The math backend spells attention as batched matmuls, which the counter sees.
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(x, x)[1].backward()
    assert counter.get_total_flops() == flops_per_token(model.cfg, t) * b * t


def test_tiny_model_overfits_a_tiny_batch():
    model = tiny()
    x = torch.randint(0, VOCAB, (4, 16), generator=torch.Generator().manual_seed(5))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    first = None
    for _ in range(150):
        opt.zero_grad()
        loss = model(x[:, :-1], x[:, 1:])[1]
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert first > 3.0  # ≈ log(40) at init
    assert loss.item() < first / 20


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"ffn": "swiglu"}, "ffn"),
        ({"n_head": 3}, "d_model"),
        ({"dropout": 1.0}, "dropout"),
        ({"n_layer": 0}, "n_layer"),
        ({"d_model": 36, "n_head": 4}, "even"),
    ],
)
def test_bad_config_raises_config_error(overrides, field):
    with pytest.raises(ConfigError, match=field):
        gpt_config("tiny", vocab_size=VOCAB, **overrides)


def test_unknown_size_names_the_choices():
    with pytest.raises(ConfigError, match="gpt-160m"):
        gpt_config("huge", vocab_size=VOCAB)


def test_attention_logit_max_counts_only_the_pairs_a_document_mask_allows():
    from tailmem.models.gpt import _causal_logit_max, document_mask

    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 3, 6, 4, generator=gen), torch.randn(2, 3, 6, 4, generator=gen)
    doc_ids = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 1, 1, 1, 2, 2]])
    want = torch.full((3,), float("-inf"))
    for b in range(2):
        for i in range(6):
            for j in range(i + 1):
                if doc_ids[b, i] == doc_ids[b, j]:
                    want = torch.maximum(want, (q[b, :, i] * k[b, :, j]).sum(-1) / 2.0)
    torch.testing.assert_close(_causal_logit_max(q, k, document_mask(doc_ids)), want)
    assert (_causal_logit_max(q, k) >= want).all()  # causal alone admits more pairs

"""Decoder-only transformer used by every language-model experiment (paper A1, A2, A3).

The architecture follows the paper's "NanoGPT 160M" description (PAPERS.md, A1): pre-norm blocks
with RMSNorm, rotary position embeddings, optional RMSNorm on queries and keys per head (Gemma-3
style), no grouped-query attention, and either a plain FFN ``W_out σ(W_in h)`` (σ = GELU) or a
gated FFN ``W_out (σ(W_in h) ⊙ W_gate h)`` (σ = SiLU).

Positions (``pos_encoding``): ``rope`` (default, the paper's) rotates queries and keys;
``learned`` adds an absolute position embedding to the token embedding (GPT-2 style); ``none``
uses no position signal at all (NoPE: causal attention alone orders the tokens).

Packed documents: :meth:`GPT.forward` and :meth:`GPT.hidden` take optional per-token
``positions`` (what RoPE or the learned embedding read; default ``0..T-1``) and ``doc_ids``
(a token attends only to earlier tokens with the same id: a block-diagonal causal mask). Without
``doc_ids`` attention takes the plain causal path.

Ensembles (``GPT(cfg, members=E)``): E independent models of one shape in one module, every
parameter with a leading member dimension (``(E, out, in)`` matrices, ``(E, d)`` norm weights),
inputs and targets ``(E, B, T)``, logits ``(E, B, T, vocab)`` and one mean loss per member
``(E,)``. Each member's forward is exactly its own model's: the matrix products are batched over
members (one ``bmm`` per projection) and attention runs over members × batch. Seeds (or sweep
points) of one arm then train as one model with larger kernels: :meth:`GPT.stack` builds an
ensemble from single models (each member starts from its own seed's initialisation),
:meth:`GPT.member` takes one out again (evaluation, diagnostics, checkpoints). Member-aware
optimisers step each member on its own (``tailmem.train.ensemble``).

Every matrix that an optimiser recipe can address is its own ``nn.Linear`` with a fixed name, so
roles can be read off the module tree::

    embed                         nn.Embedding          role embed
    pos_embed (learned only)      nn.Embedding          role embed
    blocks[i].attn_norm           RMSNorm               role norm
    blocks[i].attn.{q,k,v,o}      nn.Linear, no bias    roles q k v o
    blocks[i].attn.{q_norm,k_norm} RMSNorm (optional)   role norm
    blocks[i].ffn_norm            RMSNorm               role norm
    blocks[i].ffn.{w_in,w_gate,w_out} nn.Linear         roles w_in w_gate w_out
    final_norm                    RMSNorm               role norm
    head                          nn.Linear (tied: shares embed.weight, reported once as embed)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tailmem.errors import ConfigError, DataError

ROLES = ("q", "k", "v", "o", "w_in", "w_gate", "w_out", "embed", "head", "norm", "bias", "other")
"""Every role a parameter can have; optimiser recipes are written in these names."""

_LINEAR_ROLES = {"q", "k", "v", "o", "w_in", "w_gate", "w_out", "head"}
_EMBED_MODULES = {"embed", "pos_embed"}
POS_ENCODINGS = ("rope", "learned", "none")
"""How the GPT sees positions: rotary, a learned absolute embedding, or nothing (NoPE)."""


@dataclass(frozen=True)
class GPTConfig:
    """Shape and initialisation of a :class:`GPT`.

    ``init_std`` is the standard deviation of every weight matrix and of the embeddings; with
    ``residual_init="scaled"`` the two projections that write into the residual stream (``o``
    and ``w_out``) use ``init_std / sqrt(2 n_layer)`` (GPT-2 convention; the paper does not
    state its init), with ``"plain"`` every matrix is N(0, init_std). ``norm``: the block and
    final normalisation, ``rms`` (RMSNorm, the default) or ``layer`` (LayerNorm with a bias; one
    model only); the optional QK-norm is always RMSNorm. ``pos_encoding``: one of
    :data:`POS_ENCODINGS` (module docstring). ``tie_weights``: the LM head is the token
    embedding's matrix.
    """

    vocab_size: int
    n_layer: int
    n_head: int
    d_model: int
    d_ff: int
    ffn: str = "plain"
    qk_norm: bool = True
    tie_weights: bool = False
    pos_encoding: str = "rope"
    max_seq_len: int = 1024
    rope_base: float = 10000.0
    dropout: float = 0.0
    init_std: float = 0.02
    norm_eps: float = 1e-6
    norm: str = "rms"
    residual_init: str = "scaled"

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    def record(self) -> dict[str, object]:
        """The config as plain data for a run's identity: the fields added after runs were
        first recorded (:data:`LATER_FIELDS`) only where they differ from their defaults, so
        a run at the defaults keeps the identity it had before they existed."""
        out = dataclasses.asdict(self)
        for name, default in LATER_FIELDS.items():
            if out[name] == default:
                del out[name]
        return out

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first invalid field."""
        for name in ("vocab_size", "n_layer", "n_head", "d_model", "d_ff", "max_seq_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"GPTConfig.{name} must be a positive integer, got {value!r}")
        for name in ("rope_base", "init_std", "norm_eps", "dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"GPTConfig.{name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ConfigError(f"GPTConfig.{name} must be finite, got {value!r}")
        if not isinstance(self.qk_norm, bool) or not isinstance(self.tie_weights, bool):
            raise ConfigError(
                f"GPTConfig.qk_norm and tie_weights must be true or false, got "
                f"{self.qk_norm!r} and {self.tie_weights!r}"
            )
        if self.norm not in NORMS:
            raise ConfigError(
                f"GPTConfig.norm must be one of {', '.join(NORMS)}, got {self.norm!r}"
            )
        if self.residual_init not in RESIDUAL_INITS:
            raise ConfigError(
                f"GPTConfig.residual_init must be one of {', '.join(RESIDUAL_INITS)}, got "
                f"{self.residual_init!r}"
            )
        if self.ffn not in ("plain", "gated"):
            raise ConfigError(f"GPTConfig.ffn must be 'plain' or 'gated', got {self.ffn!r}")
        if self.pos_encoding not in POS_ENCODINGS:
            raise ConfigError(
                f"GPTConfig.pos_encoding must be one of {', '.join(POS_ENCODINGS)}, got "
                f"{self.pos_encoding!r}"
            )
        if self.d_model % self.n_head:
            raise ConfigError(
                f"GPTConfig.d_model ({self.d_model}) must be divisible by n_head ({self.n_head})"
            )
        if self.pos_encoding == "rope" and self.head_dim % 2:
            raise ConfigError(
                f"GPTConfig head dimension d_model/n_head = {self.head_dim} must be even for RoPE"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"GPTConfig.dropout must be in [0, 1), got {self.dropout!r}")
        if not self.init_std > 0:
            raise ConfigError(f"GPTConfig.init_std must be > 0, got {self.init_std!r}")
        if not self.rope_base > 1:
            raise ConfigError(f"GPTConfig.rope_base must be > 1, got {self.rope_base!r}")
        if not self.norm_eps > 0:
            raise ConfigError(f"GPTConfig.norm_eps must be > 0, got {self.norm_eps!r}")


# Named sizes. ``d_ff`` is the plain-FFN width; ``gpt_config(..., ffn="gated")`` uses
# ``gated_d_ff(d_ff)`` = 2/3 of it so that the gated FFN (three matrices) has the same parameter
# count as the plain one (two matrices): 3·d·(2/3·d_ff) = 2·d·d_ff. For gpt-160m that is 2048.
#
# Parameters in the blocks (excluding embedding and head), and totals with an untied head:
#   tiny       2 × 32,  2 heads, d_ff 128   25k in blocks    (unit tests)
#   cpu-small  2 × 128, 4 heads, d_ff 512   393k in blocks   (smoke runs)
#   cpu        4 × 256, 4 heads, d_ff 1024  3.15M in blocks  (CPU presets, the step benchmark)
#   gpt-160m  12 × 768, 12 heads, d_ff 3072 84.9M in blocks; 162.2M in total with a 50304 vocab
#             (the paper's "NanoGPT 160M": the GPT-2-small shape of modded-nanogpt, untied head)
#   gpt-0.7b  24 × 1536, 12 heads (head dim 128), d_ff 6144  679.6M in blocks; 834.1M in total
#             with a 50304 vocab. The paper gives no shape for its 0.7B model; this is the
#             GPT-2-medium depth at 1.5× width, chosen so that the blocks hold ≈ 0.7B.
NORMS = ("rms", "layer")
"""The normalisations of the blocks and the final norm (:class:`GPTConfig` ``norm``)."""
RESIDUAL_INITS = ("scaled", "plain")
"""How the residual-output projections are initialised (:class:`GPTConfig` ``residual_init``)."""
LATER_FIELDS: dict[str, object] = {"norm": "rms", "residual_init": "scaled"}
"""Fields added after runs were first recorded, with their defaults (:meth:`GPTConfig.record`)."""

SIZES: dict[str, dict[str, int]] = {
    "tiny": {"n_layer": 2, "n_head": 2, "d_model": 32, "d_ff": 128, "max_seq_len": 64},
    "cpu-small": {"n_layer": 2, "n_head": 4, "d_model": 128, "d_ff": 512, "max_seq_len": 256},
    "cpu": {"n_layer": 4, "n_head": 4, "d_model": 256, "d_ff": 1024, "max_seq_len": 256},
    "gpt-160m": {"n_layer": 12, "n_head": 12, "d_model": 768, "d_ff": 3072, "max_seq_len": 1024},
    "gpt-0.7b": {"n_layer": 24, "n_head": 12, "d_model": 1536, "d_ff": 6144, "max_seq_len": 1024},
}


def gated_d_ff(d_ff: int, multiple: int = 8) -> int:
    """Width of a gated FFN with the parameter count of a plain FFN of width ``d_ff``.

    2/3 · d_ff rounded to the nearest multiple of ``multiple`` (3072 -> 2048 exactly).
    """
    return max(multiple, multiple * round(2 * d_ff / (3 * multiple)))


def gpt_config(size: str, *, vocab_size: int, ffn: str = "plain", **overrides: object) -> GPTConfig:
    """The :class:`GPTConfig` of a named size from :data:`SIZES`.

    ``ffn="gated"`` shrinks ``d_ff`` with :func:`gated_d_ff` unless ``d_ff`` is overridden.
    Any other :class:`GPTConfig` field may be overridden by keyword.
    """
    if size not in SIZES:
        raise ConfigError(f"unknown GPT size {size!r}; expected one of {', '.join(SIZES)}")
    shape = SIZES[size]
    cfg = GPTConfig(
        vocab_size=vocab_size,
        n_layer=shape["n_layer"],
        n_head=shape["n_head"],
        d_model=shape["d_model"],
        d_ff=gated_d_ff(shape["d_ff"]) if ffn == "gated" else shape["d_ff"],
        max_seq_len=shape["max_seq_len"],
        ffn=ffn,
    )
    # The overrides come from configs and tests as loose keywords: validate() checks them at
    # run time (wrong types included), which is why they are objects here.
    cfg = replace(cfg, **overrides)  # type: ignore[arg-type]
    cfg.validate()
    return cfg


def rope_tables(head_dim: int, max_seq_len: int, base: float) -> tuple[Tensor, Tensor]:
    """Cosine and sine tables ``(max_seq_len, head_dim/2)`` of rotary embeddings.

    Pair i of a head (components i and i + head_dim/2) at position t is rotated by the angle
    ``t · base^(-2i/head_dim)``.
    """
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), inv_freq)
    return angles.cos().float(), angles.sin().float()


class MemberLinear(nn.Module):
    """``members`` bias-free linear maps in one ``(members, out, in)`` weight: member ``e`` of an
    input ``(members, ..., in)`` goes through matrix ``e`` (one batched matmul for all)."""

    def __init__(self, d_in: int, d_out: int, members: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(members, d_out, d_in))

    def forward(self, x: Tensor) -> Tensor:
        rows = x.reshape(x.shape[0], -1, x.shape[-1])
        return torch.bmm(rows, self.weight.mT).view(*x.shape[:-1], self.weight.shape[1])


class MemberRMSNorm(nn.Module):
    """``members`` RMSNorms of width ``dim`` (weight ``(members, dim)``) over inputs
    ``(members, ..., dim)``."""

    def __init__(self, dim: int, members: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(members, dim))

    def forward(self, x: Tensor) -> Tensor:
        weight = self.weight.view(self.weight.shape[0], *(1,) * (x.ndim - 2), -1)
        return F.rms_norm(x, (x.shape[-1],), eps=self.eps) * weight


class MemberEmbedding(nn.Module):
    """``members`` embedding tables in one ``(members, num_embeddings, dim)`` weight; ids
    ``(members, ...)`` look up their own member's table."""

    def __init__(self, num_embeddings: int, dim: int, members: int) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(members, num_embeddings, dim))

    def forward(self, ids: Tensor) -> Tensor:
        member = torch.arange(ids.shape[0], device=ids.device)
        return self.weight[member.view(-1, *(1,) * (ids.ndim - 1)), ids]


def _linear(d_in: int, d_out: int, members: int) -> nn.Module:
    """A bias-free projection: ``nn.Linear`` for one model, :class:`MemberLinear` for more."""
    if members == 1:
        return nn.Linear(d_in, d_out, bias=False)
    return MemberLinear(d_in, d_out, members)


def _norm(dim: int, members: int, eps: float, kind: str = "rms") -> nn.Module:
    """An RMSNorm (``nn.RMSNorm`` for one model, :class:`MemberRMSNorm` for more) or, with
    ``kind="layer"``, a LayerNorm with a bias (one model only)."""
    if kind == "layer":
        if members != 1:
            raise ConfigError("model.norm: layer is for one model; expected rms for an ensemble")
        return nn.LayerNorm(dim, eps=eps)
    return nn.RMSNorm(dim, eps=eps) if members == 1 else MemberRMSNorm(dim, members, eps)


def _embedding(num: int, dim: int, members: int) -> nn.Module:
    """A lookup table: ``nn.Embedding`` for one model, :class:`MemberEmbedding` for more."""
    return nn.Embedding(num, dim) if members == 1 else MemberEmbedding(num, dim, members)


_NORMS = (nn.RMSNorm, MemberRMSNorm, nn.LayerNorm)
_TABLES = (nn.Linear, nn.Embedding, MemberLinear, MemberEmbedding)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate ``x`` of shape ``(..., T, head_dim)`` by the tables' rows of its positions
    (``cos`` and ``sin`` broadcast to ``(..., T, head_dim/2)``: the first T rows of
    :func:`rope_tables`, or the rows of each token's position).

    Because each pair is rotated by an angle linear in the position, the dot product of a rotated
    query at position m and a rotated key at position n depends only on n - m.
    """
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class Attention(nn.Module):
    """Causal multi-head self-attention with separate Q, K, V, O projections.

    Inputs ``(B, T, d)``, or ``(members, B, T, d)`` in an ensemble (attention then runs over
    members × batch). ``rope``: the ``(cos, sin)`` rows of the tokens' positions (None: no
    rotation); ``mask``: a boolean ``(B, 1, T, T)`` (ensemble: ``(members, B, 1, T, T)``) "may
    attend" mask replacing the plain causal one (None: causal).
    """

    def __init__(self, cfg: GPTConfig, members: int = 1) -> None:
        super().__init__()
        d = cfg.d_model
        self.n_head, self.head_dim, self.dropout = cfg.n_head, cfg.head_dim, cfg.dropout
        self.q = _linear(d, d, members)
        self.k = _linear(d, d, members)
        self.v = _linear(d, d, members)
        self.o = _linear(d, d, members)
        self.q_norm: nn.Module | None
        self.k_norm: nn.Module | None
        if cfg.qk_norm:
            self.q_norm = _norm(cfg.head_dim, members, cfg.norm_eps)
            self.k_norm = _norm(cfg.head_dim, members, cfg.norm_eps)
        else:
            self.q_norm = self.k_norm = None
        self.record_logit_max = False
        self.logit_max: Tensor | None = None

    def _heads(self, x: Tensor) -> Tensor:
        return x.view(*x.shape[:-1], self.n_head, self.head_dim)

    def forward(
        self, x: Tensor, rope: tuple[Tensor, Tensor] | None, mask: Tensor | None = None
    ) -> Tensor:
        *lead, t, d = x.shape
        q, k = self._heads(self.q(x)), self._heads(self.k(x))
        v = self._heads(self.v(x)).transpose(-3, -2)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(-3, -2), k.transpose(-3, -2)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if self.record_logit_max:
            self.logit_max = _causal_logit_max(q, k, mask)
        q, k, v = q.flatten(0, -4), k.flatten(0, -4), v.flatten(0, -4)  # (members·B, H, T, hd)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=None if mask is None else mask.flatten(0, -4),
            dropout_p=self.dropout if self.training else 0.0, is_causal=mask is None,
        )  # fmt: skip
        y = y.view(*lead, self.n_head, t, self.head_dim).transpose(-3, -2)
        return self.o(y.reshape(*lead, t, d))


def _causal_logit_max(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    """Max over batch and attended positions of q·kᵀ/√d_head, per head: shape ``(n_head,)``.
    Attended: causal, or where the boolean attention ``mask`` allows (packed documents)."""
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is None:
        t = scores.shape[-1]
        mask = torch.ones(t, t, dtype=torch.bool, device=scores.device).tril()
    return scores.masked_fill(~mask, float("-inf")).amax(dim=(0, 2, 3))


def document_mask(doc_ids: Tensor) -> Tensor:
    """Boolean ``(..., B, 1, T, T)`` attention mask of packed documents: query ``i`` may attend to
    key ``j`` when ``j <= i`` and both tokens carry the same id in ``doc_ids`` ``(..., B, T)``."""
    t = doc_ids.shape[-1]
    causal = torch.ones(t, t, dtype=torch.bool, device=doc_ids.device).tril()
    same = doc_ids[..., :, None] == doc_ids[..., None, :]
    return (same & causal).unsqueeze(-3)


class FFN(nn.Module):
    """Plain ``w_out(gelu(w_in h))`` or gated ``w_out(silu(w_in h) * w_gate h)`` feed-forward."""

    def __init__(self, cfg: GPTConfig, members: int = 1) -> None:
        super().__init__()
        self.gated = cfg.ffn == "gated"
        self.w_in = _linear(cfg.d_model, cfg.d_ff, members)
        self.w_gate = _linear(cfg.d_model, cfg.d_ff, members) if self.gated else None
        self.w_out = _linear(cfg.d_ff, cfg.d_model, members)

    def forward(self, h: Tensor) -> Tensor:
        if self.w_gate is not None:
            return self.w_out(F.silu(self.w_in(h)) * self.w_gate(h))
        return self.w_out(F.gelu(self.w_in(h)))


class Block(nn.Module):
    """Pre-norm residual block: ``x + attn(norm(x))`` then ``x + ffn(norm(x))``."""

    def __init__(self, cfg: GPTConfig, members: int = 1) -> None:
        super().__init__()
        self.attn_norm = _norm(cfg.d_model, members, cfg.norm_eps, cfg.norm)
        self.attn = Attention(cfg, members)
        self.ffn_norm = _norm(cfg.d_model, members, cfg.norm_eps, cfg.norm)
        self.ffn = FFN(cfg, members)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(
        self, x: Tensor, rope: tuple[Tensor, Tensor] | None, mask: Tensor | None = None
    ) -> Tensor:
        x = x + self.drop(self.attn(self.attn_norm(x), rope, mask))
        return x + self.drop(self.ffn(self.ffn_norm(x)))


class GPT(nn.Module):
    """Decoder-only language model; ``model(idx, targets) -> (logits, loss)``.

    ``members``: how many independent models of this shape the module holds (an ensemble, see
    the module docstring); 1 is a plain model.
    """

    rope_cos: Tensor  # (max_seq_len, head_dim/2) buffers, with RoPE only
    rope_sin: Tensor
    input_axes: tuple[str, ...] = ("B", "T")
    """The axes of one model's input (a subclass that embeds other inputs names its own)."""

    def __init__(self, cfg: GPTConfig, members: int = 1) -> None:
        super().__init__()
        cfg.validate()
        if isinstance(members, bool) or not isinstance(members, int) or members < 1:
            raise ConfigError(f"GPT members must be a positive integer, got {members!r}")
        self.cfg, self.members = cfg, members
        # leading parameter dimensions that index members (routing reads it for the optimisers)
        self.member_dims = 0 if members == 1 else 1
        self.embed = _embedding(cfg.vocab_size, cfg.d_model, members)
        learned = cfg.pos_encoding == "learned"
        self.pos_embed = _embedding(cfg.max_seq_len, cfg.d_model, members) if learned else None
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg, members) for _ in range(cfg.n_layer))
        self.final_norm = _norm(cfg.d_model, members, cfg.norm_eps, cfg.norm)
        self.head = _linear(cfg.d_model, cfg.vocab_size, members)
        if cfg.tie_weights:
            self.head.weight = self.embed.weight
        if cfg.pos_encoding == "rope":
            cos, sin = rope_tables(cfg.head_dim, cfg.max_seq_len, cfg.rope_base)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Normal(0, init_std) weights (residual-output projections scaled by 1/√(2 n_layer)
        unless ``residual_init`` is ``plain``), norm gains 1 (LayerNorm biases 0)."""
        std = self.cfg.init_std
        scaled = self.cfg.residual_init == "scaled"
        residual_std = std / math.sqrt(2 * self.cfg.n_layer) if scaled else std
        for name, module in self.named_modules():
            if isinstance(module, _TABLES):
                last = name.rsplit(".", 1)[-1]
                nn.init.normal_(module.weight, 0.0, residual_std if last in ("o", "w_out") else std)
            elif isinstance(module, _NORMS):
                nn.init.ones_(module.weight)
                if isinstance(module, nn.LayerNorm):
                    nn.init.zeros_(module.bias)

    @classmethod
    def stack(cls, models: Sequence[GPT]) -> GPT:
        """An ensemble whose member ``k`` is a copy of ``models[k]`` (single models of one
        config, e.g. one per seed). With ``dropout > 0`` the members draw their masks from one
        generator, so they match single runs only in distribution."""
        if not models or any(m.members != 1 or m.cfg != models[0].cfg for m in models):
            raise ValueError("GPT.stack needs one or more single models of one config")
        if any(type(m) is not GPT for m in models):
            kinds = sorted({type(m).__name__ for m in models} - {"GPT"})
            raise ValueError(f"GPT.stack stacks language models (GPT), got {', '.join(kinds)}")
        ensemble = cls(models[0].cfg, members=len(models))
        states = [m.state_dict() for m in models]
        ensemble.load_state_dict(
            {name: torch.stack([s[name] for s in states]) for name in states[0]}
        )
        return ensemble.to(next(models[0].parameters()).device)

    def member(self, k: int) -> GPT:
        """Member ``k`` of an ensemble as a single model (a copy of its weights)."""
        if not 0 <= k < self.members:
            raise IndexError(f"member {k} of an ensemble of {self.members}")
        single = type(self)(self.cfg).to(next(self.parameters()).device)
        single.load_state_dict({name: t[k].clone() for name, t in self.state_dict().items()})
        return single

    def forward(
        self,
        idx: Tensor,
        targets: Tensor | None = None,
        *,
        positions: Tensor | None = None,
        doc_ids: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Logits ``(B, T, vocab)`` for token ids ``idx`` ``(B, T)`` (``positions`` and
        ``doc_ids``: see :meth:`hidden`); an ensemble takes ``(members, B, T)``.

        With ``targets`` (same shape, ``-100`` = ignored position) also the mean cross-entropy
        over the non-ignored positions; an ensemble's is one per member, ``(members,)``, so that
        the gradient of their sum is every member's own.
        """
        if targets is not None and tuple(targets.shape) != tuple(idx.shape):
            raise DataError(
                f"GPT: targets of shape {tuple(targets.shape)} for inputs of shape "
                f"{tuple(idx.shape)}; expected the inputs' shape"
            )
        logits = self.head(self.hidden(idx, positions=positions, doc_ids=doc_ids))
        loss = None
        if targets is not None and self.members == 1:
            loss = F.cross_entropy(
                logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100
            )
        elif targets is not None:
            per_token = F.cross_entropy(
                logits.flatten(0, -2).float(), targets.reshape(-1), ignore_index=-100,
                reduction="none",
            ).view(self.members, -1)  # fmt: skip
            counted = (targets.reshape(self.members, -1) != -100).sum(dim=1)
            loss = per_token.sum(dim=1) / counted
        return logits, loss

    def hidden(
        self, inputs: Tensor, *, positions: Tensor | None = None, doc_ids: Tensor | None = None
    ) -> Tensor:
        """The final-normed hidden states ``(B, T, d_model)`` the head reads (an ensemble's:
        ``(members, B, T, d_model)``): ``embed`` (token ids here; a subclass may embed other
        inputs) plus the learned position embedding, the blocks, the final norm.

        ``positions`` (``(B, T)`` or ``(T,)``, each below ``max_seq_len``; default ``0..T-1``):
        the position of every token, as RoPE or the learned embedding read it. ``doc_ids``
        (``(B, T)``): a token attends only to tokens at or before it with the same id (packed
        documents, each on its own); default: every earlier token of the row.
        """
        self._check_inputs(inputs, positions, doc_ids)
        x = self.embed(inputs)
        t = x.shape[-2]
        if t > self.cfg.max_seq_len:
            raise ValueError(f"sequence length {t} exceeds max_seq_len {self.cfg.max_seq_len}")
        if positions is None:
            positions = torch.arange(t, device=inputs.device)
        if self.pos_embed is not None:
            x = x + self.pos_embed(positions.expand(x.shape[:-1]))
        x = self.drop(x)
        rope = self._rope(positions)
        mask = None if doc_ids is None else document_mask(doc_ids)
        for block in self.blocks:
            x = block(x, rope, mask)
        return self.final_norm(x)

    def _check_inputs(
        self, inputs: Tensor, positions: Tensor | None, doc_ids: Tensor | None
    ) -> None:
        """One :class:`DataError` line for inputs of the wrong shape: an ensemble's need the
        member dimension first, of its size (a smaller count would silently use the first
        members' weights); ``positions`` must be one per token, ``doc_ids`` one per token of
        every row."""
        lead = (self.members,) if self.members > 1 else ()
        axes = [f"members={self.members}"] * len(lead) + list(self.input_axes)
        shape = tuple(inputs.shape)
        if len(shape) != len(axes) or shape[: len(lead)] != lead:
            note = (" (an ensemble takes every member's batch stacked on a first dimension)"
                    if lead else "")  # fmt: skip
            raise DataError(
                f"{type(self).__name__}: got inputs of shape {shape}; expected "
                f"({', '.join(axes)}){note}"
            )
        rows = shape[: len(lead) + 2]  # (members,) B, T
        name = type(self).__name__
        if positions is not None and not 1 <= positions.ndim <= len(rows):
            raise DataError(f"{name}: got positions of shape {tuple(positions.shape)}; expected "
                            f"(T,) or (B, T) of {rows}")  # fmt: skip
        if positions is not None and tuple(positions.shape) != rows[len(rows) - positions.ndim :]:
            raise DataError(f"{name}: got positions of shape {tuple(positions.shape)}; expected "
                            f"(T,) or (B, T) of {rows}")  # fmt: skip
        if doc_ids is not None and tuple(doc_ids.shape) != rows:
            raise DataError(f"{name}: got doc_ids of shape {tuple(doc_ids.shape)}; expected "
                            f"{rows}, one per token")  # fmt: skip

    def _rope(self, positions: Tensor) -> tuple[Tensor, Tensor] | None:
        """The RoPE ``(cos, sin)`` rows of ``positions`` ``(T,)`` or ``(B, T)``, shaped
        ``(..., 1, T, head_dim/2)`` to broadcast over heads; None without RoPE."""
        if self.cfg.pos_encoding != "rope":
            return None
        return self.rope_cos[positions].unsqueeze(-3), self.rope_sin[positions].unsqueeze(-3)

    def param_roles(self) -> dict[str, str]:
        """Role of every ``named_parameters()`` entry (see :data:`ROLES`).

        A tied head shares ``embed.weight``, which ``named_parameters()`` lists once, as embed;
        the learned position embedding is an embedding too.
        """
        norm_names = {n for n, m in self.named_modules() if isinstance(m, _NORMS)}
        roles = {}
        for name, _ in self.named_parameters():
            owner, _, leaf = name.rpartition(".")
            last = owner.rpartition(".")[2]
            if leaf == "bias":
                roles[name] = "bias"
            elif owner in norm_names:
                roles[name] = "norm"
            elif last in _EMBED_MODULES:
                roles[name] = "embed"
            elif last in _LINEAR_ROLES:
                roles[name] = last
            else:
                roles[name] = "other"
        return roles

    @torch.no_grad()
    def attention_logit_max(self, idx: Tensor) -> Tensor:
        """Per-layer, per-head max pre-softmax attention logit on a batch: ``(n_layer, n_head)``.

        The logit is q·kᵀ/√d_head after QK-norm and RoPE, maximised over the batch and all causal
        (query, key) pairs — the quantity of the paper's Table 2 (take ``.amax(-1)`` for one number
        per layer). It materialises a ``(B, n_head, T, T)`` score tensor per layer, so pass a modest
        batch; the normal forward never computes it.
        """
        if self.members != 1:
            raise ValueError("attention_logit_max measures one model: use ensemble.member(k)")
        attns = [m for m in self.modules() if isinstance(m, Attention)]  # one per block, in order
        for attn in attns:
            attn.record_logit_max = True
        try:
            self(idx)
            maxima = [attn.logit_max for attn in attns if attn.logit_max is not None]
            if len(maxima) != len(attns):  # a subclass whose forward skips some attention
                raise RuntimeError("attention_logit_max: some layer's attention did not run")
            return torch.stack(maxima)
        finally:
            for attn in attns:
                attn.record_logit_max, attn.logit_max = False, None


def count_params(cfg: GPTConfig, *, non_embedding: bool = False) -> int:
    """Number of parameters of ``GPT(cfg)``, counted on the meta device (no memory used).

    ``non_embedding=True`` leaves out the token and position embeddings (an untied head still
    counts; a tied one is the embedding and is left out with it).
    """
    with torch.device("meta"):
        model = GPT(cfg)
    total = sum(p.numel() for p in model.parameters())
    if non_embedding:
        embeddings = [model.embed, model.pos_embed]
        total -= sum(p.numel() for e in embeddings if e is not None for p in e.parameters())
    return total


def flops_per_token(cfg: GPTConfig, seq_len: int) -> int:
    """Training FLOPs per token (forward + backward): ``6 N + 12 · n_layer · d_model · seq_len``.

    N counts the weights used in matrix multiplies: all but the norms and the embedding lookup (a
    tied head does multiply with the shared matrix, so it counts). The attention term counts the
    full T × T score and value products (PaLM / nanoGPT convention, not halved for causality).
    """
    d, f, n_layer = cfg.d_model, cfg.d_ff, cfg.n_layer
    ffn_mats = 3 if cfg.ffn == "gated" else 2
    matmul_params = n_layer * (4 * d * d + ffn_mats * d * f) + cfg.vocab_size * d
    return 6 * matmul_params + 12 * n_layer * d * seq_len


def mfu(tokens_per_s: float, flops_per_tok: int, peak_flops: float) -> float:
    """Model FLOPs utilisation: achieved training FLOP/s as a fraction of ``peak_flops``."""
    return tokens_per_s * flops_per_tok / peak_flops

"""Role resolution on hand-built module trees that use the exact Hugging Face names and shapes."""

import pytest
import torch
from torch import nn

from tailmem.errors import ConfigError
from tailmem.models.roles import (
    MATRIX_ROLES,
    ROLES,
    ParamRole,
    matrix_roles_by_name,
    naming_scheme,
    resolve_roles,
    resolve_roles_from_names,
    roles_table,
)
from tailmem.optim.routing import plan_param_groups

E, VOCAB, POS, LAYERS = 8, 13, 5, 2


def role_names(model):
    return {name: pr.role for name, pr in resolve_roles(model).items()}


# ------------------------------------------------------------------------- our GPT contract


class OurGPT(nn.Module):
    """The module tree of tailmem.models.gpt.GPT (COMMON.md) with its param_roles() contract."""

    def __init__(self, tied=False, roles_override=None):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, E)
        self.blocks = nn.ModuleList()
        for _ in range(LAYERS):
            block = nn.Module()
            block.attn_norm, block.ffn_norm = nn.RMSNorm(E), nn.RMSNorm(E)
            block.attn = nn.Module()
            for n in ("q", "k", "v", "o"):
                setattr(block.attn, n, nn.Linear(E, E, bias=False))
            block.attn.q_norm, block.attn.k_norm = nn.RMSNorm(4), nn.RMSNorm(4)
            block.ffn = nn.Module()
            block.ffn.w_in, block.ffn.w_gate = nn.Linear(E, 16, bias=False), nn.Linear(E, 16)
            block.ffn.w_out = nn.Linear(16, E, bias=False)
            self.blocks.append(block)
        self.final_norm = nn.RMSNorm(E)
        self.head = nn.Linear(E, VOCAB, bias=False)
        if tied:
            self.head.weight = self.embed.weight
        self.roles_override = roles_override

    def param_roles(self):
        if self.roles_override is not None:
            return self.roles_override
        roles = {}
        for name, _ in self.named_parameters(remove_duplicate=False):
            module = name.split(".")[-2]
            if name.endswith("bias"):
                roles[name] = "bias"
            elif module in ROLES:
                roles[name] = module
            else:
                roles[name] = "norm"
        return roles


def test_param_roles_is_used_as_is():
    model = OurGPT()
    assert naming_scheme(model) == "param_roles"
    resolved = resolve_roles(model)
    assert {n: pr.role for n, pr in resolved.items()} == model.param_roles()
    assert resolved["blocks.1.ffn.w_gate.weight"] == ParamRole("w_gate")
    assert resolved["blocks.1.ffn.w_gate.bias"] == ParamRole("bias")
    assert resolved["blocks.0.attn.q_norm.weight"] == ParamRole("norm")


def test_param_roles_of_a_tied_model_may_name_the_alias():
    model = OurGPT(tied=True)
    assert "head.weight" in model.param_roles()
    resolved = resolve_roles(model)
    assert "head.weight" not in resolved and resolved["embed.weight"].role == "embed"


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda r: r.pop("head.weight"), "gives no role for: head.weight"),
        (lambda r: r.update({"blocks.9.x.weight": "q"}), "names unknown parameters: blocks.9"),
        (lambda r: r.update({"head.weight": "lm_head"}), "unknown role 'lm_head'"),
        (lambda r: r.update({"final_norm.weight": "q"}), "has matrix role 'q'"),
    ],
)
def test_inconsistent_param_roles_is_a_value_error(edit, needle):
    roles = OurGPT().param_roles()
    edit(roles)
    with pytest.raises(ValueError) as err:
        resolve_roles(OurGPT(roles_override=roles))
    assert needle in str(err.value)


# ------------------------------------------------------------------------------------ GPT-2


class Conv1D(nn.Module):
    """Hugging Face GPT-2's Conv1D: a Linear whose weight is stored (in, out)."""

    def __init__(self, nf, nx):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.1)
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight).view(
            *x.shape[:-1], -1
        )


class GPT2Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = Conv1D(3 * E, E)
        self.c_proj = Conv1D(E, E)

    def qkv(self, x):
        return self.c_attn(x).split(E, dim=2)  # as in transformers' GPT2Attention


class GPT2MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc, self.c_proj = Conv1D(4 * E, E), Conv1D(E, 4 * E)


class GPT2Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(E)
        self.attn = GPT2Attention()
        self.ln_2 = nn.LayerNorm(E)
        self.mlp = GPT2MLP()


class GPT2Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, E), nn.Embedding(POS, E)
        self.h = nn.ModuleList(GPT2Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(E)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, tied=True):
        super().__init__()
        self.transformer = GPT2Model()
        self.lm_head = nn.Linear(E, VOCAB, bias=False)
        if tied:
            self.lm_head.weight = self.transformer.wte.weight


def expected_gpt2(prefix, tied):
    fused = ParamRole.fused(("q", "k", "v"), (E, E, E), fan_out_dim=1)
    out = {f"{prefix}wte.weight": ParamRole("embed"), f"{prefix}wpe.weight": ParamRole("embed")}
    for i in range(LAYERS):
        h = f"{prefix}h.{i}."
        out |= {
            h + "ln_1.weight": ParamRole("norm"),
            h + "ln_1.bias": ParamRole("norm"),
            h + "attn.c_attn.weight": fused,
            h + "attn.c_attn.bias": ParamRole("bias"),
            h + "attn.c_proj.weight": ParamRole("o", fan_out_dim=1),
            h + "attn.c_proj.bias": ParamRole("bias"),
            h + "ln_2.weight": ParamRole("norm"),
            h + "ln_2.bias": ParamRole("norm"),
            h + "mlp.c_fc.weight": ParamRole("w_in", fan_out_dim=1),
            h + "mlp.c_fc.bias": ParamRole("bias"),
            h + "mlp.c_proj.weight": ParamRole("w_out", fan_out_dim=1),
            h + "mlp.c_proj.bias": ParamRole("bias"),
        }
    out |= {f"{prefix}ln_f.weight": ParamRole("norm"), f"{prefix}ln_f.bias": ParamRole("norm")}
    if not tied:
        out["lm_head.weight"] = ParamRole("head")
    return out


@pytest.mark.parametrize("tied", [True, False])
def test_gpt2_lm_head_model(tied):
    model = GPT2LMHeadModel(tied=tied)
    assert naming_scheme(model) == "gpt2"
    assert resolve_roles(model) == expected_gpt2("transformer.", tied)


def test_gpt2_base_model_without_prefix():
    assert resolve_roles(GPT2Model()) == expected_gpt2("", tied=True)


def test_gpt2_fused_row_splits_are_the_q_k_v_blocks_of_the_output_dimension():
    torch.manual_seed(0)
    model = GPT2Model()
    attn = model.h[0].attn
    pr = resolve_roles(model)["h.0.attn.c_attn.weight"]
    x = torch.randn(2, 3, E)
    for part, (start, size) in zip(pr.parts, [(0, E), (E, E), (2 * E, E)], strict=True):
        attn.c_attn.weight.grad = None
        q, k, v = attn.qkv(x)
        {"q": q, "k": k, "v": v}[part].square().sum().backward()
        grad = attn.c_attn.weight.grad
        assert grad.narrow(pr.fan_out_dim, start, size).abs().min() > 0
        outside = grad.clone()
        outside.narrow(pr.fan_out_dim, start, size).zero_()
        assert not outside.any()  # the part's output only reads its own block
    assert pr.row_splits == (E, E, E) and pr.fan_out_dim == 1


def test_gpt2_routing_of_the_fused_tensor():
    model = GPT2LMHeadModel()
    plan = plan_param_groups(model, "muon:q,k,v,o,w_in,w_out adam:*")
    by_role = {g["role"]: g for g in plan["muon"]}
    assert list(by_role) == ["q+k+v", "o", "w_in", "w_out"]
    assert by_role["q+k+v"]["row_splits"] == (E, E, E)
    assert by_role["q+k+v"]["param_names"] == [
        f"transformer.h.{i}.attn.c_attn.weight" for i in range(LAYERS)
    ]
    assert all(g["fan_out_dim"] == 1 for g in plan["muon"])
    assert [g["role"] for g in plan["adam"]] == ["embed", "norm", "bias"]
    with pytest.raises(ConfigError) as err:
        plan_param_groups(model, "muon:v,o,w_in,w_gate,w_out adam:*")
    msg = str(err.value)
    assert "'transformer.h.0.attn.c_attn.weight' holds q, k, v fused in one tensor" in msg
    assert "q -> adam, k -> adam, v -> muon" in msg


# ------------------------------------------------------------------------------------ LLaMA


class LlamaRMSNorm(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))


def llama_for_causal_lm(hidden=8, heads=4, kv_heads=2, inter=12, bias=False):
    hd = hidden // heads
    model = nn.Module()
    model.model = nn.Module()
    model.model.embed_tokens = nn.Embedding(VOCAB, hidden)
    model.model.layers = nn.ModuleList()
    for _ in range(LAYERS):
        layer = nn.Module()
        layer.self_attn = nn.Module()
        layer.self_attn.q_proj = nn.Linear(hidden, heads * hd, bias=bias)
        layer.self_attn.k_proj = nn.Linear(hidden, kv_heads * hd, bias=bias)
        layer.self_attn.v_proj = nn.Linear(hidden, kv_heads * hd, bias=bias)
        layer.self_attn.o_proj = nn.Linear(heads * hd, hidden, bias=False)
        layer.mlp = nn.Module()
        layer.mlp.gate_proj = nn.Linear(hidden, inter, bias=False)
        layer.mlp.up_proj = nn.Linear(hidden, inter, bias=False)
        layer.mlp.down_proj = nn.Linear(inter, hidden, bias=False)
        layer.input_layernorm = LlamaRMSNorm(hidden)
        layer.post_attention_layernorm = LlamaRMSNorm(hidden)
        model.model.layers.append(layer)
    model.model.norm = LlamaRMSNorm(hidden)
    model.lm_head = nn.Linear(hidden, VOCAB, bias=False)
    return model


def test_llama_naming():
    model = llama_for_causal_lm()
    assert naming_scheme(model) == "llama"
    expected = {"model.embed_tokens.weight": "embed"}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        expected |= {
            p + "self_attn.q_proj.weight": "q",
            p + "self_attn.k_proj.weight": "k",
            p + "self_attn.v_proj.weight": "v",
            p + "self_attn.o_proj.weight": "o",
            p + "mlp.gate_proj.weight": "w_gate",
            p + "mlp.up_proj.weight": "w_in",
            p + "mlp.down_proj.weight": "w_out",
            p + "input_layernorm.weight": "norm",
            p + "post_attention_layernorm.weight": "norm",
        }
    expected |= {"model.norm.weight": "norm", "lm_head.weight": "head"}
    assert role_names(model) == expected
    assert all(
        pr.fan_out_dim == 0 and pr.row_splits is None for pr in resolve_roles(model).values()
    )


def test_qwen_style_qkv_biases_are_bias():
    roles = role_names(llama_for_causal_lm(bias=True))
    assert roles["model.layers.0.self_attn.q_proj.bias"] == "bias"
    assert roles["model.layers.1.self_attn.v_proj.bias"] == "bias"
    assert roles["model.layers.1.self_attn.v_proj.weight"] == "v"


def test_llama_recipe_from_paper_a_routes_the_gated_ffn():
    plan = plan_param_groups(llama_for_causal_lm(), "muon:v,o,w_in,w_gate,w_out adam:*")
    assert [g["role"] for g in plan["muon"]] == ["v", "o", "w_in", "w_gate", "w_out"]
    w_in = next(g for g in plan["muon"] if g["role"] == "w_in")
    assert w_in["param_names"] == [f"model.layers.{i}.mlp.up_proj.weight" for i in range(LAYERS)]
    assert [g["role"] for g in plan["adam"]] == ["q", "k", "embed", "head", "norm"]


# ------------------------------------------------------------------------------------- BERT


def bert_model(prefix_module=None):
    bert = nn.Module()
    bert.embeddings = nn.Module()
    bert.embeddings.word_embeddings = nn.Embedding(VOCAB, E)
    bert.embeddings.position_embeddings = nn.Embedding(POS, E)
    bert.embeddings.token_type_embeddings = nn.Embedding(2, E)
    bert.embeddings.LayerNorm = nn.LayerNorm(E)
    bert.encoder = nn.Module()
    bert.encoder.layer = nn.ModuleList()
    for _ in range(LAYERS):
        layer = nn.Module()
        layer.attention = nn.Module()
        layer.attention.self = nn.Module()
        for n in ("query", "key", "value"):
            setattr(layer.attention.self, n, nn.Linear(E, E))
        layer.attention.output = nn.Module()
        layer.attention.output.dense = nn.Linear(E, E)
        layer.attention.output.LayerNorm = nn.LayerNorm(E)
        layer.intermediate = nn.Module()
        layer.intermediate.dense = nn.Linear(E, 4 * E)
        layer.output = nn.Module()
        layer.output.dense = nn.Linear(4 * E, E)
        layer.output.LayerNorm = nn.LayerNorm(E)
        bert.encoder.layer.append(layer)
    bert.pooler = nn.Module()
    bert.pooler.dense = nn.Linear(E, E)
    return bert


def test_bert_naming():
    model = bert_model()
    assert naming_scheme(model) == "bert"
    expected = {
        "embeddings.word_embeddings.weight": "embed",
        "embeddings.position_embeddings.weight": "embed",
        "embeddings.token_type_embeddings.weight": "embed",
        "embeddings.LayerNorm.weight": "norm",
        "embeddings.LayerNorm.bias": "norm",
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for module, role in [
            ("attention.self.query", "q"),
            ("attention.self.key", "k"),
            ("attention.self.value", "v"),
            ("attention.output.dense", "o"),
            ("intermediate.dense", "w_in"),
            ("output.dense", "w_out"),
        ]:
            expected |= {f"{p}{module}.weight": role, f"{p}{module}.bias": "bias"}
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            expected |= {f"{p}{ln}.weight": "norm", f"{p}{ln}.bias": "norm"}
    expected |= {"pooler.dense.weight": "other", "pooler.dense.bias": "bias"}
    assert role_names(model) == expected


def test_bert_classifier_is_the_head():
    model = nn.Module()
    model.bert = bert_model()
    model.classifier = nn.Linear(E, 3)
    roles = role_names(model)
    assert roles["classifier.weight"] == "head" and roles["classifier.bias"] == "bias"
    assert roles["bert.encoder.layer.1.output.dense.weight"] == "w_out"
    assert roles["bert.encoder.layer.1.attention.output.dense.weight"] == "o"


# --------------------------------------------------------------------------------- generic


def test_generic_rules_never_guess_matrix_roles():
    model = nn.Module()
    model.tok = nn.Embedding(VOCAB, E)
    model.proj = nn.Linear(E, E)
    model.mix = Conv1D(E, E)
    model.bn = nn.BatchNorm1d(E)
    model.final_ln = nn.LayerNorm(E)
    model.scale = nn.Parameter(torch.ones(E))
    assert naming_scheme(model) == "generic"
    assert resolve_roles(model) == {
        "tok.weight": ParamRole("embed"),
        "proj.weight": ParamRole("other"),
        "proj.bias": ParamRole("bias"),
        "mix.weight": ParamRole("other", fan_out_dim=1),
        "mix.bias": ParamRole("bias"),
        "bn.weight": ParamRole("norm"),
        "bn.bias": ParamRole("norm"),
        "final_ln.weight": ParamRole("norm"),
        "final_ln.bias": ParamRole("norm"),
        "scale": ParamRole("other"),
    }


def test_family_rules_skip_one_dimensional_lookalikes():
    model = llama_for_causal_lm()
    model.model.layers[0].self_attn.register_parameter("k_proj_scale", nn.Parameter(torch.ones(2)))
    model.extra = nn.Module()
    model.extra.q_proj = nn.Module()
    model.extra.q_proj.weight = nn.Parameter(torch.ones(3))
    roles = role_names(model)
    assert roles["extra.q_proj.weight"] == "other"
    assert roles["model.layers.0.self_attn.k_proj_scale"] == "other"


# ---------------------------------------------------------------------- ParamRole and table


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"role": "qkv"}, "unknown role 'qkv'"),
        ({"role": "q+k", "parts": ("q", "k"), "row_splits": (2,)}, "one row split per part"),
        ({"role": "q+k", "parts": ("q", "norm"), "row_splits": (2, 2)}, "at least two parts"),
        ({"role": "k+q", "parts": ("q", "k"), "row_splits": (2, 2)}, "must be 'q+k'"),
        ({"role": "v", "row_splits": (2, 0)}, "positive integers"),
        ({"role": "v", "fan_out_dim": 2}, "fan_out_dim must be 0 or 1"),
    ],
)
def test_param_role_validation(kwargs, needle):
    with pytest.raises(ValueError) as err:
        ParamRole(**kwargs)
    assert needle in str(err.value)


def test_matrix_roles_and_roles_property():
    assert set(MATRIX_ROLES) < set(ROLES)
    assert ParamRole("v").roles == ("v",)
    assert ParamRole.fused(("w_gate", "w_in"), (3, 3)).roles == ("w_gate", "w_in")


def test_row_splits_must_cover_the_output_dimension():
    lin = nn.Linear(4, 6, bias=False)
    lin.param_roles = lambda: {"weight": ParamRole.fused(("q", "k"), (3, 2))}
    with pytest.raises(ValueError, match="sum to 5, not to its output size 6"):
        resolve_roles(lin)


def test_roles_table_lists_every_parameter_with_its_source_and_hints():
    model = GPT2LMHeadModel()
    lines = roles_table(model).splitlines()
    assert lines[0] == "roles from: gpt2"
    assert lines[1].split() == ["parameter", "shape", "role", "hints"]
    assert len(lines) == 3 + len(resolve_roles(model))
    row = next(line for line in lines if line.startswith("transformer.h.1.attn.c_attn.weight"))
    assert "q+k+v" in row and "fan_out_dim=1" in row and f"row_splits=({E}, {E}, {E})" in row


# ---------------------------------------------- real Hugging Face models (optional extra)


def test_real_hugging_face_models_resolve_like_the_hand_built_trees():
    transformers = pytest.importorskip("transformers")
    gpt2 = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(
            n_layer=LAYERS, n_embd=E, n_head=2, vocab_size=VOCAB, n_positions=POS
        )
    )
    assert resolve_roles(gpt2) == expected_gpt2("transformer.", tied=True)
    llama = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            num_hidden_layers=LAYERS,
            hidden_size=8,
            intermediate_size=12,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=VOCAB,
            tie_word_embeddings=False,
        )
    )
    assert role_names(llama) == role_names(llama_for_causal_lm())
    bert = transformers.BertModel(
        transformers.BertConfig(
            num_hidden_layers=LAYERS,
            hidden_size=E,
            intermediate_size=4 * E,
            num_attention_heads=2,
            vocab_size=VOCAB,
            max_position_embeddings=POS,
        )
    )
    assert role_names(bert) == role_names(bert_model())


def test_wrappers_around_a_model_with_param_roles_use_it_for_its_parameters():
    wrapper = nn.Module()
    wrapper._orig_mod = OurGPT()  # what torch.compile's OptimizedModule holds
    wrapper.classifier = nn.Linear(E, 3)
    assert naming_scheme(wrapper) == "param_roles"
    roles = role_names(wrapper)
    inner = OurGPT().param_roles()
    assert {n: r for n, r in roles.items() if n.startswith("_orig_mod.")} == {
        "_orig_mod." + n: r for n, r in inner.items()
    }
    assert roles["classifier.weight"] == "other" and roles["classifier.bias"] == "bias"
    assert list(roles) == [n for n, _ in wrapper.named_parameters()]


class Forwarding(nn.Module):
    """Forwards unknown attributes to the inner module, as torch.compile's OptimizedModule does."""

    def __init__(self, inner):
        super().__init__()
        self._orig_mod = inner

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._orig_mod, name)


def test_forwarding_wrapper_keeps_the_roles():
    compiled = Forwarding(OurGPT())
    assert callable(compiled.param_roles)  # borrowed from the inner module
    inner = OurGPT().param_roles()
    assert role_names(compiled) == {"_orig_mod." + n: r for n, r in inner.items()}


# ------------------------------------------------------------------ state dicts without modules


@pytest.mark.parametrize(
    "build",
    [
        lambda: GPT2LMHeadModel(tied=False),
        GPT2Model,
        lambda: llama_for_causal_lm(),
        lambda: llama_for_causal_lm(bias=True),
        bert_model,
    ],
)
def test_names_and_shapes_alone_give_the_module_roles(build):
    """A bare state dict (no module classes) resolves exactly like its module tree."""
    model = build()
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
    assert resolve_roles_from_names(shapes) == resolve_roles(model)


def test_names_alone_split_a_gpt2_fused_tensor_only_when_it_divides_in_three():
    roles = resolve_roles_from_names(
        {"h.0.attn.c_attn.weight": (8, 24), "h.1.attn.c_attn.weight": (8, 25)}
    )
    assert roles["h.0.attn.c_attn.weight"] == ParamRole.fused(("q", "k", "v"), (8, 8, 8), 1)
    assert roles["h.1.attn.c_attn.weight"] == ParamRole("other", fan_out_dim=1)


def test_matrix_roles_by_name_ignore_the_shape():
    """What the name rules call a matrix, whatever the tensor holds: the fused c_attn that does
    not split in three and a 1-D q_proj are still named, so diagnose can say it skipped them;
    embeddings, heads, norms and our GPT's names (no family) are not matrices."""
    gpt2 = ["h.0.attn.c_attn.weight", "h.0.attn.c_proj.weight", "h.0.mlp.c_fc.weight",
            "h.0.ln_1.weight", "wte.weight", "lm_head.weight", "h.0.attn.c_attn.bias"]  # fmt: skip
    assert matrix_roles_by_name(gpt2) == {
        "h.0.attn.c_attn.weight": ("q", "k", "v"),
        "h.0.attn.c_proj.weight": ("o",),
        "h.0.mlp.c_fc.weight": ("w_in",),
    }
    llama = ["model.layers.3.self_attn.q_proj.weight", "model.layers.3.mlp.gate_proj.weight",
             "model.embed_tokens.weight", "model.norm.weight"]  # fmt: skip
    assert matrix_roles_by_name(llama) == {
        "model.layers.3.self_attn.q_proj.weight": ("q",),
        "model.layers.3.mlp.gate_proj.weight": ("w_gate",),
    }
    assert matrix_roles_by_name(["blocks.0.attn.q.weight", "blocks.0.ffn.w_in.weight"]) == {}


# --------------------------------------------------------------- torchtitan / lingua Llama


class TitanLlama(nn.Module):
    """torchtitan's / Meta lingua's Llama module tree: the exact names, small shapes."""

    def __init__(self, dim=8, hidden=12):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, dim)
        self.layers = nn.ModuleDict()
        for i in range(LAYERS):
            block = nn.Module()
            block.attention = nn.Module()
            for n in ("wq", "wk", "wv", "wo"):
                setattr(block.attention, n, nn.Linear(dim, dim, bias=False))
            block.feed_forward = nn.Module()
            block.feed_forward.w1 = nn.Linear(dim, hidden, bias=False)
            block.feed_forward.w2 = nn.Linear(hidden, dim, bias=False)
            block.feed_forward.w3 = nn.Linear(dim, hidden, bias=False)
            block.attention_norm, block.ffn_norm = nn.RMSNorm(dim), nn.RMSNorm(dim)
            self.layers[str(i)] = block
        self.norm = nn.RMSNorm(dim)
        self.output = nn.Linear(dim, VOCAB, bias=False)


def test_torchtitan_naming():
    model = TitanLlama()
    assert naming_scheme(model) == "torchtitan"
    got = role_names(model)
    want = {"tok_embeddings.weight": "embed", "norm.weight": "norm", "output.weight": "head"}
    for i in range(LAYERS):
        p = f"layers.{i}."
        want |= {p + f"attention.w{n}.weight": n for n in "qkvo"}
        want |= {
            p + "feed_forward.w1.weight": "w_gate",
            p + "feed_forward.w3.weight": "w_in",
            p + "feed_forward.w2.weight": "w_out",
            p + "attention_norm.weight": "norm",
            p + "ffn_norm.weight": "norm",
        }
    assert got == want
    assert (
        resolve_roles_from_names({n: p.shape for n, p in model.named_parameters()}).keys()
        == got.keys()
    )


def test_torchtitan_recipe_sends_the_output_head_to_adam():
    plan = plan_param_groups(TitanLlama(), "muon:q,k,v,o,w_in,w_gate,w_out adam:*")
    muon_names = {n for g in plan["muon"] for n in g["param_names"]}
    adam_names = {n for g in plan["adam"] for n in g["param_names"]}
    assert "output.weight" in adam_names and "tok_embeddings.weight" in adam_names
    assert len(muon_names) == LAYERS * 7
    assert all(".attention.w" in n or ".feed_forward.w" in n for n in muon_names)


# ------------------------------------------------------------------ explicit roles= mapping


class Mystery(nn.Module):
    """A model of no known family: names the built-in rules cannot place."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, E)
        self.mix = nn.ModuleList(nn.Linear(E, E, bias=False) for _ in range(2))
        self.up = nn.Linear(E, 2 * E)
        self.ln = nn.LayerNorm(E)
        self.lm_out = nn.Linear(E, VOCAB, bias=False)


def test_roles_patterns_come_first_and_the_rest_keeps_built_in_roles():
    roles = {r"mix\.\d+\.weight": "v", r"up\.weight": "w_in", r".*lm_out\.weight": "head"}
    got = {n: pr.role for n, pr in resolve_roles(Mystery(), roles).items()}
    assert got == {
        "emb.weight": "embed",
        "mix.0.weight": "v",
        "mix.1.weight": "v",
        "up.weight": "w_in",
        "up.bias": "bias",
        "ln.weight": "norm",
        "ln.bias": "norm",
        "lm_out.weight": "head",
    }
    # first match in mapping order wins; an exact name is its own pattern
    first = {"mix.0.weight": "q", r"mix\.\d+\.weight": "k"}
    got = {n: pr.role for n, pr in resolve_roles(Mystery(), first).items()}
    assert (got["mix.0.weight"], got["mix.1.weight"]) == ("q", "k")


def test_roles_callable_and_its_none_fallback():
    def roles(name, p):
        return "o" if name.startswith("mix.") and p.ndim == 2 else None

    got = {n: pr.role for n, pr in resolve_roles(Mystery(), roles).items()}
    assert got["mix.0.weight"] == got["mix.1.weight"] == "o"
    assert got["lm_out.weight"] == "other" and got["emb.weight"] == "embed"


@pytest.mark.parametrize(
    ("roles", "needle"),
    [
        ({"*.weight": "v"}, r"roles pattern '\*\.weight' is not a regular expression"),
        ({"up.bias": "v"}, "matrix roles .* need at least 2 dimensions"),
        ({"up.weight": "value"}, "roles gives parameter 'up.weight' a bad role: unknown role"),
    ],
)
def test_bad_roles_are_config_errors(roles, needle):
    with pytest.raises(ConfigError, match=needle):
        plan_param_groups(Mystery(), "muon:v,w_in adam:*", roles=roles)


def test_vocabulary_shaped_parameters_never_go_to_muon_unless_forced():
    with pytest.raises(ConfigError) as err:
        plan_param_groups(Mystery(), "muon:other adam:*")
    msg = str(err.value)
    assert f"the {VOCAB}-token vocabulary's tables (embedding / LM head)" in msg
    assert f"lm_out.weight ({VOCAB}, {E}) (other)" in msg and "force_muon_vocab=True" in msg
    with pytest.raises(ConfigError, match=r"emb\.weight"):
        plan_param_groups(Mystery(), "muon:embed adam:*")
    plan = plan_param_groups(Mystery(), "muon:other adam:*", force_muon_vocab=True)
    assert "lm_out.weight" in {n for g in plan["muon"] for n in g["param_names"]}
    # named by a pattern as the head, it lands in adam with the catch-all
    plan = plan_param_groups(Mystery(), "muon:other adam:*", roles={"lm_out.weight": "head"})
    assert {n for g in plan["muon"] for n in g["param_names"]} == {
        "mix.0.weight",
        "mix.1.weight",
        "up.weight",
    }


def test_unassigned_error_prints_the_role_table_and_names_roles():
    with pytest.raises(ConfigError) as err:
        plan_param_groups(Mystery(), "muon:other")
    msg = str(err.value)
    assert "roles={name pattern: role}" in msg and "roles_table(model)" in msg
    table = msg.split("\n")[1:]
    assert table[0].split() == ["parameter", "shape", "role"]
    assert table[2].split() == ["emb.weight", f"({VOCAB},", f"{E})", "embed"]
    assert len(table) == 2 + 4  # emb.weight, up.bias, ln.weight, ln.bias

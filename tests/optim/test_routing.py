"""Recipes in roles -> param groups -> one RoutedOptimizer, checked against plain torch optims."""

import copy
import io

import pytest
import torch
from torch import nn

from tailmem.errors import CheckpointError, ConfigError
from tailmem.models.roles import ROLES, ParamRole
from tailmem.optim.registry import REGISTRY
from tailmem.optim.routing import (
    RoutedOptimizer,
    build_optimizer,
    parse_recipe,
    plan_param_groups,
)

D, HEADS, VOCAB, FFN = 8, 2, 11, 12


class Attn(nn.Module):
    def __init__(self, qk_norm: bool):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(D, D, bias=False) for _ in range(4))
        self.q_norm = nn.RMSNorm(D // HEADS) if qk_norm else None
        self.k_norm = nn.RMSNorm(D // HEADS) if qk_norm else None

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (m(x).view(b, t, HEADS, -1).transpose(1, 2) for m in (self.q, self.k, self.v))
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, D))


class FFNBlock(nn.Module):
    def __init__(self, gated: bool):
        super().__init__()
        self.w_in = nn.Linear(D, FFN, bias=False)
        self.w_gate = nn.Linear(D, FFN, bias=False) if gated else None
        self.w_out = nn.Linear(FFN, D, bias=False)

    def forward(self, x):
        h = nn.functional.gelu(self.w_in(x))
        if self.w_gate is not None:
            h = h * self.w_gate(x)
        return self.w_out(h)


class Block(nn.Module):
    def __init__(self, gated: bool, qk_norm: bool):
        super().__init__()
        self.attn_norm, self.ffn_norm = nn.RMSNorm(D), nn.RMSNorm(D)
        self.attn, self.ffn = Attn(qk_norm), FFNBlock(gated)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))


class TinyGPT(nn.Module):
    """Our GPT's module tree and ``param_roles()`` contract (COMMON.md), at toy size."""

    def __init__(self, n_layers=2, gated=True, qk_norm=True, tied=False):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.blocks = nn.ModuleList(Block(gated, qk_norm) for _ in range(n_layers))
        self.final_norm = nn.RMSNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)
        if tied:
            self.head.weight = self.embed.weight

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.final_norm(x))

    def param_roles(self):
        roles = {}
        for name, _ in self.named_parameters(remove_duplicate=False):
            last = name.split(".")[-2]
            if last in ("q", "k", "v", "o", "w_in", "w_gate", "w_out", "embed", "head"):
                roles[name] = last
            else:
                roles[name] = "norm"
        return roles


def make_model(seed=0, **kw):
    torch.manual_seed(seed)
    return TinyGPT(**kw)


def batches(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (3, 6), generator=g) for _ in range(n)]


def loss_fn(model, idx):
    logits = model(idx[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), idx[:, 1:].reshape(-1))


def train(model, opt, data, sched=None):
    for idx in data:
        opt.zero_grad()
        loss_fn(model, idx).backward()
        opt.step()
        if sched is not None:
            sched.step()


def names_by_role(model):
    out = {}
    for name, role in model.param_roles().items():
        out.setdefault(role, []).append(name)
    return out


def assert_params_equal(a, b):
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert na == nb
        assert torch.equal(pa, pb), na


# --------------------------------------------------------------------------------- parse_recipe


def test_parse_recipe_expands_star_to_the_remaining_roles_in_role_order():
    got = parse_recipe("muon:v,o,w_in,w_gate,w_out adam:*")
    assert list(got) == ["muon", "adam"]
    assert got["muon"] == ["v", "o", "w_in", "w_gate", "w_out"]
    assert got["adam"] == ["q", "k", "embed", "head", "norm", "bias", "other"]
    assert parse_recipe("adam:*") == {"adam": list(ROLES)}
    assert parse_recipe("sgd:q") == {"sgd": ["q"]}


def test_parse_recipe_tolerates_spaces_and_keeps_named_roles_before_star():
    got = parse_recipe("  muon: v, o   adamw:head,*  ")
    assert got["muon"] == ["v", "o"]
    assert got["adamw"] == ["head"] + [r for r in ROLES if r not in ("v", "o", "head")]
    assert parse_recipe("muon:v o adam:*")["muon"] == ["v", "o"]


@pytest.mark.parametrize(
    ("recipe", "needle"),
    [
        ("", "recipe is empty"),
        ("   ", "recipe is empty"),
        ("muon", "should look like kind:role"),
        ("nosuchopt:*", "unknown optimiser kind 'nosuchopt'"),
        ("Adam:*", "valid: " + ", ".join(REGISTRY)),
        ("muon:qq adam:*", "unknown role 'qq'"),
        ("muon:v,o adam:o,*", "role 'o' is named twice"),
        ("muon:v,v adam:*", "role 'v' is named twice"),
        ("muon:v adam:* sgd:*", "'*' appears twice"),
        ("muon:v muon:o adam:*", "kind 'muon' appears twice"),
        ("muon: adam:*", "names no roles"),
    ],
)
def test_parse_recipe_errors_are_one_line_config_errors(recipe, needle):
    with pytest.raises(ConfigError) as err:
        parse_recipe(recipe)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_role_error_lists_the_valid_roles():
    with pytest.raises(ConfigError, match="valid roles: q, k, v, o, w_in, w_gate, w_out, embed"):
        parse_recipe("muon:value adam:*")


# ------------------------------------------------------------------------ plan_param_groups


def test_plan_partitions_every_parameter_exactly_once_by_role():
    model = make_model()
    by_role = names_by_role(model)
    plan = plan_param_groups(model, "muon:v,o,w_in,w_gate,w_out adam:*")
    assert list(plan) == ["muon", "adam"]
    assert [g["role"] for g in plan["muon"]] == ["v", "o", "w_in", "w_gate", "w_out"]
    assert [g["role"] for g in plan["adam"]] == ["q", "k", "embed", "head", "norm"]
    for kind, groups in plan.items():
        for g in groups:
            assert g["kind"] == kind
            assert g["param_names"] == by_role[g["role"]]
            params = dict(model.named_parameters())
            assert all(p is params[n] for p, n in zip(g["params"], g["param_names"], strict=True))
    seen = [n for groups in plan.values() for g in groups for n in g["param_names"]]
    assert sorted(seen) == sorted(n for n, _ in model.named_parameters())
    # q_norm/k_norm/attn_norm/ffn_norm/final_norm: 2 layers * 4 + 1
    assert len(next(g for g in plan["adam"] if g["role"] == "norm")["params"]) == 9


def test_muon_groups_carry_layout_hints_and_other_kinds_do_not():
    model = make_model()
    plan = plan_param_groups(model, "muon:q,k,v,o,w_in,w_out adamw:*")
    for g in plan["muon"]:
        assert g["fan_out_dim"] == 0
        assert "row_splits" not in g
    for g in plan["adamw"]:
        assert set(g) == {"params", "param_names", "kind", "role"}


def test_fused_tensor_becomes_one_muon_group_with_row_splits():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 12, bias=False), nn.Linear(12, 4, bias=False))
    roles = {
        "0.weight": ParamRole.fused(("q", "k", "v"), (4, 4, 4), fan_out_dim=0),
        "1.weight": "o",
    }
    plan = plan_param_groups(model, "muon:q,k,v,o", roles=roles)
    (fused, out) = plan["muon"]
    assert fused["role"] == "q+k+v" and fused["row_splits"] == (4, 4, 4)
    assert fused["param_names"] == ["0.weight"] and out["role"] == "o"
    with pytest.raises(ConfigError) as err:
        plan_param_groups(model, "muon:v,o adam:*", roles=roles)
    msg = str(err.value)
    assert "'0.weight' holds q, k, v fused in one tensor" in msg
    assert "q -> adam, k -> adam, v -> muon" in msg


def test_parameters_of_one_role_with_different_hints_get_separate_groups():
    model = nn.Sequential(nn.Linear(4, 6, bias=False), nn.Linear(6, 4, bias=False))
    roles = {"0.weight": ParamRole("other", fan_out_dim=1), "1.weight": "other"}
    (a, b) = plan_param_groups(model, "muon:*", roles=roles)["muon"]
    assert (a["role"], a["fan_out_dim"], a["param_names"]) == ("other", 1, ["0.weight"])
    assert (b["role"], b["fan_out_dim"], b["param_names"]) == ("other", 0, ["1.weight"])
    (only,) = plan_param_groups(model, "adam:*", roles=roles)["adam"]
    assert only["param_names"] == ["0.weight", "1.weight"]


def test_frozen_parameters_are_left_out():
    model = make_model()
    model.embed.weight.requires_grad_(False)
    plan = plan_param_groups(model, "adam:*")
    assert "embed" not in [g["role"] for g in plan["adam"]]
    assert "embed.weight" not in [n for g in plan["adam"] for n in g["param_names"]]


def test_tied_head_is_routed_once_under_its_first_name():
    model = make_model(tied=True)
    plan = plan_param_groups(model, "adam:*")
    names = [n for g in plan["adam"] for n in g["param_names"]]
    assert "embed.weight" in names and "head.weight" not in names
    assert len(names) == len(set(names))


def test_unassigned_parameters_are_listed_and_truncated():
    with pytest.raises(ConfigError) as err:
        plan_param_groups(make_model(), "muon:v,o,w_in,w_gate,w_out")
    msg = str(err.value)
    # 1 embed + 2 layers x (q, k, attn_norm, ffn_norm, q_norm, k_norm) + final_norm + head
    assert "gives no optimiser to 15 parameter(s) with role(s) q, k, embed, head, norm: " in msg
    first_six = "embed.weight, blocks.0.attn_norm.weight, blocks.0.ffn_norm.weight, "
    first_six += "blocks.0.attn.q.weight, blocks.0.attn.k.weight, blocks.0.attn.q_norm.weight"
    assert first_six + " (+9 more);" in msg
    assert "adam:*" in msg


def test_muon_refuses_non_matrix_roles():
    with pytest.raises(ConfigError) as err:
        plan_param_groups(make_model(), "muon:*")
    msg = str(err.value)
    assert "muon only trains matrices" in msg and "role(s) norm" in msg
    assert "blocks.0.attn_norm.weight (8,)" in msg
    with pytest.raises(ConfigError, match="role\\(s\\) other"):
        plan_param_groups(nn.Linear(3, 3), "muon:*", roles={"weight": "other", "bias": "other"})


def test_a_kind_with_no_parameters_is_an_error_but_an_empty_named_role_is_not():
    plain = make_model(gated=False)
    plan = plan_param_groups(plain, "muon:v,o,w_in,w_gate,w_out adam:*")
    assert [g["role"] for g in plan["muon"]] == ["v", "o", "w_in", "w_out"]
    with pytest.raises(ConfigError, match="gives sgd role\\(s\\) w_gate, but the model has no"):
        plan_param_groups(plain, "sgd:w_gate adam:*")


# ---------------------------------------------------------------- stepping like torch does


def reference_optimizers(model, plan_roles, make):
    """Plain torch optimisers over the same partition, built by hand from param_roles()."""
    by_role = names_by_role(model)
    params = dict(model.named_parameters())
    return [
        make[kind]([params[n] for r in roles if r in by_role for n in by_role[r]])
        for kind, roles in plan_roles.items()
    ]


def test_routed_step_equals_separate_torch_optimisers_on_the_same_partition():
    recipe = "sgd:q,k,v,o adam:*"
    a, b = make_model(), make_model()
    routed = build_optimizer(
        a, recipe, sgd={"lr": 0.1, "momentum": 0.9}, adam={"lr": 1e-2, "betas": (0.8, 0.95)}
    )
    refs = reference_optimizers(
        b,
        parse_recipe(recipe),
        {
            "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
            "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2, betas=(0.8, 0.95)),
        },
    )
    before = copy.deepcopy(a.state_dict())
    for idx in batches(5):
        routed.zero_grad()
        loss_fn(a, idx).backward()
        routed.step()
        for opt in refs:
            opt.zero_grad()
        loss_fn(b, idx).backward()
        for opt in refs:
            opt.step()
    assert_params_equal(a, b)
    assert not torch.equal(before["blocks.0.attn.q.weight"], a.blocks[0].attn.q.weight)


def test_step_with_closure_returns_the_loss_and_matches_a_plain_step():
    a, b = make_model(), make_model()
    ra = build_optimizer(a, "adamw:*", adamw={"lr": 1e-2})
    rb = build_optimizer(b, "adamw:*", adamw={"lr": 1e-2})
    for idx in batches(3):

        def closure(idx=idx):
            ra.zero_grad()
            loss = loss_fn(a, idx)
            loss.backward()
            return loss

        loss = ra.step(closure)
        rb.zero_grad()
        expected = loss_fn(b, idx)
        expected.backward()
        rb.step()
        assert torch.equal(loss, expected)
    assert_params_equal(a, b)


def test_param_groups_are_the_childrens_dicts_and_lambda_lr_drives_the_children():
    model = make_model()
    sgd = {"lr": 0.5, "momentum": 0.0}
    opt = build_optimizer(model, "sgd:v,o adam:*", sgd=sgd, adam={"lr": 1e-2})
    assert isinstance(opt, torch.optim.Optimizer)
    child_groups = [g for child in opt.optimizers.values() for g in child.param_groups]
    assert len(opt.param_groups) == len(child_groups)
    assert all(a is b for a, b in zip(opt.param_groups, child_groups, strict=True))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5**s)
    assert all("initial_lr" in g for g in opt.optimizers["sgd"].param_groups)
    train(model, opt, batches(2), sched)
    assert [g["lr"] for g in opt.optimizers["sgd"].param_groups] == [0.125, 0.125]
    assert opt.optimizers["adam"].param_groups[0]["lr"] == pytest.approx(2.5e-3, rel=0, abs=0)
    # the lr the scheduler set is the lr the child uses: plain SGD moves by exactly lr * grad
    w = model.blocks[0].attn.v.weight
    opt.zero_grad()
    loss_fn(model, batches(1, seed=7)[0]).backward()
    before, grad = w.detach().clone(), w.grad.clone()
    opt.step()
    assert torch.equal(w.detach(), before - 0.125 * grad)


def test_role_overrides_set_per_role_options_and_lrs_are_editable_per_role():
    model = make_model()
    opt = build_optimizer(
        model,
        "sgd:v,o adamw:*",
        sgd={"lr": 0.1, "momentum": 0.0},
        adamw={"lr": 1e-3, "weight_decay": 0.0},
        role_overrides={"head": {"lr": 5e-3}, "o": {"momentum": 0.5}},
    )
    lrs = {(g["kind"], g["role"]): g["lr"] for g in opt.param_groups}
    assert lrs[("adamw", "head")] == 5e-3 and lrs[("adamw", "embed")] == 1e-3
    momenta = {g["role"]: g["momentum"] for g in opt.optimizers["sgd"].param_groups}
    assert momenta == {"v": 0.0, "o": 0.5}


def test_zero_grad_and_state_view():
    model = make_model()
    opt = build_optimizer(model, "sgd:v,o adam:*", sgd={"lr": 0.1, "momentum": 0.9})
    train(model, opt, batches(1))
    n_params = len(list(model.parameters()))
    assert len(opt.state) == n_params
    w = model.blocks[1].attn.o.weight
    assert w in opt.state and opt.state[w] is opt.optimizers["sgd"].state[w]
    assert set(opt.state[model.embed.weight]) == {"step", "exp_avg", "exp_avg_sq"}
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_describe_and_summary_count_tensors_and_parameters():
    model = make_model()
    opt = build_optimizer(model, "sgd:v,o adam:*", sgd={"lr": 0.1})
    rows = {(r["kind"], r["role"]): r for r in opt.summary()}
    assert rows[("sgd", "v")]["tensors"] == 2 and rows[("sgd", "v")]["numel"] == 2 * D * D
    assert rows[("adam", "embed")]["numel"] == VOCAB * D
    assert sum(r["numel"] for r in rows.values()) == sum(p.numel() for p in model.parameters())
    text = opt.describe()
    assert text.splitlines()[0] == "recipe: sgd:v,o adam:*"
    total = sum(p.numel() for p in model.parameters())
    n_tensors = len(list(model.parameters()))
    assert text.splitlines()[-1].split() == ["total", str(n_tensors), f"{total:,}"]


def test_add_param_group_routes_by_kind():
    model = make_model()
    opt = build_optimizer(model, "adam:*")
    extra = nn.Parameter(torch.ones(3))
    with pytest.raises(ValueError, match="needs 'kind'"):
        opt.add_param_group({"params": [extra]})
    new_group = {"params": [extra], "param_names": ["extra"], "kind": "adam", "role": "other"}
    opt.add_param_group({**new_group, "lr": 0.1})
    assert opt.param_groups[-1]["params"][0] is extra
    assert opt.param_groups[-1] is opt.optimizers["adam"].param_groups[-1]
    extra.grad = torch.ones(3)
    opt.step()
    assert torch.allclose(extra.detach(), torch.full((3,), 0.9))
    with pytest.raises(ValueError, match="already belong"):
        opt.add_param_group({"params": [extra], "kind": "adam"})


def test_routed_optimizer_rejects_overlapping_children():
    p = nn.Parameter(torch.zeros(2))
    with pytest.raises(ValueError, match="belongs to both"):
        RoutedOptimizer({"a": torch.optim.SGD([p], lr=0.1), "b": torch.optim.Adam([p])})


def test_deepcopy_keeps_groups_shared_with_children():
    model = make_model()
    opt = build_optimizer(model, "sgd:v,o adam:*", sgd={"lr": 0.1, "momentum": 0.9})
    train(model, opt, batches(1))
    clone = copy.deepcopy(opt)
    children = [g for c in clone.optimizers.values() for g in c.param_groups]
    assert all(a is b for a, b in zip(clone.param_groups, children, strict=True))
    clone.param_groups[0]["lr"] = 7.0
    assert clone.optimizers["sgd"].param_groups[0]["lr"] == 7.0
    assert opt.optimizers["sgd"].param_groups[0]["lr"] == 0.1


# -------------------------------------------------------------------------------- state dict


def test_state_dict_has_the_standard_layout_with_tagged_groups():
    model = make_model()
    opt = build_optimizer(model, "sgd:v,o adam:*", sgd={"lr": 0.1, "momentum": 0.9})
    train(model, opt, batches(1))
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    ids = [i for g in sd["param_groups"] for i in g["params"]]
    assert ids == list(range(len(list(model.parameters()))))
    assert sorted(sd["state"]) == ids
    assert [(g["kind"], g["role"]) for g in sd["param_groups"]] == [
        (g["kind"], g["role"]) for g in opt.param_groups
    ]
    assert set(sd["state"][0]) == {"momentum_buffer"}


@pytest.mark.parametrize(
    ("recipe", "hparams"),
    [
        ("sgd:v,o,w_in,w_gate,w_out adam:*", {"sgd": {"lr": 0.05, "momentum": 0.9}}),
        ("adamw:* ", {"adamw": {"lr": 3e-3, "betas": (0.8, 0.95), "weight_decay": 0.1}}),
    ],
)
def test_resume_from_state_dict_is_bitwise_identical(recipe, hparams):
    data = batches(6)

    def fresh(seed):
        model = make_model(seed)
        opt = build_optimizer(model, recipe, **hparams)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
        return model, opt, sched

    full, opt, sched = fresh(0)
    train(full, opt, data, sched)

    first, opt, sched = fresh(0)
    train(first, opt, data[:3], sched)
    buf = io.BytesIO()
    torch.save(
        {"model": first.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()}, buf
    )
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=True)

    resumed, opt, sched = fresh(123)
    resumed.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    sched.load_state_dict(ckpt["sched"])
    assert all(
        a is b
        for a, b in zip(
            opt.param_groups,
            [g for c in opt.optimizers.values() for g in c.param_groups],
            strict=True,
        )
    )
    train(resumed, opt, data[3:], sched)
    assert_params_equal(full, resumed)


def test_load_state_dict_from_another_recipe_is_a_checkpoint_error():
    model = make_model()
    saved = build_optimizer(model, "sgd:v,o adam:*", sgd={"lr": 0.1}).state_dict()
    other = build_optimizer(model, "sgd:q,o adam:*", sgd={"lr": 0.1})
    with pytest.raises(CheckpointError, match="group 0 is sgd/v with 2 tensors, but this"):
        other.load_state_dict(saved)
    fewer = build_optimizer(make_model(gated=False), "adam:*")
    with pytest.raises(CheckpointError, match="has 10 param groups, this optimizer has 9"):
        fewer.load_state_dict(saved)
    with pytest.raises(CheckpointError, match="'state' and 'param_groups'"):
        fewer.load_state_dict({"param_groups": []})


# ------------------------------------------------------------------------ hyperparameters


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"nosuchopt": {"lr": 1.0}}, "unknown optimiser kind 'nosuchopt'"),
        ({"adamw": {"lr": 1.0}}, "given for adamw, but recipe 'sgd:v,o adam:*' does not use it"),
        (
            {"adam": {"beta": (0.9, 0.9)}},
            "hyperparameters for adam: unknown config field 'adam.beta'",
        ),
        ({"adam": {"lr": -1.0}}, "adam.lr: got -1.0; expected a number > 0"),
        ({"adam": {"betas": (0.9, 1.5)}}, "hyperparameters for adam: adam.betas[1]: got 1.5"),
        ({"sgd": 0.1}, "hyperparameters for sgd must be a mapping"),
        ({"role_overrides": {"vv": {"lr": 1}}}, "unknown role 'vv'"),
        ({"role_overrides": {"q": {"momentum": 0.9}}}, "role_overrides['q']: unknown name"),
        ({"role_overrides": {"o": {"beta": 0.9}}}, "role_overrides['o']: unknown name(s) 'beta'"),
        ({"role_overrides": {"o": 0.1}}, "role_overrides['o'] must be a mapping"),
    ],
)
def test_hyperparameter_errors(kwargs, needle):
    with pytest.raises(ConfigError) as err:
        build_optimizer(make_model(), "sgd:v,o adam:*", **kwargs)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_hyperparameter_error_lists_accepted_names():
    with pytest.raises(ConfigError, match=r"expected one of: betas, eps, weight_decay"):
        build_optimizer(make_model(), "adam:*", adam={"learning_rate": 1e-3})


def test_role_override_for_a_role_the_recipe_does_not_route():
    with pytest.raises(ConfigError, match="names role 'q', but recipe 'sgd:v,o' does not route"):
        build_optimizer(
            nn.Linear(2, 2, bias=False),
            "sgd:v,o",
            roles={"weight": "v"},
            role_overrides={"q": {"lr": 1.0}},
        )


def test_every_kind_is_known_to_the_parser():
    for kind in REGISTRY:
        assert parse_recipe(f"{kind}:*") == {kind: list(ROLES)}


# ------------------------------------------------------------- with the real Muon / SignGD


def test_muon_routing_matches_separate_muon_and_adam():
    muon = pytest.importorskip("tailmem.optim.muon")
    recipe = "muon:v,o,w_in,w_gate,w_out adam:*"
    a, b = make_model(), make_model()
    routed = build_optimizer(a, recipe, muon={"lr": 0.02, "momentum": 0.95}, adam={"lr": 3e-3})
    assert isinstance(routed.optimizers["muon"], muon.Muon)
    assert all(g["fan_out_dim"] == 0 for g in routed.optimizers["muon"].param_groups)
    by_role = names_by_role(b)
    params = dict(b.named_parameters())
    muon_roles = parse_recipe(recipe)["muon"]
    ref_muon = muon.Muon(  # a recipe's Muon: paper A1 settings, not torch's defaults
        [{"params": [params[n] for n in by_role[r]], "fan_out_dim": 0} for r in muon_roles],
        lr=0.02, momentum=0.95, nesterov=False, weight_decay=0.0, dtype=None,
    )  # fmt: skip
    ref_adam = torch.optim.Adam(  # a recipe's Adam: paper A1's betas
        [params[n] for r in parse_recipe(recipe)["adam"] for n in by_role.get(r, [])],
        lr=3e-3, betas=(0.8, 0.95),
    )  # fmt: skip
    for idx in batches(3):
        routed.zero_grad()
        loss_fn(a, idx).backward()
        routed.step()
        ref_muon.zero_grad()
        ref_adam.zero_grad()
        loss_fn(b, idx).backward()
        ref_muon.step()
        ref_adam.step()
    assert_params_equal(a, b)
    with pytest.raises(ConfigError, match="hyperparameters for muon: unknown config field"):
        build_optimizer(a, recipe, muon={"momentun": 0.9})


def test_a_kind_not_given_trains_at_the_registry_defaults():
    opt = build_optimizer(make_model(), "signgd:v,o adam:*", signgd={"lr": 0.1})
    signgd, adam = opt.optimizers["signgd"], opt.optimizers["adam"]
    assert all(g["lr"] == 0.1 for g in signgd.param_groups)
    default = REGISTRY["adam"]
    assert all(g["lr"] == default.lr for g in adam.param_groups)
    assert all(g["betas"] == default.hparams().betas for g in adam.param_groups)


# ----------------------------------------------------- Hugging Face Trainer (optional extra)


def test_hugging_face_trainer_trains_and_resumes_bitwise(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 16

        def __getitem__(self, i):
            x = torch.randint(0, 50, (8,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": x, "labels": x}

    def run(out, seed, resume=None):
        torch.manual_seed(seed)
        config = transformers.GPT2Config(
            n_layer=2,
            n_embd=16,
            n_head=2,
            vocab_size=50,
            n_positions=16,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        )
        model = transformers.GPT2LMHeadModel(config)
        opt = build_optimizer(
            model,
            "sgd:q,k,v,o,w_in,w_out adamw:*",
            sgd={"lr": 0.1, "momentum": 0.9},
            adamw={"lr": 1e-2},
        )
        args = transformers.TrainingArguments(
            output_dir=str(out),
            per_device_train_batch_size=4,
            max_steps=6,
            save_steps=3,
            warmup_steps=2,
            report_to=[],
            use_cpu=True,
            disable_tqdm=True,
            seed=0,
        )
        trainer = transformers.Trainer(
            model=model, args=args, train_dataset=Tokens(), optimizers=(opt, None)
        )
        trainer.train(resume_from_checkpoint=resume)
        return model, opt

    full, opt = run(tmp_path / "full", seed=0)
    assert all(g["lr"] == 0.0 for g in opt.param_groups)  # linear decay ran on every child group
    resumed, _ = run(tmp_path / "resumed", seed=1, resume=str(tmp_path / "full" / "checkpoint-3"))
    assert_params_equal(full, resumed)

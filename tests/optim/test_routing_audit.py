"""Routing's contracts that an audit found broken: a kind either applies a parameter's layout or
is refused it, a failed ``load_state_dict`` changes nothing, ``add_param_group`` takes a plain
group, and what a ``roles=`` callable raises is one line naming it."""

import copy
import dataclasses
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from tailmem.errors import ConfigError
from tailmem.models.gpt import GPT, gpt_config
from tailmem.models.roles import ParamRole
from tailmem.optim.registry import REGISTRY, AdamHParams, MuonHParams
from tailmem.optim.routing import build_optimizer

D = 4
LIBRARY = {
    "lion_pytorch": ("lion",),
    "pytorch_optimizer": ("soap", "psgd_kron", "ademamix", "mars"),
}


def _installed(kind: str) -> bool:
    return all(importlib.util.find_spec(m) for m, kinds in LIBRARY.items() if kind in kinds)


class Stored(nn.Module):
    """One ``q+k+v`` weight as a fused and/or ``(in, out)`` tensor, or its three blocks apart."""

    def __init__(self, blocks: list[torch.Tensor], fused: bool, in_out: bool):
        super().__init__()
        self.fused, self.in_out = fused, in_out
        views = [torch.cat(blocks)] if fused else blocks
        self.w = nn.ParameterList(
            nn.Parameter(v.t().clone() if in_out else v.clone()) for v in views
        )

    def role(self, name: str, p: nn.Parameter) -> ParamRole:
        index = int(name.rpartition(".")[2])
        if self.fused:
            return ParamRole("q+k+v", (D, D, D), int(self.in_out), ("q", "k", "v"))
        return ParamRole("qkv"[index], None, int(self.in_out))

    def blocks(self) -> list[torch.Tensor]:
        """The three ``(out, in)`` blocks, however they are stored."""
        views = [w.detach().t() if self.in_out else w.detach() for w in self.w]
        return list(torch.cat(views).split(D)) if self.fused else views

    def set_grads(self, grads: list[torch.Tensor]) -> None:
        views = [torch.cat(grads)] if self.fused else grads
        for w, g in zip(self.w, views, strict=True):
            w.grad = g.t().clone() if self.in_out else g.clone()


@pytest.mark.parametrize("layout", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("kind", list(REGISTRY))
def test_every_kind_steps_a_laid_out_tensor_as_its_blocks_or_refuses_it(kind, layout, monkeypatch):
    """Three (out, in) blocks stored fused and/or (in, out) must step exactly as the blocks apart
    would; a kind that cannot (torch's Muon; SOAP, PSGD-Kron and MARS given fused blocks, which
    share a preconditioner or a norm) is refused in one line naming the parameter and a kind to
    use."""
    if not _installed(kind):
        pytest.skip(f"{kind}'s library is not installed")
    # PSGD-Kron probes its preconditioner with noise shaped like the tensor: an entrywise function
    # of the momentum instead, so a transposed tensor draws the transposed probe
    monkeypatch.setattr(torch, "randn_like", lambda t, dtype=None: torch.cos(1e3 * t).to(dtype))
    gen = torch.Generator().manual_seed(0)
    blocks = [torch.randn(D, D, generator=gen) for _ in range(3)]
    apart, laid_out = Stored(blocks, False, False), Stored(blocks, *layout)
    recipe = f"{kind}:q,k,v"
    try:
        opt = build_optimizer(laid_out, recipe, roles=laid_out.role)
    except ConfigError as err:
        assert REGISTRY[kind].unapplied_layout((D, D, D) if layout[0] else None, int(layout[1]))
        line = str(err)
        assert "\n" not in line
        assert line.startswith(f"{kind} cannot apply the layout of parameter 'w.0' (")
        instead = re.search(r" to (\w+)(?: \(or [\w, ]+\))?, which applies it$", line)
        assert instead and REGISTRY[instead.group(1)].applies_any_layout
        return
    ref = build_optimizer(apart, recipe, roles=apart.role)
    for step in range(3):
        grads = [torch.randn(D, D, generator=gen) for _ in range(3)]
        for model, optimizer in ((apart, ref), (laid_out, opt)):
            model.set_grads(grads)
            np.random.seed(step)  # PSGD-Kron's coin for balancing its factors
            optimizer.step()
    for got, want in zip(laid_out.blocks(), apart.blocks(), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_torch_muon_is_refused_gpt2s_fused_conv1d_attention():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=32, n_positions=8)
    model = transformers.GPT2LMHeadModel(config)
    with pytest.raises(ConfigError) as caught:
        build_optimizer(model, "torch_muon:q,k,v,o,w_in,w_out adam:*")
    line = str(caught.value)
    assert line.startswith(
        "torch_muon cannot apply the layout of parameter 'transformer.h.0.attn.c_attn.weight' "
        "(q+k+v): fused blocks of 16+16+16 rows and its output on dimension 1 (stored (in, out))"
    )
    assert "\n" not in line and "to muon (or normuon, muon_pe)" in line
    build_optimizer(model, "muon:q,k,v,o,w_in,w_out adam:*")  # muon applies it


def test_torch_muon_is_refused_multihead_attentions_fused_in_proj():
    model = nn.ModuleDict({"emb": nn.Embedding(10, 8), "att": nn.MultiheadAttention(8, 2)})
    with pytest.raises(ConfigError, match=r"^torch_muon cannot apply .* 'att.in_proj_weight'"):
        build_optimizer(model, "torch_muon:q,k,v,o adam:*")
    build_optimizer(model, "torch_muon:o adam:*")  # out_proj is a plain (out, in) matrix


def test_a_users_kind_is_refused_a_fused_layout_and_told_a_built_in_of_each_family():
    """tailmem cannot see a user's update, so it is not trusted with fused blocks; the advice
    names a built-in of every family that applies the layout, not only Muon's."""
    from tailmem.optim.registry import user_kind
    from tailmem.optim.routing import plan_param_groups

    model = nn.ModuleDict({"emb": nn.Embedding(10, 8), "att": nn.MultiheadAttention(8, 2)})
    mine = user_kind("mine", "torch.optim:SGD", lr=0.1)
    with pytest.raises(ConfigError) as caught:
        plan_param_groups(model, "mine:q,k,v,o adam:*", kinds={"mine": mine})
    assert str(caught.value).startswith("mine cannot apply the layout of parameter")
    assert "to muon (or adam, sgd, signgd), which applies it" in str(caught.value)


def test_a_layout_option_for_a_kind_that_cannot_apply_it_is_refused():
    model = GPT(gpt_config("tiny", vocab_size=64))
    with pytest.raises(ConfigError) as caught:
        build_optimizer(model, "torch_muon:q adam:*", role_overrides={"q": {"num_heads": 2}})
    assert str(caught.value) == (
        "role_overrides['q'] sets num_heads, a layout torch_muon cannot apply (it is not told a "
        "parameter's layout); give role q to muon (or normuon, muon_pe), which applies it"
    )
    opt = build_optimizer(model, "muon:q adam:*", role_overrides={"q": {"num_heads": 2}})
    assert opt.param_groups[0]["num_heads"] == 2


def _trained_gpt(recipe: str):
    torch.manual_seed(0)
    model = GPT(gpt_config("tiny", vocab_size=64))
    opt = build_optimizer(model, recipe)
    x = torch.randint(0, 64, (2, 9))
    model(x[:, :-1], x[:, 1:])[1].backward()
    opt.step()
    return model, opt, x


def test_a_refused_load_state_dict_leaves_every_child_as_it_was():
    """Adam (first) would load lr 123 before Muon refuses momentum 1.5: Adam is put back, and the
    routed groups stay the very dicts the children read, so a scheduler still drives them."""
    model, opt, x = _trained_gpt("adam:* muon:v,o")
    groups = list(opt.param_groups)
    adam = opt.optimizers["adam"]
    adam_state = {p: {k: v.clone() for k, v in s.items()} for p, s in adam.state.items()}
    saved = copy.deepcopy(opt.state_dict())
    for group in saved["param_groups"]:
        if group["kind"] == "adam":
            group["lr"] = 123.0
            saved["state"][group["params"][0]]["exp_avg"].fill_(9.0)
        else:
            group["momentum"] = 1.5
    with pytest.raises(ValueError, match=r"^Muon momentum must be a finite number .* got 1\.5$"):
        opt.load_state_dict(saved)
    assert all(a is b for a, b in zip(opt.param_groups, groups, strict=True))
    children = [g for child in opt.optimizers.values() for g in child.param_groups]
    assert all(a is b for a, b in zip(opt.param_groups, children, strict=True))
    assert {g["lr"] for g in adam.param_groups} == {REGISTRY["adam"].lr}
    assert adam.state.keys() == adam_state.keys()
    for p, state in adam_state.items():
        for key, value in state.items():
            assert torch.equal(adam.state[p][key], value)
    for group in opt.param_groups:
        group["lr"] = 0.0
    before = [p.detach().clone() for p in model.parameters()]
    model.zero_grad()
    model(x[:, :-1], x[:, 1:])[1].backward()
    opt.step()
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))


def test_add_param_group_takes_named_pairs_and_refuses_unnamed_tensors_in_one_line():
    """A plain group for a routed kind is refused in one line saying how to name it (nothing
    added); ``named_parameters()`` pairs add it, named, and it steps as Muon with its layout."""
    model = GPT(gpt_config("tiny", vocab_size=64))
    opt = build_optimizer(model, "muon:v,o adam:*")
    groups = list(opt.param_groups)
    layer = nn.Module()
    layer.w = nn.Parameter(torch.randn(8, 12, generator=torch.Generator().manual_seed(1)))
    with pytest.raises(ConfigError) as caught:
        opt.add_param_group({"params": [layer.w], "kind": "muon"})
    assert str(caught.value) == (
        "a group added to the muon child needs its parameters' names, as its other groups have: "
        "params=list(module.named_parameters()) or param_names=[...] (one per tensor); got 1 "
        "unnamed tensor(s) among 1"
    )
    with pytest.raises(ConfigError, match=r"got 1 unnamed tensor\(s\) among 2$"):
        opt.add_param_group({"params": [("w", layer.w), torch.zeros(3, 3)], "kind": "muon"})
    assert opt.param_groups == groups
    torch_muon = build_optimizer(model, "torch_muon:v,o adam:*")
    with pytest.raises(ConfigError, match=r"^a group added to the torch_muon child sets fan_out"):
        torch_muon.add_param_group(
            {"params": list(layer.named_parameters()), "kind": "torch_muon", "fan_out_dim": 1}
        )
    opt.add_param_group(
        {"params": list(layer.named_parameters()), "kind": "muon", "fan_out_dim": 1}
        | {"method": "svd", "momentum": 0.0, "lr": 0.5}
    )
    added = opt.optimizers["muon"].param_groups[-1]
    assert added["param_names"] == ["w"] and added["params"][0] is layer.w
    assert opt.param_groups[len(opt.optimizers["muon"].param_groups) - 1] is added
    start = layer.w.detach().clone()
    layer.w.grad = torch.randn(8, 12, generator=torch.Generator().manual_seed(2))
    opt.step()
    # stored (in, out) = (8, 12): the (12, 8) matrix is orthogonalised, scaled sqrt(12 / 8)
    polar = torch.linalg.svd(layer.w.grad.t(), full_matrices=False)
    want = 0.5 * (12 / 8) ** 0.5 * (polar.U @ polar.Vh)
    torch.testing.assert_close(start - layer.w.detach(), want.t(), rtol=1e-4, atol=1e-5)


def _roles_by_lookup(name: str, p: nn.Parameter) -> str | None:
    return {"blocks.0.attn.v.weight": "v"}[name]  # a KeyError for every other parameter


def test_a_roles_callable_that_raises_is_one_line_naming_it_and_the_parameter():
    model = GPT(gpt_config("tiny", vocab_size=64))
    with pytest.raises(ConfigError) as caught:
        build_optimizer(model, "muon:v,o adam:*", roles=_roles_by_lookup)
    assert str(caught.value) == (
        f"roles callable {__name__}._roles_by_lookup raised KeyError: 'embed.weight' for "
        "parameter 'embed.weight'; expected it to return a role, a ParamRole or None for every "
        "parameter"
    )
    assert isinstance(caught.value.__cause__, KeyError)


def test_the_unrouted_parameters_first_line_names_them_and_the_fix_and_a_table_follows():
    model = GPT(gpt_config("tiny", vocab_size=64))
    with pytest.raises(ConfigError) as caught:
        build_optimizer(model, "muon:v,o")
    first, header, *rows = str(caught.value).splitlines()
    assert first.startswith("recipe 'muon:v,o' gives no optimiser to ")
    assert "embed.weight" in first and "add a catch-all such as 'adam:*'" in first
    assert first.endswith("(tailmem.models.roles.roles_table(model) shows every role)")
    assert header.split() == ["parameter", "shape", "role"]
    assert any(row.split()[0] == "embed.weight" for row in rows)


def test_one_cycle_lr_drives_a_routed_optimizer_without_cycling_momentum():
    """As docs/optim.md says: Muon's momentum and Adam's betas have no common name to cycle."""
    model = GPT(gpt_config("tiny", vocab_size=64))
    opt = build_optimizer(model, "muon:v,o adam:*")
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=[0.5 if g["kind"] == "muon" else 0.01 for g in opt.param_groups],
        total_steps=10, pct_start=0.5, cycle_momentum=False,
    )  # fmt: skip
    for _ in range(4):  # to the peak, step pct_start * total_steps - 1
        opt.step()
        sched.step()
    for kind, peak in (("muon", 0.5), ("adam", 0.01)):
        lrs = [g["lr"] for g in opt.optimizers[kind].param_groups]
        assert lrs == pytest.approx([peak] * len(lrs))


@pytest.mark.parametrize(("kind", "hparams"), [("muon", MuonHParams), ("adam", AdamHParams)])
def test_the_options_docs_list_for_a_kind_are_its_typed_fields(kind, hparams):
    page = (Path(__file__).parents[2] / "docs" / "optim.md").read_text()
    listed = re.search(rf"for\s+`{kind}`\s+`([^`]+)`", page)
    assert listed and listed.group(1).split() == [f.name for f in dataclasses.fields(hparams)]
    model = GPT(gpt_config("tiny", vocab_size=64))
    with pytest.raises(ConfigError, match=r"foreach"):
        build_optimizer(model, "muon:v,o adam:*", **{kind: {"foreach": True}})

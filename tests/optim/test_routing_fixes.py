"""A routing refusal names the fix that routes the model (issue 44): torch's own transformer
layers resolve without ``roles=``, an unrecognised model is told which ``roles=`` patterns and
which recipe line route it, and the vocabulary guard decides by role and owning module, never by a
hidden matrix whose width happens to equal the vocabulary's."""

import re

import pytest
import torch
from torch import nn

from tailmem.errors import ConfigError
from tailmem.models.roles import in_layer_stack, resolve_roles, vocabulary_tables
from tailmem.optim import build_optimizer
from tailmem.optim.orthogonalize import orthogonalize
from tailmem.optim.routing import plan_param_groups

VOCAB, D, HEADS = 32, 16, 2
VO_FFN = "muon:v,o,w_in,w_gate,w_out adam:*"  # paper A's VO+FFN arm
BLOCK_MATRICES = ("mix", "up", "down")


class Encoder(nn.Module):
    """A language model built from ``nn.TransformerEncoder``, its FFN as wide as the vocabulary."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        layer = nn.TransformerEncoderLayer(D, HEADS, dim_feedforward=VOCAB, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, x):
        return self.head(self.enc(self.emb(x)))


class Block(nn.Module):
    """A block whose layer names no built-in rule knows; its FFN is as wide as the vocabulary."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(D)
        self.mix = nn.Linear(D, D, bias=False)
        self.up = nn.Linear(D, VOCAB, bias=False)
        self.down = nn.Linear(VOCAB, D, bias=False)

    def forward(self, x):
        x = x + self.mix(self.ln(x))
        return x + self.down(torch.relu(self.up(x)))


class Custom(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.blocks = nn.ModuleList(Block() for _ in range(2))
        self.out = nn.Linear(D, VOCAB, bias=False)

    def forward(self, x):
        h = self.tok(x)
        for block in self.blocks:
            h = block(h)
        return self.out(h)


def _muon_names(plan):
    return {n for g in plan["muon"] for n in g["param_names"]}


def _step(model, opt):
    x = torch.randint(0, VOCAB, (4, 6))
    loss = nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()


def test_torch_transformer_layers_get_their_roles_from_the_modules_that_own_them():
    roles = {name: pr for name, pr in resolve_roles(Encoder()).items() if "layers.0." in name}
    assert roles["enc.layers.0.self_attn.in_proj_weight"].parts == ("q", "k", "v")
    assert roles["enc.layers.0.self_attn.in_proj_weight"].row_splits == (D, D, D)
    assert roles["enc.layers.0.self_attn.out_proj.weight"].role == "o"
    assert roles["enc.layers.0.linear1.weight"].role == "w_in"
    assert roles["enc.layers.0.linear2.weight"].role == "w_out"
    assert roles["enc.layers.0.norm1.weight"].role == "norm"
    # q, k and v of different widths are three tensors, each its own role
    attn = nn.MultiheadAttention(D, HEADS, kdim=8, vdim=4)
    got = {n: pr.role for n, pr in resolve_roles(attn).items() if n.endswith("weight")}
    assert got == {"q_proj_weight": "q", "k_proj_weight": "k", "v_proj_weight": "v"} | {
        "out_proj.weight": "o"
    }


def test_an_encoder_trains_each_block_of_its_fused_qkv_as_its_own_matrix():
    """Muon's update of the fused in_proj_weight is each of q, k, v orthogonalised alone (SVD,
    no momentum), checked against ``orthogonalize`` on that block's gradient."""
    torch.manual_seed(0)
    model = Encoder()
    opt = build_optimizer(
        model,
        "muon:q,k,v,o,w_in,w_gate,w_out adam:*",
        muon={"lr": 0.1, "momentum": 0.0, "method": "svd"},
    )
    weight = model.enc.layers[0].self_attn.in_proj_weight
    before = weight.detach().clone()
    x = torch.randint(0, VOCAB, (4, 6))
    nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten()).backward()
    grad = weight.grad.detach().clone()
    opt.step()
    step = (before - weight.detach()) / 0.1
    for block in range(3):
        rows = slice(block * D, (block + 1) * D)
        want = orthogonalize(grad[rows], "svd", dtype=None)
        torch.testing.assert_close(step[rows], want, atol=1e-5, rtol=1e-4)
    whole = orthogonalize(grad, "svd", dtype=None)
    assert (step - whole).abs().max() > 0.1  # not the fused tensor orthogonalised as one


def test_a_recipe_splitting_a_fused_qkv_names_the_recipe_lines_that_do_not():
    with pytest.raises(ConfigError) as err:
        build_optimizer(Encoder(), VO_FFN)
    msg = str(err.value)
    assert "sends q -> adam, k -> adam, v -> muon" in msg
    lines = re.findall(r"'([^']*)'", msg.split("give them one kind, e.g. ")[1])
    assert lines == ["muon:o,w_in,w_gate,w_out adam:*", "muon:q,k,v,o,w_in,w_gate,w_out adam:*"]
    for line in lines:  # each line it names routes the model and trains
        model = Encoder()
        _step(model, build_optimizer(model, line))


def test_an_unrecognised_model_is_told_the_roles_and_the_recipe_line_that_route_it():
    """Not "drop muon from the recipe": the roles= patterns (one per tensor of every block), the
    recipe line that gives Muon the unrecognised matrices, and the head's roles; each works."""
    with pytest.raises(ConfigError) as err:
        build_optimizer(Custom(), VO_FFN)
    msg = str(err.value)
    assert "drop muon" not in msg
    assert "its 6 hidden matrices have role 'other'" in msg
    patterns = re.findall(r'r"([^"]+)": "\.\.\."', msg)
    assert patterns == [rf"blocks\.\d+\.{m}\.weight" for m in BLOCK_MATRICES]
    (line,) = re.findall(r"with the recipe '([^']+)'", msg)
    assert line == "muon:other,v,o,w_in,w_gate,w_out adam:*"
    (head,) = re.findall(r'and roles=\{r"([^"]+)": "head"\} for the output layer', msg)
    # the named roles= route the model as the recipe asked ...
    roles = dict(zip(patterns, ("v", "w_in", "w_out"), strict=True))
    plan = plan_param_groups(Custom(), VO_FFN, roles=roles)
    assert _muon_names(plan) == {f"blocks.{i}.{m}.weight" for i in (0, 1) for m in BLOCK_MATRICES}
    # ... and so does the recipe line with the head's roles
    model = Custom()
    opt = build_optimizer(model, line, roles={head: "head"})
    assert {n for g in opt.param_groups if g["kind"] == "muon" for n in g["param_names"]} == {
        f"blocks.{i}.{m}.weight" for i in (0, 1) for m in BLOCK_MATRICES
    }
    _step(model, opt)


def test_a_hidden_matrix_as_wide_as_the_vocabulary_is_never_refused_as_one():
    """up (32, 16) and down (16, 32) share the vocabulary's size but sit in the blocks: Muon
    takes them; the output layer beside the blocks is refused, by its module, not its size."""
    with pytest.raises(ConfigError) as err:
        plan_param_groups(Custom(), "muon:other adam:*")
    msg = str(err.value)
    assert f"the {VOCAB}-token vocabulary's tables (embedding / LM head): out.weight" in msg
    assert "up.weight" not in msg and "down.weight" not in msg
    assert r'roles={r"out\.weight": "head"}' in msg
    plan = plan_param_groups(Custom(), "muon:other adam:*", roles={r"out\.weight": "head"})
    assert {"blocks.0.up.weight", "blocks.0.down.weight"} <= _muon_names(plan)
    # the same widths in torch's encoder: its FFN has roles w_in / w_out and trains with Muon
    plan = plan_param_groups(Encoder(), "muon:q,k,v,o,w_in,w_out adam:*")
    assert "enc.layers.1.linear1.weight" in _muon_names(plan)


def test_the_vocabulary_tables_are_decided_by_role_and_owning_module():
    model = Custom()
    assert vocabulary_tables(model, resolve_roles(model)) == ["tok.weight", "out.weight"]
    assert in_layer_stack(model, "blocks.0.up.weight")
    assert not in_layer_stack(model, "out.weight")
    # a list of output heads is not a stack of blocks: each head is the vocabulary's
    heads = Custom()
    heads.out = nn.ModuleList(nn.Linear(D, VOCAB) for _ in range(2))
    assert vocabulary_tables(heads, resolve_roles(heads)) == [
        "tok.weight",
        "out.0.weight",
        "out.1.weight",
    ]
    # a flat nn.Sequential (no blocks) keeps the shape rule for what it cannot tell apart
    flat = nn.Sequential(nn.Embedding(VOCAB, D), nn.Linear(D, D), nn.Linear(D, VOCAB))
    assert vocabulary_tables(flat, resolve_roles(flat)) == ["0.weight", "2.weight"]
    # the embed role is refused whatever its size (here a 16 x 16 table)
    with pytest.raises(
        ConfigError, match=r"tables \(embedding / LM head\): .*1\.weight \(16, 16\)"
    ):
        plan_param_groups(flat, "muon:embed adam:*", roles={"1.weight": "embed"})

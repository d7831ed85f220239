"""Muon and SignGD refuse bad hyper-parameters wherever they enter (constructor, state dict,
a group edited between steps), step empty parameters as torch does, and survive deepcopy and
pickling with everything that decides how they step."""

import copy
import math
import pickle

import pytest
import torch

from tailmem.optim import Muon, SignGD

SHAPES = [(6, 4), (4, 6)]


def params(seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*s, generator=gen)) for s in SHAPES]


def set_grads(ps, seed):
    gen = torch.Generator().manual_seed(seed)
    for p in ps:
        p.grad = torch.randn(p.shape, generator=gen)


def trained(cls, **kwargs):
    """Parameters and an optimiser after two steps (so there is momentum state to keep)."""
    ps = params()
    opt = cls(ps, **kwargs)
    for seed in (1, 2):
        set_grads(ps, seed)
        opt.step()
    return ps, opt


def snapshot(ps, opt):
    state = {i: {k: v.clone() for k, v in opt.state[p].items()} for i, p in enumerate(ps)}
    groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
    return [p.detach().clone() for p in ps], state, groups


def assert_unchanged(ps, opt, before):
    values, state, groups = snapshot(ps, opt)
    assert all(torch.equal(a, b) for a, b in zip(values, before[0], strict=True))
    assert state.keys() == before[1].keys()
    for i, entry in state.items():
        assert all(torch.equal(v, before[1][i][k]) for k, v in entry.items())
    assert groups == before[2]


MUON_BAD = [
    ("lr", math.nan, r"Muon lr must be a finite number in \[0.0, inf\), got nan"),
    ("lr", math.inf, r"Muon lr must be a finite number in \[0.0, inf\), got inf"),
    ("lr", -0.1, r"Muon lr must be a finite number in \[0.0, inf\), got -0.1"),
    ("weight_decay", math.nan, r"Muon weight_decay must be a finite number"),
    ("momentum", 1.0, r"Muon momentum must be a finite number in \[0.0, 1.0\), got 1.0"),
    ("eps", 0.0, r"Muon eps must be a finite number in \(0.0, inf\), got 0.0"),
    ("normuon_beta2", math.inf, r"Muon normuon_beta2 must be a finite number"),
    ("num_heads", 5, r"Muon num_heads=5 does not divide the output size"),
    ("method", "newton", r"unknown Muon method 'newton'"),
]


@pytest.mark.parametrize(("key", "value", "message"), MUON_BAD)
def test_muon_state_dict_with_a_bad_hyperparameter_is_refused_and_nothing_changes(
    key, value, message
):
    ps, opt = trained(Muon, lr=0.02, dtype=torch.float32)
    saved = opt.state_dict()
    saved["param_groups"][0][key] = value
    before = snapshot(ps, opt)
    with pytest.raises(ValueError, match=message):
        opt.load_state_dict(saved)
    assert_unchanged(ps, opt, before)
    set_grads(ps, 3)
    opt.step()  # still the optimiser it was: it steps, with finite results
    assert all(torch.isfinite(p).all() for p in ps)


@pytest.mark.parametrize(("key", "value", "message"), MUON_BAD)
def test_muon_group_edited_between_steps_is_refused_before_anything_moves(key, value, message):
    ps = params()
    opt = Muon([{"params": ps[:1]}, {"params": ps[1:]}], lr=0.02, dtype=torch.float32)
    set_grads(ps, 1)
    opt.step()
    opt.param_groups[1][key] = value  # the second group: the first must not move either
    set_grads(ps, 2)
    before = snapshot(ps, opt)
    with pytest.raises(ValueError, match=message):
        opt.step()
    assert_unchanged(ps, opt, before)


def test_muon_tensor_learning_rate_is_read_once_per_group_and_checked():
    ps = params()
    opt, plain = Muon(ps, lr=torch.tensor(0.02)), Muon(params(), lr=0.02)
    for seed in (1, 2):
        set_grads(ps, seed)
        set_grads(plain.param_groups[0]["params"], seed)
        opt.step()
        plain.step()
    for a, b in zip(ps, plain.param_groups[0]["params"], strict=True):
        assert torch.equal(a, b)
    opt.param_groups[0]["lr"] = torch.tensor(math.nan)
    with pytest.raises(ValueError, match=r"Muon lr must be a finite number .* got tensor\(nan\)"):
        opt.step()


SIGN_BAD = [
    ("lr", math.nan, "SignGD lr must be a number finite and >= 0.0, got nan"),
    ("lr", math.inf, "SignGD lr must be a number finite and >= 0.0, got inf"),
    ("momentum", 1.0, r"SignGD momentum must be a number in \[0.0, 1.0\), got 1.0"),
    ("weight_decay", -1.0, "SignGD weight_decay must be a number finite and >= 0.0, got -1.0"),
]


@pytest.mark.parametrize(("key", "value", "message"), SIGN_BAD)
def test_signgd_state_dict_with_a_bad_hyperparameter_is_refused_and_nothing_changes(
    key, value, message
):
    ps, opt = trained(SignGD, lr=0.1, momentum=0.9)
    saved = opt.state_dict()
    saved["param_groups"][0][key] = value
    before = snapshot(ps, opt)
    with pytest.raises(ValueError, match=message):
        opt.load_state_dict(saved)
    assert_unchanged(ps, opt, before)


@pytest.mark.parametrize(("key", "value", "message"), SIGN_BAD)
def test_signgd_group_edited_between_steps_is_refused_before_anything_moves(key, value, message):
    ps = params()
    opt = SignGD([{"params": ps[:1]}, {"params": ps[1:]}], lr=0.1, momentum=0.5)
    set_grads(ps, 1)
    opt.step()
    opt.param_groups[1][key] = value
    set_grads(ps, 2)
    before = snapshot(ps, opt)
    with pytest.raises(ValueError, match=message):
        opt.step()
    assert_unchanged(ps, opt, before)


@pytest.mark.parametrize("shape", [(0, 4), (4, 0)])
def test_an_empty_parameter_keeps_a_buffer_and_does_not_disturb_the_others(shape):
    """As torch's optimisers do (torch.optim.Muon for (0, 4), Adam and SGD for both): the empty
    parameter gets its (empty) momentum buffer and the other parameters step exactly as
    without it. (torch.optim.Muon itself divides by zero on (4, 0).)"""
    empty = torch.nn.Parameter(torch.zeros(shape))
    ps, alone = params(), params()
    opt = Muon([empty, *ps], lr=0.02, normuon=True, dtype=torch.float32)
    reference = Muon(alone, lr=0.02, normuon=True, dtype=torch.float32)
    for seed in (1, 2):
        empty.grad = torch.zeros(shape)
        set_grads(ps, seed)
        set_grads(alone, seed)
        opt.step()
        reference.step()
    for a, b in zip(ps, alone, strict=True):
        assert torch.equal(a, b)
    assert empty.shape == shape
    assert {k: v.shape for k, v in opt.state[empty].items()} == {"momentum_buffer": shape}
    if shape == (0, 4):
        theirs = torch.optim.Muon([torch.nn.Parameter(torch.zeros(shape))])
        theirs.param_groups[0]["params"][0].grad = torch.zeros(shape)
        theirs.step()
        assert {k: v.shape for k, v in theirs.state_dict()["state"][0].items()} == {
            "momentum_buffer": shape
        }


def test_deepcopy_and_pickle_keep_the_distribution_and_the_copy_steps_alike():
    ps = params()
    opt = Muon(ps, lr=0.02, momentum=0.9, dtype=torch.float32, distributed="ddp")
    set_grads(ps, 1)
    opt.step()
    copied_params, copied = copy.deepcopy((ps, opt))
    unpickled = pickle.loads(pickle.dumps(opt))
    assert (copied.distributed, unpickled.distributed) == ("ddp", "ddp")
    assert copied.process_group is None and unpickled.process_group is None
    for seed in (2, 3):  # without a process group initialised "ddp" steps locally
        set_grads(ps, seed)
        set_grads(copied_params, seed)
        opt.step()
        copied.step()
    for a, b in zip(ps, copied_params, strict=True):
        assert a is not b and torch.equal(a, b)


def test_deepcopy_shares_an_explicit_process_group():
    """A process group is a live communicator: the copy must use the same one (copying it is
    impossible). Sharing it across two real ranks is checked in test_muon_distributed.py."""
    group = object()  # stands in for a ProcessGroup here: identity is all that is checked
    copied = copy.deepcopy(Muon(params(), process_group=group))
    assert copied.process_group is group and copied.distributed is None

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


# ------------------------------------------------- gradients an optimiser cannot step on


@pytest.mark.parametrize("bad", [math.nan, math.inf])
@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [(Muon, {"dtype": torch.float32}), (Muon, {"normuon": True}), (SignGD, {"lr": 0.1})],
    ids=["muon", "normuon", "signgd"],
)
def test_a_non_finite_gradient_is_refused_by_name_and_the_next_clean_step_is_the_one_it_skipped(
    cls, kwargs, bad
):
    """Nothing moves on the refused step (parameters, momentum, NorMuon rows, even of the
    clean parameters), so skipping the bad batch leaves exactly the run that never saw it."""
    ps, opt = trained(cls, momentum=0.9, **kwargs)
    ref_ps, ref_opt = trained(cls, momentum=0.9, **kwargs)
    before = snapshot(ps, opt)
    set_grads(ps, 3)
    ps[1].grad[2, 3] = bad
    with pytest.raises(ValueError, match=r"NaN or infinite gradient entry in param_groups\[0\]"
                       r"\['params'\]\[1\], shape \(4, 6\).*Nothing was updated"):  # fmt: skip
        opt.step()
    assert_unchanged(ps, opt, before)
    for p, q, seed in ((ps, ref_ps, 4), (ps, ref_ps, 5)):
        set_grads(p, seed)
        set_grads(q, seed)
        opt.step()
        ref_opt.step()
    assert all(torch.equal(a, b) for a, b in zip(ps, ref_ps, strict=True))


def test_the_refusal_names_the_parameter_when_the_group_carries_names():
    model = torch.nn.Linear(4, 6, bias=False)
    opt = Muon(model.named_parameters())
    model.weight.grad = torch.full((6, 4), math.nan)
    with pytest.raises(ValueError, match=r"gradient entry in 'weight' \(param_groups\[0\]"):
        opt.step()


def test_muon_update_refuses_a_non_finite_gradient_before_its_buffer_moves():
    from tailmem.optim import muon_update

    buf = torch.randn(6, 4)
    before = buf.clone()
    grad = torch.randn(6, 4)
    grad[0, 0] = math.inf
    with pytest.raises(ValueError, match=r"muon_update got a NaN or infinite entry in grad"):
        muon_update(grad, buf)
    assert torch.equal(buf, before)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_normuon_resumes_on_a_model_of_any_dtype_with_its_rows_as_saved(dtype):
    """torch's ``load_state_dict`` casts every floating state tensor to its parameter's dtype;
    NorMuon's per-row second moment is loaded as saved (float32, every bit), so the resumed run
    steps exactly as the uninterrupted one."""
    shape = (256, 64)

    def run(steps, opt=None, ps=None):
        if ps is None:
            gen = torch.Generator().manual_seed(0)
            ps = [torch.nn.Parameter(torch.randn(*shape, generator=gen).to(dtype))]
            opt = Muon(ps, normuon=True, dtype=torch.float32)
        for seed in steps:
            grad = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
            ps[0].grad = grad.to(dtype)
            opt.step()
        return ps, opt

    ps, _ = run(range(1, 8))
    half, half_opt = run((1, 2))
    saved = copy.deepcopy(half_opt.state_dict())
    resumed_ps, resumed_opt = run(())
    resumed_ps[0].data.copy_(half[0].data)
    resumed_opt.load_state_dict(saved)
    rows = resumed_opt.state[resumed_ps[0]]["normuon_second_moment"]
    assert rows.dtype == torch.float32 and torch.equal(
        rows, saved["state"][0]["normuon_second_moment"]
    )
    run(range(3, 8), resumed_opt, resumed_ps)
    assert torch.equal(resumed_ps[0], ps[0])


def test_muon_steps_meta_parameters_as_torch_does():
    p = torch.nn.Parameter(torch.empty(8, 4, device="meta"))
    p.grad = torch.empty(8, 4, device="meta")
    Muon([p]).step()
    assert p.device.type == "meta"


def test_signgd_refuses_complex_parameters_and_sparse_gradients_with_momentum_in_one_line():
    with pytest.raises(
        ValueError, match=r"SignGD does not support complex parameters.*shape \(5,\)"
    ):
        SignGD([torch.nn.Parameter(torch.zeros(5, dtype=torch.complex64))], lr=0.1)
    p = torch.nn.Parameter(torch.zeros(4, 3))
    p.grad = torch.eye(4, 3).to_sparse()
    SignGD([p], lr=0.1).step()  # without momentum a sparse gradient steps
    assert torch.equal(p.detach(), -0.1 * torch.eye(4, 3))
    with pytest.raises(RuntimeError, match=r"^SignGD with momentum does not support sparse"):
        SignGD([p], lr=0.1, momentum=0.5).step()


def test_first_non_finite_finds_a_nan_or_infinity_in_any_kind_of_tensor():
    from tailmem.optim.gradients import first_non_finite

    fine = [torch.zeros(0, 3), torch.ones(4, dtype=torch.bfloat16), torch.empty(3, device="meta"),
            torch.eye(3).to_sparse()]  # fmt: skip
    assert first_non_finite(fine) is None
    for bad in (math.nan, math.inf, -math.inf):
        half = torch.ones(4, dtype=torch.float16)
        half[2] = bad
        sparse = torch.sparse_coo_tensor([[0, 2]], [1.0, bad], (4,))
        csr = torch.tensor([[0.0, bad], [1.0, 0.0]]).to_sparse_csr()
        assert first_non_finite([*fine, half]) == len(fine)
        assert first_non_finite([*fine, sparse, half]) == len(fine)
        assert first_non_finite([*fine, csr]) == len(fine)


def test_a_muon_step_reads_back_only_its_gradients_finiteness(monkeypatch):
    """One host sync per step: the gradients are refused up front, and the directions made
    from them and a finite state are finite, so the stacks are not read back again."""
    import tailmem.optim.muon_batch as muon_batch

    reads = []
    monkeypatch.setattr(muon_batch, "check_finite", lambda batches: reads.append(len(batches)))
    for method in ("ns5", "svd", "cubic"):
        ps, _ = trained(Muon, method=method, normuon=True)
        assert reads == [] and all(torch.isfinite(p).all() for p in ps)


def test_a_state_dict_holding_a_nan_momentum_is_refused_and_nothing_changes():
    ps, opt = trained(Muon, momentum=0.9)
    saved = copy.deepcopy(opt.state_dict())
    saved["state"][1]["momentum_buffer"][0, 0] = math.nan
    before = snapshot(ps, opt)
    with pytest.raises(ValueError, match=r"state dict holds a NaN or infinite momentum"):
        opt.load_state_dict(saved)
    assert_unchanged(ps, opt, before)

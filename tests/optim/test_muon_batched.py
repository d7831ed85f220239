"""Muon's batched step against the looped one (each parameter alone), compilation without
recompiles, method="auto" against its measured table, and what the optimiser keeps in memory."""

import math

import pytest
import torch
from torch._dynamo import register_backend
from torch._dynamo.testing import CompileCounter

import tailmem.optim.muon_batch as muon_batch
from tailmem.optim import Muon, muon_update, orthogonalize
from tailmem.optim.gram_table import GRAM_TABLE, gram_pays
from tailmem.optim.muon_batch import COMPILE_VARIABLE, backend
from tailmem.optim.orthogonalize import NonFiniteInputError, orthogonalize_flops

SHAPES = [(24, 12), (12, 24), (24, 12), (8, 3, 2, 2), (16, 16), (8, 3, 2, 2), (40, 12)]
"""Mixed shapes: a tall matrix three ways (two equal), its transpose, two conv weights (8, 12)
and a square one; every method sees buckets of one and of several matrices."""
METHODS = ("ns5", "polar_express", "gram_ns", "auto", "cubic", "svd")
STEPS = 4


def make(seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*s, generator=gen)) for s in SHAPES]


def grads(seed):
    gen = torch.Generator().manual_seed(seed)
    return [[torch.randn(*s, generator=gen) for s in SHAPES] for _ in range(STEPS)]


def batched_and_looped(**options):
    """Parameters after STEPS steps of one Muon over all of them and of one Muon per parameter
    (nothing batched across parameters), fed the same gradients."""
    batched, looped = make(), make()
    one = Muon(batched, lr=0.05, weight_decay=0.1, dtype=None, **options)
    each = [Muon([p], lr=0.05, weight_decay=0.1, dtype=None, **options) for p in looped]
    for step_grads in grads(1):
        for p, q, g in zip(batched, looped, step_grads, strict=True):
            p.grad, q.grad = g.clone(), g.clone()
        one.step()
        for opt in each:
            opt.step()
    return batched, looped, one, each


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("normuon", [False, True])
def test_batched_step_equals_the_looped_step(method, normuon):
    batched, looped, one, each = batched_and_looped(method=method, normuon=normuon)
    start = make()
    for p, q, s in zip(batched, looped, start, strict=True):
        assert (p - s).abs().max() > 1e-3  # it moved
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6)
    for p, q, opt in zip(batched, looped, each, strict=True):
        assert one.state[p].keys() == opt.state[q].keys()
        for name, value in opt.state[q].items():
            torch.testing.assert_close(one.state[p][name], value, rtol=0, atol=1e-6)


def test_batched_step_equals_a_loop_over_the_functional_update():
    """The reference implementations' structure: ``W -= lr·muon_update(g, B)`` per parameter."""
    params, loop = make(), make()
    kwargs = {"momentum": 0.9, "nesterov": True, "dtype": None, "method": "polar_express"}
    opt = Muon(params, lr=0.03, weight_decay=0.1, **kwargs)
    bufs = [torch.zeros_like(p) for p in loop]
    for step_grads in grads(2):
        for p, q, b, g in zip(params, loop, bufs, step_grads, strict=True):
            p.grad = g
            with torch.no_grad():
                q.mul_(1 - 0.03 * 0.1)
                q.add_(muon_update(g, b, **kwargs), alpha=-0.03)
        opt.step()
    for p, q in zip(params, loop, strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6)


def test_the_optimiser_keeps_only_its_state_between_steps():
    """Stacks are per step: what persists is one momentum buffer per parameter, each its own
    storage of the parameter's size, and NorMuon's rows; nothing else holds a tensor."""
    params = make()
    opt = Muon(params, dtype=None, normuon=True)
    for step_grads in grads(3):
        for p, g in zip(params, step_grads, strict=True):
            p.grad = g
        opt.step()
    for p in params:
        buf, rows = opt.state[p]["momentum_buffer"], opt.state[p]["normuon_second_moment"]
        assert buf.shape == p.shape
        assert buf.untyped_storage().nbytes() == p.numel() * p.element_size()
        assert rows.untyped_storage().nbytes() == p.shape[0] * 4
    held = [v for v in vars(opt).values() if isinstance(v, torch.Tensor)]
    assert held == []


def test_a_non_finite_gradient_stops_the_step_before_any_parameter_or_state_moves():
    params = make()
    opt = Muon(params, dtype=None, normuon=True)
    before = [p.detach().clone() for p in params]
    for p, g in zip(params, grads(4)[0], strict=True):
        p.grad = g
    params[5].grad[0, 0, 0, 0] = math.nan  # a conv weight, batched with its twin
    with pytest.raises(NonFiniteInputError, match=r"in param_groups\[0\]\['params'\]\[5\]"):
        opt.step()
    for p, b in zip(params, before, strict=True):
        assert torch.equal(p.detach(), b)
        assert not opt.state.get(p)  # no state made: no momentum, no NorMuon rows


def counting_backend(name):
    counter = CompileCounter()
    register_backend(counter, name=name)
    return counter


def test_compiled_step_compiles_once_per_shape_group_and_never_again():
    counter = counting_backend("tailmem_counting")
    compiled, eager = make(), make()
    a = Muon(compiled, dtype=None, compile="tailmem_counting")
    b = Muon(eager, dtype=None, compile=False)
    frames = []
    for step_grads in grads(5):
        for p, q, g in zip(compiled, eager, step_grads, strict=True):
            p.grad, q.grad = g.clone(), g.clone()
        a.step()
        b.step()
        frames.append(counter.frame_count)
    # shape groups: (24, 12) x2, (12, 24), (8, 12) x2 (conv), (16, 16), (40, 12)
    assert frames == [5] * STEPS
    for p, q in zip(compiled, eager, strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6)


def test_more_shape_groups_than_torchs_recompile_limit_compile_each_once():
    counter = counting_backend("tailmem_counting_many")
    groups = torch._dynamo.config.recompile_limit + 3
    gen = torch.Generator().manual_seed(8)
    params = [torch.nn.Parameter(torch.randn(i + 2, 5, generator=gen)) for i in range(groups)]
    opt = Muon(params, dtype=None, compile="tailmem_counting_many")
    for _ in range(2):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen)
        opt.step()
    assert counter.frame_count == groups


@pytest.mark.slow
def test_inductor_compiled_step_matches_the_eager_step():
    compiled, eager = make(), make()
    a, b = Muon(compiled, dtype=None, compile=True), Muon(eager, dtype=None, compile=False)
    for step_grads in grads(6)[:2]:
        for p, q, g in zip(compiled, eager, step_grads, strict=True):
            p.grad, q.grad = g.clone(), g.clone()
        a.step()
        b.step()
    for p, q in zip(compiled, eager, strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-5)


def test_compile_switch(monkeypatch):
    monkeypatch.delenv(COMPILE_VARIABLE, raising=False)
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert backend(None, cpu, "ns5") is None  # measured not to pay on a CPU
    assert backend(None, cuda, "ns5") == "inductor"
    assert backend(True, cpu, "auto") == "inductor"
    assert backend("aot_eager", cpu, "polar_express") == "aot_eager"
    assert backend(False, cuda, "ns5") is None
    assert backend(True, cuda, "cubic") is None and backend(True, cuda, "svd") is None
    with pytest.raises(TypeError, match="Muon compile must be None, True, False or a"):
        Muon(make(), compile=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Muon compile must be"):
        Muon(make(), compile="")
    monkeypatch.setenv(COMPILE_VARIABLE, "0")  # the switch a recipe's Muon (compile=None) reads
    assert backend(None, cuda, "ns5") is None and backend(True, cuda, "ns5") == "inductor"
    monkeypatch.setenv(COMPILE_VARIABLE, "1")
    assert backend(None, cpu, "ns5") == "inductor"
    monkeypatch.setenv(COMPILE_VARIABLE, "yes")
    with pytest.raises(ValueError, match="TAILMEM_MUON_COMPILE='yes': expected 0, 1 or unset"):
        backend(None, cpu, "ns5")


def test_auto_runs_the_gram_form_exactly_where_the_table_says_it_pays():
    assert GRAM_TABLE["cpu"], "the CPU row is measured and committed"
    assert all(rule.min_aspect > 1.5 for rules in GRAM_TABLE.values() for rule in rules)
    gen = torch.Generator().manual_seed(7)
    for m, n in ((64, 256), (256, 64), (96, 96), (64, 96), (8, 64)):
        G = torch.randn(m, n, generator=gen)
        form = "gram_ns" if gram_pays(m, n, "cpu") else "polar_express"
        assert torch.equal(orthogonalize(G, "auto"), orthogonalize(G, form)), (m, n)
        assert orthogonalize_flops(m, n, "auto") == orthogonalize_flops(m, n, form)
    assert gram_pays(64, 256, "cpu") and not gram_pays(96, 96, "cpu")
    assert not gram_pays(768, 3072, "no-such-device")  # no row: never the Gram form


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"method": "nope"}, ValueError, "unknown orthogonalisation method 'nope'"),
        ({"ns_steps": 0}, ValueError, "steps must be a positive integer"),
        ({"eps": -1.0}, ValueError, "eps must be a finite number > 0"),
        ({"adjust_lr_fn": "x"}, ValueError, "unknown Muon scale 'x'"),
        ({"dtype": torch.int32}, TypeError, "dtype must be a floating torch.dtype"),
    ],
)
def test_the_functional_update_refuses_what_orthogonalize_refuses(kwargs, error, message):
    grad, buf = torch.randn(4, 3), torch.zeros(4, 3)
    with pytest.raises(error, match=message):
        muon_update(grad, buf, **kwargs)
    assert not buf.any()  # refused before the momentum moved


def test_the_functional_update_of_an_empty_tensor_is_empty():
    assert muon_update(torch.zeros(0, 3), torch.zeros(0, 3)).shape == (0, 3)


@pytest.mark.parametrize("normuon", [False, True])
def test_a_cpu_bucket_above_the_stack_limit_is_cut_into_stacks_with_the_same_step(
    monkeypatch, normuon
):
    """At a limit of one (24, 12) block per stack the bucket of the two (24, 12) matrices is
    cut in two (the (8, 12) conv pair still fits one), and every parameter steps as when whole."""
    whole, _, _, _ = batched_and_looped(normuon=normuon)
    monkeypatch.setattr(muon_batch, "STACK_BYTES_CPU", 24 * 12 * 4)
    cut, _, _, _ = batched_and_looped(normuon=normuon)
    for p, q in zip(cut, whole, strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6)

    calls = []
    real = muon_batch.orthogonalize_wide

    def counting(X, *args, **kwargs):
        calls.append(X.shape[0])
        return real(X, *args, **kwargs)

    monkeypatch.setattr(muon_batch, "orthogonalize_wide", counting)
    params = make()
    for p, g in zip(params, grads(1)[0], strict=True):
        p.grad = g
    Muon(params, dtype=None, normuon=normuon).step()
    assert sorted(calls) == [1, 1, 1, 1, 1, 2]  # whole: [1, 1, 1, 2, 2]

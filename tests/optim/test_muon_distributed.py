"""Muon under torch.distributed, 2 CPU ranks with gloo.

* local by default: with a process group initialised, a Muon built without ``process_group``
  never joins a collective, so rank 0 can step alone;
* ``distributed="ddp"`` / ``process_group=``: ranks share the orthogonalisations and match the
  single-process trajectory bit for bit;
* FSDP2 (``fully_shard``, DTensor parameters, uneven shards): matches a single-process run on the
  whole batch to 1e-5 absolute (the only difference is the order in which the reduce-scatter
  sums the two ranks' gradients: ≈1e-7 relative); the momentum buffers stay sharded; a
  ``torch.distributed.checkpoint`` save → load resumes the identical trajectory.
"""

import copy
import datetime
import math
from typing import Any, cast

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

import tailmem.optim.muon_batch as muon_batch
from tailmem.optim import Muon, orthogonalize
from tailmem.optim.distributed import rank_and_world, sharded_map

SHAPES = [(12, 8), (8, 12), (12, 8), (12, 8), (16, 8), (6, 2, 2)]
STEPS = 4
FSDP_TOLERANCE = 1e-5


def _init(rank: int, world: int, init_file: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )


def _groups(params):
    return [
        {"params": params[:4], "lr": 0.05},
        {"params": params[4:5], "lr": 0.02, "num_heads": 2, "method": "polar_express"},
        {"params": params[5:], "lr": 0.03, "method": "gram_ns"},
    ]


def _trajectory(deepcopied: bool = False, **distribution) -> list[torch.Tensor]:
    """Build params and grads from fixed seeds (identical on every rank) and take STEPS steps
    (``deepcopied``: with a deep copy of parameters and optimiser)."""
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*s, generator=gen)) for s in SHAPES]
    opt = Muon(
        _groups(params),
        momentum=0.9,
        nesterov=True,
        weight_decay=0.01,
        dtype=torch.float32,
        **distribution,
    )
    if deepcopied:
        params, opt = copy.deepcopy((params, opt))
    for _ in range(STEPS):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen)
        opt.step()
    return [p.detach().clone() for p in params]


def _ddp_worker(rank: int, world: int, init_file: str, out_file: str) -> None:
    _init(rank, world, init_file)
    calls: list[int] = []
    original = muon_batch.orthogonalize_wide

    def counting(X, *args, **kwargs):
        calls.append(X.shape[0])
        return original(X, *args, **kwargs)

    muon_batch.orthogonalize_wide = counting
    by_name = _trajectory(distributed="ddp")
    calls_by_name, calls[:] = list(calls), []
    by_group = _trajectory(process_group=dist.group.WORLD)
    calls[:] = []
    by_copy = _trajectory(deepcopied=True, process_group=dist.group.WORLD)
    result = {
        "params": by_name,
        "by_group": by_group,
        "by_copy": by_copy,
        "calls": calls_by_name,
        "calls_by_copy": list(calls),
        "world": rank_and_world(dist.group.WORLD),
    }
    torch.save(result, f"{out_file}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


def test_two_gloo_ranks_match_single_process(tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the ranks run single-threaded too: same kernels, same rounding
    try:
        expected = _trajectory()
    finally:
        torch.set_num_threads(threads)
    init_file, out_file = str(tmp_path / "store"), str(tmp_path / "out")
    mp.spawn(_ddp_worker, args=(2, init_file, out_file), nprocs=2, join=True)
    results = [torch.load(f"{out_file}.{rank}", weights_only=True) for rank in range(2)]
    for rank, result in enumerate(results):
        assert result["world"] == (rank, 2)
        for got, by_group, by_copy, want in zip(
            result["params"], result["by_group"], result["by_copy"], expected, strict=True
        ):
            assert torch.equal(got, want)  # exact: each matrix sees the same arithmetic
            assert torch.equal(by_group, want)
            assert torch.equal(by_copy, want)  # a deep copy keeps sharing over the group
        assert result["calls_by_copy"] == result["calls"]
    # the 2 ranks shared the work: per step, buckets (12, 8)×3 from group 0 plus heads
    # (8, 8)×2 and the (6, 4) gram_ns matrix; rank 0 takes ceil(B/2), rank 1 the rest
    assert sum(results[0]["calls"]) + sum(results[1]["calls"]) == STEPS * (3 + 1 + 2 + 1)
    assert sum(results[0]["calls"]) == STEPS * (2 + 1 + 1 + 1)
    assert sum(results[1]["calls"]) == STEPS * (1 + 0 + 1 + 0)


def _local_worker(rank: int, world: int, init_file: str, out_file: str) -> None:
    _init(rank, world, init_file)
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*s, generator=gen)) for s in SHAPES]
    if rank == 0:  # rank 1 never steps: a collective inside step() would wait for it forever
        opt = Muon(_groups(params), dtype=torch.float32)
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen)
        opt.step()
        torch.save([p.detach() for p in params], out_file)
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.timeout(120)
def test_local_muon_steps_on_one_rank_without_joining_a_collective(tmp_path):
    init_file, out_file = str(tmp_path / "store"), str(tmp_path / "out")
    mp.spawn(_local_worker, args=(2, init_file, out_file), nprocs=2, join=True)
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*s, generator=gen)) for s in SHAPES]
    opt = Muon(_groups(params), dtype=torch.float32)
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen)
    opt.step()
    for got, want in zip(torch.load(out_file, weights_only=True), params, strict=True):
        assert torch.equal(got, want.detach())


def test_without_a_process_group_everything_runs_locally():
    assert not dist.is_initialized()
    assert rank_and_world() == (0, 1)
    batch = torch.randn(3, 4, 6, generator=torch.Generator().manual_seed(1))
    assert torch.equal(sharded_map(batch, orthogonalize), orthogonalize(batch))


def _refusal_worker(rank: int, world: int, init_file: str, out_file: str) -> None:
    """A NaN in rank 0's gradient only, where the step joins collectives: a Muon sharing its
    work over the world, and a local parameter beside FSDP2-sharded ones. Every rank must
    refuse (no rank left waiting in a collective) with nothing moved, and then step on."""
    from torch.distributed.fsdp import fully_shard

    _init(rank, world, init_file)
    refused: dict[str, str] = {}
    moved: dict[str, bool] = {}
    gen = torch.Generator().manual_seed(rank)  # gradients differ by rank
    params = [torch.nn.Parameter(torch.ones(6, 4)) for _ in range(2)]
    opt = Muon(params, process_group=dist.group.WORLD, dtype=torch.float32)
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen)
    if rank == 0:
        params[1].grad[0, 0] = math.nan
    try:
        opt.step()
    except ValueError as error:
        refused["shared"] = str(error)
    moved["shared"] = any(not torch.equal(p.detach(), torch.ones(6, 4)) for p in params)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6, bias=False), nn.Tanh(), nn.Linear(6, 4, bias=False))
    fully_shard(model[0])
    fully_shard(model[2])
    local = nn.Parameter(torch.ones(5, 5))
    opt = Muon([*model.parameters(), local], dtype=torch.float32)  # local: process_group None
    model(torch.randn(3, 4, generator=gen)).square().sum().backward()
    local.grad = torch.randn(5, 5, generator=gen)
    if rank == 0:
        local.grad[0, 0] = math.inf
    try:
        opt.step()
    except ValueError as error:
        refused["mixed"] = str(error)
    moved["mixed"] = not torch.equal(local.detach(), torch.ones(5, 5))
    local.grad = torch.randn(5, 5, generator=gen)
    opt.step()  # the ranks are still in step: a clean step joins the same collectives
    only_rank_0 = dist.new_group([0])
    if rank == 1:  # not a member of the Muon's group
        q = nn.Parameter(torch.ones(4, 4))
        q.grad = torch.ones(4, 4)
        try:
            Muon([q], process_group=only_rank_0).step()
        except ValueError as error:
            refused["outsider"] = str(error)
    torch.save({"refused": refused, "moved": moved}, f"{out_file}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.timeout(180)
def test_a_nan_on_one_rank_is_refused_by_every_rank_of_the_steps_collectives(tmp_path):
    init_file, out_file = str(tmp_path / "store"), str(tmp_path / "out")
    mp.spawn(_refusal_worker, args=(2, init_file, out_file), nprocs=2, join=True)
    for rank in range(2):
        result = torch.load(f"{out_file}.{rank}", weights_only=True)
        assert "gradient entry in param_groups[0]['params'][1]" in result["refused"]["shared"]
        assert "gradient entry in param_groups[0]['params'][2]" in result["refused"]["mixed"]
        assert result["moved"] == {"shared": False, "mixed": False}
    outsider = torch.load(f"{out_file}.1", weights_only=True)["refused"]["outsider"]
    assert outsider.startswith("this process (global rank 1) is not a member of the process group")


def test_process_group_and_distributed_are_the_optimisers_not_a_groups():
    p = torch.nn.Parameter(torch.zeros(4, 4))
    for key, value in (("process_group", None), ("distributed", "ddp")):
        with pytest.raises(ValueError, match=rf"^Muon {key} is set for the whole optimiser"):
            Muon([{"params": [p], key: value}])


# ------------------------------------------------------------------------------------- FSDP2

FSDP_STEPS, RESUME_AT, BATCH = 5, 2, 8


def _fsdp_model() -> nn.Module:
    torch.manual_seed(0)
    # 12 and 5 output rows: even and uneven shards over 2 ranks; a 3-D weight is flattened
    return nn.Sequential(
        nn.Linear(6, 12, bias=False), nn.Tanh(), nn.Linear(12, 5, bias=False), nn.Tanh()
    )


def _fsdp_optimizer(model: nn.Module) -> Muon:
    first, second = (m.weight for m in model if isinstance(m, nn.Linear))
    return Muon(
        [{"params": [first]}, {"params": [second], "normuon": True, "method": "polar_express"}],
        lr=0.05,
        momentum=0.9,
        weight_decay=0.01,
        dtype=torch.float32,
    )


def _batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(100 + step)
    return torch.randn(BATCH, 6, generator=gen), torch.randn(BATCH, 5, generator=gen)


def _fsdp_step(model, opt, step: int, rank: int, world: int) -> None:
    x, y = _batch(step)
    share = BATCH // world
    x, y = x[rank * share : (rank + 1) * share], y[rank * share : (rank + 1) * share]
    opt.zero_grad()
    ((model(x) - y) ** 2).mean().backward()
    opt.step()


def _full_params(model) -> list[torch.Tensor]:
    return [p.full_tensor().detach().clone() for p in model.parameters()]


def _fsdp_worker(rank: int, world: int, init_file: str, out_file: str, ckpt: str) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_optimizer_state_dict,
        set_optimizer_state_dict,
    )
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    _init(rank, world, init_file)

    def sharded():
        model = _fsdp_model()
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)
        return model, _fsdp_optimizer(model)

    model, opt = sharded()
    trajectory = []
    for step in range(FSDP_STEPS):
        if step == RESUME_AT:
            state = {"model": model.state_dict(), "optim": get_optimizer_state_dict(model, opt)}
            dcp.save(state, checkpoint_id=ckpt)
        _fsdp_step(model, opt, step, rank, world)
        trajectory.append(_full_params(model))
    buffers = [opt.state[p]["momentum_buffer"] for p in model.parameters()]
    sharded_state = all(isinstance(b, DTensor) for b in buffers)
    local_rows = [b.to_local().shape[0] for b in buffers]

    model, opt = sharded()
    state = {"model": model.state_dict(), "optim": get_optimizer_state_dict(model, opt)}
    dcp.load(state, checkpoint_id=ckpt)
    model.load_state_dict(state["model"])
    set_optimizer_state_dict(model, opt, state["optim"])
    resumed = []
    for step in range(RESUME_AT, FSDP_STEPS):
        _fsdp_step(model, opt, step, rank, world)
        resumed.append(_full_params(model))
    # a NaN in one rank's gradient shard only: every rank refuses (none waits in a collective)
    x, y = _batch(0)
    opt.zero_grad()
    ((model(x) - y) ** 2).mean().backward()
    first = next(iter(model.parameters()))
    if rank == 0:
        cast(Any, first.grad).to_local()[0, 0] = math.nan
    try:
        opt.step()
        refused = ""
    except ValueError as error:
        refused = str(error)
    result = {
        "trajectory": trajectory,
        "resumed": resumed,
        "sharded_state": sharded_state,
        "local_rows": local_rows,
        "refused": refused,
    }
    torch.save(result, f"{out_file}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def fsdp_results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fsdp")
    init_file, out_file, ckpt = str(tmp / "store"), str(tmp / "out"), str(tmp / "ckpt")
    mp.spawn(_fsdp_worker, args=(2, init_file, out_file, ckpt), nprocs=2, join=True)
    return [torch.load(f"{out_file}.{rank}", weights_only=True) for rank in range(2)]


def test_fsdp2_matches_a_single_process_run(fsdp_results):
    model = _fsdp_model()
    opt = _fsdp_optimizer(model)
    for step in range(FSDP_STEPS):
        _fsdp_step(model, opt, step, 0, 1)
        want = [p.detach() for p in model.parameters()]
        for result in fsdp_results:
            for got, ref in zip(result["trajectory"][step], want, strict=True):
                torch.testing.assert_close(got, ref, rtol=0, atol=FSDP_TOLERANCE)
    # the ranks hold the same full parameters, and the momentum state stayed sharded
    first, second = (r["trajectory"][-1] for r in fsdp_results)
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)
    assert all(r["sharded_state"] for r in fsdp_results)
    assert [r["local_rows"] for r in fsdp_results] == [[6, 3], [6, 2]]


def test_fsdp2_resumes_identically_from_a_dcp_checkpoint(fsdp_results):
    for result in fsdp_results:
        for resumed, original in zip(
            result["resumed"], result["trajectory"][RESUME_AT:], strict=True
        ):
            for a, b in zip(resumed, original, strict=True):
                assert torch.equal(a, b)


def test_fsdp2_ranks_refuse_together_a_nan_in_one_ranks_shard(fsdp_results):
    for result in fsdp_results:
        assert "NaN or infinite gradient entry in param_groups[0]['params'][0]" in result["refused"]

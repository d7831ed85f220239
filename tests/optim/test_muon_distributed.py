"""Muon under torch.distributed: 2 CPU ranks (gloo) match the single-process trajectory."""

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import tailmem.optim.muon as muon_module
from tailmem.optim import Muon, orthogonalize
from tailmem.optim.distributed import rank_and_world, sharded_map

SHAPES = [(12, 8), (8, 12), (12, 8), (12, 8), (16, 8), (6, 2, 2)]
STEPS = 4


def _groups(params):
    return [
        {"params": params[:4], "lr": 0.05},
        {"params": params[4:5], "lr": 0.02, "num_heads": 2, "method": "polar_express"},
        {"params": params[5:], "lr": 0.03, "method": "gram_ns"},
    ]


def _trajectory(calls: list[int]) -> list[torch.Tensor]:
    """Build params and grads from fixed seeds (identical on every rank) and take STEPS steps."""
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*s, generator=gen)) for s in SHAPES]
    opt = Muon(_groups(params), momentum=0.9, nesterov=True, weight_decay=0.01)
    for _ in range(STEPS):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen)
        opt.step()
    return [p.detach().clone() for p in params]


def _worker(rank: int, world: int, init_file: str, out_file: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    calls: list[int] = []
    original = muon_module.orthogonalize

    def counting(G, **kwargs):
        calls.append(G.shape[0])
        return original(G, **kwargs)

    muon_module.orthogonalize = counting
    params = _trajectory(calls)
    torch.save({"params": params, "calls": calls, "world": rank_and_world()}, f"{out_file}.{rank}")
    dist.barrier()
    dist.destroy_process_group()


def test_two_gloo_ranks_match_single_process(tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the ranks run single-threaded too: same kernels, same rounding
    try:
        expected = _trajectory([])
    finally:
        torch.set_num_threads(threads)
    init_file, out_file = str(tmp_path / "store"), str(tmp_path / "out")
    mp.spawn(_worker, args=(2, init_file, out_file), nprocs=2, join=True)
    results = [torch.load(f"{out_file}.{rank}", weights_only=True) for rank in range(2)]
    for rank, result in enumerate(results):
        assert result["world"] == (rank, 2)
        for got, want in zip(result["params"], expected, strict=True):
            assert torch.equal(got, want)  # exact: each matrix sees the same arithmetic
    # the 2 ranks shared the work: per step, buckets (12, 8)×3 from group 0 plus heads
    # (8, 8)×2 and the (6, 4) gram_ns matrix; rank 0 takes ceil(B/2), rank 1 the rest
    assert sum(results[0]["calls"]) + sum(results[1]["calls"]) == STEPS * (3 + 1 + 2 + 1)
    assert sum(results[0]["calls"]) == STEPS * (2 + 1 + 1 + 1)
    assert sum(results[1]["calls"]) == STEPS * (1 + 0 + 1 + 0)


def test_without_a_process_group_everything_runs_locally():
    assert not dist.is_initialized()
    assert rank_and_world() == (0, 1)
    batch = torch.randn(3, 4, 6, generator=torch.Generator().manual_seed(1))
    assert torch.equal(sharded_map(batch, orthogonalize), orthogonalize(batch))

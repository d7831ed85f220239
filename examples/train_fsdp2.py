# train_fsdp2.py — torchrun --nproc_per_node=2 train_fsdp2.py
import torch, torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
from torch.distributed.fsdp import fully_shard
from tailmem.optim import Muon

dist.init_process_group("gloo")  # "nccl" on GPUs
torch.manual_seed(0)  # the same model on every rank before it is sharded
model = torch.nn.Sequential(torch.nn.Linear(64, 256, bias=False), torch.nn.GELU(),
                            torch.nn.Linear(256, 64, bias=False))
for layer in model[::2]:
    fully_shard(layer)
fully_shard(model)
opt = Muon(model.parameters(), lr=0.02)  # DTensor parameters: sharded automatically
for _ in range(10):
    model(torch.randn(32, 64)).square().mean().backward()
    opt.step(); opt.zero_grad()
dcp.save({"model": model.state_dict(), "optim": get_optimizer_state_dict(model, opt)},
         checkpoint_id="ckpt")
dist.destroy_process_group()

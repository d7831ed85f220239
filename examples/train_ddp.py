# train_ddp.py — torchrun --nproc_per_node=2 train_ddp.py
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from tailmem.models.gpt import GPT, gpt_config
from tailmem.models.roles import MATRIX_ROLES, resolve_roles
from tailmem.optim import Muon

dist.init_process_group("gloo")  # "nccl" on GPUs
torch.manual_seed(0)
model = DDP(GPT(gpt_config("tiny", vocab_size=256)))
roles = resolve_roles(model)  # by role, not ndim: the embedding and LM head are matrices too
hidden = [p for n, p in model.named_parameters() if roles[n].role in MATRIX_ROLES]
rest = [p for n, p in model.named_parameters() if roles[n].role not in MATRIX_ROLES]
opt = Muon(hidden, lr=0.02, distributed="ddp")
adam = torch.optim.AdamW(rest, lr=3e-3)
for _ in range(10):
    x = torch.randint(0, 256, (8, 17))
    _, loss = model(x[:, :-1], x[:, 1:])
    loss.backward()
    opt.step(); adam.step(); opt.zero_grad(); adam.zero_grad()
print(f"rank {dist.get_rank()}: Muon {len(hidden)} matrices, AdamW {len(rest)} tensors, "
      f"loss {loss.item():.3f}")
dist.destroy_process_group()

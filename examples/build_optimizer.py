import torch
from tailmem.models.gpt import GPT, gpt_config
from tailmem.optim import build_optimizer

model = GPT(gpt_config("tiny", vocab_size=256, ffn="gated"))
opt = build_optimizer(
    model,
    "muon:v,o,w_in,w_gate,w_out adam:*",  # paper A's VO+FFN arm
    muon={"lr": 0.02, "momentum": 0.95},  # or nesterov, method, scale, weight_decay
    adam={"lr": 3e-3, "betas": (0.8, 0.95)},  # or eps, weight_decay
)
print(opt.describe())  # role -> kind -> tensors, params, lr
x = torch.randint(0, 256, (4, 16))
logits, loss = model(x[:, :-1], x[:, 1:])
opt.zero_grad()
loss.backward()
opt.step()

"""A user's optimiser, as a researcher would write one outside tailmem: sign descent whose step
is ``lr · damping``. Only its import path ``toy_optimizer:DampedSign`` reaches tailmem."""

import torch


class DampedSign(torch.optim.Optimizer):
    def __init__(self, params, lr, damping=1.0):
        super().__init__(params, {"lr": lr, "damping": damping})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad.sign(), alpha=-group["lr"] * group["damping"])

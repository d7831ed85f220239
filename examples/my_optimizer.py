# mypkg/opt.py — your optimiser as a tailmem kind: optim.mine.factory=mypkg.opt:MyOptimizer
import torch


class MyOptimizer(torch.optim.Optimizer):
    """Momentum SGD whose update is scaled to unit RMS per tensor: a template to edit.

    tailmem calls ``MyOptimizer(param_groups, lr=..., **hyper_parameters)``: param groups (dicts
    with "params" and tags such as "role"), ``lr`` (which the schedule then sets in
    ``group["lr"]`` before every step) and each ``optim.mine.NAME=VALUE`` as a keyword, which
    the signature must name, with a default. A value arrives as YAML reads it (``0`` is an int,
    a list a tuple), so convert it here; a ValueError is one line, exit 2.
    """

    def __init__(self, params, lr=1e-3, momentum=0.9, weight_decay=0.0):
        lr, momentum, weight_decay = float(lr), float(momentum), float(weight_decay)
        if not (lr >= 0 and 0 <= momentum < 1 and weight_decay >= 0):
            raise ValueError(
                f"expected lr >= 0, 0 <= momentum < 1 and weight_decay >= 0; got lr={lr}, "
                f"momentum={momentum}, weight_decay={weight_decay}"
            )
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:  # read every step: the schedule changes "lr"
            lr, momentum, decay = group["lr"], group["momentum"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                buf = self.state[p].setdefault("momentum", torch.zeros_like(p))
                buf.mul_(momentum).add_(p.grad)
                update = buf / buf.square().mean().sqrt().clamp_min(1e-12)
                p.mul_(1 - lr * decay).add_(update, alpha=-lr)
        return loss

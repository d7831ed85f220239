"""SignGD: element-wise sign descent, the β1 = β2 = 0 limit of Adam (paper A, Sec. 5).

Adam with ``β1 = β2 = 0`` steps by ``g / (|g| + eps)``, which tends to ``sign(g)`` as
``eps -> 0``; the theory of paper A calls that optimiser SignGD. With momentum ``μ`` the sign is
taken of the buffer ``B <- μ·B + (1 - μ)·g`` (the same convention as Muon; the sign does not see
the positive factor ``1 - μ``)::

    W <- (1 - lr·weight_decay)·W - lr·sign(B)

``sign(0) = 0``, so exactly-zero coordinates do not move.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor
from torch.optim import Optimizer

from tailmem.optim.gradients import refuse_non_finite


class SignGD(Optimizer):
    """Sign descent with optional momentum and decoupled weight decay; see the module docstring.

    Args:
        params: parameters or param groups (any shape).
        lr: learning rate (>= 0).
        momentum: ``μ`` in ``[0, 1)``; 0 takes the sign of the raw gradient.
        weight_decay: decoupled weight decay (>= 0), multiplied by lr.

    ``p.grad`` is never modified; parameters whose grad is ``None`` are skipped. A NaN or
    infinite gradient entry raises :class:`~tailmem.optim.orthogonalize.NonFiniteInputError`
    naming the parameter before anything is updated (see :mod:`tailmem.optim.gradients`). A bad
    hyperparameter raises ``ValueError`` wherever it enters: the constructor,
    :meth:`add_param_group`, :meth:`load_state_dict`, and a group edited between steps (checked
    at :meth:`step`, before anything is updated).
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group after checking its hyperparameters."""
        super().add_param_group(param_group)
        try:
            _check_group(self.param_groups[-1])
            for p in self.param_groups[-1]["params"]:
                if torch.is_complex(p):
                    raise ValueError(
                        f"SignGD does not support complex parameters (the sign of a complex "
                        f"number is not defined here), got one of shape {tuple(p.shape)} and "
                        f"dtype {p.dtype}; expected real parameters"
                    )
        except ValueError:
            self.param_groups.pop()
            raise

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict after checking its hyperparameters; a bad one raises and leaves the
        optimiser as it was."""
        state, groups = self.state, self.param_groups
        super().load_state_dict(state_dict)  # replaces both, so the old ones stay intact
        try:
            for group in self.param_groups:
                _check_group(group)
        except ValueError:
            self.state, self.param_groups = state, groups
            raise

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One sign-descent step for every parameter that has a gradient."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:  # edited since they were checked?
            _check_group(group)
            if group["momentum"] != 0.0 and any(
                p.grad is not None and p.grad.is_sparse for p in group["params"]
            ):
                raise RuntimeError(
                    "SignGD with momentum does not support sparse gradients (its buffer is "
                    "dense); use momentum=0 or dense gradients"
                )
        refuse_non_finite("SignGD", self.param_groups)  # before any state moves
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            if group["momentum"] != 0.0:
                bufs = []
                for p in params:
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = torch.zeros_like(p)
                    bufs.append(state["momentum_buffer"])
                torch._foreach_lerp_(bufs, grads, 1.0 - group["momentum"])
                grads = bufs
            if group["weight_decay"] != 0.0:
                torch._foreach_mul_(params, 1.0 - group["lr"] * group["weight_decay"])
            torch._foreach_add_(params, torch._foreach_sign(grads), alpha=-group["lr"])
        return loss


def _check_group(group: dict[str, Any]) -> None:
    """Raise ValueError naming the first hyperparameter of ``group`` that is not a finite number
    in its range (lr and weight_decay >= 0, momentum in [0, 1))."""
    for name, low, high in (("lr", 0.0, None), ("momentum", 0.0, 1.0), ("weight_decay", 0.0, None)):
        value: Any = group.get(name)
        bad = isinstance(value, bool) or not isinstance(value, (int, float))
        bad = bad or not math.isfinite(value) or not value >= low
        if bad or (high is not None and not value < high):
            expected = f"in [{low}, {high})" if high is not None else f"finite and >= {low}"
            raise ValueError(f"SignGD {name} must be a number {expected}, got {value!r}")

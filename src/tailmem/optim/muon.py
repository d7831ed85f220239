"""Muon: momentum followed by orthogonalisation of each matrix update (paper A, Sec. 5).

A drop-in for ``torch.optim.Muon`` (2.9+): called with torch's names and defaults
(``lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True, ns_coefficients=(3.4445, -4.7750,
2.0315), eps=1e-7, ns_steps=5, adjust_lr_fn=None``, Newton–Schulz in bfloat16) it takes the same
step and its ``state_dict`` loads into torch's and back. Per step, for a matrix parameter ``W``
with gradient ``g`` (:func:`muon_update` is that step for one tensor)::

    B <- μ·B + (1 - μ)·g                         (momentum buffer, B_0 = 0)
    D <- (1 - μ)·g + μ·B  if nesterov  else  B
    W <- (1 - lr·weight_decay)·W                 (decoupled weight decay, unscaled lr)
    W <- W - lr·scale(rows, cols)·orthogonalize(D)

(torch's docstring writes the sum form ``B <- μB + g``: the same buffer times ``1/(1 - μ)``, hence
the same direction, which orthogonalisation normalises anyway.) ``momentum = 0`` is pure spectral
descent. One difference in rounding only: the input is divided by ``‖D‖_F + eps`` where torch
divides by ``max(‖D‖_F, eps)``.

Beyond torch (a superset; ``steps`` and ``scale`` are tailmem's older names of ``ns_steps`` and
``adjust_lr_fn``): any :data:`~tailmem.optim.orthogonalize.METHODS` (``method="polar_express"``…),
any compute ``dtype`` (``None``: the gradient's), parameters with more than two dimensions,
row blocks (``num_heads`` / ``row_splits``), ``fan_out_dim``, leading ``batch_dims``, NorMuon
(``normuon=True``), and explicit distribution (below).

Matrix view of a parameter: the output (fan-out) dimension ``fan_out_dim`` is moved first and
all other dimensions are flattened, so a conv weight ``(out, in, kh, kw)`` is the matrix
``(out, in·kh·kw)`` and a Hugging Face ``Conv1D`` weight ``(in, out)`` with ``fan_out_dim=1`` is
``(out, in)``. Its rows may be split into blocks (``num_heads`` equal blocks, or ``row_splits``
sizes, e.g. a fused q/k/v) that are orthogonalised and scaled separately. ``batch_dims`` leading
dimensions index independent parameters stacked in one tensor (an ensemble's members,
:class:`tailmem.models.gpt.GPT` with ``members``): each index is its own parameter, with its own
matrix view, blocks and NorMuon rows, so member ``k`` steps exactly as a single model would;
``fan_out_dim`` counts after them. ``scale`` always uses the block's ``(rows, cols)`` in that
``(out, in)`` view:

* ``"original"`` (or ``None``): ``sqrt(max(1, rows/cols))`` (Keller Jordan; torch's default),
* ``"match_rms_adamw"``: ``0.2·sqrt(max(rows, cols))`` (Moonlight: update RMS ≈ AdamW's),
* ``"none"``: 1.

NorMuon (``normuon=True``; modded-nanogpt, dion): after orthogonalisation each block ``O`` is
normalised per output neuron (row) by a running second moment and rescaled to its own norm::

    V <- β₂·V + (1 - β₂)·mean_j O_ij²           (state "normuon_second_moment", one per row)
    O' = O / sqrt(max(V, 1e-10)),   O <- O'·‖O‖_F / max(‖O'‖_F, 1e-10)

Speed: all blocks of one shape (across parameters and param groups with the same method, steps,
dtype and eps) are stacked and orthogonalised in ONE batched call (on a CPU, in stacks of at most
24 MiB), compiled by ``torch.compile`` on CUDA (``compile``); momentum, weight decay and the
update are ``torch._foreach_*`` calls over all parameters that share their values
(:mod:`tailmem.optim.muon_batch`, which :func:`muon_update` calls too: one code path). A NaN or
infinite gradient entry is refused by name before anything moves
(:mod:`tailmem.optim.gradients`: the step's one host sync; a loaded state must be finite, so
the directions are). Only the momentum buffers (and NorMuon's rows) persist between
steps; the stacks are per step. ``method="auto"`` runs the Polar Express polynomial in the Gram form
where that was measured to pay on the device (:mod:`tailmem.optim.gram_table`).

Distribution is explicit. ``process_group=None`` (default) is local: no collective, ever, so any
subset of ranks may step. Passing a ``process_group`` (or ``distributed="ddp"``: the default group,
looked up at each step) shares every batch across that group's ranks (each orthogonalises a
disjoint share, results are all-gathered): gradients must already be averaged and present for the
same parameters on every rank of it, as under DDP, and every rank must step. DTensor parameters
(``torch.distributed.fsdp.fully_shard``, FSDP2) are handled whatever ``process_group`` is: each
matrix's direction is all-gathered once over its mesh, the matrices are orthogonalised shared
across that mesh's ranks, and each rank applies its own shard of the update; the momentum buffer
stays a sharded DTensor, so ``torch.distributed.checkpoint`` saves and restores it per shard.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.optim import Optimizer

from tailmem.optim import distributed as D
from tailmem.optim.gradients import first_non_finite, refuse_non_finite
from tailmem.optim.muon_batch import (
    SCALES,
    Layout,
    Orthogonalisation,
    Request,
    Update,
    orthogonal_updates,
    update_scale,
)
from tailmem.optim.orthogonalize import (
    DEFAULT_STEPS,
    METHODS,
    NS5_COEFFICIENTS,
    NonFiniteInputError,
    check_arguments,
)

ALIASES: dict[str, str] = {"steps": "ns_steps", "scale": "adjust_lr_fn"}
"""tailmem's older hyperparameter names and torch's names they stand for."""


def momentum_directions(
    grads: list[Tensor], bufs: list[Tensor] | None, momentum: float, nesterov: bool
) -> list[Tensor]:
    """Update the buffers in place (``B <- lerp(B, g, 1 - μ)``) and return the directions."""
    if momentum == 0.0 or bufs is None:
        return grads
    torch._foreach_lerp_(bufs, grads, 1.0 - momentum)
    if nesterov:
        return list(torch._foreach_lerp(grads, bufs, momentum))
    return bufs


def muon_update(
    grad: Tensor,
    buf: Tensor | None,
    *,
    momentum: float = 0.95,
    nesterov: bool = True,
    method: str = "ns5",
    ns_steps: int | None = None,
    ns_coefficients: tuple[float, float, float] | None = None,
    eps: float = 1e-7,
    dtype: torch.dtype | None = torch.bfloat16,
    adjust_lr_fn: str | None = None,
) -> Tensor:
    """Muon's update for one ``(out, in, ...)`` tensor: ``W <- W - lr·muon_update(g, B)``.

    Updates the momentum buffer ``buf`` in place (``None`` with ``momentum=0``) and returns
    ``scale(out, in)·orthogonalize(D)`` with ``D`` the (Nesterov) momentum direction, dimensions
    after the first flattened. Weight decay is the caller's: ``W.mul_(1 - lr·weight_decay)``.
    :class:`Muon` computes exactly this through the same functions
    (:func:`momentum_directions`, :func:`~tailmem.optim.muon_batch.orthogonal_updates`),
    batched across parameters.
    """
    coefficients = ns_coefficients if method == "ns5" else None
    matrix = grad.flatten(1) if grad.ndim > 1 else grad.reshape(-1, 1)
    check_arguments(matrix, method, ns_steps, dtype, eps, coefficients)
    update_scale(1, 1, adjust_lr_fn)  # a ValueError naming a bad one
    if first_non_finite([grad]) is not None:  # before the buffer moves
        raise NonFiniteInputError(
            f"muon_update got a NaN or infinite entry in grad, shape {tuple(grad.shape)}; "
            "expected finite values (the momentum buffer was not updated)"
        )
    (direction,) = momentum_directions([grad], None if buf is None else [buf], momentum, nesterov)
    if grad.numel() == 0:
        return torch.zeros_like(grad)
    how = Orthogonalisation(method, ns_steps, coefficients, dtype, eps)
    (update,) = orthogonal_updates([Request(direction, how, adjust_lr_fn=adjust_lr_fn)])
    return update.tensor * update.factor


class Muon(Optimizer):
    """Muon optimiser for matrix (and flattened >2-D) parameters; see the module docstring.

    Args:
        params: parameters or param groups. Every parameter needs at least 2 dimensions.
        lr: learning rate (>= 0), multiplied by the shape scale of each block.
        weight_decay: decoupled weight decay (>= 0), multiplied by the (unscaled) lr.
        momentum: momentum ``μ`` in ``[0, 1)``; 0 gives pure spectral descent.
        nesterov: use the Nesterov direction ``(1 - μ)·g + μ·B``.
        ns_coefficients: the quintic ``(a, b, c)`` of ``method="ns5"``.
        eps: added to the Frobenius norm before normalising (finite, > 0).
        ns_steps: polynomial steps (``None``: the method's default, 5 for "ns5"); alias ``steps``.
        adjust_lr_fn: ``None``/``"original"``, ``"match_rms_adamw"`` or ``"none"``; alias
            ``scale``.
        method: orthogonalisation method, see :func:`tailmem.optim.orthogonalize`.
        dtype: compute dtype of the orthogonalisation (default bfloat16, as torch; ``None``: the
            gradient's dtype). On CPUs without bf16 units float32 is much faster.
        num_heads: split the output rows into this many equal blocks.
        row_splits: split the output rows into blocks of these sizes (exclusive with num_heads).
        fan_out_dim: which dimension of the parameter is the output (0: ``nn.Linear`` (out, in);
            1: Hugging Face ``Conv1D`` (in, out)), counted after the batch dimensions.
        batch_dims: leading dimensions that index independent matrices (an ensemble's members),
            each orthogonalised, scaled and NorMuon-normalised on its own.
        normuon: NorMuon per-row normalisation after orthogonalisation; ``normuon_beta2`` its
            second-moment decay in ``[0, 1)``.
        process_group: share the orthogonalisation across this group (DDP); ``None``: local.
        distributed: ``"ddp"`` to use the default process group at each step (local while
            none is initialised); ``None``: local.
        compile: run each batched orthogonalisation through ``torch.compile`` (one graph per
            shape group, compiled at its first step, none later): ``None`` on CUDA devices only
            (on a CPU it was measured not to pay) unless the environment variable
            ``TAILMEM_MUON_COMPILE`` is "0" (never) or "1" (everywhere), ``True`` everywhere,
            ``False`` never, or the name of a ``torch.compile`` backend. Polynomial methods
            only; see :func:`tailmem.optim.muon_batch.backend`.

    Every group argument (all but the last three) can be overridden per param group. ``p.grad`` is
    never modified; parameters whose grad is ``None`` are skipped, and an empty one (a zero-size
    dimension) is stepped as torch's optimisers step it: its momentum buffer is kept, and there
    is nothing to orthogonalise or move. State per parameter: ``momentum_buffer`` (when
    momentum > 0), shaped like the parameter, and with NorMuon ``normuon_second_moment`` (one
    entry per output row). Bad values raise ``ValueError`` (a wrong type ``TypeError``) wherever
    they enter: the constructor, :meth:`add_param_group`, :meth:`load_state_dict`, and a group
    edited between steps (checked at :meth:`step`, before anything is updated). A deep copy
    keeps ``process_group`` (shared, not copied: it is a live communicator), ``distributed`` and
    ``compile``.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = NS5_COEFFICIENTS,
        eps: float = 1e-7,
        ns_steps: int | None = None,
        adjust_lr_fn: str | None = None,
        *,
        method: str = "ns5",
        dtype: torch.dtype | None = torch.bfloat16,
        num_heads: int | None = None,
        row_splits: tuple[int, ...] | None = None,
        fan_out_dim: int = 0,
        batch_dims: int = 0,
        normuon: bool = False,
        normuon_beta2: float = 0.95,
        steps: int | None = None,
        scale: str | None = None,
        process_group: Any = None,
        distributed: str | None = None,
        compile: bool | str | None = None,
    ) -> None:
        if not (
            compile is None or isinstance(compile, bool) or (compile and isinstance(compile, str))
        ):
            raise TypeError(
                f"Muon compile must be None, True, False or a torch.compile backend name, "
                f"got {compile!r}"
            )
        if distributed not in (None, "ddp"):
            raise ValueError(f"Muon distributed must be None or 'ddp', got {distributed!r}")
        if distributed is not None and process_group is not None:
            raise ValueError("Muon takes process_group or distributed='ddp', not both")
        self.process_group = process_group
        self.distributed = distributed
        self.compile = compile
        defaults = {
            "lr": lr,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "nesterov": nesterov,
            "ns_coefficients": ns_coefficients,
            "eps": eps,
            "ns_steps": _alias(ns_steps, steps, "ns_steps", "steps", None),
            "adjust_lr_fn": _alias(adjust_lr_fn, scale, "adjust_lr_fn", "scale", None),
            "method": method,
            "dtype": dtype,
            "num_heads": num_heads,
            "row_splits": row_splits,
            "fan_out_dim": fan_out_dim,
            "batch_dims": batch_dims,
            "normuon": normuon,
            "normuon_beta2": normuon_beta2,
        }
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group (tailmem's aliases translated) after checking its values and shapes."""
        param_group = dict(param_group)
        for alias, name in ALIASES.items():
            if alias in param_group:
                value = param_group.pop(alias)
                param_group[name] = _alias(param_group.get(name), value, name, alias, None)
        super().add_param_group(param_group)
        try:
            _complete_group(self.param_groups[-1])
        except (ValueError, TypeError):
            self.param_groups.pop()
            raise

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict of this class or of ``torch.optim.Muon`` (missing keys: defaults).

        Its hyper-parameters are checked as the constructor's are; a bad one raises and leaves
        the optimiser as it was.
        """
        state, groups = self.state, self.param_groups
        rows = _saved_rows(state_dict, self.param_groups)
        super().load_state_dict(state_dict)  # replaces both, so the old ones stay intact
        for p, saved in rows.items():  # torch cast them to the parameter's dtype: lost bits
            device = D.local(p).device
            self.state[p][NORMUON_STATE] = saved.to(device, torch.float32, copy=True)
        try:
            _refuse_non_finite_state(self.state)
            for group in self.param_groups:
                for key, value in self.defaults.items():
                    group.setdefault(key, value)
                _complete_group(group)
        except (ValueError, TypeError):
            self.state, self.param_groups = state, groups
            raise

    def __getstate__(self) -> dict[str, Any]:
        """torch's state (defaults, state, param groups), how this optimiser distributes and
        whether it compiles."""
        return {
            **super().__getstate__(),
            "process_group": self.process_group,
            "distributed": self.distributed,
            "compile": self.compile,
        }

    def __deepcopy__(self, memo: dict[int, Any]) -> Muon:
        """A copy with its own parameters and state that shares ``process_group`` (a process
        group cannot be copied or pickled; ``distributed="ddp"`` looks it up at each step)."""
        if self.process_group is not None:
            memo[id(self.process_group)] = self.process_group
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        clone.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return clone

    def _group_comm(self) -> Any:
        """The process group plain (non-DTensor) parameters share work over, or None (local)."""
        if self.process_group is not None:
            return self.process_group
        if self.distributed == "ddp" and dist.is_available() and dist.is_initialized():
            return dist.group.WORLD
        return None

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One Muon step for every parameter that has a gradient; returns the closure's loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:  # edited since they were checked? (no host sync)
            _check_group(group)
        comm = self._group_comm()
        refuse_non_finite("Muon", self.param_groups, [] if comm is None else [comm])
        requests: list[Request] = []
        owners: list[tuple[Tensor, dict[str, Any]]] = []
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            how, layout = _orthogonalisation(group), _layout(group)
            for p, direction in zip(params, self._directions(group, params), strict=True):
                if p.numel() == 0:  # nothing to orthogonalise (torch's Muon divides by 0 cols)
                    continue
                request = Request(
                    direction,
                    how,
                    layout,
                    group["adjust_lr_fn"],
                    self._second_moment(p, group),
                    float(group["normuon_beta2"]),
                    D.mesh_group(p) if D.is_dtensor(p) else comm,
                )
                requests.append(request)
                owners.append((p, group))
        _apply(owners, orthogonal_updates(requests, self.compile, checked=True))
        return loss

    def _directions(self, group: dict[str, Any], params: list[Tensor]) -> list[Tensor]:
        """Update momentum buffers (foreach, on local shards) and return full directions."""
        grads = []
        for p in params:
            grad = p.grad
            if grad is None:  # the caller keeps only parameters with a gradient
                raise ValueError("Muon._directions needs parameters that have gradients")
            if grad.is_sparse:
                raise RuntimeError("Muon does not support sparse gradients")
            grads.append(D.local(grad))
        bufs = None
        if group["momentum"] != 0.0:
            bufs = []
            for p in params:
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(
                        p, memory_format=torch.preserve_format
                    )
                bufs.append(D.local(state["momentum_buffer"]))
        directions = momentum_directions(grads, bufs, group["momentum"], group["nesterov"])
        return [
            D.full_matrix(p, d) if D.is_dtensor(p) else d
            for p, d in zip(params, directions, strict=True)
        ]

    def _second_moment(self, p: Tensor, group: dict[str, Any]) -> Tensor | None:
        """NorMuon's per-row state of ``p`` (created as zeros), or ``None`` without NorMuon."""
        if not group["normuon"]:
            return None
        state = self.state[p]
        if NORMUON_STATE not in state:
            batch = group["batch_dims"]
            rows = math.prod(p.shape[:batch]) * p.shape[batch + group["fan_out_dim"]]
            device = D.local(p).device
            state[NORMUON_STATE] = torch.zeros(rows, dtype=torch.float32, device=device)
        moments: Tensor = state[NORMUON_STATE]
        return moments


NORMUON_STATE = "normuon_second_moment"
"""The state key of NorMuon's per-row second moment, kept in float32 whatever the parameter's
dtype."""


def _saved_rows(state_dict: dict[str, Any], groups: list[dict[str, Any]]) -> dict[Tensor, Tensor]:
    """NorMuon's rows in ``state_dict`` by the parameter of ``groups`` they load into (matched
    by position, as torch matches them), as saved: torch's loading casts every floating state
    tensor to its parameter's dtype, which would round float32 rows to a bf16 model's bf16."""
    ids = [i for group in state_dict.get("param_groups", []) for i in group.get("params", [])]
    params = [p for group in groups for p in group["params"]]
    saved = state_dict.get("state", {})
    return {
        p: saved[i][NORMUON_STATE]
        for i, p in zip(ids, params, strict=False)
        if isinstance(saved.get(i), dict) and isinstance(saved[i].get(NORMUON_STATE), Tensor)
    }


def _refuse_non_finite_state(state: Mapping[Tensor, dict[str, Any]]) -> None:
    """Raise :class:`NonFiniteInputError` when a loaded momentum buffer or NorMuon row holds a
    NaN or an infinity: a step trusts its state to be finite (it reads back only the
    gradients), and such a state would turn every later update into NaN."""
    tensors = [
        value
        for entry in state.values()
        for key, value in entry.items()
        if key in ("momentum_buffer", NORMUON_STATE) and isinstance(value, Tensor)
    ]
    if first_non_finite(tensors) is not None:
        raise NonFiniteInputError(
            "Muon state dict holds a NaN or infinite momentum or NorMuon entry; expected a "
            "finite state (a checkpoint from before the run diverged)"
        )


def _orthogonalisation(group: dict[str, Any]) -> Orthogonalisation:
    """How a (checked) group's blocks are orthogonalised."""
    method = group["method"]
    coefficients = tuple(group["ns_coefficients"]) if method == "ns5" else None
    return Orthogonalisation(
        method, group["ns_steps"], coefficients, group["dtype"], float(group["eps"])
    )


def _layout(group: dict[str, Any]) -> Layout:
    """How a (checked) group's parameters are sets of matrices."""
    splits = group["row_splits"]
    return Layout(
        group["fan_out_dim"],
        group["batch_dims"],
        group["num_heads"],
        None if splits is None else tuple(splits),
    )


def _apply(owners: list[tuple[Tensor, dict[str, Any]]], updates: list[Update]) -> None:
    """Weight decay, then ``p -= lr·factor·update``, as ``torch._foreach_*`` calls over the
    parameters that share a decay or a step size (a DTensor parameter takes its own shard)."""
    decays: dict[float, list[Tensor]] = {}
    steps: dict[float, tuple[list[Tensor], list[Tensor]]] = {}
    for (p, group), update in zip(owners, updates, strict=True):
        lr, target = float(group["lr"]), D.local(p)
        tensor = D.local_shard(p, update.tensor) if D.is_dtensor(p) else update.tensor
        if group["weight_decay"] != 0.0:
            decays.setdefault(1.0 - lr * float(group["weight_decay"]), []).append(target)
        targets, tensors = steps.setdefault(-lr * update.factor, ([], []))
        targets.append(target)
        tensors.append(tensor)
    for decay, targets in decays.items():
        torch._foreach_mul_(targets, decay)
    for alpha, (targets, tensors) in steps.items():
        torch._foreach_add_(targets, tensors, alpha=alpha)


def _alias(value: Any, alias_value: Any, name: str, alias: str, default: Any) -> Any:
    """``value`` or its alias' value; both given and different is a ValueError."""
    if alias_value is None:
        return value
    if value is not default and value != alias_value:
        raise ValueError(f"Muon got {name}={value!r} and its alias {alias}={alias_value!r}")
    return alias_value


def _number(group: dict[str, Any], name: str, low: float, high: float, closed: bool) -> None:
    """Raise ValueError unless ``group[name]`` is a finite real in ``[low, high)`` (``(low,``
    when not ``closed``); a 1-element tensor counts as its value."""
    value = group[name]
    if isinstance(value, Tensor) and value.numel() == 1 and not value.is_complex():
        value = value.item()
    bad = isinstance(value, bool) or not isinstance(value, (int, float))
    if (
        bad
        or not math.isfinite(value)
        or value >= high
        or value < low
        or (not closed and value == low)
    ):
        bound = "[" if closed else "("
        upper = "inf" if high == math.inf else str(high)
        raise ValueError(
            f"Muon {name} must be a finite number in {bound}{low}, {upper}), got {group[name]!r}"
        )


OPTIMISER_LEVEL = ("process_group", "distributed")
"""Settings of the whole optimiser (one collective schedule for every rank), never a group's."""


def _complete_group(group: dict[str, Any]) -> None:
    """Check a group that enters the optimiser and resolve its default number of steps."""
    for key in OPTIMISER_LEVEL:
        if key in group:
            raise ValueError(
                f"Muon {key} is set for the whole optimiser (Muon(..., {key}=...)), not per "
                f"param group; got it in a group. Parameters that must be stepped differently "
                "need an optimiser of their own"
            )
    _check_group(group)
    if group["ns_steps"] is None:
        group["ns_steps"] = DEFAULT_STEPS.get(group["method"])


def _check_group(group: dict[str, Any]) -> None:
    """Raise ValueError/TypeError naming the bad hyperparameter or parameter shape (plain Python
    on the group's values and the parameters' shapes; a tensor value is read once)."""
    _number(group, "lr", 0.0, math.inf, True)
    _number(group, "weight_decay", 0.0, math.inf, True)
    _number(group, "momentum", 0.0, 1.0, True)
    _number(group, "eps", 0.0, math.inf, False)
    _number(group, "normuon_beta2", 0.0, 1.0, True)
    for flag in ("nesterov", "normuon"):
        if not isinstance(group[flag], bool):
            raise TypeError(f"Muon {flag} must be True or False, got {group[flag]!r}")
    if group["method"] not in METHODS:
        raise ValueError(f"unknown Muon method {group['method']!r}; expected one of {METHODS}")
    coefficients = group["ns_coefficients"]
    if (
        not isinstance(coefficients, (tuple, list))
        or len(coefficients) != 3
        or not all(
            isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c)
            for c in coefficients
        )
    ):
        raise ValueError(f"Muon ns_coefficients must be 3 finite numbers, got {coefficients!r}")
    if group["method"] != "ns5" and tuple(coefficients) != NS5_COEFFICIENTS:
        raise ValueError(
            f"Muon ns_coefficients are the ns5 polynomial's; method {group['method']!r} has its own"
        )
    steps = group["ns_steps"]
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ValueError(f"Muon ns_steps must be a positive integer or None, got {steps!r}")
    if group["adjust_lr_fn"] not in SCALES:
        raise ValueError(
            f"unknown Muon adjust_lr_fn/scale {group['adjust_lr_fn']!r}; expected one of {SCALES}"
        )
    dtype = group["dtype"]
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"Muon dtype must be a floating torch.dtype or None, got {dtype!r}")
    heads, splits = group["num_heads"], group["row_splits"]
    if heads is not None and splits is not None:
        raise ValueError("Muon takes num_heads or row_splits, not both")
    if heads is not None and (isinstance(heads, bool) or not isinstance(heads, int) or heads < 1):
        raise ValueError(f"Muon num_heads must be a positive integer or None, got {heads!r}")
    if splits is not None:
        if not isinstance(splits, (tuple, list)) or not splits:
            raise ValueError(f"Muon row_splits must be a non-empty tuple of sizes, got {splits!r}")
        if any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in splits):
            raise ValueError(f"Muon row_splits must be positive integers, got {splits!r}")
    fan_out_dim, batch = group["fan_out_dim"], group["batch_dims"]
    if isinstance(fan_out_dim, bool) or not isinstance(fan_out_dim, int) or fan_out_dim < 0:
        raise ValueError(f"Muon fan_out_dim must be an integer >= 0, got {fan_out_dim!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 0:
        raise ValueError(f"Muon batch_dims must be an integer >= 0, got {batch!r}")
    for p in group["params"]:
        _check_param(p, heads, splits, fan_out_dim, batch)


def _check_param(
    p: Tensor, heads: int | None, splits: tuple[int, ...] | None, fan_out_dim: int, batch: int
) -> None:
    shape = tuple(p.shape)
    if p.ndim - batch < 2:
        batched = f" after its {batch} batch dimension(s)" if batch else ""
        raise ValueError(
            f"Muon only handles matrices; route 1-D params like norms/biases to Adam "
            f"(got a parameter of shape {shape}{batched})"
        )
    if torch.is_complex(p):
        raise TypeError(f"Muon does not support complex parameters (shape {shape})")
    if fan_out_dim >= p.ndim - batch:
        raise ValueError(f"Muon fan_out_dim={fan_out_dim} is out of range for shape {shape}")
    out = shape[batch + fan_out_dim]
    if heads is not None and out % heads != 0:
        raise ValueError(f"Muon num_heads={heads} does not divide the output size {out} of {shape}")
    if splits is not None and sum(splits) != out:
        raise ValueError(
            f"Muon row_splits {tuple(splits)} sum to {sum(splits)}, "
            f"expected the output size {out} of {shape}"
        )

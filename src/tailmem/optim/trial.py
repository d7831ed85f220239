"""One trial step of a user's optimiser, before a run writes anything.

A user's optimiser (``optim.<kind>.factory=module:Class``) is code tailmem has never run. A study's
preflight builds it on a tiny model, routed as a real arm routes it, gives every parameter a
small gradient and steps it once (:func:`trial_step`). Whatever the user's code raises then — a
factory that fails, returns None or something that is not an optimiser, a ``step`` that fails on
a hyper-parameter of the wrong type — is one :class:`~tailmem.errors.ConfigError` line naming the
kind, its import path and the exception, and so is a step that changes a parameter's shape,
dtype or device (the model's other references to it would no longer match).

A constructor taking ``**kwargs`` (most of pytorch-optimizer's) accepts any name and may ignore
it: a typo in ``weight_decay`` would silently train at the default. So a hyper-parameter only
``**kwargs`` takes counts as used when a constructor up the class's bases names it
(:func:`~tailmem.optim.registry.named_parameters`) or when the trial step reads it from a param
group or the optimiser's ``defaults``; anything else is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from tailmem.errors import ConfigError
from tailmem.optim.registry import OptimizerSetting, named_parameters, user_code_error
from tailmem.optim.routing import route

GRAD_SCALE = 1e-3
"""The trial gradient: Gaussian noise of this scale (small, so a sane step stays finite)."""


class _Reads(dict):  # type: ignore[type-arg]
    """A param group (or ``defaults``) that records every key read from it."""

    def __init__(self, values: Mapping[str, Any], seen: set[str]) -> None:
        super().__init__(values)
        self.seen = seen

    def __getitem__(self, key: Any) -> Any:
        self.seen.add(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self.seen.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.seen.add(str(key))
        return super().__contains__(key)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self.seen.add(key)
        return super().setdefault(key, default)


def trial_step(model: nn.Module, recipe: str, settings: Mapping[str, OptimizerSetting]) -> None:
    """Build ``recipe``'s optimiser on ``model`` with ``settings`` and step every user kind
    once (module docstring); one ConfigError line on the first problem."""
    routed = route(model, recipe, settings)
    before = {name: _form(p) for name, p in model.named_parameters()}
    noise = torch.Generator().manual_seed(0)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=noise, dtype=p.dtype) * GRAD_SCALE
    for name, child in routed.optimizers.items():
        setting = settings.get(name)
        if setting is None or setting.kind.path is None:
            continue
        seen: set[str] = set()
        child.param_groups[:] = [_Reads(group, seen) for group in child.param_groups]
        child.defaults = _Reads(child.defaults, seen)
        try:
            child.step()
        except (Exception, SystemExit) as exc:  # user code: any failure is its input's
            given = {"lr": setting.lr, **setting.hparams.kwargs()}
            raise user_code_error(setting.kind, f"its step with {given}", exc) from None
        _check_forms(setting, model, before)
        _check_used(setting, seen)


def _form(p: torch.Tensor) -> tuple[tuple[int, ...], torch.dtype, torch.device]:
    return tuple(p.shape), p.dtype, p.device


def _check_forms(
    setting: OptimizerSetting,
    model: nn.Module,
    before: Mapping[str, tuple[tuple[int, ...], torch.dtype, torch.device]],
) -> None:
    """Refuse a step that changed a parameter's shape, dtype or device."""
    for name, p in model.named_parameters():
        if _form(p) != before[name]:
            was, now = before[name], _form(p)
            what = next(i for i, (a, b) in enumerate(zip(was, now, strict=True)) if a != b)
            label = ("shape", "dtype", "device")[what]
            raise ConfigError(
                f"optim.{setting.kind.name} ({setting.kind.path}): its step changed the {label} "
                f"of parameter {name} from {_text(was[what])} to {_text(now[what])}; expected "
                "a step that updates each parameter in place"
            )


def _text(value: Any) -> str:
    return str(tuple(value)) if isinstance(value, tuple) else str(value)


def _check_used(setting: OptimizerSetting, seen: set[str]) -> None:
    """Refuse a hyper-parameter that only ``**kwargs`` took and nothing read (module
    docstring)."""
    kind = setting.kind
    path = str(kind.path)
    named = named_parameters(kind.factory, path)
    for key in setting.hparams.kwargs():
        if key not in named and key not in seen:
            raise ConfigError(
                f"optim.{kind.name}.{key}: {path} takes it only through **kwargs, and neither "
                "its constructor (nor a base class's) names it nor its step reads it, so it "
                f"would be silently ignored; expected one of: {', '.join(sorted(named))}"
            )

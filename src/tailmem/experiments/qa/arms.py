"""The optimiser arms of the knowledge-QA experiment, written as role recipes (PAPERS.md A3).

=============  =========================  ==============================================
arm            label                      recipe (roles -> optimiser)
=============  =========================  ==============================================
muon           Muon                       Muon on q,k,v,o,w_in,w_gate,w_out; Adam on the rest
adam           Adam                       Adam on everything
sgd            SGD+M                      SGD with momentum on everything
muon_vo_ffn    Muon(VO+FFN)&Adam(QK)      Muon on v,o,w_in,w_gate,w_out; Adam on the rest
muon_qk        Muon(QK)&Adam(VO+FFN)      Muon on q,k; Adam on the rest
=============  =========================  ==============================================

"The rest" is the token embedding, the LM head and the RMSNorm gains: Adam, as in the paper
(A1: "token embedding and LM head are always optimised by Adam"). Only the pure SGD arm trains
them with SGD too — the paper's SGD+M arm is a baseline for the whole model, and an Adam-trained
embedding would make it a hybrid. No weight decay anywhere, no Nesterov (A1).

Fair tuning. Each arm sweeps the learning rate of one optimiser kind, ``swept``: the kind that
trains most of its hidden matrices (Muon for ``muon`` and ``muon_vo_ffn``, Adam for ``adam`` and
``muon_qk``, SGD for ``sgd``). Its other kinds run at the best learning rate found for the arm
that uses that kind alone (its *base arm*: Adam's for the Adam-trained embedding/head of the Muon
arms, Muon's for the QK matrices of ``muon_qk``) — the paper likewise holds the Muon learning
rate fixed across its ablation arms. :func:`dependencies` gives that order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from torch import nn

from tailmem.errors import ConfigError
from tailmem.optim.routing import RoutedOptimizer, build_optimizer, parse_recipe

KINDS = ("muon", "adam", "sgd")
"""Optimiser kinds the arms use, in the order LRs are written in run names."""


@dataclass(frozen=True)
class Arm:
    """One optimiser configuration: a role recipe and the kind whose learning rate is swept."""

    name: str
    label: str
    recipe: str
    swept: str

    @property
    def kinds(self) -> tuple[str, ...]:
        """Optimiser kinds of the recipe, in :data:`KINDS` order."""
        used = parse_recipe(self.recipe)
        return tuple(k for k in KINDS if k in used)


ARMS: dict[str, Arm] = {
    arm.name: arm
    for arm in (
        Arm("muon", "Muon", "muon:q,k,v,o,w_in,w_gate,w_out adam:*", "muon"),
        Arm("adam", "Adam", "adam:*", "adam"),
        Arm("sgd", "SGD+M", "sgd:*", "sgd"),
        Arm("muon_vo_ffn", "Muon(VO+FFN)&Adam(QK)", "muon:v,o,w_in,w_gate,w_out adam:*", "muon"),
        Arm("muon_qk", "Muon(QK)&Adam(VO+FFN)", "muon:q,k adam:*", "adam"),
    )
}

BASE_ARM = {"muon": "muon", "adam": "adam", "sgd": "sgd"}
"""The arm that uses each kind alone; its tuned LR is reused by the hybrids."""


@dataclass
class OptimConfig:
    """Optimiser hyperparameters shared by every arm (only the learning rates are swept).

    Adam β = (0.8, 0.95) and Muon momentum 0.95 as in paper A's 160M runs (A1); SGD momentum 0.9
    (not published). ``muon_scale`` is the Muon LR convention (``"original"``:
    √max(1, rows/cols)). ``fallback_lr`` gives the LR of a kind whose base arm is not run.
    """

    adam_betas: tuple[float, float] = (0.8, 0.95)
    adam_eps: float = 1e-8
    muon_momentum: float = 0.95
    muon_method: str = "ns5"
    muon_scale: str = "original"
    sgd_momentum: float = 0.9
    fallback_lr: dict[str, float] | None = None

    def validate(self) -> None:
        b1, b2 = self.adam_betas
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise ConfigError(f"optim.adam_betas: got {self.adam_betas!r}; expected two in [0, 1)")
        if not self.adam_eps > 0:
            raise ConfigError(f"optim.adam_eps: got {self.adam_eps!r}; expected a number > 0")
        for name in ("muon_momentum", "sgd_momentum"):
            if not 0 <= getattr(self, name) < 1:
                raise ConfigError(f"optim.{name}: got {getattr(self, name)!r}; expected [0, 1)")
        if self.muon_scale not in ("original", "match_rms_adamw", "none"):
            raise ConfigError(
                f"optim.muon_scale: got {self.muon_scale!r}; expected 'original', "
                "'match_rms_adamw' or 'none'"
            )
        for kind, lr in (self.fallback_lr or {}).items():
            if kind not in KINDS or not isinstance(lr, (int, float)) or not lr > 0:
                raise ConfigError(
                    f"optim.fallback_lr: got {kind}: {lr!r}; expected kinds of {', '.join(KINDS)} "
                    "mapped to positive learning rates"
                )


def check_arms(names: Sequence[str]) -> None:
    """Raise :class:`ConfigError` for an empty, repeated or unknown arm name."""
    if not names:
        raise ConfigError(f"arms: got an empty list; expected some of {', '.join(ARMS)}")
    for name in names:
        if name not in ARMS:
            raise ConfigError(f"arms: unknown arm {name!r}; expected some of {', '.join(ARMS)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"arms: got {list(names)}; expected each arm at most once")


def dependencies(name: str, running: Sequence[str]) -> list[str]:
    """Arms among ``running`` whose tuned LR arm ``name`` needs before its own sweep."""
    arm = ARMS[name]
    deps = []
    for kind in arm.kinds:
        base = BASE_ARM[kind]
        if kind != arm.swept and base in running and base != name:
            deps.append(base)
    return deps


def make_optimizer(
    model: nn.Module, arm: Arm, lrs: Mapping[str, float], cfg: OptimConfig
) -> RoutedOptimizer:
    """The routed optimiser of ``arm`` with learning rate ``lrs[kind]`` for each of its kinds."""
    options: dict[str, dict[str, object]] = {}
    for kind in arm.kinds:
        if kind == "adam":
            options["adam"] = {
                "lr": lrs["adam"],
                "betas": tuple(cfg.adam_betas),
                "eps": cfg.adam_eps,
                "weight_decay": 0.0,
            }
        elif kind == "muon":
            options["muon"] = {
                "lr": lrs["muon"],
                "momentum": cfg.muon_momentum,
                "nesterov": False,
                "method": cfg.muon_method,
                "scale": cfg.muon_scale,
                "weight_decay": 0.0,
            }
        else:
            options["sgd"] = {
                "lr": lrs["sgd"],
                "momentum": cfg.sgd_momentum,
                "nesterov": False,
                "weight_decay": 0.0,
            }
    return build_optimizer(model, arm.recipe, **options)

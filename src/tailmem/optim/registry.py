"""Every optimiser kind tailmem routes parameters to, declared once.

A *kind* (:class:`OptimizerKind`) is a name used in recipes and configs (``"muon"``), a label
for tables and figures (``"Muon"``), a factory (the optimiser class, or a function returning
one), its default learning rate, a typed hyper-parameter spec (a frozen :class:`HParams`
dataclass of every other constructor argument, with defaults and valid ranges) and whether it
trains matrices only. Recipes and routing (:mod:`tailmem.optim.routing`), the LM studies'
``optim`` section, sweeps, arms and report labels all read :data:`REGISTRY`; adding an optimiser
is one entry there::

    OptimizerKind("lion", "Lion", _lion, LionHParams, lr=1e-4)

A user's optimiser enters without editing tailmem: :func:`user_kind` makes a kind from an import
path (``package.module:Class``), and its hyper-parameters are checked against the class's
signature (:class:`FactoryHParams`). An LM config does that for ``optim.<name>.factory``.

What crosses a process boundary is an :class:`OptimizerSetting` — a kind, its learning rate and
its hyper-parameters — which builds the optimiser for a list of param groups and records itself
(``spec.json``) as ``{"lr": ..., **hyper-parameters}``.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import os
import sys
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from tailmem.errors import ConfigError, describe_exception
from tailmem.names import KIND, check_folder_name
from tailmem.optim.orthogonalize import METHODS
from tailmem.optim.user_code import code_digest, import_user_module
from tailmem.typecheck import check_range, from_dict

BOUNDS = "bounds"
"""Field metadata key of an :class:`HParams` field: its valid range (:class:`Bounds`)."""
CHOICES = "choices"
"""Field metadata key of an :class:`HParams` field: the values it may take."""


@dataclass(frozen=True)
class Bounds:
    """A closed or open range; a tuple-valued field applies it to every element."""

    ge: float | None = None
    gt: float | None = None
    lt: float | None = None

    def check(self, name: str, value: Any) -> None:
        for i, item in enumerate(value if isinstance(value, tuple) else (value,)):
            where = f"{name}[{i}]" if isinstance(value, tuple) else name
            check_range(where, float(item), ge=self.ge, gt=self.gt, lt=self.lt)


def bounded(default: Any, *, ge: float | None = None, gt: float | None = None,
            lt: float | None = None) -> Any:  # fmt: skip
    """A hyper-parameter field with a default and a valid range."""
    return field(default=default, metadata={BOUNDS: Bounds(ge=ge, gt=gt, lt=lt)})


def choice(default: str, options: Collection[str]) -> Any:
    """A hyper-parameter field that takes one of ``options``."""
    return field(default=default, metadata={CHOICES: tuple(options)})


@dataclass(frozen=True)
class HParams:
    """A kind's hyper-parameters: every constructor argument but ``params`` and ``lr``.

    Subclasses declare fields with :func:`bounded` / :func:`choice`; :meth:`validate` (run by
    the config loader) checks them. :meth:`kwargs` are the constructor's keyword arguments,
    :meth:`record` what ``spec.json`` stores.
    """

    def validate(self) -> None:
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            if BOUNDS in spec.metadata:
                spec.metadata[BOUNDS].check(spec.name, value)
            options = spec.metadata.get(CHOICES)
            if options is not None and value not in options:
                raise ConfigError(
                    f"{spec.name}: got {value!r}; expected one of {', '.join(map(str, options))}"
                )

    def kwargs(self) -> dict[str, Any]:
        return {spec.name: getattr(self, spec.name) for spec in dataclasses.fields(self)}

    def record(self) -> dict[str, Any]:
        """The fields as plain data (what a config section holds, not the constructor form)."""
        return {spec.name: _plain(getattr(self, spec.name)) for spec in dataclasses.fields(self)}


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, (tuple, list)) else value


@dataclass(frozen=True)
class MuonHParams(HParams):
    """Muon as paper A1 trains with it: momentum 0.95 without Nesterov, no weight decay, the
    ``original`` shape scale sqrt(max(1, rows/cols)); orthogonalised in the gradient's dtype."""

    momentum: float = bounded(0.95, ge=0, lt=1)
    nesterov: bool = False
    method: str = choice("ns5", METHODS)
    scale: str = choice("original", ("original", "match_rms_adamw", "none"))
    weight_decay: float = bounded(0.0, ge=0)

    def kwargs(self) -> dict[str, Any]:
        return {**super().kwargs(), "dtype": None}


@dataclass(frozen=True)
class NorMuonHParams(MuonHParams):
    """Muon followed by NorMuon's per-output-neuron normalisation with second-moment decay
    ``beta2`` (modded-nanogpt, dion)."""

    beta2: float = bounded(0.95, ge=0, lt=1)

    def kwargs(self) -> dict[str, Any]:
        kwargs = super().kwargs()
        beta2 = kwargs.pop("beta2")
        return {**kwargs, "normuon": True, "normuon_beta2": beta2}


@dataclass(frozen=True)
class AdamHParams(HParams):
    """Adam with paper A1's betas (0.8, 0.95) and no weight decay."""

    betas: tuple[float, float] = bounded((0.8, 0.95), ge=0, lt=1)
    eps: float = bounded(1e-8, gt=0)
    weight_decay: float = bounded(0.0, ge=0)


@dataclass(frozen=True)
class AdamWHParams(AdamHParams):
    """AdamW with the usual LM-pretraining settings: betas (0.9, 0.95), decoupled weight decay
    0.1."""

    betas: tuple[float, float] = bounded((0.9, 0.95), ge=0, lt=1)
    weight_decay: float = bounded(0.1, ge=0)


@dataclass(frozen=True)
class SGDHParams(HParams):
    """SGD with heavy-ball momentum 0.9 (paper A does not publish its SGD+M settings)."""

    momentum: float = bounded(0.9, ge=0, lt=1)
    nesterov: bool = False
    weight_decay: float = bounded(0.0, ge=0)


@dataclass(frozen=True)
class SignGDHParams(HParams):
    """Sign descent (paper A's Adam with β1 = β2 = 0), optionally on a momentum buffer."""

    momentum: float = bounded(0.0, ge=0, lt=1)
    weight_decay: float = bounded(0.0, ge=0)


@dataclass(frozen=True)
class MuonPEHParams(MuonHParams):
    """Muon orthogonalised by Polar Express (per-step optimal quintics, as the fastest public
    GPT-2 speed runs use) instead of the fixed ns5 quintic."""

    method: str = choice("polar_express", METHODS)


@dataclass(frozen=True)
class TorchMuonHParams(HParams):
    """``torch.optim.Muon`` (Newton–Schulz in bfloat16, Nesterov on), here without weight decay
    like every other kind; ``adjust_lr_fn`` its shape scale."""

    momentum: float = bounded(0.95, ge=0, lt=1)
    nesterov: bool = True
    weight_decay: float = bounded(0.0, ge=0)
    adjust_lr_fn: str = choice("original", ("original", "match_rms_adamw"))


@dataclass(frozen=True)
class LionHParams(HParams):
    """Lion (Chen et al. 2023): the sign of an interpolated momentum; lion-pytorch's betas."""

    betas: tuple[float, float] = bounded((0.9, 0.99), ge=0, lt=1)
    weight_decay: float = bounded(0.0, ge=0)


@dataclass(frozen=True)
class SOAPHParams(HParams):
    """SOAP (Vyas et al. 2024): Adam in the eigenbasis of Shampoo's preconditioner, refreshed
    every ``precondition_frequency`` steps; pytorch-optimizer's betas, no weight decay."""

    betas: tuple[float, float] = bounded((0.95, 0.95), ge=0, lt=1)
    eps: float = bounded(1e-8, gt=0)
    weight_decay: float = bounded(0.0, ge=0)
    precondition_frequency: int = 10


@dataclass(frozen=True)
class KronHParams(HParams):
    """PSGD-Kron (Li 2018; Evan Walters' Kron): a Kronecker-factored preconditioner fitted by
    PSGD, updated with a probability that anneals from 1 to 0.03; pytorch-optimizer's Kron."""

    momentum: float = bounded(0.9, ge=0, lt=1)
    weight_decay: float = bounded(0.0, ge=0)


@dataclass(frozen=True)
class AdEMAMixHParams(HParams):
    """AdEMAMix (Pagliardini et al. 2024): Adam plus a slow EMA (β3) mixed in with weight
    ``alpha``; pytorch-optimizer's defaults."""

    betas: tuple[float, float, float] = bounded((0.9, 0.999, 0.9999), ge=0, lt=1)
    alpha: float = bounded(5.0, ge=0)
    eps: float = bounded(1e-8, gt=0)
    weight_decay: float = bounded(0.0, ge=0)


@dataclass(frozen=True)
class MARSHParams(HParams):
    """MARS (Yuan et al. 2024): variance-reduced AdamW (``gamma`` weighs the gradient
    correction); pytorch-optimizer's defaults, no weight decay."""

    betas: tuple[float, float] = bounded((0.95, 0.99), ge=0, lt=1)
    gamma: float = bounded(0.025, ge=0)
    eps: float = bounded(1e-8, gt=0)
    weight_decay: float = bounded(0.0, ge=0)


@dataclass(frozen=True)
class LibraryFactory:
    """A well-kept library's optimiser class, imported when first built (``package`` names the
    pip package and the install hint; ``needs``: modules it cannot do without, e.g.
    ``opt_einsum``, without which ``torch.einsum`` contracts PSGD-Kron's preconditioner left to
    right through a 16 GiB intermediate)."""

    module: str
    attr: str
    package: str
    needs: tuple[str, ...] = ()

    def __call__(self, params: Any, **kwargs: Any) -> torch.optim.Optimizer:
        try:
            cls = getattr(importlib.import_module(self.module), self.attr)
            for module in self.needs:
                importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError(
                f"{self.module}.{self.attr} needs {exc.name or self.package}; expected it "
                "installed (pip install 'tailmem[bench]')"
            ) from None
        optimizer: torch.optim.Optimizer = cls(params, **kwargs)
        return optimizer


def _muon(params: Any, **kwargs: Any) -> torch.optim.Optimizer:
    """tailmem's Muon; under a process group of several ranks (``torchrun`` + DDP) it shares
    its orthogonalisation across them (``distributed="ddp"``)."""
    from tailmem.optim.muon import Muon

    dist = torch.distributed
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        kwargs.setdefault("distributed", "ddp")
    return Muon(params, **kwargs)


def _signgd(params: Any, **kwargs: Any) -> torch.optim.Optimizer:
    from tailmem.optim.sign import SignGD

    return SignGD(params, **kwargs)


MUON_LAYOUT_KEYS: tuple[str, ...] = ("row_splits", "fan_out_dim", "num_heads", "batch_dims")
"""Per-group options of Muon-like kinds that describe a parameter's matrix layout."""

FAMILIES: dict[str, str] = {
    "orthogonalised": "the update's singular values set to (about) 1: Muon and its variants",
    "whitening": "a preconditioner that whitens the gradient's row and column covariances",
    "sign": "the sign of a momentum, entry by entry",
    "elementwise": "Adam-like: each entry divided by its own second-moment estimate",
    "plain": "the gradient (with momentum) itself",
    "yours": "a user's optimiser, given by import path",
}
"""How the update of each kind is formed (what the tail-learning benchmark compares)."""
ENTRIES, TENSOR, MATRIX = "entries", "tensor", "matrix"
"""What a kind's step of one entry reads (:attr:`OptimizerKind.reads`): that entry's history
alone (Adam, SGD, sign descent); the whole tensor, every dimension alike (a norm, a preconditioner
per dimension: SOAP, PSGD-Kron, MARS's clipped correction); the tensor as one (out, in) matrix
(Muon)."""


@dataclass(frozen=True)
class OptimizerKind:
    """One optimiser kind (see the module docstring).

    ``factory(param_groups, lr=..., **hparams.kwargs())`` builds it. ``matrices_only``: it
    refuses parameters with fewer than two dimensions and vocabulary-shaped ones (routing checks
    this before building). ``layout_keys``: per-group options routing sets from a parameter's
    layout (Muon's ``fan_out_dim`` / ``row_splits``) and that ``role_overrides`` may set.
    ``path``: the import path of a user's factory (None for the built-in kinds). ``family``:
    what kind of update it is (:data:`FAMILIES`), for tables that compare families.
    ``per_member``: it can train an ensemble (``GPT(cfg, members=E)``): each index of a
    parameter's leading member dimension steps as its own parameter would, because the update is
    elementwise or (Muon) told the member dimension through ``batch_dims``. Kinds that mix a
    tensor's entries (whitening, a per-tensor norm, torch's Muon) are refused for ensembles.
    ``twin``: this kind is another kind at a learning rate of its own, with every other
    hyper-parameter the other's (``adam_split``: Adam on the hidden matrices, its rate tuned
    apart from the embedding's, for comparisons with equal tuning freedom). ``code``: the digest
    of a user's factory's code (:func:`tailmem.optim.user_code.code_digest`), which a run's
    record holds, so that changed code is never resumed as the same run. ``reads``: what its
    step of one entry reads (:data:`ENTRIES`, :data:`TENSOR` or :data:`MATRIX`), which decides
    the layouts it can apply (:meth:`unapplied_layout`).
    """

    name: str
    label: str
    factory: Callable[..., torch.optim.Optimizer]
    hparams: type[HParams]
    lr: float
    matrices_only: bool = False
    layout_keys: tuple[str, ...] = ()
    path: str | None = None
    family: str = "yours"
    per_member: bool = False
    twin: str | None = None
    code: str | None = None
    reads: str = MATRIX

    @property
    def applies_any_layout(self) -> bool:
        """Whether every layout steps right: the kind is told it (:attr:`layout_keys`) or its
        step reads each entry alone."""
        return bool(self.layout_keys) or self.reads == ENTRIES

    def unapplied_layout(self, row_splits: tuple[int, ...] | None, fan_out_dim: int) -> str:
        """What of a parameter's layout this kind's step would get wrong, in words ("" when
        nothing): ``row_splits`` blocks fused in one tensor and an output dimension
        ``fan_out_dim`` other than 0 (Hugging Face ``Conv1D`` stores ``(in, out)``).

        A kind with :attr:`layout_keys` is told both; a step that reads each entry alone is
        the same whatever the layout; one that reads the whole tensor, every dimension alike,
        does not see its orientation but mixes fused blocks; one that reads it as a matrix
        (torch's Muon, and a user's optimiser, unknown) depends on both. Routing refuses a kind
        a layout it cannot apply rather than let it step the wrong matrices.
        """
        if self.applies_any_layout:
            return ""
        gaps = []
        if row_splits is not None:
            gaps.append(f"fused blocks of {'+'.join(map(str, row_splits))} rows")
        if fan_out_dim != 0 and self.reads == MATRIX:
            gaps.append(f"its output on dimension {fan_out_dim} (stored (in, out))")
        return " and ".join(gaps)

    def options(self) -> set[str] | None:
        """Names a param group of this kind may set (None: any, a factory taking ``**kwargs``)."""
        if self.path is not None:
            return _signature_names(self.factory, self.path)[0]
        names = {f.name for f in dataclasses.fields(self.hparams)} | {"lr"}
        return names | set(self.layout_keys) | set(self.hparams().kwargs())

    def parse(self, values: Mapping[str, Any], where: str) -> HParams:
        """This kind's hyper-parameters from a mapping (no ``lr``), checked; ``where`` prefixes
        the field names in error messages (``optim.muon.``)."""
        if self.path is not None:
            return FactoryHParams.parse(self.factory, self.path, values, where)
        return from_dict(self.hparams, values, prefix=where)

    def setting(self, lr: float | None = None, hparams: HParams | None = None) -> OptimizerSetting:
        """This kind at ``lr`` (default: its own) with ``hparams`` (default: its defaults)."""
        return OptimizerSetting(self, self.lr if lr is None else lr, hparams or self.hparams())


def check_finite_rate(name: str, lr: float) -> None:
    """Refuse a learning rate that is not a finite number > 0 (``.inf`` passes ``> 0``)."""
    if not math.isfinite(lr):
        raise ConfigError(f"{name}: got {lr!r}; expected a finite learning rate > 0")
    check_range(name, lr, gt=0)


@dataclass(frozen=True)
class OptimizerSetting:
    """A kind ready to build: its learning rate and hyper-parameters (what a run records)."""

    kind: OptimizerKind
    lr: float
    hparams: HParams

    def __post_init__(self) -> None:
        check_finite_rate(f"{self.kind.name}.lr", self.lr)

    def build(self, param_groups: list[dict[str, Any]]) -> torch.optim.Optimizer:
        """The optimiser over ``param_groups``; a value it rejects is one ConfigError line, and
        so is anything a user's factory raises or returns other than an optimiser."""
        kwargs = {"lr": self.lr, **self.hparams.kwargs()}
        if self.kind.path is not None:
            return self._build_users(param_groups, kwargs)
        try:
            return self.kind.factory(param_groups, **kwargs)
        except (ValueError, TypeError) as err:
            raise ConfigError(
                f"{self.kind.name} rejected its hyperparameters {kwargs}: {err}"
            ) from None

    def _build_users(
        self, param_groups: list[dict[str, Any]], kwargs: dict[str, Any]
    ) -> torch.optim.Optimizer:
        """A user's factory called as :meth:`build` says; user code may raise anything."""
        try:
            built = self.kind.factory(param_groups, **kwargs)
        except (Exception, SystemExit) as exc:  # its code, not ours: any failure is its input's
            raise user_code_error(self.kind, f"building it with {kwargs}", exc) from None
        if not isinstance(built, torch.optim.Optimizer):
            raise ConfigError(
                f"optim.{self.kind.name} ({self.kind.path}): the factory returned "
                f"{_shown(built)}; expected a torch.optim.Optimizer"
            )
        return built

    def record(self) -> dict[str, Any]:
        """``{"lr": ..., **hyper-parameters}`` (plus ``factory`` and the digest of its
        ``code`` for a user's kind)."""
        out: dict[str, Any] = {"lr": self.lr, **self.hparams.record()}
        if self.kind.path is None:
            return out
        return {"factory": self.kind.path, "code": self.kind.code, **out}


REGISTRY: dict[str, OptimizerKind] = {
    kind.name: kind
    for kind in (
        OptimizerKind("muon", "Muon", _muon, MuonHParams, lr=0.02, matrices_only=True,
                      layout_keys=MUON_LAYOUT_KEYS, family="orthogonalised", per_member=True),
        OptimizerKind("adam", "Adam", torch.optim.Adam, AdamHParams, lr=3e-3,
                      family="elementwise", per_member=True, reads=ENTRIES),
        OptimizerKind("adam_split", "Adam (own rate)", torch.optim.Adam, AdamHParams, lr=3e-3,
                      family="elementwise", per_member=True, twin="adam", reads=ENTRIES),
        OptimizerKind("sgd", "SGD+M", torch.optim.SGD, SGDHParams, lr=0.1, family="plain",
                      per_member=True, reads=ENTRIES),
        OptimizerKind("adamw", "AdamW", torch.optim.AdamW, AdamWHParams, lr=1e-3,
                      family="elementwise", per_member=True, reads=ENTRIES),
        OptimizerKind("signgd", "SignGD", _signgd, SignGDHParams, lr=1e-3, family="sign",
                      per_member=True, reads=ENTRIES),
        OptimizerKind("normuon", "NorMuon", _muon, NorMuonHParams, lr=0.02, matrices_only=True,
                      layout_keys=MUON_LAYOUT_KEYS, family="orthogonalised", per_member=True),
        OptimizerKind("muon_pe", "Muon (Polar Express)", _muon, MuonPEHParams, lr=0.02,
                      matrices_only=True, layout_keys=MUON_LAYOUT_KEYS, family="orthogonalised",
                      per_member=True),
        OptimizerKind("torch_muon", "torch.optim.Muon", torch.optim.Muon, TorchMuonHParams,
                      lr=0.02, matrices_only=True, family="orthogonalised"),
        OptimizerKind("lion", "Lion", LibraryFactory("lion_pytorch", "Lion", "lion-pytorch"),
                      LionHParams, lr=1e-4, family="sign", per_member=True, reads=ENTRIES),
        OptimizerKind("soap", "SOAP", LibraryFactory("pytorch_optimizer", "SOAP",
                      "pytorch-optimizer"), SOAPHParams, lr=3e-3, family="whitening",
                      reads=TENSOR),
        OptimizerKind("psgd_kron", "PSGD-Kron", LibraryFactory("pytorch_optimizer", "Kron",
                      "pytorch-optimizer", ("opt_einsum",)), KronHParams, lr=1e-3,
                      family="whitening", reads=TENSOR),
        OptimizerKind("ademamix", "AdEMAMix", LibraryFactory("pytorch_optimizer", "AdEMAMix",
                      "pytorch-optimizer"), AdEMAMixHParams, lr=1e-3, family="elementwise",
                      reads=ENTRIES),
        OptimizerKind("mars", "MARS", LibraryFactory("pytorch_optimizer", "MARS",
                      "pytorch-optimizer"), MARSHParams, lr=3e-3, family="elementwise",
                      reads=TENSOR),
    )
}  # fmt: skip
"""Every built-in kind, in the order tables list them."""


def get_kind(name: str, extra: Mapping[str, OptimizerKind] | None = None) -> OptimizerKind:
    """The kind called ``name`` among the registry and ``extra`` (a config's user kinds); an
    unknown name is one ConfigError line listing the known ones."""
    known = {**REGISTRY, **(extra or {})}
    if name not in known:
        raise ConfigError(
            f"unknown optimiser kind {name!r}; expected one of {', '.join(known)} (or your own: "
            f"optim.{name}.factory=package.module:Class)"
        )
    return known[name]


def source(kind: OptimizerKind) -> str:
    """Where ``kind``'s implementation comes from, with the installed version: ``tailmem 0.1.0``,
    ``torch 2.13.0``, ``pytorch-optimizer 4.1.0`` or a user's module."""
    from importlib import metadata

    factory = kind.factory
    if isinstance(factory, LibraryFactory):
        package = factory.package
    elif kind.path is not None:
        return f"{kind.path} (yours)"
    else:
        module = getattr(factory, "__module__", "") or ""
        package = "torch" if module.startswith("torch") else "tailmem"
    try:
        return f"{package} {metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return f"{package} (not installed)"


def kind_order(names: Iterable[str]) -> list[str]:
    """``names`` in registry order, then the user kinds by name."""
    order = list(REGISTRY)
    return sorted(set(names), key=lambda n: (order.index(n) if n in order else len(order), n))


# --------------------------------------------------------------------------- a user's optimiser


def load_factory(path: str) -> Callable[..., torch.optim.Optimizer]:
    """The callable at import path ``package.module:Name`` (one ConfigError line otherwise).

    The current directory is importable, as under ``python -m``: a module or package in the
    folder tailmem is started from is found without ``PYTHONPATH``. Whatever the module raises
    while it is imported (an ImportError, a SyntaxError, a ``sys.exit``) is one line naming it.
    """
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"factory: got {path!r}; expected an import path package.module:Class")
    _import_from_working_directory()
    try:
        target: Any = import_user_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"factory {path!r}: cannot import {module_name!r} ({exc}); expected a module on "
            "the import path (the current directory or PYTHONPATH)"
        ) from None
    except (Exception, SystemExit) as exc:  # the module's own code failed while importing
        raise ConfigError(
            f"factory {path!r}: importing {module_name!r} raised {describe_exception(exc)}; "
            "expected a module that imports cleanly"
        ) from None
    for part in attr.split("."):
        try:
            found = hasattr(target, part)
        except (Exception, SystemExit) as exc:  # a module __getattr__ of the user's
            raise ConfigError(
                f"factory {path!r}: looking up {part!r} raised {describe_exception(exc)}"
            ) from None
        if not found:
            raise ConfigError(f"factory {path!r}: module {module_name!r} has no {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ConfigError(f"factory {path!r}: expected a class or function, got {target!r}")
    return target


def _import_from_working_directory() -> None:
    """Put the current directory first on ``sys.path`` (where ``python -m`` puts it), once; the
    worker processes a study spawns inherit the path."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
        importlib.invalidate_caches()


def user_code_error(kind: OptimizerKind, doing: str, exc: BaseException) -> ConfigError:
    """The one-line refusal of a user's optimiser whose code raised ``exc`` while ``doing``."""
    return ConfigError(
        f"optim.{kind.name} ({kind.path}): {doing} raised {describe_exception(exc)}; expected "
        "an optimiser that builds and steps on the parameters it is given"
    )


def _shown(value: Any) -> str:
    """What a factory returned, for a message: None, or the class of the object."""
    return "None" if value is None else f"an object of class {type(value).__qualname__}"


def _signature_names(factory: Callable[..., Any], path: str) -> tuple[set[str] | None, set[str]]:
    """Keyword names ``factory(params, ...)`` accepts (None: any) and those it requires."""
    accepted: set[str] | None = set()
    required = set()
    for param in _parameters(factory, path, factory.__init__ if inspect.isclass(factory) else None):
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            accepted = None
        elif accepted is not None:
            accepted.add(param.name)
            if param.default is inspect.Parameter.empty:
                required.add(param.name)
    return accepted, required


def _parameters(
    factory: Callable[..., Any], path: str, init: Callable[..., Any] | None
) -> list[inspect.Parameter]:
    """The parameters of ``factory`` (a function), or of a class's constructor ``init``, after
    ``self`` and ``params``; ``*args`` left out."""
    try:
        params = list(inspect.signature(init or factory).parameters.values())
    except (TypeError, ValueError):
        raise ConfigError(f"factory {path!r}: its signature cannot be read") from None
    params = params[2:] if init is not None else params[1:]  # self, params
    return [p for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL]


def named_parameters(factory: Callable[..., Any], path: str) -> set[str]:
    """Every hyper-parameter ``factory`` names: its own keyword parameters and, for a class whose
    constructor passes ``**kwargs`` on, those of its base classes' constructors, up to
    ``torch.optim.Optimizer`` (whose ``defaults`` takes anything). A name outside this set that
    a ``**kwargs`` constructor accepts may be silently ignored (:mod:`tailmem.optim.trial`)."""
    if not inspect.isclass(factory):
        return {p.name for p in _parameters(factory, path, None) if p.kind is not p.VAR_KEYWORD}
    names: set[str] = set()
    for klass in factory.__mro__:
        if klass in (torch.optim.Optimizer, object):
            break
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = _parameters(factory, path, init)
        own = {p.name for p in params if p.kind is not p.VAR_KEYWORD}
        names |= own if klass is factory else own - {"defaults"}  # a base's group defaults
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break  # nothing is passed on further
    return names


def _non_finite(value: Any) -> bool:
    """Whether ``value`` holds a NaN or infinite float at any depth of lists and mappings."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(_non_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_non_finite(v) for v in value)
    return False


def _frozen(value: Any) -> Any:
    """``value`` with every list, at any depth, a tuple (what the constructor receives)."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, Mapping):
        return {k: _frozen(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class FactoryHParams(HParams):
    """A user optimiser's hyper-parameters as given, checked against its factory's signature."""

    values: tuple[tuple[str, Any], ...] = ()

    def kwargs(self) -> dict[str, Any]:
        return dict(self.values)

    def record(self) -> dict[str, Any]:
        return {name: _plain(value) for name, value in self.values}

    @staticmethod
    def parse(
        factory: Callable[..., Any], path: str, values: Mapping[str, Any], where: str
    ) -> FactoryHParams:
        """Refuse a name ``factory`` does not take, a required one left out and a non-finite
        number at any depth; lists become tuples. (A name only ``**kwargs`` takes is checked
        when the preflight steps the optimiser: :mod:`tailmem.optim.trial`.)"""
        accepted, required = _signature_names(factory, path)
        if accepted is not None and "lr" not in accepted:
            raise ConfigError(
                f"{where}factory {path!r} takes no lr; expected an optimiser whose learning rate "
                "the schedule can set"
            )
        for name, value in values.items():
            if accepted is not None and name not in accepted:
                raise ConfigError(
                    f"unknown hyperparameter '{where}{name}' of {path}; expected one of: "
                    f"{', '.join(sorted(accepted))}"
                )
            if _non_finite(value):
                raise ConfigError(f"{where}{name}: got {value!r}; expected finite numbers")
        missing = sorted(required - set(values) - {"lr"})
        if missing:
            raise ConfigError(f"{where}{missing[0]}: {path} requires it; expected a value")
        return FactoryHParams(tuple((name, _frozen(v)) for name, v in sorted(values.items())))


def user_kind(name: str, path: str, lr: float) -> OptimizerKind:
    """The kind ``name`` built by the factory at ``path`` (``package.module:Class``), with
    default learning rate ``lr``. A registered name cannot be reused."""
    check_folder_name(f"optim.{name}", name, KIND)
    taken = {known.casefold(): known for known in REGISTRY}
    if name.casefold() in taken:
        same = "" if taken[name.casefold()] == name else f" (as {taken[name.casefold()]!r}, "
        same += "" if not same else "on a disk that ignores letter case)"
        raise ConfigError(
            f"optim.{name}.factory: {name!r} is a built-in optimiser kind{same}; expected a new "
            "name for your own"
        )
    try:
        factory = load_factory(path)
        _signature_names(factory, path)
    except ConfigError as exc:
        raise ConfigError(f"optim.{name}.{exc}") from None
    return OptimizerKind(name, name, factory, FactoryHParams, lr=lr, path=path,
                         code=code_digest(path))  # fmt: skip

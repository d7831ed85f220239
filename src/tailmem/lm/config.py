"""The config tree every language-model study shares.

``model`` (which GPT), ``train`` (how every run trains: steps, batch, schedule, cadence, device,
threads), ``optim`` (each optimiser kind's learning rate — one number or a grid to sweep — and
hyper-parameters, :class:`OptimSection`), ``seeds`` (how many, from ``seed``) and ``workers``
(runs trained at once) have the same keys in every LM study; a study adds its own ``data``
section, its arms (:meth:`LMConfig.run_arms`) and study fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from tailmem.claims.core import Scale
from tailmem.data.bios import LATER_FIELDS as BIOS_LATER_FIELDS
from tailmem.errors import ConfigError
from tailmem.lm.arms import Arm
from tailmem.lm.store import StoredRate, load_store, missing_rates, stored_choices
from tailmem.lm.tuning import TuningSection
from tailmem.models.gpt import LATER_FIELDS, SIZES, GPTConfig, gated_d_ff, gpt_config
from tailmem.names import check_distinct
from tailmem.optim.registry import (
    HParams,
    OptimizerKind,
    OptimizerSetting,
    check_finite_rate,
    get_kind,
    kind_order,
    user_kind,
)
from tailmem.train import TrainConfig
from tailmem.train.precision import resolve_precision

if TYPE_CHECKING:
    from tailmem.lm.entries import Entry


@dataclass(frozen=True)
class ModelSection:
    """The GPT: a named size of :data:`tailmem.models.gpt.SIZES`, with optional overrides.

    ``d_ff`` is the plain-FFN width; a gated FFN gets :func:`~tailmem.models.gpt.gated_d_ff` of
    it (same parameter count). ``vocab_size`` comes from the data, the FFN type from the study
    and ``max_seq_len`` from ``train.seq_len``. ``tie_weights``: the LM head shares the token
    embedding's matrix (one parameter, role ``embed``, so it is trained once, by the optimiser
    of the embedding). ``pos_encoding``: ``rope`` (rotary, the paper's), ``learned`` (an
    absolute position embedding added to the token embedding, role ``embed``) or ``none``
    (NoPE). ``norm``: ``rms`` (RMSNorm) or ``layer`` (LayerNorm); ``residual_init``: ``scaled``
    (O and W_out at init_std/√(2 n_layer)) or ``plain`` (every matrix at init_std);
    ``norm_eps``: the ε of every norm (null: the GPT's default, 1e-6; torch's LayerNorm uses
    1e-5).
    """

    size: str = "cpu-small"
    n_layer: int | None = None
    n_head: int | None = None
    d_model: int | None = None
    d_ff: int | None = None
    qk_norm: bool = True
    init_std: float = 0.02
    dropout: float = 0.0
    tie_weights: bool = False
    pos_encoding: Literal["rope", "learned", "none"] = "rope"
    norm: Literal["rms", "layer"] = "rms"
    residual_init: Literal["scaled", "plain"] = "scaled"
    norm_eps: float | None = None

    def validate(self) -> None:
        if self.size not in SIZES:
            raise ConfigError(f"model.size: got {self.size!r}; expected one of {', '.join(SIZES)}")
        try:
            self.build(1024, "plain", 64)
        except ConfigError as exc:
            raise ConfigError(f"model: {exc}") from None

    def scale(self, m: int | None = None) -> Scale:
        """Layers × width of the model this section builds (with ``m``, the QA's rarest group),
        as a claim compares it with the model a published number is of."""
        built = self.build(1024, "plain", 64)
        return Scale(built.n_layer, built.d_model, m)

    def build(self, vocab_size: int, ffn: str, seq_len: int) -> GPTConfig:
        """The :class:`GPTConfig` of this section for a vocabulary, FFN type and length."""
        fields: dict[str, Any] = {
            name: getattr(self, name)
            for name in ("n_layer", "n_head", "d_model")
            if getattr(self, name) is not None
        }
        d_ff = self.d_ff if self.d_ff is not None else SIZES[self.size]["d_ff"]
        return gpt_config(
            self.size,
            vocab_size=vocab_size,
            ffn=ffn,
            d_ff=gated_d_ff(d_ff) if ffn == "gated" else d_ff,
            max_seq_len=seq_len,
            qk_norm=self.qk_norm,
            init_std=self.init_std,
            dropout=self.dropout,
            tie_weights=self.tie_weights,
            pos_encoding=self.pos_encoding,
            norm=self.norm,
            residual_init=self.residual_init,
            **fields,
            **({} if self.norm_eps is None else {"norm_eps": self.norm_eps}),
        )


TRAIN_RECORD = ("steps", "batch_size", "seq_len", "grad_accum", "grad_clip", "schedule",
                "warmup_steps", "decay_frac", "min_lr_frac", "eval_every", "eval_batch_size",
                "log_every", "ckpt_every", "device")  # fmt: skip
"""The ``train`` fields a tuning problem's record holds (:meth:`LMConfig.tuning_record`): those
a run's spec holds, less how its arithmetic is carried out — not the threads, the precision or
``compile`` (like the host, they change a trial's rounding, not the problem it solves: a rate
tuned in fp32 serves a bf16 run, which is how the cpu verdicts are checked against a second
reduction order), the checkpoints kept or how metrics are reported."""

RECORD_LATER: dict[str, dict[str, object]] = {
    "model": {**LATER_FIELDS, "norm_eps": None},
    "data": dict(BIOS_LATER_FIELDS),
    "tuning": {"rest_lr": None},
    "": {"epochs": None},
}
"""Per section of a tuning problem's record (``""``: the study's own fields), the fields added
after problems were first recorded, with their defaults: left out where at their default, so a
rate stored before a field existed keeps its key (:meth:`LMConfig.tuning_record`)."""

LOOP_FIELDS = ("schedule", "decay_frac", "min_lr_frac", "grad_clip", "grad_accum", "log_every",
               "eval_every", "ckpt_every", "precision", "compile", "device")  # fmt: skip
"""The :class:`~tailmem.train.TrainConfig` fields a ``train`` section passes on as they are."""


@dataclass(frozen=True)
class TrainSection:
    """How every run of a study trains (the fields of :class:`tailmem.train.TrainConfig`, same
    meaning, plus the batch shape and where it runs).

    ``batch_size`` rows of ``seq_len`` tokens per update; ``eval_batch_size`` rows per evaluation
    batch. A run shorter than ``steps`` (an LR-sweep run) scales ``warmup_steps`` with its length.
    ``keep_checkpoints``: after a study, keep the final checkpoint of ``all`` its runs, of the
    ``first_seed`` run of each arm (the one ``tailmem diagnose`` reads), or ``none``.
    ``threads``: torch threads of each worker (null: torch's default). ``precision``: ``fp32``,
    ``bf16`` (forward and loss autocast to bfloat16, fp32 weights and optimiser state) or
    ``auto`` (bf16 where this machine's bfloat16 products are clearly faster, measured once per
    machine: :mod:`tailmem.train.precision`); every run records the resolved one. ``compile``:
    train through ``torch.compile`` (:func:`tailmem.train.loop.compiled_loss`). ``log_to``:
    trackers that get every metrics line too, ``tensorboard`` and/or ``wandb``
    (:mod:`tailmem.train.track`; how runs are watched, not what they compute: no run's digest
    holds it).
    """

    steps: int = 400
    batch_size: int = 16
    seq_len: int = 128
    grad_accum: int = 1
    grad_clip: float | None = 1.0
    schedule: str = "cosine"
    warmup_steps: int = 20
    decay_frac: float = 0.2
    min_lr_frac: float = 0.0
    eval_every: int = 50
    eval_batch_size: int = 16
    log_every: int = 10
    ckpt_every: int = 100
    keep_checkpoints: Literal["all", "first_seed", "none"] = "all"
    device: str = "cpu"
    precision: Literal["auto", "fp32", "bf16"] = "fp32"
    compile: bool = False
    threads: int | None = 1
    log_to: list[Literal["tensorboard", "wandb"]] = field(default_factory=list)

    def validate(self) -> None:
        for name in ("steps", "batch_size", "seq_len", "eval_batch_size", "grad_accum"):
            if getattr(self, name) < 1:
                raise ConfigError(f"train.{name}: got {getattr(self, name)}; expected >= 1")
        if self.batch_size % self.grad_accum:
            raise ConfigError(
                f"train.grad_accum: got {self.grad_accum}; expected a divisor of train.batch_size "
                f"({self.batch_size}): each update splits the batch into that many micro-batches"
            )
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"train.threads: got {self.threads}; expected null or >= 1")
        try:
            self.loop_config(self.steps, seed=0).validate()
        except ConfigError as exc:
            raise ConfigError(f"train.{exc}") from None

    def loop_config(
        self, steps: int, seed: int, progress: bool = True, resolve: bool = False
    ) -> TrainConfig:
        """The loop's config of one run of ``steps`` steps with ``seed``; with ``resolve`` its
        precision is the one ``auto`` resolves to on this machine (what a run's spec records;
        without, ``auto`` stays, for checking a config without measuring the machine)."""
        same = {name: getattr(self, name) for name in LOOP_FIELDS}
        if resolve:
            same["precision"] = resolve_precision(self.precision, self.device)
        warmup = round(self.warmup_steps * steps / self.steps)
        return TrainConfig(
            steps=steps, warmup_steps=warmup, keep_ckpts=1, seed=seed, progress=progress,
            log_to=tuple(self.log_to), **same,
        )  # fmt: skip


Rate = float | tuple[float, ...]
"""A kind's learning rate: one number, or a grid of candidates the study sweeps."""


@dataclass(frozen=True)
class KindSection:
    """``optim.<kind>``: an optimiser kind of :data:`~tailmem.optim.registry.REGISTRY` (or a
    user's, ``factory: package.module:Class``), its learning rate — one number, or a grid the
    study sweeps (a list) — and its other hyper-parameters, typed by the kind."""

    kind: OptimizerKind
    lr: Rate
    hparams: HParams

    @property
    def swept(self) -> bool:
        """The rate was given as a list (a grid)."""
        return isinstance(self.lr, tuple)

    @property
    def tuned(self) -> bool:
        """The grid has candidates to choose between (a one-point list is a set rate)."""
        return len(self.grid) > 1

    @property
    def grid(self) -> tuple[float, ...]:
        """The candidate rates (one, when the rate is a number)."""
        return self.lr if isinstance(self.lr, tuple) else (self.lr,)

    def at(self, lr: float) -> OptimizerSetting:
        """This kind at learning rate ``lr``."""
        return OptimizerSetting(self.kind, lr, self.hparams)

    def to_config(self) -> dict[str, Any]:
        """The section as config (a twin kind's: its rate alone; its twin's section holds the
        rest)."""
        lr = list(self.lr) if isinstance(self.lr, tuple) else self.lr
        if self.kind.twin is not None:
            return {"lr": lr}
        factory = {} if self.kind.path is None else {"factory": self.kind.path}
        return {**factory, "lr": lr, **self.hparams.record()}


def _rate(value: Any, name: str) -> Rate:
    """A learning rate or a grid of distinct ones, each finite and > 0."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ConfigError(f"{name}: got []; expected a learning rate or a list of them")
    for item in values:
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            raise ConfigError(f"{name}: got {value!r}; expected a number or a list of numbers")
        check_finite_rate(name, float(item))
    if len(set(values)) != len(values):
        raise ConfigError(f"{name}: got {value!r}; expected each learning rate at most once")
    return tuple(float(v) for v in values) if isinstance(value, list) else float(value)


class OptimSection(Mapping[str, KindSection]):
    """``optim``: one :class:`KindSection` per optimiser kind, by name::

        optim:
          muon: {lr: [0.01, 0.02, 0.05], momentum: 0.95}    # a grid: swept
          adam: {lr: 3.0e-3, betas: [0.8, 0.95]}           # one number: fixed
          mine: {factory: mypkg.opt:Lion, lr: 1.0e-4, weight_decay: 0.1}

    A registered kind's fields not given keep the registry's defaults; a user's kind needs
    ``factory`` and ``lr``, and its other keys must be arguments its factory accepts. A twin
    kind (``adam_split``: Adam at a rate of its own) takes only ``lr``: every other
    hyper-parameter is its twin's (``optim.adam``'s), so the two differ in the rate alone.
    Every kind an arm uses gets a section (:meth:`with_kinds`), so the resolved config shows
    what each run trains with.
    """

    def __init__(self, sections: Mapping[str, KindSection] | None = None) -> None:
        self._sections = dict(sections or {})

    def __getitem__(self, name: str) -> KindSection:
        return self._sections[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._sections)

    def __len__(self) -> int:
        return len(self._sections)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OptimSection) and other.to_config() == self.to_config()

    def __repr__(self) -> str:
        return f"OptimSection({self.to_config()!r})"

    @classmethod
    def defaults(cls, *names: str) -> OptimSection:
        """The registry's defaults of the kinds ``names``."""
        return cls().with_kinds(names)

    @classmethod
    def from_config(cls, value: Any, name: str) -> OptimSection:
        """Parse ``optim`` (see the class docstring); one ConfigError line per problem."""
        if not isinstance(value, Mapping):
            raise ConfigError(f"{name}: got {value!r}; expected a mapping of optimiser kinds")
        sections = {}
        for kind_name, raw in value.items():
            where = f"{name}.{kind_name}"
            if not isinstance(raw, Mapping):
                raise ConfigError(f"{where}: got {raw!r}; expected a mapping of hyperparameters")
            given = dict(raw)
            path = given.pop("factory", None)
            if path is not None:
                if "lr" not in given:
                    raise ConfigError(f"{where}.lr: expected a learning rate for your optimiser")
                if not isinstance(path, str):
                    raise ConfigError(f"{where}.factory: got {path!r}; expected an import path")
                kind = user_kind(str(kind_name), path, lr=1.0)
            else:
                kind = get_kind(str(kind_name))
            lr = _rate(given.pop("lr"), f"{where}.lr") if "lr" in given else kind.lr
            if kind.twin is not None and given:
                key = next(iter(given))
                raise ConfigError(
                    f"{where}.{key}: {kind_name} is {kind.twin} at a learning rate of its own and "
                    f"takes only lr; expected optim.{kind.twin}.{key} (it sets both)"
                )
            hparams = kind.parse(given, f"{where}.")
            sections[str(kind_name)] = KindSection(kind, lr, hparams)
        check_distinct(name, sections)
        return cls(sections)._twins_synced()

    def _twins_synced(self) -> OptimSection:
        """Every twin kind's hyper-parameters set to its twin's (the registry's defaults when
        the twin has no section)."""
        sections = dict(self._sections)
        for name, section in sections.items():
            twin = section.kind.twin
            if twin is not None:
                source = sections.get(twin)
                hparams = source.hparams if source is not None else get_kind(twin).hparams()
                sections[name] = KindSection(section.kind, section.lr, hparams)
        return OptimSection(sections)

    def to_config(self) -> dict[str, Any]:
        return {name: section.to_config() for name, section in self._sections.items()}

    def kinds(self) -> dict[str, OptimizerKind]:
        """The user kinds this section defines (recipes may name them besides the registry)."""
        return {n: s.kind for n, s in self._sections.items() if s.kind.path is not None}

    def updated(self, other: OptimSection) -> OptimSection:
        """This section with every kind of ``other`` taking ``other``'s section."""
        return OptimSection({**self._sections, **other._sections})._twins_synced()

    def with_rates(self, rates: Mapping[str, float | list[float]]) -> OptimSection:
        """This section with each kind of ``rates`` at that rate or grid (checked as
        ``optim.<kind>.lr`` is; a kind without a section gets the registry's defaults)."""
        sections = dict(self.with_kinds(rates)._sections)
        for name, lr in rates.items():
            rate = _rate(lr, f"optim.{name}.lr")
            sections[name] = replace(sections[name], lr=rate)
        return OptimSection(sections)  # with_kinds synced the twins; a rate changes no hparam

    def with_kinds(self, names: Iterable[str]) -> OptimSection:
        """This section plus the registry's defaults for every kind of ``names`` it lacks."""
        sections = dict(self._sections)
        for name in names:
            if name not in sections:
                kind = get_kind(name, self.kinds())
                sections[name] = KindSection(kind, kind.lr, kind.hparams())
        return OptimSection(sections)._twins_synced()


L = TypeVar("L", bound="LMConfig")


@dataclass(frozen=True)
class LMConfig:
    """What every LM study config has. ``seed`` .. ``seed + seeds - 1`` are the seeds (weights
    and data order). ``workers`` runs train at once, each in its own process with
    ``train.threads`` threads (1: one after another in this process; under torchrun every rank
    trains each run together, one at a time)."""

    seed: int = 0
    seeds: int = 1
    workers: int = 2
    model: ModelSection = field(default_factory=ModelSection)
    train: TrainSection = field(default_factory=TrainSection)
    optim: OptimSection = field(default_factory=OptimSection)
    tuning: TuningSection = field(default_factory=TuningSection)

    def validate(self) -> None:
        """Check the shared fields (only checks: :meth:`normalized` gives every optimiser kind
        the arms use its section)."""
        if self.seeds < 1:
            raise ConfigError(f"seeds: got {self.seeds}; expected >= 1")
        self.tuning.check(self.tuning_scores(), self.seeds)
        if self.workers < 1:
            raise ConfigError(f"workers: got {self.workers}; expected >= 1")
        missing = [kind for arm in self.run_arms() for kind in arm.kinds if kind not in self.optim]
        if missing:
            raise ConfigError(
                f"optim: no section for {', '.join(missing)}; expected the normal form "
                "(normalized()), which gives every kind the arms use a section"
            )

    def normalized(self: L) -> L:
        """This config with a section for every optimiser kind its arms use (the registry's
        defaults where ``optim`` gives none), so the resolved config shows what each run
        trains with; an arm's kind that is neither registered nor defined is refused."""
        used = []
        for arm in self.run_arms():
            for kind in arm.kinds:
                try:
                    get_kind(kind, self.optim.kinds())
                except ConfigError as exc:
                    raise ConfigError(f"arms: arm {arm.name!r}: {exc}") from None
                used.append(kind)
        return replace(self, optim=self.optim.with_kinds(kind_order(used)))

    def run_arms(self) -> list[Arm]:
        """The arms this config trains (every study defines its own)."""
        return []

    def tuning_scores(self) -> dict[str, str]:
        """The scores a sweep of this study may be ranked by (name → what it is; the first
        is the default). A study that sweeps learning rates defines its own."""
        return {"none": "this study tunes no learning rate"}

    def entries(self) -> list[Entry]:
        """The study's plan entries (a study that trains defines its own)."""
        return []

    def tuning_record(self) -> dict[str, Any]:
        """Every field that may determine a tuning trial's numbers: the rate store's problem
        record (:mod:`tailmem.lm.store`). Left out: the evaluation seed count, the arms (each
        entry's own recipe and borrowed rates enter its key), workers, threads, checkpoints
        kept, the note and where the tuning's rates come from; a study drops its own output
        fields too."""
        skip = {"seeds", "workers", "arms", "note", "cache_dir"}
        out: dict[str, Any] = {}
        for spec in fields(self):
            if spec.name in skip:
                continue
            value = getattr(self, spec.name)
            if isinstance(value, OptimSection):
                value = value.to_config()
            elif is_dataclass(value) and not isinstance(value, type):
                value = asdict(value)
            out[spec.name] = value
        out["train"] = {k: v for k, v in out["train"].items() if k in TRAIN_RECORD}
        out["tuning"] = {k: v for k, v in out["tuning"].items()
                         if k not in ("rates", "store", "only")}  # fmt: skip
        for section, later in RECORD_LATER.items():  # a problem recorded before they existed
            found = out.get(section) if section else out
            for name, default in later.items():
                if isinstance(found, dict) and name in found and found[name] == default:
                    del found[name]
        return out

    def stored_rates(self) -> dict[tuple[str, str], StoredRate]:
        """With ``tuning.rates: stored``, every tuned entry's stored rate (refused in one line
        when one is missing, before anything is written); with ``fill``, those the store holds
        (the others tune in the run); else none."""
        if self.tuning.rates == "sweep":
            return {}
        store = load_store(self.tuning.store)
        found, missing = stored_choices(self.entries(), self.tuning_record(), store)
        if missing and self.tuning.rates == "stored":
            raise missing_rates(missing, self.tuning.store or "the package's rate store")
        return found

    def fixed_rates(self, why: str) -> dict[str, float]:
        """Every kind's learning rate, for a study that sweeps none (``why`` says so in the
        refusal of a grid)."""
        for name, section in self.optim.items():
            if section.swept:
                raise ConfigError(
                    f"optim.{name}.lr: got a list {list(section.grid)}; expected one number ({why})"
                )
        return {name: section.grid[0] for name, section in self.optim.items()}

    def check_overrides(self, keys: Sequence[str]) -> None:
        """Refuse a key the user set that would reach no run: an ``optim.<kind>`` that no arm
        uses (called by :func:`tailmem.config.load_config` with the override keys)."""
        used = {kind for arm in self.run_arms() for kind in arm.kinds}
        for key in keys:
            parts = key.split(".")
            if parts[0] == "optim" and len(parts) > 1 and parts[1] not in used:
                raise ConfigError(
                    f"{key}: no arm of this run uses {parts[1]} (they use "
                    f"{', '.join(kind_order(used))}); expected an optimiser an arm uses, or an "
                    f"arm that uses it, e.g. arms=[..., '{parts[1]}:q,k,v,o,w_in,w_gate,w_out "
                    "adam:*']"
                )

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seed, self.seed + self.seeds))

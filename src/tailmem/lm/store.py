"""Chosen learning rates kept with their provenance, so a preset evaluates fresh seeds at them.

A *tuning problem* is identified by one digest (:func:`tuning_key`): the study's *problem
record* — every config field that determines a trial's numbers (model, training, data, the
hyper-parameters of the optimisers the entry trains, the tuning section; each study's
``tuning_record``: not the evaluation seed count, workers, threads or output fields, nor the
sections of optimisers only other arms train) — and the entry's own FFN type,
recipe, sweep (grid, tuning seeds, length, score, widening rule), set rates and borrowed rates.
Change anything that would change a trial's numbers and the key changes, so a stored rate is
only ever used for the problem it was tuned on; :func:`stored_choices` finds every entry's in
the order the entries borrow from each other (no data need be built: a preset's missing rates
are refused before anything is written). A :class:`StoredRate` holds the choice, every trial's
score and where it came from (commit, tailmem version, date, command).

The package's store is ``configs/tuned_rates.json`` (:data:`PACKAGE_STORE`); a study reads it
with ``tuning.rates: stored`` (or another file: ``tuning.store``), and ``tailmem tune`` writes
one, which ``--store`` merges into the package's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tailmem.atomic import atomic_write_text
from tailmem.errors import ConfigError, DataError
from tailmem.optim.registry import REGISTRY
from tailmem.provenance import config_digest

if TYPE_CHECKING:
    from tailmem.lm.entries import Entry, EntryId

PACKAGE_STORE = Path(__file__).resolve().parents[1] / "configs" / "tuned_rates.json"
"""The rates tailmem's presets evaluate at (``tuning.rates: stored``)."""


def tuning_key(problem: Mapping[str, Any], entry: Entry, borrowed: Mapping[str, float]) -> str:
    """The digest of one entry's tuning problem (module docstring); ``borrowed`` holds the
    rates its borrowed kinds take (the lenders' choices). Of the problem's ``optim`` section
    only the kinds the entry trains enter (and the twins whose hyper-parameters they share):
    another arm's optimiser changes none of this entry's trials, so it leaves its key alone."""
    sweep = None if entry.sweep is None else asdict(entry.sweep)
    record = {
        "problem": _trained_problem(problem, entry.arm.kinds),
        "ffn": entry.ffn,
        "recipe": entry.arm.recipe,
        "sweep": sweep,
        "fixed": dict(entry.rates.fixed),
        "swept": list(entry.rates.swept),
        "base": dict(entry.rates.base),
        "borrowed": dict(sorted(borrowed.items())),
    }
    return config_digest("tuning", record)


def _trained_problem(problem: Mapping[str, Any], kinds: Iterable[str]) -> dict[str, Any]:
    """``problem`` with its ``optim`` section cut to ``kinds`` and their twins."""
    optim = problem.get("optim")
    if not isinstance(optim, Mapping):
        return dict(problem)
    needed = set(kinds) | {REGISTRY[k].twin for k in kinds if k in REGISTRY} - {None}
    return {**problem, "optim": {k: v for k, v in optim.items() if k in needed}}


def stored_choices(
    entries: Sequence[Entry], problem: Mapping[str, Any], store: Mapping[str, StoredRate]
) -> tuple[dict[EntryId, StoredRate], dict[EntryId, str]]:
    """The stored rate of every entry that tunes, and the keys of those with none stored (by
    entry). Entries are resolved in borrowing order: an entry's key holds its lenders' rates,
    which are their stored choices (or their set rates); an entry whose lender has no stored
    rate is missing too."""
    found: dict[EntryId, StoredRate] = {}
    missing: dict[EntryId, str] = {}
    rates: dict[tuple[str, str], dict[str, float]] = {}  # (ffn, arm) -> its chosen rates
    pending = list(entries)
    while pending:
        ready = [e for e in pending if all((e.ffn, arm) in rates for arm in e.rates.lenders)]
        if not ready:  # a lender has no rate: everything waiting on it is missing too
            missing |= {e.id: "" for e in pending}
            break
        for entry in ready:
            pending.remove(entry)
            chosen = {arm: rates[entry.ffn, arm] for arm in entry.rates.lenders}
            borrowed = {k: chosen[arm][theirs] for k, (arm, theirs) in entry.rates.borrowed.items()}
            if entry.sweep is None:
                rates[entry.id] = entry.rates.at(1.0, chosen)
                continue
            key = tuning_key(problem, entry, borrowed)
            stored = store.get(key)
            if stored is None:
                missing[entry.id] = key
                continue
            found[entry.id] = stored
            rates[entry.id] = entry.rates.at(stored.point, chosen)
    return found, missing


@dataclass(frozen=True)
class StoredTrial:
    """One trial of a stored tuning: the candidate point, tuning seed and score (None:
    failed)."""

    point: float
    seed: int
    score: float | None


@dataclass(frozen=True)
class StoredRate:
    """A tuned entry's choice and its provenance (module docstring): ``point`` is the chosen
    sweep point, ``lrs`` every kind's rate at it, ``edge`` where it sat among the points
    tried, ``score`` the score's name, ``trials`` every trial with its score, ``budget`` the
    sweep's trial budget."""

    key: str
    study: str
    preset: str
    ffn: str
    arm: str
    point: float
    lrs: Mapping[str, float]
    edge: Literal["lowest", "highest"] | None
    score: str
    trials: tuple[StoredTrial, ...]
    budget: int
    commit: str | None
    version: str
    date: str
    command: str

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["lrs"] = dict(self.lrs)
        out["trials"] = [asdict(t) for t in self.trials]
        return out

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> StoredRate:
        values = dict(data)
        values["trials"] = tuple(StoredTrial(**t) for t in values["trials"])
        values["lrs"] = {str(k): float(v) for k, v in values["lrs"].items()}
        return StoredRate(**values)


def load_store(path: Path | str | None = None) -> dict[str, StoredRate]:
    """The stored rates by key (the package's store when ``path`` is None; an absent package
    store is empty). A named file that is missing or damaged is one :class:`DataError`."""
    where = Path(path) if path is not None else PACKAGE_STORE
    if not where.is_file():
        if path is None:
            return {}
        raise DataError(
            f"tuning.store: {where} does not exist; expected a tuned_rates.json "
            "written by `tailmem tune`"
        )
    try:
        data = json.loads(where.read_text())
        return {key: StoredRate.from_json(entry) for key, entry in data["rates"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        problem = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise DataError(
            f"{where}: not a store of tuned rates ({problem}); expected the file `tailmem tune` "
            "writes"
        ) from None


def write_store(path: Path | str, rates: Iterable[StoredRate], merge: bool = True) -> int:
    """Write ``rates`` to the store at ``path`` (atomically), merged into what it holds when
    ``merge``; returns how many entries it holds. Read, merge and write happen under a lock of
    the store's folder, so two writers at once both keep their entries."""
    where = Path(path)
    with _locked(where.parent):
        held = load_store(where) if merge and where.is_file() else {}
        held |= {rate.key: rate for rate in rates}
        atomic_write_text(where, json.dumps(store_body(held.values()), indent=1) + "\n")
    return len(held)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``folder`` for the block, waiting for another holder (a
    store is replaced by a rename, so its folder, not the file, is what stays put)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def check_writable(path: Path) -> None:
    """Refuse, before any trial trains, a store ``--store`` cannot merge into: a damaged file
    (:func:`load_store`'s line) or one whose folder takes no new file (the write is a rename)."""
    if path.is_file():
        load_store(path)
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".probe-"):
            pass
        if path.is_file():
            with open(path, "ab"):
                pass
    except OSError as exc:
        raise DataError(
            f"--store: {path} cannot be written ({exc.strerror or type(exc).__name__}); "
            "expected a writable package store, or tailmem tune without --store (its choices "
            "stay in the run folder's tuned_rates.json)"
        ) from None


def store_body(rates: Iterable[StoredRate]) -> dict[str, object]:
    """The JSON of a store holding ``rates`` (sorted by key)."""
    held = {rate.key: rate for rate in rates}
    return {
        "note": "learning rates chosen by `tailmem tune`, keyed by tuning problem "
        "(tailmem.lm.store)",
        "rates": {k: r.to_json() for k, r in sorted(held.items())},
    }


def missing_rates(missing: Iterable[tuple[str, str]], where: str) -> ConfigError:
    """The refusal of ``tuning.rates: stored`` when entries (FFN, arm) have no stored rate."""
    names = ", ".join(f"{ffn}/{arm}" for ffn, arm in missing)
    return ConfigError(
        f"tuning.rates: stored, but {where} holds no rate tuned for exactly this config for "
        f"{names}; expected tuning.rates=sweep (tune in this run) or fill (tune only those), "
        "or `tailmem tune --missing` with the same config first: with --store it fills the "
        "package's store, without it set tuning.store=OUT/tuned_rates.json"
    )


STORE_NAME = "tuned_rates.json"
"""What a run that tuned writes its choices to (in its folder; grid points in theirs)."""


def gather(root: Path) -> list[StoredRate]:
    """Every choice written under ``root`` (``tuned_rates.json`` of the run and of its grid
    points), merged (the run's own last). It only reads: a run writes the merged store through
    its outputs before it completes, so a finished folder is never changed after the fact."""
    found: dict[str, StoredRate] = {}
    for path in sorted(Path(root).rglob(STORE_NAME)):
        if path.parent != Path(root):
            found |= load_store(path)
    top = Path(root) / STORE_NAME
    if top.is_file():
        found |= load_store(top)
    return list(found.values())

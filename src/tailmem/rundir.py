"""Run directories: the only hand-off between an experiment and the report.

A run directory holds ``config.yaml`` (the full config plus the environment that produced it),
the experiment's outputs (``results.json``, CSVs, figures, ``claims.json``) and, once the
experiment has finished, ``COMPLETE``. Every write is atomic (:mod:`tailmem.atomic`: temp file in
the same folder, then ``os.replace``) so an interrupted run never leaves a half-written file
behind; ``config.yaml`` records the environment (:mod:`tailmem.provenance`).

Every folder a command writes records what it is and what was written into it, in
``.tailmem.json`` (:data:`MANIFEST`): its kind — a *run* folder (``tailmem run``, and each
experiment of a results folder), a *results* folder (``tailmem reproduce``) or a *diagnose*
folder (``tailmem diagnose --out``) — and, for every top-level file or folder a command wrote,
which command wrote it. A :class:`RunDir` records each file it writes before writing it (so a
killed run leaves a record of it too); for a command that writes otherwise (``tailmem
report``'s pages, ``reproduce``'s report), :func:`claim` records whatever its block created or
replaced. Every sub-folder of a run folder counts as the run's (its sub-runs and data caches,
made by code that writes by path), as do its ``progress.json`` and COMPLETE. A folder from
before these records is recognised by its files (``config.yaml``: a run; sub-folders holding
one: a results folder).

``COMPLETE`` lists the top-level files the run itself wrote, with their SHA-256 — never a file
another command or a person put there; a run counts as complete only while every listed file
exists with that hash. ``--force`` removes what tailmem wrote (:meth:`RunDir.clear`) and nothing
else. One process at a time writes a folder: :meth:`RunDir.lock` takes an advisory ``flock`` on
``.lock``; :func:`claim` takes it for a command after checking that the folder is of a kind the
command may write (a run never writes into a results folder, ``reproduce`` never into a run
folder or a folder of the user's, nothing into another run's folder).
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import errno
import fcntl
import io
import json
import os
import shutil
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tailmem.atomic import (
    atomic_write_bytes,
    atomic_write_text,
    file_sha256,
    is_temp,
    strict_json,
    temp_owner,
)
from tailmem.config import dump_yaml, to_dict
from tailmem.errors import ConfigError, DataError
from tailmem.provenance import environment, run_digest

COMPLETE_MARKER = "COMPLETE"
LOCK_FILE = ".lock"
MANIFEST = ".tailmem.json"
"""A folder's record: ``{"kind": KIND, "entries": {top-level name: command that wrote it}}``."""
UNLISTED = frozenset({COMPLETE_MARKER, "progress.json"})
"""Top-level files that COMPLETE does not list: itself, and progress that is rewritten later."""
RUN_RECORD = frozenset({"config.yaml", COMPLETE_MARKER, "progress.json"})
"""A run's bookkeeping files: a folder holding only these has produced nothing yet."""

KINDS = {
    "run": "a run folder (written by tailmem run)",
    "results": "a results folder (written by tailmem reproduce)",
    "diagnose": "a diagnose folder (written by tailmem diagnose --out)",
    "compare": "a compare folder (written by tailmem compare --out)",
}
"""The kinds of folder tailmem writes, as a message names them."""
OWNER = {"run": "run", "results": "reproduce", "diagnose": "diagnose", "compare": "compare"}
"""The command whose :class:`RunDir` writes a folder of each kind."""
FOREIGN = "foreign"
"""The kind of a folder that holds files but no tailmem record: the user's own."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(fd: int) -> str:
    """The pid a lock holder wrote into the lock file ``fd`` ("unknown" if none yet)."""
    return os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"


class RunDir:
    """A folder that one experiment run writes into, atomically, file by file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def file(self, name: str) -> Path:
        return self.path / name

    def subdir(self, name: str) -> RunDir:
        return RunDir(self.path / name)

    def write_bytes(self, name: str, data: bytes) -> Path:
        """Record ``name`` as written by this folder's command (see the module docstring), then
        write it atomically; every file a RunDir writes goes through here."""
        target = self.file(name)
        self.record([Path(name).parts[0]])
        atomic_write_bytes(target, data)
        return target

    def write_text(self, name: str, text: str) -> Path:
        return self.write_bytes(name, text.encode())

    def write_json(self, name: str, obj: Any) -> Path:
        """Write ``obj`` as strict JSON (see :func:`strict_json`), atomically."""
        return self.write_text(name, strict_json(obj))

    def read_json(self, name: str) -> Any:
        target = self.file(name)
        try:
            return json.loads(target.read_text())
        except FileNotFoundError:
            raise DataError(f"{target} is missing; expected the run to have written it") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataError(
                f"{target} is not valid JSON ({exc}); delete the run and redo it"
            ) from None

    def write_csv(self, name: str, rows: Iterable[Mapping[str, Any]]) -> Path:
        rows = list(rows)
        buffer = io.StringIO()
        if rows:
            fields = list(dict.fromkeys(key for row in rows for key in row))
            writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        return self.write_text(name, buffer.getvalue())

    def save_figure(self, fig: Any, stem: str) -> list[Path]:
        """Save a matplotlib figure as ``stem.png`` and ``stem.svg``, then close it."""
        import matplotlib.pyplot as plt

        paths = []
        for ext in ("png", "svg"):
            buffer = io.BytesIO()
            fig.savefig(buffer, format=ext, dpi=120, bbox_inches="tight")
            paths.append(self.write_bytes(f"{stem}.{ext}", buffer.getvalue()))
        plt.close(fig)
        return paths

    def write_config(
        self,
        experiment: str,
        preset: str,
        cfg: Any,
        source: Mapping[str, Any] | None = None,
        command: str | None = None,
    ) -> Path:
        """Record what a re-run needs: experiment, preset, full config, digest, environment;
        ``source``: where a config not from a packaged preset came from (``config_file``);
        ``command``: the command line that started the run, as the caller knows it."""
        config = to_dict(cfg)
        record = {
            "experiment": experiment,
            "preset": preset,
            **(source or {}),
            **({"command": command} if command is not None else {}),
            "digest": run_digest(experiment, config),
            "config": config,
            "environment": environment(),
        }
        return self.write_text("config.yaml", dump_yaml(record))

    def read_config(self) -> dict[str, Any]:
        import yaml

        target = self.file("config.yaml")
        try:
            record = yaml.safe_load(target.read_text())
        except FileNotFoundError:
            raise DataError(f"{target} is missing; this is not a tailmem run directory") from None
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            problem = " ".join(str(exc).split())
            raise DataError(f"{target} is not valid YAML text ({problem})") from None
        if not isinstance(record, dict) or "experiment" not in record or "config" not in record:
            raise DataError(f"{target} lacks the experiment/config fields of a tailmem run record")
        return record

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the run's writer lock (``flock`` on ``.lock``) for the block; a second writer
        gets a :class:`ConfigError` at once. The kernel drops the lock when the holder dies, so a
        killed run never leaves a stale lock behind."""
        target = self.file(LOCK_FILE)
        fd = os.open(target, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ConfigError(
                    f"{self.path} is being written by another tailmem process (pid "
                    f"{_holder(fd)}); wait for it to finish or choose another folder"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            os.close(fd)  # closing the last descriptor releases the flock

    def writer(self) -> str | None:
        """The pid of the tailmem process writing this folder now (holding :meth:`lock`), or
        None. A reader's probe: it creates no lock file and holds a shared lock only for the
        probe itself."""
        try:
            fd = os.open(self.file(LOCK_FILE), os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _holder(fd)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ what was written here

    def manifest(self) -> dict[str, Any]:
        """The folder's record (:data:`MANIFEST`), or the one its files imply when it has none:
        a run from before the records lists its bookkeeping files and what its COMPLETE lists."""
        record = read_manifest(self.path)
        if record is not None:
            return record
        kind = folder_kind(self.path)
        entries: dict[str, str] = {}
        if kind == "run":
            names = {*RUN_RECORD, *_complete_files(self.file(COMPLETE_MARKER))}
            entries = {n: "run" for n in sorted(names) if (self.path / n).is_file()}
        return {"kind": None if kind == FOREIGN else kind, "entries": entries}

    def entries(self) -> dict[str, str]:
        """Every top-level entry tailmem wrote here, with the command that wrote it: the
        recorded ones that still exist and, in a run folder, its bookkeeping files
        (:data:`RUN_RECORD`) and every sub-folder that is not hidden."""
        record = self.manifest()
        found = {p.name: p for p in self.path.iterdir() if p.name not in (MANIFEST, LOCK_FILE)}
        out = {name: who for name, who in record["entries"].items() if name in found}
        if record["kind"] == "run":
            runs = [
                n
                for n, p in found.items()
                if n in RUN_RECORD or (p.is_dir() and not p.is_symlink() and not n.startswith("."))
            ]
            out.update({n: "run" for n in runs if n not in out})
        return out

    def record(self, names: Iterable[str], writer: str | None = None) -> None:
        """Add top-level ``names`` to the record as written by ``writer`` (default: the command
        that owns a folder of this kind); a name already recorded keeps its writer."""
        record = self.manifest()
        kind = record["kind"] or "run"
        who = writer or OWNER[kind]
        new = {
            n: who for n in names if n not in record["entries"] and n not in (MANIFEST, LOCK_FILE)
        }
        if new or record["kind"] is None or not self.file(MANIFEST).is_file():
            entries = {**record["entries"], **new}
            self._write_manifest(kind, entries)

    def _write_manifest(self, kind: str, entries: Mapping[str, str]) -> None:
        data = {"kind": kind, "entries": dict(sorted(entries.items()))}
        atomic_write_text(self.file(MANIFEST), strict_json(data))

    def clear(self, keep: Collection[str] = ()) -> list[str]:
        """Remove every entry tailmem wrote here (:meth:`entries`: the previous run's outputs,
        sub-runs, data caches, a report of it) but those named in ``keep``, COMPLETE first so an
        interrupted clean-up leaves an incomplete run; anything tailmem did not write stays.
        Returns the names removed."""
        kept = {name: who for name, who in self.entries().items() if name in keep}
        names = sorted(set(self.entries()) - set(kept))  # before COMPLETE goes
        self.clear_complete()
        for name in names:
            target = self.file(name)
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
        kind = self.manifest()["kind"] or "run"
        self._write_manifest(kind, kept)
        return names

    def _snapshot(self) -> dict[str, tuple[int, int, int]]:
        """Identity (inode, mtime, size) of every top-level entry but the lock, the record and
        temp files: what :func:`claim` compares to see what its block wrote."""
        out = {}
        with os.scandir(self.path) as it:
            for entry in it:
                if entry.name in (MANIFEST, LOCK_FILE) or is_temp(entry.name):
                    continue
                st = entry.stat(follow_symlinks=False)
                out[entry.name] = (st.st_ino, st.st_mtime_ns, st.st_size)
        return out

    def listed_files(self) -> list[str]:
        """The top-level files :meth:`mark_complete` records: those the run itself wrote (not
        hidden, not in UNLISTED, not another command's such as a report)."""
        return sorted(
            name
            for name, who in self.entries().items()
            if who == "run"
            and self.file(name).is_file()
            and not name.startswith(".")
            and name not in UNLISTED
        )

    @property
    def is_complete(self) -> bool:
        """COMPLETE exists and every file it lists is there with its recorded SHA-256."""
        return self.incomplete_reason() is None

    def incomplete_reason(self) -> str | None:
        """Why this run does not count as complete (None: it does)."""
        marker = self.file(COMPLETE_MARKER)
        if not marker.is_file():
            return "it has no COMPLETE marker"
        try:
            files = json.loads(marker.read_text()).get("files")
        except (OSError, ValueError, AttributeError):
            return f"{marker} is not a JSON record"
        if not isinstance(files, dict) or not files:
            return f"{marker} lists no files with hashes"
        for name, recorded in files.items():
            target = self.file(str(name))
            if Path(str(name)).name != str(name) or not target.is_file():
                return f"{target} listed in COMPLETE is missing"
            if file_sha256(target) != recorded:
                return f"{target} does not match the hash recorded in COMPLETE"
        return None

    def mark_complete(self, wall_seconds: float | None = None) -> None:
        """Write COMPLETE, recording every listed file's SHA-256 (see :meth:`is_complete`)."""
        stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        files = {name: file_sha256(self.file(name)) for name in self.listed_files()}
        record = {"finished": stamp, "wall_seconds": wall_seconds, "files": files}
        self.write_json(COMPLETE_MARKER, record)

    def clear_complete(self) -> None:
        self.file(COMPLETE_MARKER).unlink(missing_ok=True)

    def remove_stale_temp_files(self) -> list[Path]:
        """Delete the temp files of atomic writes that a killed process (SIGKILL, power loss)
        never renamed. Call while holding :meth:`lock`; a temp file whose writer (the pid in its
        name) is still alive is kept all the same."""
        stale = [
            p
            for p in self.path.rglob(".*.tmp")
            if p.is_file() and not ((pid := temp_owner(p)) is not None and _alive(pid))
        ]
        for path in stale:
            path.unlink(missing_ok=True)
        return stale


def _complete_files(marker: Path) -> list[str]:
    """The file names a COMPLETE marker lists (none when it is missing or damaged)."""
    try:
        files = json.loads(marker.read_text()).get("files")
    except (OSError, ValueError, AttributeError):
        return []
    return [str(name) for name in files] if isinstance(files, dict) else []


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """``folder``'s record (:data:`MANIFEST`), None when it has none; a damaged one is a
    :class:`DataError`."""
    target = Path(folder) / MANIFEST
    try:
        record = json.loads(target.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise DataError(
            f"{target} is damaged ({exc}); expected tailmem's record of the folder"
        ) from None
    if not isinstance(record, dict) or record.get("kind") not in KINDS:
        raise DataError(f"{target} is damaged; expected tailmem's record of the folder")
    entries = record.get("entries")
    if not isinstance(entries, dict):
        raise DataError(f"{target} is damaged; expected tailmem's record of the folder")
    return {"kind": record["kind"], "entries": {str(k): str(v) for k, v in entries.items()}}


def folder_kind(path: Path) -> str | None:
    """What ``path`` is: a kind of :data:`KINDS` (from its record, or for a folder from before
    the records from its files), :data:`FOREIGN` (it holds visible files and no record) or None
    (no such path, or a folder holding nothing but hidden entries)."""
    path = Path(path)
    if not path.is_dir():
        return None
    record = read_manifest(path)
    if record is not None:
        return str(record["kind"])
    if (path / "config.yaml").is_file():
        return "run"
    visible = [p for p in path.iterdir() if not p.name.startswith(".")]
    if any((p / "config.yaml").is_file() for p in visible):
        return "results"
    return FOREIGN if visible else None


def _loops(path: Path) -> bool:
    """Whether following ``path``'s links never ends (the system says ELOOP)."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def check_folder(path: Path, kinds: Sequence[str], *, new: bool = True) -> str | None:
    """Refuse (one-line :class:`ConfigError`, nothing written) a folder a command may not write:
    one of a kind not in ``kinds``, the user's own (:data:`FOREIGN`), one lying inside a run
    folder (only that run writes there), and, unless ``new``, a missing or empty one. Returns
    the folder's kind."""
    path = Path(path)
    expected = " or ".join(KINDS[k] for k in kinds)
    if new:
        expected = f"a new or empty folder, or {expected}"
    if path.is_symlink() and not path.exists():  # a link to nowhere, or to itself
        what = "a symbolic-link loop" if _loops(path) else "a link to a missing path"
        raise ConfigError(f"{path} is {what}; expected {expected}")
    for parent in path.absolute().parents:
        if (parent / MANIFEST).is_file() and folder_kind(parent) == "run":
            raise ConfigError(f"{path} lies inside the run folder {parent}; expected {expected} "
                              "outside any run folder")  # fmt: skip
    kind = folder_kind(path)
    if kind == FOREIGN:
        shown = ", ".join(sorted(p.name for p in path.iterdir() if not p.name.startswith("."))[:3])
        raise ConfigError(
            f"{path} holds files tailmem did not write ({shown}); expected {expected}"
        )
    if kind is None and not new:
        raise ConfigError(f"{path} holds nothing tailmem wrote; expected {expected}")
    if kind is not None and kind not in kinds:
        raise ConfigError(f"{path} is {KINDS[kind]}; expected {expected}")
    return kind


@contextlib.contextmanager
def claim(
    path: str | os.PathLike[str],
    kinds: Sequence[str],
    writer: str,
    *,
    new: bool = True,
    record_new: bool = False,
) -> Iterator[RunDir]:
    """Hold the writer lock of ``path`` for a command (``writer``) that writes folders of the
    first of ``kinds`` (or also writes into the others): refuse it first if the command may not
    write there (:func:`check_folder`, checked again under the lock) and stamp a new folder
    with that kind. With ``record_new`` (a command that writes other than through a
    :class:`RunDir`, such as the report), every top-level entry the block created or replaced
    is recorded as ``writer``'s at the end; otherwise only what RunDir writes is, so a file
    someone drops into a run folder while it runs is neither listed in COMPLETE nor removed."""
    check_folder(Path(path), kinds, new=new)
    folder = RunDir(path)
    with folder.lock():
        if check_folder(folder.path, kinds, new=new) is None:
            folder._write_manifest(kinds[0], {})
        before = folder._snapshot()
        try:
            yield folder
        finally:
            if record_new:
                after = folder._snapshot()
                with contextlib.suppress(OSError):  # a full disk: the block's own error matters
                    folder.record([n for n, st in after.items() if before.get(n) != st], writer)

"""Whether two run folders of one study hold the same outputs, file by file: for a refactor that
must change no result.

Usage: ``python scripts/same_outputs.py BEFORE AFTER`` (two folders of ``tailmem run``, e.g. the
smoke preset run from two commits). Prints every difference and a last line ``N common files,
D differing``; exits 1 when a file differs or exists on one side only.

- JSON and JSON-lines files must hold the same values once the fields that time a run are left
  out (:data:`VOLATILE`, at any depth): the same values in other bytes (another key order) are
  the same file; CSVs the same rows once the columns of :data:`VOLATILE` are left out;
- every other file (PNG, text) must be the same bytes;
- the run's own bookkeeping is skipped (:data:`SKIPPED`: the lock, COMPLETE, progress, the
  config record with its start time) and so are SVGs (matplotlib stamps a date and random ids),
  logs, checkpoints and the trackers' files (:data:`SKIPPED_FOLDERS`: TensorBoard's event files
  and W&B's run files, stamped with host and time; ``metrics.jsonl`` holds their numbers).

A folder with no file to compare is refused (two empty folders are not "the same outputs"), and
so is a damaged JSON, JSON-lines or CSV file: one line each, exit 2.

A sub-run's identity is its ``spec.json`` digest, so two folders with the same ``spec.json``
files (compared as values here) trained the same runs and would reuse each other's cache.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from tailmem.cli import ScriptParser, script_main
from tailmem.errors import DataError

VOLATILE = frozenset({"wall_seconds", "build_seconds", "seconds", "elapsed", "started",
                      "planned", "environment", "date", "step_seconds", "step_time_vs_adam",
                      "step time", "tokens_per_s"})  # fmt: skip
"""Fields and columns that time a run or record when it ran, not what it computed."""
SKIPPED = frozenset({".lock", "COMPLETE", "progress.json", "config.yaml", ".tailmem.json"})
SKIPPED_SUFFIXES = frozenset({".svg", ".log", ".pt", ".safetensors", ".html", ".md"})
SKIPPED_FOLDERS = frozenset({"tensorboard", "wandb"})
"""Folders of a run's trackers (``train.log_to``), at any depth."""


def _without_volatile(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_volatile(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_without_volatile(v) for v in value]
    return value


def _values(path: Path) -> object:
    """The values of a JSON, JSON-lines or CSV file (timing left out); a damaged one is one
    :class:`DataError` line naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        if path.suffix == ".csv":
            return [_without_volatile(row) for row in csv.DictReader(io.StringIO(text))]
        if path.suffix == ".jsonl":
            lines = [line for line in text.splitlines() if line.strip()]
            return [_without_volatile(json.loads(line)) for line in lines]
        return _without_volatile(json.loads(text))
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{path}: not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno}); expected "
            "a whole file (was the run killed while writing it?)"
        ) from None
    except csv.Error as exc:
        raise DataError(f"{path}: not a valid CSV ({exc}); expected a whole file") from None


def _first_difference(a: object, b: object, where: str = "") -> str | None:
    """The path of the first value that differs, with both values (None: equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            if key not in a or key not in b:
                return f"{where}/{key}: on one side only"
            found = _first_difference(a[key], b[key], f"{where}/{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} items vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{where}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"{where or '/'}: {str(a)[:60]} vs {str(b)[:60]}"


def _files(root: Path) -> set[Path]:
    found = set()
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if SKIPPED_FOLDERS & set(rel.parts[:-1]) or not p.is_file():
            continue
        if p.name not in SKIPPED and p.suffix not in SKIPPED_SUFFIXES:
            found.add(rel)
    return found


def differences(before: Path, after: Path) -> Iterator[str]:
    """Every difference between the two folders, one line each (see the module docstring)."""
    first, second = _files(before), _files(after)
    for rel in sorted(first - second):
        yield f"{rel}: only in {before}"
    for rel in sorted(second - first):
        yield f"{rel}: only in {after}"
    for rel in sorted(first & second):
        a, b = before / rel, after / rel
        if a.read_bytes() == b.read_bytes():
            continue
        if rel.suffix in (".json", ".jsonl", ".csv"):
            found = _first_difference(_values(a), _values(b))
            if found:
                yield f"{rel}: {found}"
        else:
            yield f"{rel}: other bytes"


def main(argv: Sequence[str] | None = None) -> int:
    parser = ScriptParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("before", type=Path, help="a run folder")
    parser.add_argument("after", type=Path, help="the same study's run folder, made otherwise")
    args = parser.parse_args(argv)

    def body() -> int:
        for folder in (args.before, args.after):
            if not folder.is_dir():
                raise DataError(f"{folder}: no such folder; expected a folder of tailmem run")
            if not _files(folder):
                raise DataError(
                    f"{folder}: holds no output to compare; expected a folder of tailmem run "
                    "(two empty folders are not the same outputs)"
                )
        found = list(differences(args.before, args.after))
        for line in found:
            print(line)
        common = len(_files(args.before) & _files(args.after))
        print(f"{common} common files, {len(found)} differing")
        return 1 if found else 0

    return script_main(body, "same_outputs")


if __name__ == "__main__":
    sys.exit(main())

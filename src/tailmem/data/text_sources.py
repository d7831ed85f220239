"""Where corpus text comes from: the standard library, local files, Hugging Face data sets.

Every source yields :class:`Document` objects in a deterministic order. Text that must be
produced or fetched (the standard-library extraction, a streamed data set) is written once as
JSON lines under ``cache_dir/text/`` and read from there afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import types
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, overload

from tailmem.atomic import atomic_write_bytes, file_sha256
from tailmem.data import stdlib_text
from tailmem.errors import ConfigError, DataError


@dataclass(frozen=True)
class Document:
    """One document and where it came from (module, ``path#piece``, ``path:line`` or row)."""

    name: str
    text: str


def stdlib_text_file(cache_dir: str | Path) -> Path:
    """The JSON-lines file of this interpreter's standard-library text, extracted once.

    The extraction runs :mod:`tailmem.data.stdlib_text` as a script in an isolated child
    interpreter (``-I -S -B``); the file is cached under ``cache_dir/text/`` keyed by the
    interpreter (version, installation prefix, platform) and the extractor version.
    """
    key = digest(
        {
            "extractor": stdlib_text.EXTRACTOR_VERSION,
            "version": sys.version,
            "prefix": sys.base_prefix,
            "platform": sys.platform,
        }
    )
    path = Path(cache_dir) / "text" / f"stdlib-{key[:16]}.jsonl"
    if _verified(path):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-I", "-S", "-B", str(Path(stdlib_text.__file__)), str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0 or not path.is_file():
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise DataError(f"extracting standard-library text with {sys.executable} failed: {tail}")
    _record_hash(path)
    return path


def _hash_file(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _verified(path: Path) -> bool:
    """Whether cached text ``path`` exists with the SHA-256 recorded beside it when it was
    written; a damaged (truncated, edited) or unrecorded file is fetched or extracted again."""
    try:
        return path.is_file() and _hash_file(path).read_text().strip() == file_sha256(path)
    except (OSError, UnicodeDecodeError):
        return False


def _record_hash(path: Path) -> None:
    atomic_write_bytes(_hash_file(path), (file_sha256(path) + "\n").encode())


def read_jsonl(path: str | Path, text_field: str = "text") -> list[Document]:
    """Documents of a JSON-lines file: one object per line, the text in ``text_field``.

    Blank lines and empty texts are skipped; a line that is not such an object raises
    :class:`DataError` naming the file and line. A ``name`` field, if present, names the document.
    """
    path = Path(path)
    docs = []
    with _open_file(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(
                    f"{path}:{lineno}: not valid UTF-8 (byte {exc.start}); expected UTF-8 text"
                ) from None
            if line.strip():
                docs.extend(_jsonl_row(path, lineno, line, text_field))
    return docs


def _jsonl_row(path: Path, lineno: int, line: str, text_field: str) -> list[Document]:
    expected = f"expected one JSON object per line with a string field {text_field!r}"
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{lineno}: invalid JSON ({exc.msg}); {expected}") from None
    if not isinstance(row, dict) or not isinstance(row.get(text_field), str):
        raise DataError(f"{path}:{lineno}: got {_field_kind(row, text_field)}; {expected}")
    text = row[text_field].strip()
    return [Document(str(row.get("name", f"{path}:{lineno}")), text)] if text else []


def _field_kind(row: object, text_field: str) -> str:
    if not isinstance(row, dict):
        return f"a JSON {type(row).__name__}"
    if text_field not in row:
        return f"an object without {text_field!r}"
    return f"{text_field!r} of type {type(row[text_field]).__name__}"


@overload
def _open_file(path: Path, mode: Literal["r"] = "r") -> IO[str]: ...
@overload
def _open_file(path: Path, mode: Literal["rb"]) -> IO[bytes]: ...
def _open_file(path: Path, mode: Literal["r", "rb"] = "r") -> IO[str] | IO[bytes]:
    """``open(path, mode)`` (UTF-8 in text mode), with a :class:`DataError` for a missing file."""
    try:
        return open(path, mode, encoding=None if "b" in mode else "utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found; expected a UTF-8 text file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory; expected a file") from None


def local_files(paths: Sequence[str | Path]) -> list[Path]:
    """The ``.txt`` / ``.jsonl`` files named by ``paths`` (directories searched recursively)."""
    files: list[Path] = []
    for item in paths:
        path = Path(item)
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*") if p.suffix in (".txt", ".jsonl") and p.is_file()
            )
            if not found:
                raise DataError(f"{path}: directory holds no .txt or .jsonl files")
            files.extend(found)
        elif not path.exists():
            raise DataError(f"{path}: file not found; expected a .txt or .jsonl file")
        elif path.suffix not in (".txt", ".jsonl"):
            raise DataError(f"{path}: unsupported file type {path.suffix!r}; expected .txt/.jsonl")
        elif not path.is_file():  # a device (/dev/zero) or pipe named like a text file
            raise DataError(f"{path}: not a regular file; expected a .txt or .jsonl file")
        else:
            files.append(path)
    return files


def read_local_documents(
    paths: Sequence[str | Path],
    text_field: str = "text",
    txt_mode: Literal["file", "paragraph", "line"] = "file",
) -> Iterator[Document]:
    """Documents of local files in :func:`local_files` order.

    A ``.jsonl`` file gives one document per line (:func:`read_jsonl`); a ``.txt`` file gives one
    document (``txt_mode="file"``), one per blank-line separated paragraph (``"paragraph"``) or
    one per line (``"line"``). Texts are stripped; empty ones are skipped.
    """
    for path in local_files(paths):
        if path.suffix == ".jsonl":
            yield from read_jsonl(path, text_field)
            continue
        try:
            with _open_file(path) as handle:
                text = handle.read()
        except UnicodeDecodeError as exc:
            raise DataError(
                f"{path}: not valid UTF-8 (byte {exc.start}); expected a UTF-8 .txt file"
            ) from None
        if txt_mode == "file":
            pieces = [text]
        elif txt_mode == "paragraph":
            pieces = re.split(r"\n[ \t\r\f\v]*\n", text)
        else:
            pieces = text.splitlines()
        for i, piece in enumerate(pieces):
            if piece.strip():
                yield Document(f"{path}#{i}", piece.strip())


def hf_text_file(
    cache_dir: str | Path,
    *,
    name: str,
    config: str | None,
    split: str,
    max_docs: int,
    text_field: str = "text",
    data_files: Sequence[str] = (),
) -> Path:
    """The first ``max_docs`` documents of a Hugging Face data set, fetched once as JSON lines.

    ``name`` is a hub data set streamed with ``load_dataset(name, name=config, split=split,
    streaming=True, data_files=...)`` (so a builder such as ``"json"`` with local ``data_files``
    also works), or a local folder written by ``Dataset.save_to_disk``. The result is cached
    under ``cache_dir/text/`` keyed by these arguments and never fetched again.
    """
    path = hf_text_path(cache_dir, name, config, split, max_docs, text_field, data_files)
    if _verified(path):
        return path
    where = f"Hugging Face data set {name!r} (config {config!r}, split {split!r})"
    lines = []
    try:
        for i, row in enumerate(_hf_rows(name, config, split, data_files)):
            if i >= max_docs:
                break
            text = row.get(text_field) if isinstance(row, dict) else None
            if not isinstance(text, str):
                raise DataError(
                    f"{where} row {i}: got {_field_kind(row, text_field)}; expected a string "
                    f"field {text_field!r}"
                )
            lines.append(json.dumps({"name": f"{name}[{i}]", "text": text}) + "\n")
    except (DataError, ConfigError):
        raise
    except Exception as exc:  # the library raises many types (not found, offline, bad config)
        raise DataError(f"cannot read {where}: {_first_line(exc)}") from None
    atomic_write_bytes(path, "".join(lines).encode())
    _record_hash(path)
    return path


def hf_text_path(
    cache_dir: str | Path,
    name: str,
    config: str | None,
    split: str,
    max_docs: int,
    text_field: str,
    data_files: Sequence[str],
) -> Path:
    """Where :func:`hf_text_file` caches the documents of these arguments."""
    spec = {
        "name": name,
        "config": config,
        "split": split,
        "data_files": list(data_files),
        "field": text_field,
        "max_docs": max_docs,
    }
    return Path(cache_dir) / "text" / f"hf-{digest(spec)[:16]}.jsonl"


OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
HUB_TIMEOUT_S = 3.0
"""How long :func:`check_hf_source` waits for the Hugging Face Hub to answer a connection."""


def check_hf_source(
    cache_dir: str | Path,
    name: str,
    config: str | None,
    split: str,
    max_docs: int,
    text_field: str,
    data_files: Sequence[str],
) -> None:
    """Refuse at once, before anything is written, a Hugging Face source that cannot be read
    here: the ``datasets`` package missing, or a Hub data set not yet cached under
    ``cache_dir`` while offline (``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` set, or the Hub
    not answering within :data:`HUB_TIMEOUT_S`; the library itself retries for half a minute).
    A local ``save_to_disk`` folder, or documents fetched before, need no network."""
    path = hf_text_path(cache_dir, name, config, split, max_docs, text_field, data_files)
    if _verified(path) or Path(name).is_dir():
        return
    _import_datasets()
    where = f"Hugging Face data set {name!r} is not cached under {Path(cache_dir) / 'text'}"
    offline = [
        v for v in OFFLINE_VARIABLES if os.environ.get(v, "").lower() in ("1", "true", "yes", "on")
    ]
    if offline:
        raise DataError(
            f"{where} and {offline[0]}={os.environ[offline[0]]} forbids fetching it; expected "
            "network access (unset it), a local save_to_disk folder as hf_name, or another source"
        )
    hub = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    proxy = urllib.request.getproxies().get(urllib.parse.urlparse(hub).scheme)
    endpoint = urllib.parse.urlparse(proxy or hub)  # through a proxy, the proxy must answer
    host, port = (
        endpoint.hostname or "huggingface.co",
        endpoint.port or (443 if endpoint.scheme == "https" else 80),
    )
    try:
        socket.create_connection((host, port), timeout=HUB_TIMEOUT_S).close()
    except OSError as exc:
        raise DataError(
            f"{where} and {'the proxy' if proxy else 'the Hub'} ({host}:{port}) cannot be "
            f"reached ({exc.strerror or exc}); expected network access, a local save_to_disk "
            "folder as hf_name, or another source"
        ) from None


def _import_datasets() -> types.ModuleType:
    """The ``datasets`` package, or a :class:`ConfigError` saying how to install it."""
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            "corpus source 'hf' needs the optional package 'datasets'; "
            "install tailmem[hf] (pip install 'tailmem[hf]')"
        ) from None
    return datasets


def _hf_rows(
    name: str, config: str | None, split: str, data_files: Sequence[str]
) -> Iterable[object]:
    """The rows of a Hugging Face data set (dicts when it is a text data set; the caller
    checks)."""
    datasets = _import_datasets()
    if Path(name).is_dir():
        loaded = datasets.load_from_disk(name)
        return loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
    return datasets.load_dataset(
        name, name=config, split=split, streaming=True, data_files=list(data_files) or None
    )


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def digest(data: object) -> str:
    """SHA-256 (hex) of the canonical JSON of ``data``."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

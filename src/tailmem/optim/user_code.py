"""The code of a user's optimiser, by digest: what a run records and a resume verifies.

A user's optimiser (``optim.<name>.factory: package.module:Class``) is code tailmem does not
ship: a run that resumes after it changed would certify a mix of old-code and new-code steps as
one result. :func:`code_digest` is the SHA-256 of every file of that code — the factory's
top-level package (each ``*.py`` under it) or module, and every other module of the user's that
importing it brought in (:func:`import_user_module` notes them; the Python installation, its
site-packages and tailmem itself are not the user's) — by path relative to the folder it is
imported from (moving the project changes nothing) and content.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

_BROUGHT_IN: dict[str, tuple[Path, ...]] = {}
"""For each module imported through :func:`import_user_module`: the user's files its first
import brought in."""


def _installed_roots() -> tuple[Path, ...]:
    """Folders whose modules are not the user's: the Python installation, its site-packages
    and tailmem's own package."""
    import tailmem

    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, *sysconfig.get_paths().values()}
    return (*(Path(p).resolve() for p in found), Path(tailmem.__file__).resolve().parent)


def _user_file(module: ModuleType | None, installed: tuple[Path, ...]) -> Path | None:
    """The source file of ``module`` when it is the user's (None otherwise)."""
    name = getattr(module, "__file__", None)
    if not isinstance(name, str) or not name.endswith(".py"):
        return None
    path = Path(name).resolve()
    return None if any(path.is_relative_to(root) for root in installed) else path


def import_user_module(module_name: str) -> ModuleType:
    """``importlib.import_module(module_name)``, noting the user's files its first import
    brings in besides the module's own package."""
    before = set(sys.modules)
    module = importlib.import_module(module_name)
    if module_name not in _BROUGHT_IN:
        installed = _installed_roots()
        found = {_user_file(sys.modules.get(n), installed) for n in set(sys.modules) - before}
        _BROUGHT_IN[module_name] = tuple(sorted(p for p in found if p is not None))
    return module


def code_digest(path: str) -> str:
    """The digest of the code of the factory at import path ``path`` (module docstring); its
    module is imported first if it is not yet."""
    module_name = path.partition(":")[0]
    import_user_module(module_name)
    top = sys.modules[module_name.split(".")[0]]
    folders = [Path(p).resolve() for p in getattr(top, "__path__", [])]
    if folders:  # a package: every module of it, imported or not
        files = {f.resolve() for folder in folders for f in folder.rglob("*.py")}
        base = folders[0].parent
    else:
        own = Path(str(top.__file__)).resolve()
        files, base = {own}, own.parent
    files |= set(_BROUGHT_IN.get(module_name, ()))
    h = hashlib.sha256()
    for file in sorted(files):
        name = file.relative_to(base) if file.is_relative_to(base) else file
        h.update(f"{name.as_posix()}\0{_file_digest(file)}\0".encode())
    return h.hexdigest()[:16]


_DIGESTS: dict[tuple[Path, int, int], str] = {}
"""File digests by path, modification time and size (a config is parsed many times)."""


def _file_digest(file: Path) -> str:
    """The SHA-256 of one file's content (cached while the file is unchanged)."""
    stat = file.stat()
    key = (file, stat.st_mtime_ns, stat.st_size)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(file.read_bytes()).hexdigest()
    return _DIGESTS[key]

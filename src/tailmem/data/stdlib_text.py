"""English text that ships with every CPython: standard-library docstrings and pydoc topics.

This file imports nothing but the standard library because :mod:`tailmem.data.corpus` runs it as
a script in a fresh interpreter (``python -I -S -B stdlib_text.py OUT``): isolated from the
environment and from site-packages (so ``distutils`` is the standard library's, not setuptools'
shim), writing no bytecode, and keeping the side effects of importing hundreds of modules out of
the caller's process.

Extraction is deterministic for one interpreter:

1. modules: every name in ``sys.stdlib_module_names`` in sorted order, and recursively the
   submodules of packages (``pkgutil.iter_modules``, sorted), skipping private names (leading
   underscore), ``__main__`` modules, test packages, the generated ``encodings.*`` codecs and
   modules with side effects or GUI dependencies (:data:`SKIP_TOP`); a module that fails to
   import is skipped;
2. one document per module: its docstring, then for each public name defined in it (sorted,
   ``obj.__module__`` equal to the module) the object's own docstring and, for classes, the own
   docstrings of its public methods and properties (sorted) — own, not inherited, docstrings;
3. one document per pydoc topic (``pydoc_data.topics.topics``, sorted keys);
4. docstrings are cleaned with ``inspect.cleandoc``; a docstring already seen earlier in this
   order is dropped, so re-exported objects and shared boilerplate appear once.

Output: JSON lines ``{"name": ..., "text": ...}``, one per non-empty document.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import json
import os
import pkgutil
import sys
import types
import warnings

#: Bump when the extraction rules change; part of the cache key of the extracted text.
EXTRACTOR_VERSION = 1

#: Top-level modules never imported: side effects on import (``this`` prints, ``antigravity``
#: opens a browser, ``lib2to3`` may write grammar pickles), GUI toolkits, the test suite, and
#: ``pydoc_data`` (its topics are read separately).
SKIP_TOP = frozenset(
    {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "test", "lib2to3"}
    | {"pydoc_data"}
)
SKIP_PART = frozenset({"test", "tests", "idle_test", "__main__"})


def wanted(name: str) -> bool:
    """Whether module ``name`` is part of the extraction (see the module docstring)."""
    parts = name.split(".")
    if parts[0] in SKIP_TOP or (parts[0] == "encodings" and len(parts) > 1):
        return False
    return not any(p.startswith("_") or p in SKIP_PART for p in parts)


def _import_quietly(name: str) -> types.ModuleType | None:
    sink = io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink):
            warnings.simplefilter("ignore")
            with contextlib.redirect_stderr(sink):
                return importlib.import_module(name)
    except KeyboardInterrupt:
        raise
    except BaseException:  # ImportError, OSError, SystemExit from platform-specific modules
        return None


def iter_modules() -> list[types.ModuleType]:
    """Imported modules in extraction order."""
    found: list[types.ModuleType] = []

    def walk(name: str) -> None:
        if not wanted(name):
            return
        module = _import_quietly(name)
        if module is None:
            return
        found.append(module)
        for info in sorted(
            pkgutil.iter_modules(getattr(module, "__path__", [])), key=lambda info: info.name
        ):
            walk(f"{name}.{info.name}")

    for top in sorted(sys.stdlib_module_names):
        walk(top)
    return found


def _own_doc(obj: object) -> str | None:
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    own = vars(obj) if isinstance(obj, type) else {"__doc__": getattr(obj, "__doc__", None)}
    doc = own.get("__doc__")
    return doc if isinstance(doc, str) else None


def module_docstrings(module: types.ModuleType) -> list[str]:
    """Raw docstrings of ``module`` in extraction order (before cleaning and de-duplication)."""
    docs = [module.__doc__ if isinstance(module.__doc__, str) else None]
    namespace = vars(module)
    for name in sorted(namespace):
        obj = namespace[name]
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(obj):
            docs.append(_own_doc(obj))
            members = vars(obj)
            for member in sorted(members):
                value = members[member]
                if member.startswith("_"):
                    continue
                if (
                    inspect.isroutine(value)
                    or inspect.isdatadescriptor(value)
                    or isinstance(value, (staticmethod, classmethod))
                ):
                    docs.append(_own_doc(value))
        elif inspect.isroutine(obj):
            docs.append(_own_doc(obj))
    return [d for d in docs if d]


def extract() -> list[tuple[str, str]]:
    """``(name, text)`` of every document, in extraction order."""
    seen: set[str] = set()

    def fresh(raw: list[str]) -> list[str]:
        kept = []
        for doc in raw:
            text = inspect.cleandoc(doc).strip()
            if text and text not in seen:
                seen.add(text)
                kept.append(text)
        return kept

    documents = []
    for module in iter_modules():
        parts = fresh(module_docstrings(module))
        if parts:
            documents.append((module.__name__, "\n\n".join(parts)))
    from pydoc_data.topics import topics

    for key in sorted(topics):
        parts = fresh([topics[key]])
        if parts:
            documents.append((f"pydoc topic {key}", parts[0]))
    return documents


def main(out_path: str) -> None:
    tmp = f"{out_path}.{os.getpid()}.part"
    with open(tmp, "w", encoding="utf-8") as handle:
        for name, text in extract():
            handle.write(json.dumps({"name": name, "text": text}, ensure_ascii=False) + "\n")
    os.replace(tmp, out_path)


if __name__ == "__main__":
    main(sys.argv[1])

"""Import graph of the ``tailmem`` package: cycles between modules and forbidden layer edges.

Usage: ``python scripts/import_cycles.py [SRC]`` (default ``src``). Reads every module's imports
statically (``ast``; imports inside functions and ``if TYPE_CHECKING:`` blocks count too: a
reader follows a type's import as much as a call's), prints each import cycle (strongly
connected component of more than one module, and of more than one subpackage such as
``tailmem.report``/``tailmem.experiments``) and each edge that breaks a layer rule, and exits 1
if there is any. Layer rules: ``tailmem.claims`` imports
nothing from ``tailmem.experiments`` or ``tailmem.report``; ``tailmem.report`` imports nothing
from ``tailmem.experiments``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

FORBIDDEN = {
    "tailmem.claims": ("tailmem.experiments", "tailmem.report"),
    "tailmem.report": ("tailmem.experiments",),
}


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, name: str, modules: set[str]) -> Iterator[str]:
    """The ``tailmem`` modules that module ``name`` (file ``path``) imports."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def graph(src: Path) -> dict[str, set[str]]:
    files = {module_name(p, src): p for p in (src / "tailmem").rglob("*.py")}
    return {name: set(imports_of(path, name, set(files))) for name, path in files.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def layer_violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for source, targets in sorted(edges.items()):
        for layer, banned in FORBIDDEN.items():
            if source == layer or source.startswith(layer + "."):
                bad += [f"{source} -> {t}" for t in sorted(targets) if t.startswith(banned)]
    return bad


def packages(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between ``tailmem``'s subpackages (``tailmem.report``, ``tailmem.claims`` …)."""

    def top(name: str) -> str:
        return ".".join(name.split(".")[:2])

    out: dict[str, set[str]] = {}
    for source, targets in edges.items():
        out.setdefault(top(source), set()).update(top(t) for t in targets if top(t) != top(source))
    return out


def main(argv: list[str]) -> int:
    src = Path(argv[1] if len(argv) > 1 else "src")
    if not (src / "tailmem" / "__init__.py").is_file():  # no package: no silent "0 modules"
        print(f"import_cycles: error: {src} holds no tailmem package; expected the src folder "
              "of a tailmem checkout", file=sys.stderr)  # fmt: skip
        return 2
    edges = graph(src)
    problems = [" <-> ".join(c) for c in cycles(edges)] + layer_violations(edges)
    problems += [f"packages: {' <-> '.join(c)}" for c in cycles(packages(edges))]
    for line in problems:
        print(line)
    print(f"{len(edges)} modules: {len(problems)} cycle(s) or layer violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

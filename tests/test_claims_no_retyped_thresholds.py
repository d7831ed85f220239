"""Tests import a claim's numbers; they never retype them (one copy of each threshold).

Every function of every test file is checked, helpers and fixtures included, against the claims
it reaches: those whose ids it names, those of the module-level names it uses (``LAG =
CLAIMS["A3.sensitivity.lag"]``, ``(CLAIM,) = CLAIMS`` imported from a claims module), those of
a claims module's ``CLAIMS`` it reads, and those of the file's own functions it calls. A
literal there — in the function or in a module-level constant it uses — that equals one of
those claims' tolerances is a retyped threshold.
"""

import ast
import importlib
import re
from pathlib import Path

from tailmem.claims.registry import CLAIMS

TESTS = Path(__file__).resolve().parent
TRIVIAL = {0.0, 1.0}
"""Values too common to attribute to a claim (counts, booleans, identities)."""
_BOUND = re.compile(r"(?:±|≤|≥|<=|>=|<|>)\s*(-?\d+(?:\.\d+)?(?:e-?\d+)?)")
_PREFIX = "tailmem.claims."


def _ids(node: ast.AST) -> set[str]:
    """Registry ids (or their family stems) named by string constants inside ``node``."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            for cid, claim in CLAIMS.items():
                if sub.value == cid or (claim.variant and sub.value.startswith(f"{cid}.")):
                    found.add(cid)
    return found


def _module_claims(module: str) -> set[str]:
    """The ids of a claims module's ``CLAIMS`` list (none for a module without one)."""
    claims = getattr(importlib.import_module(module), "CLAIMS", None)
    return {c.id for c in claims} if isinstance(claims, list) else set()


def _imported_lists(tree: ast.Module) -> dict[str, set[str]]:
    """Local name → the ids of the claims module ``CLAIMS`` (or module) it is bound to."""
    names: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                local = alias.asname or alias.name
                if node.module.startswith(_PREFIX) and alias.name == "CLAIMS":
                    names[local] = _module_claims(node.module)
                elif node.module == "tailmem.claims":
                    names[local] = _module_claims(f"{_PREFIX}{alias.name}")
    return names


def _loaded(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _numbers(node: ast.AST) -> list[tuple[int, object, float]]:
    """(line, literal, number) of every number literal in ``node``, strings' bounds included."""
    out = []
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Constant):
            continue
        if isinstance(sub.value, (int, float)) and not isinstance(sub.value, bool):
            out.append((sub.lineno, sub.value, float(sub.value)))
        elif isinstance(sub.value, str):
            out += [(sub.lineno, sub.value, float(m)) for m in _BOUND.findall(sub.value)]
    return out


def retyped_thresholds(source: str, name: str) -> list[str]:
    """``file:line (literal)`` of each literal that retypes a tolerance of a claim the function
    that holds (or uses) it reaches (see the module docstring)."""
    tree = ast.parse(source)
    imported = _imported_lists(tree)
    constants: dict[str, tuple[ast.AST, set[str]]] = {}  # module-level name → (value, ids)
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            reached = _ids(node.value) | set().union(
                *(imported.get(n, set()) for n in _loaded(node.value))
            )
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for bound in _loaded(target):
                    constants[bound] = (node.value, reached)
    functions = {
        n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }

    def reach(fn: ast.AST, seen: set[str]) -> set[str]:
        names = _loaded(fn)
        found = _ids(fn) | set().union(*(imported.get(n, set()) for n in names))
        found |= set().union(*(constants[n][1] for n in names if n in constants))
        for callee in names & set(functions) - seen:
            found |= reach(functions[callee], seen | {callee})
        return found

    problems = set()
    for fname, fn in functions.items():
        values = {float(v) for c in reach(fn, {fname}) for v in CLAIMS[c].tolerances.values()}
        values -= TRIVIAL
        if not values:
            continue
        used = [constants[n][0] for n in _loaded(fn) if n in constants]
        for holder in (fn, *used):
            for line, literal, number in _numbers(holder):
                if number in values:
                    problems.add(f"{name}:{line} ({literal!r})")
    return sorted(problems)


def _a_threshold() -> tuple[str, float]:
    cid = next(c.id for c in CLAIMS.values() if set(c.tolerances.values()) - TRIVIAL)
    return cid, next(v for v in CLAIMS[cid].tolerances.values() if v not in TRIVIAL)


def test_the_detector_finds_a_retyped_threshold():
    cid, value = _a_threshold()
    bad = f"def test_x():\n    assert check({cid!r}) <= {value!r}\n"
    assert retyped_thresholds(bad, "t.py") == [f"t.py:2 ({value!r})"]
    text = f"def test_y():\n    assert 'within ±{value!r}' in rule({cid!r})\n"
    assert len(retyped_thresholds(text, "t.py")) == 1
    good = f"def test_z():\n    assert check({cid!r}) <= CLAIMS[{cid!r}]['x']\n"
    assert retyped_thresholds(good, "t.py") == []


def test_the_detector_follows_claims_that_a_test_does_not_name():
    """A claim bound at module level, a claims module's CLAIMS list, a helper that names the
    claim, or a module-level constant holding the number: each is caught."""
    cid, value = _a_threshold()
    via_name = f"CLAIM = CLAIMS[{cid!r}]\n\ndef test_a():\n    assert CLAIM.x <= {value!r}\n"
    assert retyped_thresholds(via_name, "t.py") == [f"t.py:4 ({value!r})"]
    module = CLAIMS[cid].check.__module__  # type: ignore[union-attr]
    via_list = (
        f"from {module} import CLAIMS\n(C, *_) = CLAIMS\n\n"
        f"def test_b():\n    assert C.x <= {value!r}\n"
    )
    assert retyped_thresholds(via_list, "t.py") == [f"t.py:5 ({value!r})"]
    via_helper = (
        f"def _judge(x):\n    return CLAIMS[{cid!r}].evaluate(x)\n\n"
        f"def test_c():\n    assert _judge(1) <= {value!r}\n"
    )
    assert retyped_thresholds(via_helper, "t.py") == [f"t.py:5 ({value!r})"]
    via_constant = f"LIMIT = {value!r}\n\ndef test_d():\n    assert check({cid!r}) <= LIMIT\n"
    assert retyped_thresholds(via_constant, "t.py") == [f"t.py:1 ({value!r})"]
    unrelated = f"def test_e():\n    assert len('x') <= {value!r}\n"
    assert retyped_thresholds(unrelated, "t.py") == []


def test_no_test_retypes_a_threshold_of_a_claim():
    problems: dict[str, list[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        name = str(path.relative_to(TESTS))
        if found := retyped_thresholds(path.read_text(), name):
            problems[name] = found
    assert not problems, "import the claim's tolerance instead: " + (
        ", ".join(p for found in problems.values() for p in found)
    )

"""Tests import a claim's numbers; they never retype them (one copy of each threshold)."""

import ast
import re
from pathlib import Path

from tailmem.claims.registry import CLAIMS

TESTS = Path(__file__).resolve().parent
TRIVIAL = {0.0, 1.0}
"""Values too common to attribute to a claim (counts, booleans, identities)."""
_BOUND = re.compile(r"(?:±|≤|≥|<=|>=|<|>)\s*(-?\d+(?:\.\d+)?(?:e-?\d+)?)")


def _referenced_claims(node: ast.AST) -> set[str]:
    """Registry ids (or their family stems) named by string constants inside ``node``."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            for cid, claim in CLAIMS.items():
                if sub.value == cid or (claim.variant and sub.value.startswith(f"{cid}.")):
                    found.add(cid)
    return found


def retyped_thresholds(source: str, name: str) -> list[str]:
    """``file:line`` of each literal in a test function that equals a threshold of a claim the
    same function names (numbers, or numbers after ±/≤/≥/</> inside strings)."""
    problems = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef):
            continue
        claims = _referenced_claims(fn)
        values = {float(v) for c in claims for v in CLAIMS[c].tolerances.values()} - TRIVIAL
        if not values:
            continue
        for sub in ast.walk(fn):
            if not isinstance(sub, ast.Constant):
                continue
            numbers = []
            if isinstance(sub.value, (int, float)) and not isinstance(sub.value, bool):
                numbers = [float(sub.value)]
            elif isinstance(sub.value, str):
                numbers = [float(m) for m in _BOUND.findall(sub.value)]
            if any(n in values for n in numbers):
                problems.append(f"{name}:{sub.lineno} ({sub.value!r})")
    return problems


def test_the_detector_finds_a_retyped_threshold():
    cid = next(c.id for c in CLAIMS.values() if set(c.tolerances.values()) - TRIVIAL)
    value = next(v for v in CLAIMS[cid].tolerances.values() if v not in TRIVIAL)
    bad = f"def test_x():\n    assert check({cid!r}) <= {value!r}\n"
    assert retyped_thresholds(bad, "t.py") == [f"t.py:2 ({value!r})"]
    text = f"def test_y():\n    assert 'within ±{value!r}' in rule({cid!r})\n"
    assert len(retyped_thresholds(text, "t.py")) == 1
    good = f"def test_z():\n    assert check({cid!r}) <= CLAIMS[{cid!r}]['x']\n"
    assert retyped_thresholds(good, "t.py") == []


def test_no_test_retypes_a_threshold_of_a_claim():
    problems: dict[str, list[str]] = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        name = str(path.relative_to(TESTS))
        if found := retyped_thresholds(path.read_text(), name):
            problems[name] = found
    assert not problems, "import the claim's tolerance instead: " + (
        ", ".join(p for found in problems.values() for p in found)
    )

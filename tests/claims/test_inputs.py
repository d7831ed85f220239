"""Every claims module declares its checks' inputs as one frozen, typed dataclass, and the
registry refuses inputs of another type."""

import ast
import dataclasses
from pathlib import Path

import pytest

import tailmem.claims
from tailmem.claims.a1 import A1Inputs
from tailmem.claims.a3 import A3Inputs
from tailmem.claims.core import EXACT, Claim, ClaimInputs, Outcome, decided, declares
from tailmem.claims.registry import CLAIMS, claims_of, evaluate, inputs_of
from tailmem.claims.related import BenchMemory

CLAIMS_DIR = Path(tailmem.claims.__file__).parent
EXPERIMENTS = sorted({c.experiment for c in CLAIMS.values() if c.experiment and c.check})


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_each_experiment_reads_one_frozen_inputs_class(experiment):
    cls = inputs_of(experiment)
    assert cls is not None and issubclass(cls, ClaimInputs) and dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert {c.inputs for c in claims_of(experiment) if c.check} == {cls}
    assert all(c.inputs is None for c in CLAIMS.values() if c.check is None)


def _inputs_classes() -> list[tuple[str, ast.ClassDef]]:
    found = []
    for path in sorted(CLAIMS_DIR.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            bases = [b.id for b in getattr(node, "bases", []) if isinstance(b, ast.Name)]
            if isinstance(node, ast.ClassDef) and "ClaimInputs" in bases:
                found.append((path.name, node))
    return found


def test_every_inputs_field_has_a_type_and_a_docstring():
    """The fields are the contract: each one typed and described in the line(s) below it."""
    classes = _inputs_classes()
    assert {c.name for _, c in classes} >= {
        "A1Inputs", "A2Inputs", "A3Inputs", "A3QKInputs", "A3SensitivityInputs", "A3MapInputs",
        "A4Inputs", "BInputs", "CapacityInputs", "BenchMemory",
    }  # fmt: skip
    for file, cls in classes:
        body = cls.body
        fields = [(i, s) for i, s in enumerate(body) if isinstance(s, ast.AnnAssign)]
        assert fields, f"{file}: {cls.name} has no fields"
        for i, stmt in fields:
            doc = body[i + 1] if i + 1 < len(body) else None
            described = isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
            assert described and isinstance(doc.value.value, str), (
                f"{file}: {cls.name}.{ast.unparse(stmt.target)} has no docstring"
            )


def test_evaluate_refuses_inputs_of_another_type_in_one_line():
    qa = A3Inputs(ffn="plain", seeds=[0], rarest=2, head_groups=1, chance_fta=0.1)
    with pytest.raises(TypeError, match=r"ablation read tailmem\.claims\.a1\.A1Inputs; got A3In"):
        evaluate("ablation", qa)
    with pytest.raises(TypeError, match="got dict") as info:
        evaluate("knowledge-qa", {"ffn": "plain", "seeds": [0]})  # the old plain mapping
    assert "\n" not in str(info.value)
    claim = CLAIMS["A1.o_beats_v"]
    with pytest.raises(TypeError, match=r"claim A1\.o_beats_v reads .*A1Inputs; got A3Inputs"):
        claim.evaluate(qa)
    assert evaluate("no-such-experiment", qa) == []  # no claims: nothing to check


def test_inputs_are_frozen_and_keyword_only():
    inputs = BenchMemory(seeds=[0], paces=[])
    with pytest.raises(dataclasses.FrozenInstanceError):
        inputs.seeds = [1]  # type: ignore[misc]
    with pytest.raises(TypeError):  # keyword-only: no positional mix-ups
        A1Inputs("plain", {})  # type: ignore[misc]


def test_a_check_must_name_its_inputs_class():
    def untyped(claim, inputs):
        return decided(True, "x")

    def typed(claim: Claim, inputs: A1Inputs) -> Outcome:
        return decided(True, "x")

    with pytest.raises(TypeError, match="annotated as a ClaimInputs dataclass"):
        Claim("X.y", "ablation", "A1", "s", "p", "r", check=untyped)
    with pytest.raises(TypeError, match="declares no test"):
        Claim("X.y", "ablation", "A1", "s", "p", "r", check=typed)
    claim = Claim("X.y", "ablation", "A1", "s", "p", "r", check=declares(EXACT)(typed))
    assert claim.inputs is A1Inputs and claim.declared is EXACT
    assert Claim("X.z", None, "A1", "s", "p", "r").inputs is None

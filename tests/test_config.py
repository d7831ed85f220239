from dataclasses import dataclass, field
from typing import Literal

import pytest

from tailmem.config import load_config, parse_override, to_dict
from tailmem.errors import ConfigError
from tailmem.typecheck import from_dict


@dataclass
class Typed:
    n: int = 1
    x: float = 0.5
    flag: bool = False
    kind: Literal["gd", "muon"] = "gd"
    ks: list[int] = field(default_factory=list)
    pair: tuple[float, float] = (0.9, 0.95)
    maybe: int | None = None


def test_overrides_parse_as_yaml():
    assert parse_override("lr=1e-3") == ("lr", 1e-3)
    assert parse_override("ks=[1, 2]") == ("ks", [1, 2])
    assert parse_override("a.b=null") == ("a.b", None)
    assert parse_override("name=") == ("name", "")
    assert parse_override("x=-2E+4") == ("x", -2e4)
    assert parse_override("n=7") == ("n", 7)
    assert parse_override("v=1.2.3") == ("v", "1.2.3")


@pytest.mark.parametrize("bad", ["noequals", "=3", "x=[1,"])
def test_bad_override_is_one_clear_error(bad):
    with pytest.raises(ConfigError) as info:
        parse_override(bad)
    assert "\n" not in str(info.value)


def test_types_are_checked_and_coerced():
    cfg = from_dict(Typed, {"n": 3, "x": 2, "ks": [1, 2], "pair": [0.8, 0.95], "maybe": None})
    assert cfg.x == 2.0 and isinstance(cfg.x, float)
    assert cfg.pair == (0.8, 0.95)
    assert cfg.ks == [1, 2]


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ({"n": "three"}, "n: got 'three'; expected an integer"),
        ({"n": True}, "expected an integer"),
        ({"x": "fast"}, "x: got 'fast'; expected a number"),
        ({"flag": 1}, "expected true or false"),
        ({"kind": "adam"}, "expected one of 'gd', 'muon'"),
        ({"ks": [1, "a"]}, "ks[1]"),
        ({"pair": [1.0]}, "expected 2 values"),
        ({"maybe": "x"}, "expected int or null"),
        ({"bogus": 1}, "unknown config field 'bogus'"),
    ],
)
def test_type_errors_name_field_and_expectation(values, fragment):
    with pytest.raises(ConfigError) as info:
        from_dict(Typed, values)
    assert fragment in str(info.value)


def test_preset_plus_nested_override(fake_experiment):
    cfg = load_config(fake_experiment.Config, "fake", "smoke", ["inner.rate=0.25", "ks=[3]"])
    assert cfg.steps == 2 and cfg.inner.width == 8 and cfg.inner.rate == 0.25 and cfg.ks == [3]
    assert to_dict(cfg)["inner"] == {"width": 8, "rate": 0.25}


def test_unknown_preset_and_validate(fake_experiment):
    with pytest.raises(
        ConfigError, match="unknown preset 'huge' for fake; expected one of: smoke, cpu"
    ):
        load_config(fake_experiment.Config, "fake", "huge")
    with pytest.raises(ConfigError, match="steps: got 0; expected a positive integer"):
        load_config(fake_experiment.Config, "fake", "cpu", ["steps=0"])
    with pytest.raises(ConfigError, match=r"unknown config field 'inner\.depth'"):
        load_config(fake_experiment.Config, "fake", "cpu", ["inner.depth=2"])


def _sections(cls: type) -> list[type]:
    """``cls`` and every dataclass section type reachable through its fields' annotations."""
    import dataclasses
    import typing

    seen: list[type] = []
    todo = [cls]
    while todo:
        item = todo.pop()
        if item in seen or not dataclasses.is_dataclass(item):
            continue
        seen.append(item)
        for hint in typing.get_type_hints(item).values():
            todo.extend(a for a in (hint, *typing.get_args(hint)) if isinstance(a, type))
    return seen


@pytest.mark.parametrize("name", __import__("tailmem.experiments").experiments.study_names())
def test_every_config_is_frozen_and_loading_changes_no_value(name):
    """A study's config and every section in it are frozen dataclasses, and checking a built
    config changes nothing: normalisation made a new value before ``validate()`` ran."""
    import dataclasses

    from tailmem.experiments import get_study

    study = get_study(name)
    mutable = [t.__qualname__ for t in _sections(study.config) if not t.__dataclass_params__.frozen]
    assert not mutable, f"{name}: config types not frozen: {mutable}"
    cfg = load_config(study.config, name, "smoke")
    before = to_dict(cfg)
    cfg.validate()
    assert to_dict(cfg) == before
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 1  # type: ignore[misc]


def test_a_dotted_override_changes_one_entry_of_a_default_mapping_the_preset_does_not_set():
    """assoc-capacity's presets leave ``lr_grid`` (one grid per optimiser) at its default: an
    override of one optimiser's grid keeps the others' (it used to replace the whole mapping,
    and the run was then refused for a grid it had not been told to drop)."""
    from tailmem.experiments.assoc_capacity import Config

    default = load_config(Config, "assoc-capacity", "smoke").lr_grid
    cfg = load_config(Config, "assoc-capacity", "smoke", ["lr_grid.gd=[5.0]"])
    assert cfg.lr_grid == {**default, "gd": [5.0]} and len(default) > 1
    assert load_config(Config, "assoc-capacity", "smoke").lr_grid == default  # not mutated


@dataclass(frozen=True)
class Grids:
    grid: dict[str, list[float]] = field(default_factory=lambda: {"a": [1.0], "b": [2.0]})


@dataclass(frozen=True)
class Nested:
    n: int = 1
    inner: Grids = field(default_factory=Grids)


def test_a_dotted_override_reaches_a_default_mapping_through_an_unset_section():
    from pathlib import Path

    from tailmem.config import PresetSource, config_from

    source = PresetSource("custom", Path("nested.yaml"), b"n: 2\n", True)
    cfg = config_from(Nested, source, ["inner.grid.b=[3.0]"])
    assert cfg.inner.grid == {"a": [1.0], "b": [3.0]} and cfg.n == 2

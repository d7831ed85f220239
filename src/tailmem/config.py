"""Experiment configs: packaged YAML presets plus ``key=value`` overrides, checked into dataclasses.

Every experiment declares a ``Config`` dataclass. A preset is the YAML file
``tailmem/configs/<experiment>/<preset>.yaml``, named by its name only (never a path); it may set
any subset of the fields (the rest keep their dataclass defaults). A user's own YAML file
(``--config FILE``, e.g. ``tailmem config EXP --preset cpu`` saved and edited) takes the place of
a preset, is checked the same way, and is recorded by path and SHA-256
(:class:`PresetSource`). Overrides use dotted keys for nested dataclasses (``model.n_layer=4``)
and YAML syntax for values (``ks=[99,300]``, ``lr=1e-3``, ``name=null``).

Every problem — unknown preset, unknown field, a key given twice, wrong type, failed
``validate()``, an override the config's ``check_overrides(keys)`` finds would reach nothing —
raises :class:`~tailmem.errors.ConfigError` with one line naming the field by its full dotted
key (a nested section's ``validate()`` names its own field; :func:`from_dict` adds the
section's prefix) and what was expected. A field whose type has a ``from_config(value, name)``
classmethod parses its own section (and gives its plain form with ``to_config()``).

The type check is strict, for every field of every experiment alike (finite floats, true/false
booleans, no repeated list values, 64-bit ints, seeds in range): :mod:`tailmem.typecheck`, kept
apart from YAML so that the optimiser library can check its typed hyper-parameters without it.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import os
import re
import typing
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError

from tailmem.errors import ConfigError
from tailmem.typecheck import from_dict

T = TypeVar("T")

PRESETS = ("smoke", "cpu", "paper")

CONFIGS_ROOT = Path(str(resources.files("tailmem") / "configs"))


def preset_path(experiment: str, preset: str) -> Path:
    """The packaged YAML file of ``experiment`` at ``preset``."""
    return CONFIGS_ROOT / experiment / f"{preset}.yaml"


def available_presets(experiment: str) -> list[str]:
    """Presets shipped for ``experiment``, in the canonical order."""
    folder = CONFIGS_ROOT / experiment
    found = {p.stem for p in folder.glob("*.yaml")} if folder.is_dir() else set()
    return [p for p in PRESETS if p in found] + sorted(found - set(PRESETS))


USER_PRESET = "custom"
"""The preset a run records when its config comes from a user's file (``--config``)."""


@dataclass(frozen=True)
class PresetSource:
    """Where a config's base values come from: a packaged preset by name, or a user's YAML file
    (``--config FILE``), read once — its text is what is parsed, its SHA-256 what the run
    records, so the record names exactly the bytes the run used."""

    preset: str
    path: Path
    data: bytes
    user: bool = False

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def label(self) -> str:
        """How an error message names the file: ``--config FILE`` or ``preset file FILE``."""
        return f"--config {self.path}" if self.user else f"preset file {self.path}"

    def record(self) -> dict[str, Any]:
        """What a run's ``config.yaml`` records beyond the preset: a user's file, by absolute
        path and SHA-256 (nothing for a packaged preset)."""
        if not self.user:
            return {}
        return {"config_file": {"path": str(self.path.absolute()), "sha256": self.sha256}}


def preset_source(
    experiment: str, preset: str | None, config: str | os.PathLike[str] | None = None
) -> PresetSource:
    """The packaged preset ``preset`` of ``experiment`` — a name, never a path — or the user's
    YAML file ``config``: exactly one of the two (one ConfigError line otherwise)."""
    names = available_presets(experiment)
    choices = ", ".join(names) or "none"
    if preset is not None and config is not None:
        raise ConfigError(
            f"--preset {preset} and --config {config}: got both; expected one (a preset name, or "
            "a YAML file of your own)"
        )
    if config is not None:
        return PresetSource(USER_PRESET, Path(config), _user_file(Path(config), experiment), True)
    if preset is None:
        raise ConfigError(
            f"no preset given for {experiment}; expected --preset {' | '.join(names) or 'NAME'} "
            "(or --config FILE, a YAML file of your own)"
        )
    if preset not in names:
        raise ConfigError(
            f"unknown preset {preset!r} for {experiment}; expected one of: {choices} (a YAML "
            "file of your own: --config FILE)"
        )
    path = preset_path(experiment, preset)
    return PresetSource(preset, path, path.read_bytes())


def _user_file(path: Path, experiment: str) -> bytes:
    """The bytes of a user's config file; a path that is not a readable file is one line."""
    hint = f"a YAML file of {experiment}'s config fields (tailmem config {experiment} prints one)"
    if not path.exists():
        raise ConfigError(f"--config {path}: no such file; expected {hint}")
    if not path.is_file():
        raise ConfigError(f"--config {path} is not a file; expected {hint}")
    size = path.stat().st_size
    if size > MAX_YAML_CHARS * 4:  # UTF-8: at most 4 bytes a character
        raise ConfigError(f"--config {path}: {size} bytes; expected {hint} (at most "
                          f"{MAX_YAML_CHARS} characters)")  # fmt: skip
    return path.read_bytes()


def load_config(
    cls: type[T],
    experiment: str,
    preset: str | None,
    overrides: Sequence[str] = (),
    config: str | os.PathLike[str] | None = None,
) -> T:
    """Build ``cls`` from the ``preset`` YAML of ``experiment`` (or the user's file ``config``)
    plus ``key=value`` overrides."""
    return config_from(cls, preset_source(experiment, preset, config), overrides)


def config_from(cls: type[T], source: PresetSource, overrides: Sequence[str] = ()) -> T:
    """Build ``cls`` from the YAML of ``source`` plus ``key=value`` overrides."""
    values = _read_yaml(source)
    given: dict[str, tuple[str, Any]] = {}
    for item in overrides:
        key, value = parse_override(item)
        _check_once(key, item, value, given)
        _seed_default_mapping(cls, values, key)
        _set_dotted(values, key, value)
    cfg = from_dict(cls, values)
    check_overrides = getattr(cfg, "check_overrides", None)
    if callable(check_overrides):  # a key that would reach no run is refused, not ignored
        check_overrides(list(given))
    return cfg


def _check_once(key: str, item: str, value: Any, given: dict[str, tuple[str, Any]]) -> None:
    """Refuse an override that would silently replace an earlier one: the same key again, a
    section holding an earlier key (``model={...}`` after ``model.n_head=4``), or a key an
    earlier section's mapping sets (``tuning.only=true`` after ``tuning={only: false}``; a key
    it does not set adds to it). ``given`` maps the keys so far to their items and values."""
    for earlier, (text, held) in given.items():
        inside = key.startswith(f"{earlier}.") and _holds(held, key[len(earlier) + 1 :])
        if earlier == key or earlier.startswith(f"{key}.") or inside:
            relation = "repeats" if earlier == key else "replaces"
            relation = "changes a key of" if inside else relation
            raise ConfigError(
                f"override {key}: {item!r} {relation} {text!r}; expected each key once "
                "(the later would silently replace the earlier)"
            )
    given[key] = (item, value)


def _holds(section: Any, dotted: str) -> bool:
    """Whether the mapping ``section`` sets the dotted key ``dotted`` (``a.b``: ``{a: {b: 1}}``)."""
    for part in dotted.split("."):
        if not isinstance(section, Mapping) or part not in section:
            return False
        section = section[part]
    return True


class _Loader(yaml.SafeLoader):
    """YAML 1.1 reads ``1e-3`` as a string; scientific notation without a dot is a float here.
    Only ``true`` / ``false`` are booleans (YAML 1.2): ``yes``, ``on``, ``n`` stay strings, so a
    boolean field refuses them instead of guessing."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)

_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN)$"
    ),
    list("-+0123456789."),
)


MAX_YAML_CHARS = 1_000_000
"""The longest YAML text read (a preset is a few kilobytes)."""
MAX_YAML_DEPTH = 64
"""The deepest nesting of collections read (a config nests a handful deep)."""
MAX_YAML_NODES = 100_000
"""The most values a document may hold once every alias is expanded (an alias bomb's billions
are refused before anything is built from them)."""

_MERGE = "tag:yaml.org,2002:merge"


class _BoundedLoader(_Loader):
    """:class:`_Loader` that refuses, before building any value, what would exhaust the
    interpreter or the machine: nesting deeper than :data:`MAX_YAML_DEPTH` (a RecursionError
    otherwise), more than :data:`MAX_YAML_NODES` values once aliases are expanded, and a key
    given twice in one mapping (YAML would keep the second silently)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise ComposerError(
                    None, None, f"nested more than {MAX_YAML_DEPTH} deep",
                    self.peek_event().start_mark,
                )  # fmt: skip
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            _check_expanded_size(node)
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE:
                    continue
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, Hashable) and key in seen:
                    raise ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"found key {key!r} twice (first at line {seen[key].line + 1}); "
                        "expected each key once", key_node.start_mark,
                    )  # fmt: skip
                if isinstance(key, Hashable):
                    seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _check_expanded_size(root: Any) -> None:
    """Refuse a composed document holding more than :data:`MAX_YAML_NODES` values once its
    aliases are expanded, or an alias of a collection inside itself; counted without expanding
    (each node once, in post-order, without recursion)."""
    size: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        items = _children(node)
        if children_done:
            open_.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in items)
            if size[key] > MAX_YAML_NODES:
                raise ComposerError(
                    None, None, f"holds more than {MAX_YAML_NODES} values once its aliases are "
                    "expanded (an alias bomb?)", node.start_mark,
                )  # fmt: skip
            continue
        if key in size:
            continue
        if key in open_:
            raise ComposerError(
                None, None, "an alias refers to a collection inside itself", node.start_mark
            )
        open_.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in items if id(child) not in size)


def _children(node: Any) -> list[Any]:
    """The child nodes of a composed YAML node (a mapping's keys and values)."""
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _yaml_load(text: str) -> Any:
    """Parse YAML text; a value Python refuses to build (an integer of more digits than
    ``sys.get_int_max_str_digits()``, a date such as 2020-13-45) is a :class:`yaml.YAMLError`
    like any other malformed document, and so is a text longer than :data:`MAX_YAML_CHARS` or a
    document :class:`_BoundedLoader` refuses."""
    if len(text) > MAX_YAML_CHARS:
        raise yaml.YAMLError(f"{len(text)} characters; expected at most {MAX_YAML_CHARS}")
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # safe: a SafeLoader subclass
    except ValueError as exc:  # Python's own advice after ";" (set_int_max_str_digits) is cut
        raise yaml.YAMLError(" ".join(str(exc).split(";")[0].split())) from None


def parse_override(item: str) -> tuple[str, Any]:
    """Split ``key=value``; the value is YAML (``1e-3`` is a float, ``[1,2]`` a list)."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {item!r} is not of the form key=value")
    try:
        value = _yaml_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        shown = raw if len(raw) <= 60 else f"{raw[:40]}... ({len(raw)} characters)"
        problem = getattr(exc, "problem", None) or exc
        raise ConfigError(
            f"override {key}: value {shown!r} is not valid YAML ({problem})"
        ) from None
    return key, value


def as_overrides(overrides: object) -> list[str]:
    """``key=value`` overrides from a mapping ``{key: value}`` (each value written as YAML that
    :func:`parse_override` reads back as the same value) or a sequence of ``"key=value"``
    strings; anything else (one string, a list of tuples) is one :class:`ConfigError` line."""
    expected = "expected a mapping {key: value} or a list of 'key=value' strings"
    if isinstance(overrides, Mapping):
        items = []
        for key, value in overrides.items():
            if not isinstance(key, str) or not key.strip() or "=" in key:
                raise ConfigError(f"overrides: key {key!r} is not a config key; {expected}")
            flow = yaml.dump(_plain(value), Dumper=_Dumper, default_flow_style=True,
                             width=float("inf"))  # fmt: skip
            items.append(f"{key}={flow.removesuffix(chr(10)).removesuffix('...').strip()}")
        return items
    if isinstance(overrides, (str, bytes)) or not isinstance(overrides, Sequence):
        raise ConfigError(
            f"overrides: got {type(overrides).__name__} {overrides!r:.60}; {expected}"
        )
    for item in overrides:
        if not isinstance(item, str):
            raise ConfigError(f"overrides: got an item {item!r:.60}; {expected}")
    return list(overrides)


def to_dict(cfg: Any) -> dict[str, Any]:
    """A plain, YAML-serialisable dict of a config dataclass (tuples become lists)."""
    plain: dict[str, Any] = _plain(cfg)
    return plain


class _Dumper(yaml.SafeDumper):
    """Quotes every string that either reader would take for something else: this module's
    :class:`_Loader` (``1e-8`` is a float) or plain YAML 1.1 (``on`` is a boolean), so a dumped
    config reads back as the same values (``tailmem config EXP > f.yaml`` then ``--config``)."""


_Dumper.yaml_implicit_resolvers = {
    first: [*yaml.SafeDumper.yaml_implicit_resolvers.get(first, []), *resolvers]
    for first, resolvers in {
        **yaml.SafeDumper.yaml_implicit_resolvers,
        **_Loader.yaml_implicit_resolvers,
    }.items()
}


def dump_yaml(data: Any) -> str:
    """Stable YAML text for configs and run records, read back as the same values."""
    return yaml.dump(_plain(data), Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def _plain(value: Any) -> Any:
    """Plain data of a config value; a type with its own config form (``to_config()``, as
    :class:`~tailmem.lm.config.OptimSection`) gives that."""
    to_config = getattr(value, "to_config", None)
    if callable(to_config) and not isinstance(value, type):
        return _plain(to_config())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, Path)):
        return str(value)  # also plain-ifies str subclasses such as torch's TorchVersion
    return value


def _read_yaml(source: PresetSource) -> dict[str, Any]:
    try:
        data = _yaml_load(source.data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{source.label} is not UTF-8 text ({exc.reason} at byte {exc.start}); expected a "
            "YAML file"
        ) from None
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        raise ConfigError(f"{source.label} is not valid YAML: {problem}") from None
    if data is None:  # no document, or comments only: it would run every default unasked
        raise ConfigError(
            f"{source.label} is empty; expected a mapping of config fields (`tailmem config "
            "EXP --preset cpu` prints one to start from)"
        )
    if not isinstance(data, dict):
        raise ConfigError(f"{source.label} must contain a mapping of config fields")
    return data


def _seed_default_mapping(cls: type, values: dict[str, Any], key: str) -> None:
    """Copy into ``values`` the default of a mapping field (``dict[str, …]``) that the dotted
    ``key`` reaches into and nothing has set yet, so that ``lr_grid.gd=[5.0]`` changes one entry
    of the default mapping rather than replacing the mapping by ``{gd: [5.0]}``, as a key of a
    mapping the preset sets already does; the walk goes through dataclass sections (whose unset
    fields keep their defaults) to a mapping field at any depth."""
    *parents, _ = key.split(".")
    node: dict[str, Any] = values
    owner: Any = cls
    for part in parents:
        if not (isinstance(owner, type) and dataclasses.is_dataclass(owner)):
            return
        spec = next((f for f in dataclasses.fields(owner) if f.name == part), None)
        if spec is None:  # an unknown field: from_dict names it
            return
        hint = typing.get_type_hints(owner).get(part)
        if part not in node:
            default = _default(spec)
            if isinstance(default, dict):
                node[part] = copy.deepcopy(default)
            elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
                node[part] = {}  # a section: its unset fields keep their defaults
            else:
                return
        child = node[part]
        if not isinstance(child, dict):
            return
        node, owner = child, hint


def _default(spec: dataclasses.Field[Any]) -> Any:
    """A dataclass field's default value (a fresh one from its factory), or None."""
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return None if spec.default is dataclasses.MISSING else spec.default


def _set_dotted(values: dict[str, Any], key: str, value: Any) -> None:
    *parents, leaf = key.split(".")
    node = values
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {key}: {part!r} is not a nested section")
        node = child
    node[leaf] = value

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

import dataclasses
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml

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
    given: dict[str, str] = {}
    for item in overrides:
        key, value = parse_override(item)
        _check_once(key, item, given)
        _set_dotted(values, key, value)
    cfg = from_dict(cls, values)
    check_overrides = getattr(cfg, "check_overrides", None)
    if callable(check_overrides):  # a key that would reach no run is refused, not ignored
        check_overrides(list(given))
    return cfg


def _check_once(key: str, item: str, given: dict[str, str]) -> None:
    """Refuse an override that would silently replace an earlier one: the same key again, or a
    section holding an earlier key (``model={...}`` after ``model.n_head=4``). ``given`` maps the
    keys so far to their items."""
    for earlier, text in given.items():
        if earlier == key or earlier.startswith(f"{key}."):
            relation = "repeats" if earlier == key else "replaces"
            raise ConfigError(
                f"override {key}: {item!r} {relation} {text!r}; expected each key once "
                "(the later would silently replace the earlier)"
            )
    given[key] = item


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


def _yaml_load(text: str) -> Any:
    """Parse YAML text; a value Python refuses to build (an integer of more digits than
    ``sys.get_int_max_str_digits()``, a date such as 2020-13-45) is a :class:`yaml.YAMLError`
    like any other malformed document."""
    try:
        return yaml.load(text, Loader=_Loader)  # safe: _Loader is a SafeLoader subclass
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
        data = _yaml_load(source.data.decode("utf-8")) or {}
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{source.label} is not UTF-8 text ({exc.reason} at byte {exc.start}); expected a "
            "YAML file"
        ) from None
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        raise ConfigError(f"{source.label} is not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source.label} must contain a mapping of config fields")
    return data


def _set_dotted(values: dict[str, Any], key: str, value: Any) -> None:
    *parents, leaf = key.split(".")
    node = values
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {key}: {part!r} is not a nested section")
        node = child
    node[leaf] = value

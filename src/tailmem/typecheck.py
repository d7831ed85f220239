"""Strict checking of values against type annotations, and building dataclasses from them.

What :mod:`tailmem.config` uses to check a preset and its overrides, apart from reading YAML, so
that code which only checks typed values (the optimiser registry's hyper-parameter specs) needs
neither YAML nor a preset: :func:`from_dict` builds a dataclass from a mapping, checking each
field against its annotation, then putting it in its normal form (``normalized()``, a new value:
configs are frozen) and running its ``validate()``, which only checks; every problem is one
:class:`~tailmem.errors.ConfigError` line naming the field by its full dotted key;
:func:`replaced` changes fields of a built config by dotted key under the same checks (how one
study builds another's configs as values).

The rules, for every field alike: a ``float`` must be finite (NaN and ±inf are refused unless
the field is declared with ``metadata={NONFINITE: True}``); a ``bool`` is ``true`` or ``false``
(not ``maybe``, not ``1``); a variable-length list (``list[X]``, ``tuple[X, ...]``, also inside
mappings) must not repeat a value unless declared with ``metadata={DUPLICATES: True}``;
``dict[K, V]`` checks its keys and values; an ``int`` fits in 64 bits (:data:`INT_MAX`), and a
seed (a field named ``seed`` or ``*_seed``) lies in ``[0, SEED_MAX]``, the range every random
generator used here accepts. A type with a ``from_config(value, name)`` classmethod parses its
own value. Ranges that depend on the field's meaning are checked in ``validate()`` with
:func:`check_range`, which refuses NaN.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from tailmem.errors import ConfigError

T = TypeVar("T")

NONFINITE = "allow_nonfinite"
"""Field metadata key: this float field may be NaN or ±inf."""
DUPLICATES = "allow_duplicates"
"""Field metadata key: this list field may repeat a value."""

INT_MAX = 2**63 - 1
"""The largest magnitude of an ``int`` field: what torch and NumPy index and seed with."""
SEED_MAX = 2**32 - 1
"""The largest seed: NumPy's legacy seeding takes ``[0, 2**32 − 1]``, torch takes more."""


def from_dict(cls: type[T], values: object, prefix: str = "") -> T:
    """Type-check ``values`` (as read: anything but a mapping is a ConfigError) against dataclass
    ``cls`` and build it in its normal form, checked by ``validate()`` (:func:`_validated`)."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"from_dict builds dataclasses; got {cls!r}")
    if not isinstance(values, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {values!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(
            f"unknown config field '{prefix}{unknown[0]}'; expected one of: {', '.join(fields)}"
        )
    kwargs = {
        name: _coerce(value, hints[name], f"{prefix}{name}", _Rules.of(fields[name]))
        for name, value in values.items()
    }
    cfg = cls(**kwargs)
    return _validated(cfg, prefix, fields)


def replaced(cfg: T, changes: Mapping[str, object], prefix: str = "") -> T:
    """``cfg`` with ``changes`` made, keyed by dotted field (``{"model.n_layer": 4}``): the
    typed counterpart of building the config again with the changes among its overrides.

    Each value is checked against its field's annotation as :func:`from_dict` checks it; every
    section a change reaches is rebuilt with :func:`dataclasses.replace` (a type with its own
    config form, such as an optimiser section, is parsed again from ``to_config()`` with the
    change) and validated, ``cfg`` last. ``cfg`` is left as it was. Whether a user's change
    reaches a run is the caller's to ask (``check_overrides(keys)``, as the loader does) once
    every change is made."""
    if not dataclasses.is_dataclass(cfg) or isinstance(cfg, type):
        raise TypeError(f"replaced changes dataclass instances; got {cfg!r}")
    hints = typing.get_type_hints(type(cfg))
    fields = {f.name: f for f in dataclasses.fields(cfg) if f.init}
    by_field: dict[str, dict[str, object]] = {}
    for key, value in changes.items():
        head, _, rest = key.partition(".")
        if head not in fields:
            raise ConfigError(
                f"unknown config field '{prefix}{head}'; expected one of: {', '.join(fields)}"
            )
        by_field.setdefault(head, {})[rest] = value
    new = {
        name: _replaced_field(
            getattr(cfg, name), sub, hints[name], f"{prefix}{name}", _Rules.of(fields[name])
        )
        for name, sub in by_field.items()
    }
    return _validated(dataclasses.replace(cfg, **new), prefix, fields)


def _validated(cfg: T, prefix: str, fields: Mapping[str, object]) -> T:
    """``cfg`` in its normal form (``normalized()``, where the config defines it: a new value,
    e.g. with a section for every optimiser kind it uses), checked by its ``validate()``; a
    message names its field by the full key. Neither method changes the value it is given:
    configs are frozen."""
    try:
        normalized = getattr(cfg, "normalized", None)
        if callable(normalized):
            cfg = normalized()
        validate = getattr(cfg, "validate", None)
        if callable(validate):
            validate()
    except ConfigError as exc:
        raise ConfigError(_dotted(str(exc), prefix, fields)) from None
    return cfg


def _replaced_field(
    current: object, changes: Mapping[str, object], tp: object, name: str, rules: _Rules
) -> object:
    """One field of :func:`replaced`: a whole new value (key ``""``), or changes inside it."""
    if "" in changes:
        if len(changes) > 1:
            deeper = next(f"{name}.{k}" for k in changes if k)
            raise ConfigError(
                f"{deeper}: given beside {name} itself; expected one of the two (the whole "
                "value would silently replace the key inside it, or the other way round)"
            )
        return _coerce(changes[""], tp, name, rules)
    if dataclasses.is_dataclass(current) and not isinstance(current, type):
        return replaced(current, changes, prefix=f"{name}.")
    to_config = getattr(current, "to_config", None)
    if callable(to_config):
        plain = to_config()
    elif isinstance(current, Mapping):
        plain = dict(current)
    else:
        key = next(iter(changes))
        raise ConfigError(f"{name}.{key}: {name} is not a nested section; expected {name}=VALUE")
    for key, value in changes.items():
        node = plain
        *parents, leaf = key.split(".")
        for part in parents:
            child = node.get(part, {})
            if not isinstance(child, Mapping):
                raise ConfigError(f"{name}.{key}: {part!r} is not a nested section")
            node[part] = child = dict(child)
            node = child
        node[leaf] = value
    return _coerce(plain, tp, name, rules)


def _dotted(message: str, prefix: str, fields: Mapping[str, object]) -> str:
    """``message`` of a nested section's ``validate()`` with its field named by the full key:
    ``m: got 99`` from the ``data`` section becomes ``data.m: got 99``."""
    name = re.match(r"[A-Za-z_]\w*", message)
    if prefix and name and name.group() in fields and message[name.end() : name.end() + 1] in ":[":
        return prefix + message
    return message


def _type_name(tp: object) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if origin in (list, tuple, Sequence):
        args = [a for a in get_args(tp) if a is not Ellipsis]
        return f"a list of {_type_name(args[0])}" if args else "a list"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


@dataclasses.dataclass(frozen=True)
class _Rules:
    """What a field's metadata relaxes in :func:`_coerce` (see the module docstring)."""

    nonfinite: bool = False
    duplicates: bool = False
    seed: bool = False

    @staticmethod
    def of(spec: dataclasses.Field[object]) -> _Rules:
        seed = spec.name == "seed" or spec.name.endswith("_seed")
        return _Rules(bool(spec.metadata.get(NONFINITE)), bool(spec.metadata.get(DUPLICATES)), seed)


def check_range(
    name: str,
    value: float,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    why: str = "",
) -> None:
    """Raise :class:`ConfigError` unless ``value`` lies in the given bounds; NaN never does.

    NaN is refused whatever the bounds (comparisons with NaN are all false, so ``x <= 0``-style
    checks would let it through).
    """
    ok = (
        not math.isnan(value)
        and (gt is None or value > gt)
        and (ge is None or value >= ge)
        and (lt is None or value < lt)
        and (le is None or value <= le)
    )
    if ok:
        return
    bounds = [
        f"{op} {bound:g}"
        for op, bound in ((">", gt), ("≥", ge), ("<", lt), ("≤", le))
        if bound is not None
    ]
    suffix = f" ({why})" if why else ""
    expected = " ".join(["expected a number", " and ".join(bounds)]).strip()
    raise ConfigError(f"{name}: got {value!r}; {expected}{suffix}")


def check_value(value: object, tp: object, name: str) -> Any:
    """Check one value against annotation ``tp`` with the strict rules of the module docstring
    (for values outside a config dataclass, e.g. the entries of a free-form overrides mapping)."""
    return _coerce(value, tp, name, _Rules())


def _coerce(value: object, tp: object, name: str, rules: _Rules) -> Any:
    """Check ``value`` against annotation ``tp``; ints are accepted where floats are expected."""
    origin = get_origin(tp)
    expected = _type_name(tp)
    if tp is Any:
        return value
    if origin is Literal:
        if value in get_args(tp):
            return value
        raise ConfigError(f"{name}: got {value!r}; expected {expected}")
    if origin in (Union, types.UnionType):
        others = [arg for arg in get_args(tp) if arg is not type(None)]
        if value is not None and len(others) == 1 and _same_kind(value, others[0]):
            return _coerce(value, others[0], name, rules)  # X | None: X's precise message
        for arg in get_args(tp):
            try:
                return _coerce(value, arg, name, rules)
            except ConfigError:
                continue
        raise ConfigError(f"{name}: got {value!r}; expected {expected}")
    if tp is type(None):
        if value is None:
            return None
        raise ConfigError(f"{name}: got {value!r}; expected null")
    if origin in (list, tuple, Sequence) or tp in (list, tuple):
        return _coerce_sequence(value, tp, name, rules)
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{name}: got {value!r}; expected a mapping")
        key_tp, value_tp = get_args(tp) or (Any, Any)
        return {
            _coerce(k, key_tp, f"{name} key", rules): _coerce(v, value_tp, f"{name}.{k}", rules)
            for k, v in value.items()
        }
    parse = getattr(tp, "from_config", None)
    if isinstance(tp, type) and callable(parse):  # a type that parses its own section
        return parse(value, name)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_dict(tp, value, prefix=f"{name}.")
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{name}: got {value!r}; expected true or false")
    if tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{name}: got {value!r}; expected an integer")
        if rules.seed and not 0 <= value <= SEED_MAX:
            raise ConfigError(f"{name}: got {_short(value)}; expected a seed in [0, {SEED_MAX}]")
        if abs(value) > INT_MAX:
            raise ConfigError(
                f"{name}: got {_short(value)}; expected an integer of at most 64 bits "
                f"(magnitude ≤ {INT_MAX})"
            )
        return value
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not rules.nonfinite and not math.isfinite(value):
                raise ConfigError(f"{name}: got {value!r}; expected a finite number")
            return float(value)
        raise ConfigError(f"{name}: got {value!r}; expected a number")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{name}: got {value!r}; expected a string")
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise ConfigError(f"{name}: got {value!r}; expected {expected}")


def _same_kind(value: object, tp: object) -> bool:
    """Whether ``value`` has the Python type annotation ``tp`` asks for (a list for a list, a
    mapping for a dict or section, an int for an int...), so that its own checks, not the
    type, decide; a literal never counts (its choices make the message)."""
    origin = get_origin(tp) or tp
    if origin in (list, tuple, Sequence):
        return isinstance(value, (list, tuple))
    if origin in (dict, Mapping) or dataclasses.is_dataclass(tp):
        return isinstance(value, Mapping)
    if tp in (int, float):
        return isinstance(value, (int, float) if tp is float else int) and not isinstance(
            value, bool
        )
    return isinstance(tp, type) and origin is not Literal and isinstance(value, tp)


def _short(value: int) -> str:
    """An integer as text, or its size in bits when it is too long to read (or to convert)."""
    return str(value) if value.bit_length() <= 80 else f"an integer of {value.bit_length()} bits"


def _coerce_sequence(value: object, tp: object, name: str, rules: _Rules) -> Any:
    """A fixed-length tuple item by item, or a variable-length list without repeated values."""
    origin = get_origin(tp)
    expected = _type_name(tp)
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"{name}: got {value!r}; expected {expected}")
    args = [a for a in get_args(tp) if a is not Ellipsis]
    if origin is tuple and len(args) > 1 and Ellipsis not in get_args(tp):
        if len(value) != len(args):
            raise ConfigError(f"{name}: got {value!r}; expected {len(args)} values")
        return tuple(
            _coerce(v, a, f"{name}[{i}]", rules)
            for i, (v, a) in enumerate(zip(value, args, strict=True))
        )
    item = args[0] if args else Any
    items = [_coerce(v, item, f"{name}[{i}]", rules) for i, v in enumerate(value)]
    if not rules.duplicates:
        for i, v in enumerate(items):
            if v in items[:i]:
                raise ConfigError(
                    f"{name}: got {value!r}; expected each value at most once ({v!r} repeats)"
                )
    return tuple(items) if origin is tuple or tp is tuple else items

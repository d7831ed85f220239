"""Optimiser routing: a recipe written in roles -> param groups -> one combined optimiser.

Paper A trains each block of a transformer with a different optimiser ("Muon on V and O, Adam on
everything else"). A *recipe* says that in roles (:mod:`tailmem.models.roles`), not parameter
names, so it works for any model whose roles resolve::

    "muon:v,o,w_in,w_gate,w_out adam:*"     "adam:*"     "muon:q,k,v,o,w_in,w_out adamw:*"

Grammar: clauses ``kind:role,role,...`` separated by whitespace (roles may be separated by commas
and/or spaces). Kinds: the optimiser registry (:data:`tailmem.optim.registry.REGISTRY`), plus any
user kinds the caller passes. ``*`` stands for every role not named in another clause.
Each kind appears once and each role at most once; a role named in the recipe but absent from the
model is fine (so one recipe serves plain and gated FFNs), but every kind must end up with at least
one trainable parameter. Frozen parameters (``requires_grad=False``) are left out.

:func:`build_optimizer` returns a :class:`RoutedOptimizer`: a real ``torch.optim.Optimizer`` that
owns one child optimiser per kind and exposes the union of their param groups (the very same dict
objects), so LR schedulers, Hugging Face ``Trainer`` and plain loops drive it like any optimiser.
Within each kind there is one param group per role (tagged ``"kind"`` and ``"role"``, with
``"param_names"``), so per-role learning rates can be read and changed.

Strictness (all raise :class:`~tailmem.errors.ConfigError` with one line; under the unrouted
parameters' line, which names them and the fix, a table of them follows): unknown kind or role,
a kind or role named twice, ``*`` twice, a trainable parameter whose role the recipe does not
route, a fused tensor (GPT-2 ``c_attn``) whose parts go to different kinds, a matrices-only kind
(Muon) given a parameter with fewer than two dimensions, a kind given a parameter whose layout
it cannot apply (fused blocks or ``(in, out)`` storage to ``torch_muon``, fused blocks to SOAP,
PSGD-Kron or MARS, a layout option in ``role_overrides``), a kind that gets no parameters,
hyperparameters for a kind that is unknown or not in the recipe, hyperparameter names the kind's
typed spec (:class:`~tailmem.optim.registry.HParams`) does not have, and values it or the
optimiser rejects.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from tailmem.errors import CheckpointError, ConfigError
from tailmem.mdtable import text_table
from tailmem.models.roles import (
    FAMILIES,
    MATRIX_ROLES,
    ROLES,
    ParamRole,
    RoleSpec,
    _short_list,
    resolve_roles,
    vocab_size,
    vocabulary_tables,
)
from tailmem.optim.registry import (
    MUON_LAYOUT_KEYS,
    REGISTRY,
    OptimizerKind,
    OptimizerSetting,
    get_kind,
)

_EXAMPLE = "e.g. 'muon:v,o,w_in,w_gate,w_out adam:*'"
_TABLE_ROWS = 20


def parse_recipe(
    recipe: str, kinds: Collection[str] | None = tuple(REGISTRY)
) -> dict[str, list[str]]:
    """Parse and validate a recipe into ``kind -> roles`` (in recipe order), ``*`` expanded.

    ``*`` becomes every role of :data:`~tailmem.models.roles.ROLES` not named by another clause,
    in that order, after the clause's own named roles. ``kinds``: the kind names allowed
    (default: the registry's; None: any name, checked by the caller). Needs no model, so the CLI
    can validate a config before building anything.
    """
    if not isinstance(recipe, str) or not recipe.strip():
        raise ConfigError(f"optimiser recipe is empty; expected kind:role,... clauses, {_EXAMPLE}")
    clauses = re.split(r"\s+(?=[^\s,:]+\s*:)", recipe.strip())
    named: dict[str, list[str]] = {}
    owner: dict[str, str] = {}
    star_kind = None
    for clause in clauses:
        kind, sep, rest = (s.strip() for s in clause.partition(":"))
        if not sep:
            raise ConfigError(
                f"recipe clause {clause!r} in {recipe!r} should look like kind:role,role "
                f"({_EXAMPLE})"
            )
        if kinds is not None and kind not in kinds:
            raise ConfigError(
                f"unknown optimiser kind {kind!r} in recipe {recipe!r}; valid: {', '.join(kinds)}"
            )
        if kind in named:
            raise ConfigError(
                f"optimiser kind {kind!r} appears twice in recipe {recipe!r}; list all its roles "
                f"in one clause"
            )
        roles = [r for r in re.split(r"[,\s]+", rest) if r]
        if not roles:
            raise ConfigError(f"recipe clause {clause!r} in {recipe!r} names no roles")
        named[kind] = []
        for role in roles:
            if role == "*":
                if star_kind is not None:
                    raise ConfigError(
                        f"'*' appears twice in recipe {recipe!r} ({star_kind} and {kind}); "
                        f"only one kind can take the remaining roles"
                    )
                star_kind = kind
                continue
            if role not in ROLES:
                raise ConfigError(
                    f"unknown role {role!r} in recipe {recipe!r}; valid roles: "
                    f"{', '.join(ROLES)} or '*'"
                )
            if role in owner:
                raise ConfigError(
                    f"role {role!r} is named twice in recipe {recipe!r} ({owner[role]} and "
                    f"{kind}); give each role one optimiser"
                )
            owner[role] = kind
            named[kind].append(role)
    if star_kind is not None:
        named[star_kind] += [r for r in ROLES if r not in owner]
    return named


def plan_param_groups(
    model: nn.Module,
    recipe: str,
    *,
    roles: RoleSpec | None = None,
    force_muon_vocab: bool = False,
    kinds: Mapping[str, OptimizerKind] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Route every trainable parameter of ``model`` to a kind and a param group, as plain data.

    Returns ``kind -> groups`` (kinds in recipe order). Each group is a dict with ``params``,
    ``param_names``, ``kind`` and ``role`` (a fused tensor's role is e.g. ``"q+k+v"``); groups
    follow the order of :data:`~tailmem.models.roles.ROLES`, parameters the order of
    ``named_parameters()``. Groups of a kind with layout keys (Muon) also carry the layout
    hints of their parameters, ``fan_out_dim`` always and ``row_splits`` when the tensor is
    split; parameters of one role with different hints get separate groups with the same role
    tag. A kind that cannot apply a parameter's layout
    (:meth:`~tailmem.optim.registry.OptimizerKind.unapplied_layout`: fused blocks, an output
    dimension other than 0) is refused it. ``kinds``: user kinds besides the registry's.

    ``roles`` (``{name pattern: role}`` or ``(name, param) -> role | None``) is consulted before
    the built-in roles (:func:`~tailmem.models.roles.resolve_roles`).

    Ensembles: a model with ``member_dims`` (``GPT(cfg, members=E)``: 1) has that many leading
    member dimensions on every parameter. They do not count as matrix dimensions, every group of
    a Muon-like kind gets ``batch_dims`` (each member's matrix orthogonalised on its own), and a
    kind that is not ``per_member`` (it would mix members) is a :class:`ConfigError`.

    Vocabulary guard: the vocabulary's tables (an embedding, an LM head, an unrecognised output
    layer beside the blocks; decided by role and owning module, not by shape alone:
    :func:`~tailmem.models.roles.vocabulary_tables`) are never given to a matrices-only kind
    (Muon): that raises :class:`~tailmem.errors.ConfigError` unless ``force_muon_vocab=True``.
    A hidden matrix whose width happens to equal the vocabulary's is not refused.

    Every refusal names its fix: a recipe line that routes the model, or the ``roles=`` that
    names the roles of a model whose layers no built-in rule recognises.
    """
    known = {**REGISTRY, **(kinds or {})}
    routes = parse_recipe(recipe, tuple(known))
    kind_of_role = {role: kind for kind, rs in routes.items() for role in rs}
    try:
        resolved = resolve_roles(model, roles)
    except ConfigError:
        raise  # a roles= callable that raised: its exception stays chained
    except ValueError as err:
        raise ConfigError(str(err)) from None
    member_dims = getattr(model, "member_dims", 0)
    tables = set() if force_muon_vocab else set(vocabulary_tables(model, resolved, member_dims))
    mixing = [kind for kind in routes if member_dims and not known[kind].per_member]
    if mixing:
        safe = [k for k, spec in known.items() if spec.per_member]
        raise ConfigError(
            f"{mixing[0]} cannot train an ensemble (its step mixes the members of a stacked "
            f"parameter); ensembles take {', '.join(safe)}"
        )
    buckets: dict[tuple[Any, ...], list[tuple[str, nn.Parameter]]] = {}
    unassigned: list[tuple[str, str]] = []
    non_matrix: Misrouted = []
    vocab_shaped: Misrouted = []
    unapplied: list[tuple[str, str]] = []  # (kind, parameter name)
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        pr = resolved[name]
        kinds_of_param = [kind_of_role.get(role) for role in pr.roles]
        if None in kinds_of_param:
            unassigned.append((name, pr.role))
            continue
        if len(set(kinds_of_param)) > 1:
            sent = ", ".join(f"{r} -> {k}" for r, k in zip(pr.roles, kinds_of_param, strict=True))
            fixes = " or ".join(
                repr(_recipe_moving(recipe, pr.roles, kind))
                for kind in dict.fromkeys(k for k in kinds_of_param if k is not None)
            )
            raise ConfigError(
                f"parameter {name!r} holds {', '.join(pr.roles)} fused in one tensor, so they "
                f"need one optimiser kind, but recipe {recipe!r} sends {sent}; give them one "
                f"kind, e.g. {fixes}"
            )
        kind = kind_of_role[pr.roles[0]]  # every part of a fused tensor goes to this one kind
        matrices_only = known[kind].matrices_only
        if matrices_only and p.ndim - member_dims < 2:
            non_matrix.append((kind, name, pr.role, tuple(p.shape)))
        elif matrices_only and name in tables:
            vocab_shaped.append((kind, name, pr.role, tuple(p.shape)))
        if known[kind].unapplied_layout(pr.row_splits, pr.fan_out_dim):
            unapplied.append((kind, name))
        hints = (pr.fan_out_dim, pr.row_splits) if known[kind].layout_keys else ()
        buckets.setdefault((kind, pr.role, *hints), []).append((name, p))
    _refuse_unrouted(model, recipe, unassigned)
    _refuse_misrouted(recipe, known, non_matrix, vocab_shaped, vocab_size(model))
    _refuse_unapplied(recipe, known, resolved, unapplied)
    empty = [kind for kind in routes if not any(key[0] == kind for key in buckets)]
    if empty:
        _refuse_empty(model, recipe, empty[0], routes[empty[0]], resolved, tables, member_dims)
    return _groups(buckets, routes, known, member_dims)


def _refuse_empty(
    model: nn.Module,
    recipe: str,
    kind: str,
    kind_roles: Sequence[str],
    resolved: Mapping[str, ParamRole],
    tables: Collection[str],
    member_dims: int,
) -> None:
    """The :class:`ConfigError` for a kind of ``recipe`` that gets no parameter: where the model
    has matrices no built-in rule recognises (role ``other``) and the kind was given matrix
    roles, the fix is to name their roles (``roles=``, patterns drawn from their names) or to
    route ``other`` (a recipe line); otherwise, to drop the kind."""
    params = dict(model.named_parameters())
    hidden = [
        name
        for name, pr in resolved.items()
        if pr.role == "other"
        and params[name].requires_grad
        and params[name].ndim - member_dims >= 2
        and name not in tables
    ]
    given = f"recipe {recipe!r} gives {kind} role(s) {', '.join(kind_roles)}"
    if not hidden or not set(kind_roles) & set(MATRIX_ROLES):
        raise ConfigError(
            f"{given}, but the model has no trainable parameters with those roles; drop {kind} "
            f"from the recipe"
        )
    heads = [name for name in tables if resolved[name].role == "other"]
    patterns = ", ".join(f'r"{p}": "..."' for p in dict.fromkeys(map(name_pattern, hidden)))
    head_roles = ", ".join(f'r"{p}": "head"' for p in dict.fromkeys(map(name_pattern, heads)))
    line = _recipe_moving(recipe, ("other",), kind)
    raise ConfigError(
        f"{given}, but no parameter of the model has them: its layer names are none that "
        f"tailmem recognises ({FAMILIES}), so its {len(hidden)} hidden matrices have role "
        f"'other' ({_short_list(hidden, 4)}); name their roles, build_optimizer(model, recipe, "
        f"roles={{{patterns}}}) with each one's role ({' '.join(MATRIX_ROLES)}), or give "
        f"{kind} all of them with the recipe {line!r}"
        + (f" and roles={{{head_roles}}} for the output layer" if heads else "")
        + "; tailmem.models.roles.roles_table(model) shows every role"
    )


def name_pattern(name: str) -> str:
    """A regular expression matching ``name`` with every block index as ``\\d+``
    (``layers.0.linear1.weight`` -> ``layers\\.\\d+\\.linear1\\.weight``): one ``roles=``
    pattern for the same tensor of every block."""
    return r"\.".join(r"\d+" if part.isdigit() else re.escape(part) for part in name.split("."))


def _recipe_moving(recipe: str, roles: Sequence[str], kind: str) -> str:
    """``recipe`` with ``roles`` taken out of every clause and given to ``kind`` (left to its
    ``*`` when it has one); a clause left with no role is dropped."""
    clauses: dict[str, list[str]] = {}
    for clause in re.split(r"\s+(?=[^\s,:]+\s*:)", recipe.strip()):
        name, _, rest = (part.strip() for part in clause.partition(":"))
        clauses[name] = [r for r in re.split(r"[,\s]+", rest) if r and r not in roles]
    if "*" not in clauses[kind]:
        clauses[kind] = [*roles, *clauses[kind]]
    return " ".join(f"{name}:{','.join(rs)}" for name, rs in clauses.items() if rs)


Misrouted = list[tuple[str, str, str, tuple[int, ...]]]
"""(kind, parameter name, role, shape) of parameters a recipe sends where they cannot go."""


def _refuse_unrouted(model: nn.Module, recipe: str, unassigned: list[tuple[str, str]]) -> None:
    """One :class:`ConfigError` naming the parameters (name, role) no clause of ``recipe``
    routes and the fix in its first line, which says all a log line needs; a table of them
    (name, shape, role) follows it. Nothing when every parameter has a kind."""
    if not unassigned:
        return
    missing_roles = sorted({role for _, role in unassigned}, key=_role_order)
    params = dict(model.named_parameters())
    rows: list[tuple[object, ...]] = [
        (n, tuple(params[n].shape), role) for n, role in unassigned[:_TABLE_ROWS]
    ]
    more = len(unassigned) - len(rows)
    raise ConfigError(
        f"recipe {recipe!r} gives no optimiser to {len(unassigned)} parameter(s) with role(s) "
        f"{', '.join(missing_roles)}: {_short_list([n for n, _ in unassigned])}; "
        f"name those roles or add a catch-all such as 'adam:*', or give the parameters "
        f"roles with build_optimizer(..., roles={{name pattern: role}}) "
        f"(tailmem.models.roles.roles_table(model) shows every role)\n"
        + text_table(("parameter", "shape", "role"), rows)
        + (f"\n(+{more} more)" if more > 0 else "")
    )


def _refuse_misrouted(
    recipe: str,
    known: Mapping[str, OptimizerKind],
    non_matrix: Misrouted,
    vocab_shaped: Misrouted,
    vocab: int | None,
) -> None:
    """One :class:`ConfigError` for a matrices-only kind given vectors or the vocabulary's
    tables (embedding, LM head); nothing when there are none."""
    if non_matrix:
        kind = non_matrix[0][0]
        bad_roles = sorted({role for k, _, role, _ in non_matrix if k == kind}, key=_role_order)
        shown = _short_list([f"{n} {tuple(s)}" for k, n, _, s in non_matrix if k == kind])
        others = [k for k, spec in known.items() if not spec.matrices_only and k in REGISTRY]
        raise ConfigError(
            f"{kind} only trains matrices, but recipe {recipe!r} gives it role(s) "
            f"{', '.join(bad_roles)} holding parameters with fewer than 2 dimensions: {shown}; "
            f"route those roles to {', '.join(others)}"
        )
    if vocab_shaped:
        kind = vocab_shaped[0][0]
        shown = _short_list([f"{n} {s} ({role})" for k, n, role, s in vocab_shaped if k == kind])
        of = f"the {vocab}-token vocabulary's" if vocab is not None else "the vocabulary's"
        unnamed = [n for k, n, role, _ in vocab_shaped if k == kind and role == "other"]
        head_roles = ", ".join(f'r"{p}": "head"' for p in dict.fromkeys(map(name_pattern, unnamed)))
        raise ConfigError(
            f"recipe {recipe!r} gives {kind} {of} tables (embedding / LM head): {shown}; {kind} "
            f"is for hidden matrices: route them to adam (name their role in an adam clause, or "
            f"give them roles={{{head_roles or 'pattern: ' + repr('head')}}}), or pass "
            f"force_muon_vocab=True to build_optimizer"
        )


def _refuse_unapplied(
    recipe: str,
    known: Mapping[str, OptimizerKind],
    resolved: Mapping[str, ParamRole],
    unapplied: list[tuple[str, str]],
) -> None:
    """One :class:`ConfigError` for a kind given parameters whose layout (fused blocks, an
    ``(in, out)`` storage) it cannot apply (:meth:`OptimizerKind.unapplied_layout`), naming the
    kinds that do; nothing when there are none."""
    if not unapplied:
        return
    kind = known[unapplied[0][0]]
    names = [name for k, name in unapplied if k == kind.name]
    first = resolved[names[0]]
    roles = sorted({r for n in names for r in resolved[n].roles}, key=_role_order)
    more = f" (+{len(names) - 1} more: {_short_list(names[1:], 3)})" if len(names) > 1 else ""
    raise ConfigError(
        f"{kind.name} cannot apply the layout of parameter {names[0]!r} ({first.role}): "
        f"{kind.unapplied_layout(first.row_splits, first.fan_out_dim)}{more}; {kind.name} is "
        f"not told a parameter's layout, so it would step it as one matrix stored (out, in); "
        f"recipe {recipe!r} should give role(s) {', '.join(roles)} to {_applying(kind)}, "
        f"which applies it"
    )


def _applying(kind: OptimizerKind) -> str:
    """The built-in kinds to use instead of ``kind`` for a parameter whose layout it cannot
    apply: those of its family that apply every layout, e.g. ``muon (or normuon, muon_pe)``;
    for a user's kind, whose update tailmem cannot see, the first of each family that does
    (``muon (or adam, sgd, signgd)``); else the Muon-like ones."""
    applying = [k for k, spec in REGISTRY.items() if spec.applies_any_layout]
    if kind.name not in REGISTRY:
        firsts = {REGISTRY[k].family: k for k in reversed(applying)}
        instead = [k for k in applying if k in firsts.values()]
    else:
        instead = [k for k in applying if REGISTRY[k].family == kind.family] or [
            k for k in applying if REGISTRY[k].layout_keys
        ]
    return instead[0] + (f" (or {', '.join(instead[1:])})" if len(instead) > 1 else "")


def _groups(
    buckets: Mapping[tuple[Any, ...], list[tuple[str, nn.Parameter]]],
    routes: Mapping[str, Sequence[str]],
    known: Mapping[str, OptimizerKind],
    member_dims: int,
) -> dict[str, list[dict[str, Any]]]:
    """The param groups of each kind (recipe order), one per bucket (kind, role, layout hints),
    in role order (:func:`plan_param_groups`)."""
    kind_order = {kind: i for i, kind in enumerate(routes)}
    first_seen = {key: i for i, key in enumerate(buckets)}
    plan: dict[str, list[dict[str, Any]]] = {kind: [] for kind in routes}
    for key in sorted(buckets, key=lambda k: (kind_order[k[0]], _role_order(k[1]), first_seen[k])):
        kind, role = key[0], key[1]
        members = buckets[key]
        group: dict[str, Any] = {
            "params": [p for _, p in members],
            "param_names": [n for n, _ in members],
            "kind": kind,
            "role": role,
        }
        if known[kind].layout_keys:
            fan_out_dim, row_splits = key[2], key[3]
            group["fan_out_dim"] = fan_out_dim
            if row_splits is not None:
                group["row_splits"] = row_splits
            if member_dims:
                group["batch_dims"] = member_dims
        plan[kind].append(group)
    return plan


def build_optimizer(
    model: nn.Module,
    recipe: str,
    *,
    roles: RoleSpec | None = None,
    role_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    force_muon_vocab: bool = False,
    **hparams: Mapping[str, Any],
) -> RoutedOptimizer:
    """Build one :class:`RoutedOptimizer` that trains ``model`` as ``recipe`` says.

    Args:
        model: any ``nn.Module``; roles come from :func:`~tailmem.models.roles.resolve_roles`
            unless ``roles`` is given.
        recipe: e.g. ``"muon:v,o,w_in,w_gate,w_out adam:*"`` (see the module docstring).
        roles: optional explicit roles, consulted before the built-in ones: ``{name pattern:
            role}`` (regular expressions matched against whole names, first match wins; role a
            str or ParamRole) or a callable ``(name, param) -> role | None``.
        force_muon_vocab: let Muon train the vocabulary's tables (embedding, LM head) (see
            :func:`plan_param_groups`).
        role_overrides: optional ``role -> {option: value}`` set on that role's param group after
            the kind's settings, e.g. ``{"head": {"lr": 1e-3}, "q": {"num_heads": 12}}``.
            Options are the kind's hyper-parameters (for Muon also ``row_splits``,
            ``fan_out_dim``, ``num_heads``); the role must be routed by the recipe. A fused
            tensor takes the overrides of all its parts, which must not contradict each other.
        **hparams: per kind, ``lr`` and the fields of its typed spec
            (:class:`~tailmem.optim.registry.HParams`), e.g. ``muon={"lr": 0.02, "momentum":
            0.95}, adam={"lr": 3e-4, "betas": (0.8, 0.95)}``. Whatever is not given keeps the
            registry's default (``tailmem.optim.registry.REGISTRY``: the papers' settings —
            Muon lr 0.02, momentum 0.95, no Nesterov, no weight decay, orthogonalised in the
            gradient's dtype and shared over the default process group when one with several
            ranks exists, as under ``torchrun`` + DDP; Adam lr 3e-3, betas (0.8, 0.95); ...).
    """
    settings: dict[str, OptimizerSetting] = {}
    routes = parse_recipe(recipe)
    for name, options in hparams.items():
        kind = get_kind(name)
        if name not in routes:
            raise ConfigError(
                f"hyperparameters given for {name}, but recipe {recipe!r} does not use it "
                f"(it uses {', '.join(routes)})"
            )
        if not isinstance(options, Mapping):
            raise ConfigError(
                f"hyperparameters for {name} must be a mapping of name -> value, "
                f"got {type(options).__name__}"
            )
        given = dict(options)
        lr = given.pop("lr", kind.lr)
        try:
            settings[name] = kind.setting(lr, kind.parse(given, f"{name}."))
        except ConfigError as err:
            raise ConfigError(f"hyperparameters for {name}: {err}") from None
    return route(
        model,
        recipe,
        settings,
        roles=roles,
        role_overrides=role_overrides,
        force_muon_vocab=force_muon_vocab,
    )


def route(
    model: nn.Module,
    recipe: str,
    settings: Mapping[str, OptimizerSetting],
    *,
    roles: RoleSpec | None = None,
    role_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    force_muon_vocab: bool = False,
) -> RoutedOptimizer:
    """:func:`build_optimizer` from typed settings: each kind of ``recipe`` built as its
    :class:`~tailmem.optim.registry.OptimizerSetting` in ``settings`` says (a kind without
    one: the registry's defaults). ``settings`` may hold user kinds (a run's spec does)."""
    user = {s.kind.name: s.kind for s in settings.values() if s.kind.name not in REGISTRY}
    known = {**REGISTRY, **user}
    routes = parse_recipe(recipe, tuple(known))
    unused = [name for name in settings if name not in routes]
    if unused:
        raise ConfigError(
            f"settings given for {unused[0]}, but recipe {recipe!r} does not use it "
            f"(it uses {', '.join(routes)})"
        )
    overrides = dict(role_overrides or {})
    kind_of_role = {role: kind for kind, rs in routes.items() for role in rs}
    for role, options in overrides.items():
        if role not in ROLES:
            raise ConfigError(
                f"role_overrides names unknown role {role!r}; valid roles: {', '.join(ROLES)}"
            )
        if role not in kind_of_role:
            raise ConfigError(
                f"role_overrides names role {role!r}, but recipe {recipe!r} does not route it"
            )
        if not isinstance(options, Mapping):
            raise ConfigError(
                f"role_overrides[{role!r}] must be a mapping of option -> value, "
                f"got {type(options).__name__}"
            )
    plan = plan_param_groups(
        model, recipe, roles=roles, force_muon_vocab=force_muon_vocab, kinds=user
    )
    children: dict[str, torch.optim.Optimizer] = {}
    for name, groups in plan.items():
        setting = settings.get(name) or known[name].setting()
        accepted = setting.kind.options()
        for role in routes[name]:
            unknown = [
                k for k in overrides.get(role, {}) if accepted is not None and k not in accepted
            ]
            layout = [
                k
                for k in overrides.get(role, {})
                if k in MUON_LAYOUT_KEYS and k not in setting.kind.layout_keys
            ]
            if layout:
                raise ConfigError(
                    f"role_overrides[{role!r}] sets {', '.join(layout)}, a layout {name} cannot "
                    f"apply (it is not told a parameter's layout); give role {role} to "
                    f"{_applying(setting.kind)}, which applies it"
                )
            if unknown:
                raise ConfigError(
                    f"role_overrides[{role!r}]: unknown name(s) {', '.join(map(repr, unknown))} "
                    f"for {name}; accepted: {', '.join(sorted(accepted or ()))}"
                )
        for group in groups:
            group.update(_merged_overrides(group, overrides))
        children[name] = setting.build(groups)
    return RoutedOptimizer(children, recipe=recipe)


class RoutedOptimizer(torch.optim.Optimizer):
    """Several optimisers, each owning a disjoint set of parameters, driven as one.

    ``param_groups`` is the union of the children's param groups - the same dict objects - so an
    LR scheduler or a user editing ``group["lr"]`` changes the child that owns the group.
    ``step`` steps every child (after evaluating ``closure`` once, if given), ``zero_grad``
    zeroes every child, and ``state`` is a read-only view of the children's states.

    ``state_dict()`` has the standard ``{"state", "param_groups"}`` layout: parameters are
    numbered across children in ``param_groups`` order, and every group keeps its ``kind`` and
    ``role`` tags, which ``load_state_dict`` checks against this optimiser before restoring each
    child (a mismatch raises :class:`~tailmem.errors.CheckpointError`).
    """

    def __init__(self, optimizers: Mapping[str, torch.optim.Optimizer], recipe: str | None = None):
        if not optimizers:
            raise ValueError("RoutedOptimizer needs at least one child optimizer")
        for key, opt in optimizers.items():
            if not isinstance(opt, torch.optim.Optimizer):
                raise TypeError(f"child {key!r} is a {type(opt).__name__}, not a torch Optimizer")
        self.optimizers: dict[str, torch.optim.Optimizer] = dict(optimizers)
        self.recipe = recipe
        self._ready = False
        self._owner: dict[torch.Tensor, str] = {}
        self._index_params()
        super().__init__(list(self._owner), defaults={})
        self.param_groups = []
        self._sync_groups()
        self.state = _RoutedState(self)  # type: ignore[assignment]  # a read-only view
        self._ready = True

    def _index_params(self) -> None:
        owner: dict[torch.Tensor, str] = {}
        for key, opt in self.optimizers.items():
            for group in opt.param_groups:
                for p in group["params"]:
                    if p in owner:
                        raise ValueError(
                            f"a parameter of shape {tuple(p.shape)} belongs to both child "
                            f"optimizers {owner[p]!r} and {key!r}"
                        )
                    owner[p] = key
        self._owner = owner

    def _sync_groups(self) -> None:
        self._index_params()
        self.param_groups[:] = [g for opt in self.optimizers.values() for g in opt.param_groups]

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Evaluate ``closure`` (if given) once with grad enabled, then step every child."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for opt in self.optimizers.values():
            opt.step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter of every child."""
        for opt in self.optimizers.values():
            opt.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group to the child named by its ``"kind"`` key, and to ``param_groups``.

        ``params``: tensors, or ``(name, tensor)`` pairs as ``module.named_parameters()`` gives
        them. Routing names every parameter (``param_names``), and torch keeps the groups of one
        optimiser all named or all unnamed, so a group for a routed kind needs its names: the
        pairs, or ``param_names``. A layout option (``row_splits``, ``fan_out_dim``, ...) the
        child does not take is refused rather than carried unread.
        """
        if not self.__dict__.get("_ready", False):
            super().add_param_group(param_group)  # the placeholder group of Optimizer.__init__
            return
        kind = param_group.get("kind")
        if kind not in self.optimizers:
            raise ValueError(
                f"a group added to a RoutedOptimizer needs 'kind' set to one of "
                f"{', '.join(self.optimizers)}; got {kind!r}"
            )
        child = self.optimizers[kind]
        params = param_group["params"]
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        group = {**param_group, "params": params}
        if params and all(isinstance(p, tuple) for p in params):
            group["param_names"], group["params"] = (list(x) for x in zip(*params, strict=True))
        taken = [p for p in group["params"] if p in self._owner]
        if taken:
            raise ValueError(
                f"{len(taken)} parameter(s) of the new group already belong to this optimizer"
            )
        named = any("param_names" in g for g in child.param_groups)
        if named and "param_names" not in group:
            raise ConfigError(
                f"a group added to the {kind} child needs its parameters' names, as its other "
                f"groups have: params=list(module.named_parameters()) or param_names=[...] "
                f"(one per tensor); got {sum(not isinstance(p, tuple) for p in params)} unnamed "
                f"tensor(s) among {len(params)}"
            )
        unread = [k for k in MUON_LAYOUT_KEYS if k in group and k not in child.defaults]
        if unread:
            raise ConfigError(
                f"a group added to the {kind} child sets {', '.join(unread)}, which "
                f"{type(child).__name__} does not take (it would not apply that layout)"
            )
        child.add_param_group(group)
        self._sync_groups()

    def state_dict(self) -> dict[str, Any]:
        """The children's state dicts merged into one standard optimizer state dict."""
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        state: dict[int, Any] = {}
        groups: list[dict[str, Any]] = []
        offset = 0
        for opt in self.optimizers.values():
            child = opt.state_dict()
            state.update({offset + i: s for i, s in child["state"].items()})
            for group in child["param_groups"]:
                groups.append({**group, "params": [offset + i for i in group["params"]]})
            offset += sum(len(g["params"]) for g in opt.param_groups)
        merged: dict[str, Any] = {"state": state, "param_groups": groups}
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            result = post_hook(self, merged)
            if result is not None:
                merged = result
        return merged

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore every child from a dict made by :meth:`state_dict` of a matching optimizer.

        All or nothing: when a child refuses its part (a bad hyper-parameter, a state it cannot
        take), every child keeps the state and param groups it had, ``param_groups`` are still
        theirs, and the child's exception propagates.
        """
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = pre_hook(self, state_dict)
            if result is not None:
                state_dict = result
        if not isinstance(state_dict, Mapping) or not {"state", "param_groups"} <= set(state_dict):
            raise CheckpointError(
                "optimizer checkpoint must be a dict with 'state' and 'param_groups'"
            )
        saved_groups = list(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise CheckpointError(
                f"optimizer checkpoint has {len(saved_groups)} param groups, this optimizer has "
                f"{len(self.param_groups)} (recipe {self.recipe!r}); was it saved with another "
                f"recipe or model?"
            )
        for i, (saved, group) in enumerate(zip(saved_groups, self.param_groups, strict=True)):
            want = (group.get("kind"), group.get("role"), len(group["params"]))
            got = (saved.get("kind"), saved.get("role"), len(saved["params"]))
            if want != got:
                raise CheckpointError(
                    f"optimizer checkpoint group {i} is {got[0]}/{got[1]} with {got[2]} tensors, "
                    f"but this optimizer's group {i} is {want[0]}/{want[1]} with {want[2]}"
                )
        saved_state = state_dict["state"]
        before = [(opt, opt.state, opt.param_groups) for opt in self.optimizers.values()]
        start = 0
        try:
            for opt in self.optimizers.values():
                mine = saved_groups[start : start + len(opt.param_groups)]
                start += len(opt.param_groups)
                local: dict[Any, int] = {}
                child_groups = []
                for group in mine:
                    ids = [local.setdefault(i, len(local)) for i in group["params"]]
                    child_groups.append({**group, "params": ids})
                child_state = {local[i]: s for i, s in saved_state.items() if i in local}
                opt.load_state_dict({"state": child_state, "param_groups": child_groups})
        except BaseException:
            # a child refused its part: the children loaded before it are put back too (torch's
            # load_state_dict replaces state and param_groups, so the old ones are intact)
            for opt, state, groups in before:
                opt.state, opt.param_groups = state, groups
            raise
        finally:
            self._sync_groups()
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)

    def summary(self) -> list[dict[str, Any]]:
        """One row per param group: kind, role, number of tensors and of scalars, current lr."""
        return [
            {
                "kind": group.get("kind", ""),
                "role": group.get("role", ""),
                "tensors": len(group["params"]),
                "numel": sum(p.numel() for p in group["params"]),
                "lr": float(group["lr"]),
            }
            for group in self.param_groups
        ]

    def describe(self) -> str:
        """A printable table of role -> kind -> #tensors, #parameters and lr, for logs."""
        summary = self.summary()
        rows: list[tuple[object, ...]] = [
            (r["kind"], r["role"], r["tensors"], f"{r['numel']:,}", f"{r['lr']:.3g}")
            for r in summary
        ]
        tensors = sum(r["tensors"] for r in summary)
        rows.append(("total", "", tensors, f"{sum(r['numel'] for r in summary):,}", ""))
        title = f"recipe: {self.recipe}\n" if self.recipe else ""
        return title + text_table(("kind", "role", "tensors", "params", "lr"), rows)

    def __repr__(self) -> str:
        return f"{type(self).__name__}\n{self.describe()}"

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "optimizers": self.optimizers, "recipe": self.recipe}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.param_groups = []
        self._sync_groups()
        self.state = _RoutedState(self)  # type: ignore[assignment]  # a read-only view
        self._ready = True


class _RoutedState(Mapping[torch.Tensor, Any]):
    """Read-only view of a :class:`RoutedOptimizer`'s children's ``state``, keyed by parameter."""

    def __init__(self, routed: RoutedOptimizer) -> None:
        self._routed = routed

    def _child_state(self, p: torch.Tensor) -> Any:
        return self._routed.optimizers[self._routed._owner[p]].state

    def __getitem__(self, p: torch.Tensor) -> Any:
        return self._child_state(p)[p]

    def __contains__(self, p: object) -> bool:
        return (
            isinstance(p, torch.Tensor) and p in self._routed._owner and p in self._child_state(p)
        )

    def __iter__(self) -> Iterator[torch.Tensor]:
        for opt in self._routed.optimizers.values():
            yield from opt.state

    def __len__(self) -> int:
        return sum(len(opt.state) for opt in self._routed.optimizers.values())


def _merged_overrides(
    group: dict[str, Any], overrides: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The overrides of a group's role, or of all parts of a fused role (which must agree)."""
    merged: dict[str, Any] = {}
    source: dict[str, str] = {}
    for role in group["role"].split("+"):
        for key, value in overrides.get(role, {}).items():
            if key in merged and merged[key] != value:
                raise ConfigError(
                    f"role_overrides give {key!r} different values for {source[key]} and {role}, "
                    f"but {group['param_names'][0]!r} fuses them in one tensor"
                )
            merged[key], source[key] = value, role
    return merged


def _role_order(role: str) -> int:
    return ROLES.index(role.split("+")[0])

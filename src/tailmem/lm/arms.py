"""An arm: a named optimiser configuration of a study, written as a role recipe.

A recipe routes parameter roles to optimiser kinds (:mod:`tailmem.optim.routing`), e.g.
``muon:v,o,w_in,w_out adam:*`` trains V, O and the FFN matrices with Muon and everything else
(embedding, head, norms, Q, K) with Adam. A study's ``arms`` list names its own arms or gives a
recipe (:func:`select_arms`), so any optimiser — a user's too — can be an arm.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from tailmem.errors import ConfigError
from tailmem.names import MAX_NAME, check_distinct, check_folder_name
from tailmem.optim.registry import REGISTRY, kind_order
from tailmem.optim.routing import parse_recipe

HIDDEN_MATRICES = ("q", "k", "v", "o", "w_in", "w_gate", "w_out")
"""The roles of a block's matrices (everything but embedding, head and norms)."""


@dataclass(frozen=True)
class Arm:
    """One optimiser configuration: ``name`` (folder and table key), ``label`` (for people) and
    the role ``recipe``."""

    name: str
    label: str
    recipe: str

    def __post_init__(self) -> None:
        check_folder_name("arms", self.name)

    @cached_property
    def routes(self) -> dict[str, list[str]]:
        """Kind -> roles of the recipe (kind names are checked by the study's config)."""
        return parse_recipe(self.recipe, kinds=None)

    @property
    def kinds(self) -> tuple[str, ...]:
        """Optimiser kinds of the recipe, in registry order (user kinds last)."""
        return tuple(kind_order(self.routes))

    @property
    def tuned(self) -> str:
        """The kind that trains most of the arm's hidden matrices (the first in the recipe on a
        tie): the kind whose learning rate the arm tunes (:mod:`tailmem.lm.rates`)."""
        return _tuned(self.routes)

    def trains_rest_only(self, kind: str) -> bool:
        """Whether ``kind`` trains none of the arm's hidden matrices (only its rest:
        embedding, head, norms)."""
        return not set(HIDDEN_MATRICES) & set(self.routes.get(kind, ()))

    def trains_every_hidden(self, kind: str) -> bool:
        """Whether ``kind`` trains all of the arm's hidden matrices."""
        return set(HIDDEN_MATRICES) <= set(self.routes.get(kind, ()))

    @staticmethod
    def of_recipe(recipe: str) -> Arm:
        """The arm a study's ``arms`` list gives as a recipe. One kind on everything
        (``adam:*``), or a kind on every hidden matrix and Adam on the rest
        (:func:`matrix_recipe`), is named after the kind and labelled with the registry's label;
        any other recipe is named by a folder-safe form of it (``sgd-v_o+adam-all``) and
        labelled with it."""
        clauses = " ".join(recipe.split())
        kind = _tuned(parse_recipe(clauses, kinds=None))
        if clauses in (matrix_recipe(kind), f"{kind}:*"):
            label = REGISTRY[kind].label if kind in REGISTRY else kind
            return Arm(kind, label, clauses)
        name = clauses.replace("*", "all").replace(":", "-").replace(" ", "+")
        name = re.sub(r"[^A-Za-z0-9_.+-]+", "_", name).lstrip(".")
        if len(name) > MAX_NAME:  # a long recipe: cut, and told apart by its digest
            name = f"{name[: MAX_NAME - 9]}-{hashlib.sha256(clauses.encode()).hexdigest()[:8]}"
        return Arm(name, clauses, clauses)


def _tuned(routes: Mapping[str, Sequence[str]]) -> str:
    """The kind of ``routes`` (kind → roles) that trains most hidden matrices (the first on a
    tie): :attr:`Arm.tuned`."""
    hidden = {kind: len(set(roles) & set(HIDDEN_MATRICES)) for kind, roles in routes.items()}
    return max(routes, key=lambda kind: hidden[kind])


def muon_recipe(roles: Sequence[str]) -> str:
    """``muon:<roles> adam:*`` (Adam on the rest), or ``adam:*`` when ``roles`` is empty."""
    return f"muon:{','.join(roles)} adam:*" if roles else "adam:*"


def matrix_recipe(kind: str) -> str:
    """``<kind>`` on every hidden matrix, Adam on the rest (embedding, head, norms): how a
    study compares matrix optimisers with only that optimiser changing."""
    return f"{kind}:{','.join(HIDDEN_MATRICES)} adam:*"


def select_arms(entries: Sequence[str], known: Mapping[str, Arm]) -> list[Arm]:
    """The arms a study's ``arms`` list names: a name of ``known``, or a recipe (it has a
    ``:``). Refuses an empty list, an unknown name and a repeated arm (one line each)."""
    expected = f"expected names from {', '.join(known)} or recipes such as 'adamw:q,k,v adam:*'"
    if not entries:
        raise ConfigError(f"arms: got an empty list; {expected}")
    arms = []
    for entry in entries:
        if ":" in entry:
            arms.append(Arm.of_recipe(entry))
        elif entry in known:
            arms.append(known[entry])
        else:
            raise ConfigError(f"arms: unknown arm {entry!r}; {expected}")
    check_distinct("arms", [arm.name for arm in arms])
    return arms

"""An arm: a named optimiser configuration of a study, written as a role recipe.

A recipe routes parameter roles to optimiser kinds (:mod:`tailmem.optim.routing`), e.g.
``muon:v,o,w_in,w_out adam:*`` trains V, O and the FFN matrices with Muon and everything else
(embedding, head, norms, Q, K) with Adam.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tailmem.errors import ConfigError
from tailmem.lm.config import KINDS
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

    @property
    def kinds(self) -> tuple[str, ...]:
        """Optimiser kinds of the recipe, in :data:`~tailmem.lm.config.KINDS` order."""
        used = parse_recipe(self.recipe)
        return tuple(k for k in KINDS if k in used)


def muon_recipe(roles: Sequence[str]) -> str:
    """``muon:<roles> adam:*`` (Adam on the rest), or ``adam:*`` when ``roles`` is empty."""
    return f"muon:{','.join(roles)} adam:*" if roles else "adam:*"


def check_arm_names(names: Sequence[str], known: Sequence[str]) -> None:
    """Raise :class:`ConfigError` for an empty, repeated or unknown arm name."""
    if not names:
        raise ConfigError(f"arms: got an empty list; expected some of {', '.join(known)}")
    for name in names:
        if name not in known:
            raise ConfigError(f"arms: unknown arm {name!r}; expected some of {', '.join(known)}")
    repeated = sorted({name for name in names if list(names).count(name) > 1})
    if repeated:
        raise ConfigError(
            f"arms: got {list(names)}; expected each arm at most once "
            f"(repeated: {', '.join(repr(name) for name in repeated)})"
        )

"""Optimisers for matrix parameters (Muon, sign descent) and role-based routing of a model's
parameters to them and to torch's Adam/AdamW/SGD."""

from tailmem.optim.muon import Muon, muon_update
from tailmem.optim.orthogonalize import METHODS, orthogonalize
from tailmem.optim.routing import RoutedOptimizer, build_optimizer, parse_recipe
from tailmem.optim.sign import SignGD

__all__ = [
    "METHODS",
    "Muon",
    "RoutedOptimizer",
    "SignGD",
    "build_optimizer",
    "muon_update",
    "orthogonalize",
    "parse_recipe",
]

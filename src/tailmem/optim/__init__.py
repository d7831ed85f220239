"""Optimisers for matrix parameters: Muon (orthogonalised updates) and sign descent."""

from tailmem.optim.muon import Muon
from tailmem.optim.orthogonalize import METHODS, orthogonalize
from tailmem.optim.sign import SignGD

__all__ = ["METHODS", "Muon", "SignGD", "orthogonalize"]

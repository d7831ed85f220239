"""Compatibility name for ``knowledge-qa`` until it imports :mod:`tailmem.claims.a3` directly."""

from tailmem.claims.a3 import A3_PUBLISHED_FTA

__all__ = ["A3_PUBLISHED_FTA"]

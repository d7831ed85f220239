"""The share of one effect another explains, with Fieller's interval: :mod:`tailmem.claims.share`
(the claims decide with it, so it lives beside them), under the name the studies import."""

from tailmem.claims.share import Share, share

__all__ = ["Share", "share"]

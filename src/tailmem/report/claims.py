"""Compatibility names for the LM studies until they call :mod:`tailmem.claims` directly.

The claims moved to :mod:`tailmem.claims` (types in :mod:`tailmem.claims.core`, the registry in
:mod:`tailmem.claims.registry`). ``ablation``, ``spectra`` and ``knowledge-qa`` still import
these names from here; once they import from :mod:`tailmem.claims.registry` this module goes.
"""

from tailmem.claims.core import ClaimResult
from tailmem.claims.registry import CLAIMS, claims_of, read_claims, write_claims

__all__ = ["CLAIMS", "ClaimResult", "claims_of", "read_claims", "write_claims"]

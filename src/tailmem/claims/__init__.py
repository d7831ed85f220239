"""Published claims as units: statement, published value, rule, tolerances and check.

:mod:`tailmem.claims.core` holds the types and the shared statistics (a leaf module);
one module per PAPERS.md section holds that section's claims and checks; :mod:`.registry` joins
them. This package imports nothing from ``tailmem.experiments`` or ``tailmem.report``.
"""

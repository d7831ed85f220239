"""The few lines ``tailmem run`` ends with: how the run's claims came out, on one screen.

Read from the run directory alone (``config.yaml`` and ``claims.json``, through
:func:`tailmem.report.reader.read_run`, so the registry claims a run lacks count as "not
measured" exactly as in the report, and a damaged run is refused in one line): the verdict
counts, then each claim that did not reproduce (not reproduced, inconclusive or not measured)
with the published value beside ours, then where to look.
At the smoke preset the verdicts say nothing about the papers, and the summary says so instead
of listing them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tailmem.claims.core import VERDICTS
from tailmem.report.reader import read_run

SMOKE_NOTE = (
    "smoke runs are too small to judge claims: they check that the code runs end to end; "
    "use --preset cpu (or paper) for verdicts"
)
MAX_LISTED = 8
"""At most this many claims are listed, two lines each (the rest are counted): one screen."""
WIDTH = 110


def run_summary(path: str | Path) -> str:
    """The end-of-run summary of the run directory ``path``."""
    path = Path(path)
    run = read_run(path)
    counts: Counter[str] = Counter(c.verdict for c in run.claims)
    preset = run.record.get("preset", "?")
    tally = ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)
    lines = [f"{run.record['experiment']} ({preset}): {tally} (claims: {len(run.claims)})"]
    if preset == "smoke":
        lines.append(SMOKE_NOTE)
    else:
        missed = [c for c in run.claims if c.verdict != "reproduced"]
        for claim in missed[:MAX_LISTED]:
            lines.append(_fit(f"  {claim.verdict:<16}{claim.claim} ({claim.source})"))
            lines.append(_fit(f"  {'':<16}published {claim.published}; ours {claim.ours}"))
        if len(missed) > MAX_LISTED:
            lines.append(f"  … and {len(missed) - MAX_LISTED} more in claims.json")
    lines.append(f"run directory: {path} (claims.json: every rule and number)")
    return "\n".join(lines)


def _fit(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"

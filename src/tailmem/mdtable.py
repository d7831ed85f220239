"""A Markdown table from a header and rows (used by the report and the claims listing)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def md_table(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; ``|`` and newlines in cells are escaped."""

    def cell(text: Any) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)

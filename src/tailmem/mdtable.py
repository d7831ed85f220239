"""A Markdown table from a header and rows (used by the report and the claims listing)."""

from __future__ import annotations

from collections.abc import Sequence


def md_table(header: Sequence[object], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table of any values written with ``str``; ``|`` and newlines in
    cells are escaped."""

    def cell(text: object) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)

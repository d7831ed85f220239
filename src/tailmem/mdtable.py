"""Tables from a header and rows: Markdown (the report, the claims listing) and plain text
(a terminal, a log)."""

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


def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain-text table with left-aligned columns, for a terminal or a log."""
    cells = [tuple(str(c) for c in headers)] + [tuple(str(c) for c in row) for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)

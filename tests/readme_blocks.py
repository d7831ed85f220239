"""The code blocks of the README and of the documentation's pages (docs/), read as the tests that
run them verbatim need them."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
TEMPLATE = DOCS / "readme_results.md"
"""The results page's template (no page of the site: scripts/readme_results.py fills it in)."""


def pages() -> list[Path]:
    """The README and every page of the documentation site, the README first."""
    return [README, *sorted(p for p in DOCS.rglob("*.md") if p != TEMPLATE)]


def section(heading: str, page: Path = README) -> str:
    """``page``'s text under ``## heading`` up to the next ``## `` heading."""
    text = page.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def blocks(text: str, language: str) -> list[str]:
    """The fenced ``language`` code blocks of ``text``, in order."""
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def block(heading: str, language: str, containing: str, page: Path = README) -> str:
    """The one ``language`` block of ``page``'s section ``heading`` that contains
    ``containing``."""
    (found,) = [b for b in blocks(section(heading, page), language) if containing in b]
    return found


def commands(bash: str) -> list[list[str]]:
    """A bash block's commands (continuation lines joined, ``&&`` splitting), as argv lists."""
    joined = bash.replace("\\\n", " ")
    return [
        shlex.split(part)
        for line in joined.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
        for part in line.split(" && ")
    ]

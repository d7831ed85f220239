"""The README and the documentation site (mkdocs.yml, docs/): the README stays short and gives
exactly the quick start's two commands, its links lead to files that exist, CI builds the site
with the command the docs give, every page is in the navigation, and the build's hooks generate
the CLI reference from the parser and keep the API reference's code spans clean. (The site
itself is built by .ci/run with ``mkdocs build --strict``, which fails on a broken link.)"""

from __future__ import annotations

import argparse
import os
import re

import pytest
import yaml

import script_module
from readme_blocks import DOCS, README, ROOT, TEMPLATE, block, blocks
from tailmem.cli import build_parser

CI = (ROOT / ".ci" / "run").read_text().splitlines()


def _hooks():
    return script_module.load("scripts/docs_hooks.py")


def _nav_pages(entries) -> list[str]:
    out = []
    for entry in entries:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            out.extend(_nav_pages(value) if isinstance(value, list) else [value])
    return out


def test_the_readme_is_short_and_its_first_section_gives_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    first = text.split("\n## ", 2)[1]
    assert first.startswith("Quick start\n")
    assert blocks(first, "bash") == [
        "pip install torch==2.13.0 -e . && tailmem reproduce --preset cpu\n",
        'pip install torch==2.13.0 -e ".[test]" && python -m pytest -q\n',
    ]
    assert blocks(text, "python") == []  # the examples live on the site's pages


def test_every_relative_link_of_the_readme_leads_to_a_file():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert "docs/results.md" in local and "docs/getting-started.md" in local
    assert [link for link in local if not (ROOT / link).exists()] == []


def test_ci_builds_the_site_with_the_command_the_docs_give():
    command = block("Where to go next", "bash", "mkdocs").strip()
    assert command == 'pip install -e ".[docs]" && mkdocs build --strict'
    assert command in CI
    assert block("These docs", "bash", "mkdocs", DOCS / "getting-started.md").strip() == command


def test_getting_started_gives_the_readmes_quick_start_command():
    readme = block("Quick start", "bash", "tailmem reproduce")
    page = DOCS / "getting-started.md"
    assert block("The first reproduction", "bash", "tailmem reproduce", page) == readme


def test_every_page_is_in_the_navigation_and_every_entry_is_a_page():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = _nav_pages(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if p != TEMPLATE)
    assert sorted(nav) == pages
    assert config["exclude_docs"].split() == [TEMPLATE.name]


def test_the_cli_reference_is_each_commands_help_in_the_parsers_order(monkeypatch):
    hooks = _hooks()
    monkeypatch.setenv("COLUMNS", "37")  # the hook formats at its own width, then restores this
    text = hooks.fill_cli_reference(f"# CLI\n\n{hooks.CLI_MARKER}\n")
    assert hooks.CLI_MARKER not in text and os.environ["COLUMNS"] == "37"
    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    commands = [("tailmem", parser), *((f"tailmem {n}", p) for n, p in subparsers.choices.items())]
    assert re.findall(r"^## `(.+)`$", text, flags=re.MULTILINE) == [name for name, _ in commands]
    monkeypatch.setenv("COLUMNS", str(hooks.HELP_WIDTH))
    for name, sub in commands:
        assert f"## `{name}`\n\n```text\n{sub.format_help().rstrip()}\n```\n" in text
    assert "--preset PRESET" in text.split("## `tailmem run`")[1].split("## ")[0]


def test_the_cli_page_holds_the_marker_and_a_mistyped_one_fails_the_build():
    hooks = _hooks()
    assert hooks.CLI_MARKER in (DOCS / "cli.md").read_text()
    assert hooks.fill_cli_reference("no marker here\n") == "no marker here\n"
    stale = hooks.CLI_MARKER.replace("generated", "made")
    with pytest.raises(ValueError, match="a page names '<!-- cli-help' but not as"):
        hooks.fill_cli_reference(f"# CLI\n\n{stale}\n")


def test_sphinx_roles_before_code_spans_are_dropped_from_rendered_docstrings():
    hooks = _hooks()
    html = (
        "<p>See :func:<code>orthogonalize</code>, :class:<code>~tailmem.optim.Muon</code> and "
        ":data:<code>METHODS</code>; a ratio 2:1 and <code>a:b</code> stay.</p>"
    )
    assert hooks.strip_roles(html) == (
        "<p>See <code>orthogonalize</code>, <code>tailmem.optim.Muon</code> and "
        "<code>METHODS</code>; a ratio 2:1 and <code>a:b</code> stay.</p>"
    )

"""Write a report of run directories: ``report.md``, a self-contained ``report.html`` and
``verdicts.json`` (every claim of every run, as read).

The report is made of four parts with one job each: :mod:`.reader` reads and checks the run
directories (:mod:`.layout` each ``report.json``, :mod:`.presets` each run's preset),
:mod:`.content` decides what is said (answers first, verdicts counted per preset), and
:mod:`.markdown` and :mod:`.page` (styled by :mod:`.style`) lay it out.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path

from tailmem.atomic import atomic_write_text, strict_json
from tailmem.report.markdown import render_markdown
from tailmem.report.page import render_html
from tailmem.report.reader import collect_runs


def write_report(root: str | Path, questions: Mapping[str, str]) -> Path:
    """Write ``report.md``, ``report.html`` and ``verdicts.json`` into ``root`` (a results
    folder or one run folder); returns the HTML path. ``questions``: the headline question of
    each study that states answers, by study name (:func:`tailmem.experiments.
    headline_questions`), named with the command that answers it where the folder lacks its
    answers.

    Everything is read and checked before anything is written. Each run that is not rendered
    is also named on stderr (``tailmem: warning: ...``), so a command that ends with the
    report's path does not hide it.
    """
    root = Path(root)
    results = collect_runs(root)
    folder = None if (root / "config.yaml").is_file() else root
    markdown = render_markdown(results, root, folder, questions)
    page = render_html(results, folder, questions)
    verdicts = {r.name: [dataclasses.asdict(c) for c in r.claims] for r in results.runs}
    atomic_write_text(root / "report.md", markdown)
    html_path = root / "report.html"
    atomic_write_text(html_path, page)
    atomic_write_text(root / "verdicts.json", strict_json(verdicts))
    for broken in results.not_rendered:
        print(f"tailmem: warning: {broken.name} not rendered: {broken.reason}", file=sys.stderr)
    return html_path

"""What each experiment reproduces and what its presets cost, as data.

``tailmem list`` prints one line per experiment from this table, and ``tailmem reproduce`` uses
the measured times as the prior of its overall ETA for experiments that have not started yet
(:mod:`tailmem.progress_display`). Kept apart from the experiment modules so that listing the
experiments imports none of them (the language-model studies pull in torch and their data).

Times are wall-clock seconds of ``tailmem reproduce`` on a 2-core machine (cpu: from a fresh
clone on a quiet machine, the measurements ``docs/getting-started.md`` quotes;
smoke: every study in one ``reproduce --preset smoke`` at load 5, so that their ratios agree);
None where the preset was not timed here (the ``paper`` presets are meant for GPUs or long CPU
runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tailmem.progress import format_seconds


@dataclass(frozen=True)
class About:
    """One experiment: what it reproduces (paper, section) and each preset's size and time.

    ``in_reproduce``: ``tailmem reproduce`` runs it unless ``--only`` says otherwise (False for
    the long studies beyond the papers, which ``--only`` adds to the same report)."""

    reproduces: str
    sizes: Mapping[str, str]
    seconds: Mapping[str, float | None]
    in_reproduce: bool = True

    def presets_text(self) -> str:
        """``smoke 2s · cpu K ≤ 3000, 6s · paper K ≤ 30000`` (untimed presets: the size only)."""
        parts = []
        for preset, size in self.sizes.items():
            took = self.seconds.get(preset)
            time = "" if took is None else ("<1s" if took < 1 else format_seconds(took))
            text = ", ".join(p for p in (size, time) if p)
            parts.append(f"{preset} {text}")
        return " · ".join(parts)


CATALOG: dict[str, About] = {
    "assoc-two-group": About(
        "paper A Sec. 5 (Thm 5.3, Fig. 4): one-step balance, Δ–L",
        {"smoke": "", "cpu": "K ≤ 3000", "paper": "K ≤ 30000"},
        {"smoke": 3.6, "cpu": 12.0, "paper": None},
    ),
    "assoc-scaling": About(
        "paper B: per-group loss curves, noisy scaling laws, TRA-SignGD",
        {"smoke": "", "cpu": "K = 10^4", "paper": "K = 10^5"},
        {"smoke": 4.6, "cpu": 61.0, "paper": None},
    ),
    "assoc-capacity": About(
        "beyond the papers: Cabannes et al.'s d < K capacity law",
        {"smoke": "", "cpu": "10^3 facts", "paper": "10^4 facts"},
        {"smoke": 0.9, "cpu": 19.0, "paper": None},
    ),
    "assoc-embeddings": About(
        "beyond the papers (D): the embeddings' orientation — Muon vs sign, Adam, GD",
        {
            "smoke": "",
            "cpu": "K = 64, 5 families × 3 geometries × 2 d × 8 draws",
            "paper": "K = 999",
        },
        {"smoke": 0.9, "cpu": 288.0, "paper": None},  # cpu timed at load 6-7 (137 s of CPU)
        in_reproduce=False,
    ),
    "knowledge-qa": About(
        "paper A Sec. 4.3 (Fig. 3, Tables 3–8): tail-fact QA accuracy",
        {"smoke": "", "cpu": "6 arms × 2 FFN types × 3 seeds, d 256", "paper": "160M GPT"},
        {"smoke": 17.2, "cpu": 2073.0, "paper": None},
    ),
    "qa-sensitivity": About(
        "paper A Sec. 4.3 (Tables 3–8): the QA lag under unpublished choices",
        {"smoke": "", "cpu": "9 factor levels × 3 seeds", "paper": "160M GPT"},
        {"smoke": 38.6, "cpu": 1462.0, "paper": None},
        in_reproduce=False,
    ),
    "qa-map": About(
        "beyond the papers: where Muon's QA tail edge appears (width, exposures, m, exponent)",
        {"smoke": "", "cpu": "3 widths × 2 exposures", "paper": "up to 160M"},
        {"smoke": 26.1, "cpu": 979.0, "paper": None},
        in_reproduce=False,
    ),
    "ablation": About(
        "paper A Sec. 4.1 (Table 1, Fig. 1): which blocks need Muon",
        {"smoke": "", "cpu": "8 arms × 3 seeds", "paper": "160M GPT"},
        {"smoke": 11.9, "cpu": 720.0, "paper": None},
    ),
    "spectra": About(
        "paper A Sec. 4.2 (Fig. 2, Table 2): weight isotropy, logits",
        {"smoke": "", "cpu": "2 arms × 5 seeds", "paper": "160M GPT"},
        {"smoke": 16.1, "cpu": 306.0, "paper": None},
    ),
    "icl-regression": About(
        "paper A (ICLR, reviewers): QK control task, in-context regression",
        {"smoke": "", "cpu": "2 arms × 3 seeds", "paper": "10k steps, LR 1e-4"},
        {"smoke": 8.3, "cpu": 114.0, "paper": None},
    ),
    "optim-bench": About(
        "beyond the papers (C): which optimisers learn the tail",
        {"smoke": "", "cpu": "14 optimisers × 19 seeds at stored rates", "paper": "160M GPT"},
        {"smoke": 37.9, "cpu": 5407.0, "paper": None},
        in_reproduce=False,
    ),
    "rule-or-rate": About(
        "beyond the papers (D): is Muon's tail edge its update rule or its learning rate?",
        {"smoke": "", "cpu": "6 arms x 3 seeds, stored rates, 13 more points", "paper": "160M GPT"},
        {"smoke": 30.7, "cpu": 2805.0, "paper": None},
        in_reproduce=False,
    ),
}
"""Smoke presets are toy sizes (seconds, for the test suite), all timed in one ``tailmem reproduce
--preset smoke`` of every study (this branch, from main at 0a0d16f, load 5 on the shared 2-core AMD
EPYC: 3 min 17 s in all). Timed one by one at other commits and loads they had drifted apart
(knowledge-qa 2.5 s against 17 s, icl-regression 38 s against 8 s), and the overall ETA, which
rescales the others by the finished ones, overestimated threefold. The ``paper`` presets carry the
published sizes and were not timed here. The cpu times are each study's wall time from a fresh clone
on a 2-core AMD EPYC: ``tailmem reproduce --preset cpu`` of commit 47a0af2 (the main job's studies),
``tailmem run spectra --preset cpu`` of commit f5d1dc1 (5 seeds), ``tailmem run optim-bench --preset
cpu`` of commit 62546c5 and ``tailmem run rule-or-rate --preset cpu`` of commit 143334a (the results
page's numbers come from those runs); qa-sensitivity's, qa-map's and assoc-embeddings' were measured
at earlier commits. optim-bench's cpu time is not measured: its 5-seed run's 1423 s scaled to the 19
seeds its preset now runs (its evaluation runs are all of its cost at stored rates)."""


def about(name: str) -> About | None:
    """The catalog entry of experiment ``name`` (None for one registered without an entry)."""
    return CATALOG.get(name)


def in_reproduce(name: str) -> bool:
    """Whether ``tailmem reproduce`` runs ``name`` by default (one without an entry: yes)."""
    entry = CATALOG.get(name)
    return entry is None or entry.in_reproduce


def expected_seconds(name: str, preset: str) -> float | None:
    """Measured wall time of ``name`` at ``preset`` (None if not timed)."""
    entry = CATALOG.get(name)
    return None if entry is None else entry.seconds.get(preset)

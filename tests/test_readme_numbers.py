"""Every number the README states is in a results file it names: each interval ``m [lo, hi]``
is an interval of one of those files rounded to the README's digits, and every other decimal
number is one of theirs rounded so. An interval typed into the README from memory, or left
behind when a run moved it, fails here; a lone two-decimal number is a weaker check (the files
hold thousands of numbers), so the README states its results as intervals where it can."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
NUMBER = r"[−+-]?\d+\.\d+"
INTERVAL = re.compile(rf"({NUMBER}) \[({NUMBER}), ({NUMBER})\]")
DECIMAL = re.compile(rf"(?<![\w.]){NUMBER}(?![\w.])")
NOT_RESULTS = re.compile(r"```.*?```|arXiv \d+\.\d+|Python ≥ \d+\.\d+", re.S)
"""Code blocks, paper identifiers and version requirements: no results."""


def named_results() -> list[Path]:
    """The results files the README links or names: the pages under docs/ that hold runs'
    numbers, and the JSON files it names."""
    text = README.read_text()
    named = set(re.findall(r"docs/[\w./-]+\.(?:md|json)", text))
    results = {"docs/results.md", "docs/results_cpu.json", "docs/two-implementations.md",
               "docs/reference_check.json", "docs/claims.md"}  # fmt: skip
    assert results <= named, f"the README no longer names {sorted(results - named)}"
    return [ROOT / p for p in sorted(results)]


def value(text: str) -> Decimal:
    return Decimal(text.replace("−", "-").lstrip("+"))


def shown(source: str, stated: str) -> bool:
    """Could ``stated`` be ``source`` rounded to ``stated``'s decimals? Within half a unit of
    ``stated``'s last digit, plus half of ``source``'s where ``source`` is itself rounded (a
    0.165 may be 0.1649 or 0.1652); a source with fewer decimals never matches."""
    digits = len(stated.split(".")[1])
    source_digits = len(source.split(".")[1])
    if source_digits <= digits:
        return source_digits == digits and value(source) == value(stated)
    slack = Decimal(5).scaleb(-digits - 1) + Decimal(5).scaleb(-source_digits - 1)
    return abs(value(source) - value(stated)) <= slack


def readme_text() -> str:
    return NOT_RESULTS.sub("", README.read_text())


def sources() -> str:
    return "\n".join(p.read_text().replace("\\u2212", "−") for p in named_results())


def test_every_interval_in_the_readme_is_one_of_a_results_file():
    found = INTERVAL.findall(sources())
    missing = [f"{mean} [{low}, {high}]" for mean, low, high in INTERVAL.findall(readme_text())
               if not any(all(shown(f, s) for f, s in zip(cand, (mean, low, high), strict=True))
                          for cand in found)]  # fmt: skip
    assert not missing, f"README intervals in no results file it names: {missing}"


def test_every_other_number_in_the_readme_is_one_of_a_results_file():
    text = INTERVAL.sub("", readme_text())
    found = DECIMAL.findall(sources())
    missing = [n for n in DECIMAL.findall(text)
               if not any(shown(f.lstrip("−+-"), n.lstrip("−+-")) for f in found)]  # fmt: skip
    assert not missing, f"README numbers in no results file it names: {missing}"


def test_the_check_catches_a_number_no_file_holds():
    """The matcher itself: 0.123456 is in no results file at those digits; a rounded source
    matches the values it may round to and no other."""
    found = DECIMAL.findall(sources())
    assert not any(shown(f, "0.123456") for f in found)
    assert shown("0.165", "0.17") and shown("0.165", "0.16") and not shown("0.165", "0.18")
    assert shown("0.7509", "0.75") and not shown("0.7509", "0.76") and not shown("0.7", "0.70")
    assert shown("0.65", "0.65") and not shown("0.65", "0.66")

"""The questions knowledge-QA answers, stated first in the report (``report.json`` ``answers``).

1. With equal tuning freedom — Adam on the hidden matrices at a rate of its own (``adam_split``)
   over the same Adam-trained rest — does Muon learn the rare facts faster?
2. Paper A's comparison — Adam everywhere at one rate — does Muon learn them faster, and by as
   much as the paper's tables say?
3. How much of Muon's edge over Adam at one rate does giving Adam's hidden matrices their own
   rate recover (:mod:`tailmem.claims.share`)?

Each reads the exposure-lag ratio pooled over groups at τ 0.5 (geometric mean over paired
seeds) and decides by a two-sided t test of a difference and two one-sided tests of equivalence
within the lag margin of ``A3.beyond.rule_not_rate`` (:func:`tailmem.claims.rule_or_rate.
lag_margin`: its one copy). Where several such verdicts answer one question — a table of them,
one per point — :func:`lag_verdicts` corrects them together by Holm's rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypeVar

from tailmem.claims.core import ALPHA, EquivalenceTest, equivalence, holm
from tailmem.claims.rule_or_rate import lag_margin
from tailmem.claims.share import share
from tailmem.experiments.knowledge_qa.gaps import FAIR, PAPER, QAGaps, ratio_text
from tailmem.metrics.qa_gaps import POOLED, LagRatio
from tailmem.outputs import Answer

TAU = 0.5
"""The FTA level the answers read (the middle of the paper's three)."""
SPLIT = ("adam_split", "adam")
"""Adam at one rate behind Adam with its hidden matrices at their own rate."""
_K = TypeVar("_K")


def _test(ratio: LagRatio | None) -> EquivalenceTest | None:
    """The difference and equivalence tests of a lag ratio's per-seed logs (None: not measured
    in every seed)."""
    if ratio is None or not ratio.complete:
        return None
    return equivalence(ratio.log_values(), math.log(lag_margin()), resolution=ratio.resolution)


def _words(test: EquivalenceTest | None, different: bool, equivalent: bool) -> tuple[str, str]:
    if test is None:
        return "not measured", "not measured in every seed"
    if different:
        return ("faster", "yes") if test.mean > 0 else ("slower", "no, it is slower")
    if equivalent:
        return "equivalent", f"no: the two are equivalent within ×{lag_margin():g}"
    return "not distinguished", "not distinguished at this scale"


def lag_verdict(ratio: LagRatio | None) -> tuple[str, str]:
    """(verdict, words) of "the lagging arm needs more exposures", one question alone:
    ``faster`` (a difference beyond the 95 % interval), ``slower``, ``equivalent`` (within
    ×:func:`~tailmem.claims.rule_or_rate.lag_margin`, two one-sided tests at 5 %) or ``not
    distinguished``; ``not measured`` where a seed has no ratio."""
    test = _test(ratio)
    if test is None:
        return _words(None, False, False)
    return _words(test, test.p_different < ALPHA, test.p_equivalent < ALPHA)


def lag_verdicts(ratios: Mapping[_K, LagRatio | None]) -> dict[_K, tuple[str, str]]:
    """:func:`lag_verdict` of every ratio of a family that answers one question together (a
    table's verdict column, one per point): the difference and the equivalence test of every
    measured ratio form one family, corrected by Holm's step-down rule at family-wise 5 %, so
    that "faster at 7 of 12 points" is not read from uncorrected tests."""
    tests = {key: _test(ratio) for key, ratio in ratios.items()}
    measured = [(key, t) for key, t in tests.items() if t is not None]
    held = holm([p for _, t in measured for p in (t.p_different, t.p_equivalent)], ALPHA)
    out = {key: _words(None, False, False) for key, t in tests.items() if t is None}
    for k, (key, t) in enumerate(measured):
        out[key] = _words(t, held[2 * k], held[2 * k + 1])
    return {key: out[key] for key in ratios}


def answers(gaps: QAGaps, ffn: str, labels: dict[str, str]) -> list[Answer]:
    """The questions of the module docstring this run can answer (pairs it measured)."""
    out = []
    for lead, lag, question in (
        (*FAIR, "With equal tuning freedom (Adam on the hidden matrices at its own rate), does "
         "Muon learn the rare facts faster than Adam?"),
        (*PAPER, "In paper A's comparison (Adam everywhere at one rate), does Muon learn the "
         "rare facts faster than Adam?"),
    ):  # fmt: skip
        pair = gaps.pair(lead, lag)
        if pair is None:
            continue
        ratio = pair.ratio(TAU, POOLED)
        verdict, words = lag_verdict(ratio)
        shown = "—" if ratio is None else ratio_text(ratio, labels[lead], labels[lag])
        paper = gaps.paper["arxiv-v2"].pair(lead, lag)
        beside = ""
        if paper is not None:
            cell = paper.cell(TAU, POOLED)
            if cell is not None:
                theirs = ratio_text(cell, labels[lead], labels[lag])
                beside = f"; the paper's tables (arXiv v2, same reading): {theirs}"
        out.append(Answer(
            f"{question} ({ffn} FFN)", words,
            f"{labels[lag]} needs {shown} × {labels[lead]}'s exposures to bring the rarest "
            f"facts' FTA to {TAU:g} (pooled over groups; 95 % interval){beside}",
            verdict,
        ))  # fmt: skip
    paper_pair, split = gaps.pair(*PAPER), gaps.pair(*SPLIT)
    if paper_pair is not None and split is not None:
        whole, part = paper_pair.ratio(TAU, POOLED), split.ratio(TAU, POOLED)
        if whole is not None and part is not None and whole.complete and part.complete:
            found = share(part.log_values(), whole.log_values())
            if found.low is None or found.high is None:
                verdict = "not distinguished"
            elif found.low > 0.5:
                verdict = "mostly the rate"
            elif found.high < 0.5:
                verdict = "mostly the update rule"
            else:
                verdict = "not distinguished"
            out.append(Answer(
                f"How much of Muon's edge over Adam at one rate does Adam's own rate on the "
                f"hidden matrices recover? ({ffn} FFN)", verdict,
                f"share of the log exposure-lag ratio recovered: {found.text()} (1: all of it "
                f"is the rate; 0: none; τ {TAU:g}, pooled, 95 % interval over paired seeds)",
                verdict,
            ))  # fmt: skip
    return out

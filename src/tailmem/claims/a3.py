"""PAPERS.md A3 — heavy-tailed knowledge QA (Tables 3-8); measured by ``knowledge-qa``.

The checks are pure functions of :class:`A3Inputs`, the results of one FFN type;
:func:`evaluate_per_ffn` checks every claim against the inputs of its own FFN type.

The arms share their seeds (the same data order and initialisation per seed), so comparisons
between arms are paired: per-seed differences (or contrasts) over ≥ 3 seeds, beyond their 95 %
two-sided Student-t interval (df n − 1: :func:`~tailmem.claims.core.compare_paired`,
:func:`~tailmem.claims.core.contrast` with ``paired``), the SE floored by the resolution of an
FTA (one question of the group). "Behaves like" is an equivalence, two one-sided tests at 5 % each
(:func:`~tailmem.claims.core.within_band`). An arm whose head groups are not resolved above
chance learned nothing: a claim that compares it is ``inconclusive``; when every arm is at
chance, so is every claim.

"Far better" and "learned vs not" are two claims each: a *direction* (Muon above Adam beyond the
noise, no threshold of ours) and a *magnitude* against the paper's own number (Muon − Adam at
least the published gap, arXiv v2; the camera-ready's value is shown beside it). The published
gap is paper A's measurement of its 160M model on m = 15 groups, not a bound derived for another
model, so a magnitude claim is judged on that model only (elsewhere: not measured in its
setting).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tailmem.claims import paper_a_qa_tables as tables
from tailmem.claims.core import (
    ALPHA,
    CONFIDENCE,
    MIN_SEEDS,
    ONE_SIDED,
    PAPER_A_QA,
    TWO_SIDED,
    Claim,
    ClaimInputs,
    ClaimResult,
    Declared,
    Outcome,
    Scale,
    at_chance,
    compare_paired,
    contrast,
    declares,
    flipped,
    holm,
    inconclusive,
    mean_se,
    not_in_setting,
    unmeasured,
    within_band,
)

EXPERIMENT = "knowledge-qa"
ARMS = tables.ARMS
CHANCE_TOL = 0.05
"""Head-group FTA within this of chance under every arm: the model learned nothing."""
A3_PUBLISHED_FTA = tables.fta_by_fraction("arxiv-v2")
"""Published FTA (arXiv v2) per FFN type, (fraction of training, groups from the rarest), arm."""
CAMERA_READY_ADAM_RAREST = tables.published_fta("iclr")["plain", 10000, 15]["adam"]
"""ICLR 2026 camera-ready (secondary sources): Adam on group 15 at 10k steps, plain FFN."""
SOURCE_TAIL = "A3, Tables 3-8 (group 15 at 10k)"
NOISE = f"the {CONFIDENCE:.0%} two-sided t interval of the per-seed differences (paired, df n − 1)"
"""How every comparison of this module is decided, in the rules' words."""


def _pub(ffn: str, frac: float, offset: int, arm: str) -> float:
    return A3_PUBLISHED_FTA[ffn][(frac, offset)][arm]


def published_gap(ffn: str, frac: float = 1.0, offset: int = 0) -> float:
    """The paper's Muon − Adam FTA (arXiv v2) at a fraction of training, ``offset`` groups from
    the rarest, to the table's three decimals."""
    return round(_pub(ffn, frac, offset, "muon") - _pub(ffn, frac, offset, "adam"), 3)


@dataclass(frozen=True, kw_only=True)
class A3Inputs(ClaimInputs):
    """What knowledge-QA gives the A3 checks for one FFN type (every per-seed list in the order
    of ``seeds``, the seeds every arm completed: seed ``i`` of one arm is paired with seed ``i``
    of another)."""

    ffn: str
    """The FFN type these results are of: ``"plain"`` or ``"gated"``."""
    seeds: Sequence[int]
    """The seeds completed by every arm run."""
    rarest: int
    """Index m of the rarest group."""
    head_groups: int
    """The number of head groups (groups 0 … head_groups − 1)."""
    chance_fta: float
    """First-token accuracy of guessing (1 / the answer pool size)."""
    fta: Mapping[str, Mapping[str, Sequence[Sequence[float]]]] = field(default_factory=dict)
    """Arm id (``"muon"``, ``"adam"``, ``"sgd"``, ``"muon_vo_ffn"``, ``"muon_qk"``; absent where
    not run) → ``"final"`` / ``"half"`` (at 50% of the steps; absent where not evaluated) → FTA
    per group, per seed."""
    questions_per_group: Sequence[int] = ()
    """Evaluation questions per group (6 per person): an FTA is a count of answered questions,
    so one question is its resolution, the floor of a seed SD (none given: no floor)."""
    model: Scale | None = None
    """The model measured (a magnitude against the paper's gap is judged only on its model)."""
    edges: Mapping[str, str] = field(default_factory=dict)
    """Arm id → ``lowest`` / ``highest`` where the arm's chosen learning rate sits at that end
    of the rates its tuning tried, its widening spent (absent: interior or not tuned)."""


EDGE = (
    "inconclusive too when the arm the verdict puts behind chose its rate at an end of its "
    "tuning grid with the widening spent: a better rate may lie beyond, so being behind may be "
    "under-tuning"
)


def _under_tuned(
    inputs: A3Inputs, outcome: Outcome, behind_if_reproduced: str, behind_if_not: str
) -> Outcome:
    """``outcome``, or inconclusive when the arm it puts behind chose its rate at a grid end
    (:data:`EDGE`): a comparison is fair only between arms tuned to an interior rate."""
    behind = {"reproduced": behind_if_reproduced, "not reproduced": behind_if_not}.get(
        outcome.verdict
    )
    if behind is None or behind not in inputs.edges:
        return outcome
    reason = (
        f"{behind}'s rate is at the {inputs.edges[behind]} end of its tuning grid (widening "
        f"spent), and the verdict puts {behind} behind: a better rate may lie beyond"
    )
    return inconclusive(outcome.ours, reason, details=outcome.details, seeds=outcome.seeds)


def _per_seed(inputs: A3Inputs, arm: str, when: str, groups: slice) -> list[float]:
    """Per seed, the mean FTA over ``groups`` at ``when`` (``final`` or ``half``)."""
    rows = inputs.fta[arm][when]
    return [sum(r[groups]) / len(r[groups]) for r in rows]


def resolution(inputs: A3Inputs, groups: slice) -> float:
    """The step of the mean FTA over ``groups`` when one question changes (0: not known)."""
    counts = list(inputs.questions_per_group)[groups]
    return 1.0 / (max(counts) * len(counts)) if counts else 0.0


def _heads(inputs: A3Inputs) -> slice:
    return slice(0, inputs.head_groups)


def _guard(
    inputs: A3Inputs, ffn: str, arms: tuple[str, ...], when: str = "final", *, learned: bool = True
) -> Outcome | None:
    """A not-measured/inconclusive Outcome when the claim cannot be decided, else ``None``:
    its arms not run; every arm at chance (the model learned nothing); with ``learned``, any
    of the claim's own arms at chance (a comparison with an arm that learned nothing says
    nothing about the optimisers)."""
    if inputs.ffn != ffn:
        return unmeasured(f"the {ffn} FFN was not run")
    fta = inputs.fta
    missing = [a for a in arms if a not in fta or when not in fta[a]]
    if missing:
        return unmeasured(f"{', '.join(missing)} not run or not evaluated at this step")
    heads = _heads(inputs)
    step = resolution(inputs, heads)

    def chance(arm: str) -> bool:
        per_seed = _per_seed(inputs, arm, "final", heads)
        return at_chance(per_seed, inputs.chance_fta, tol=CHANCE_TOL, resolution=step)

    means = ", ".join(f"{a} {sum(v) / len(v):.3f}" for a in fta
                      if (v := _per_seed(inputs, a, "final", heads)))  # fmt: skip
    if all(chance(a) for a in fta):
        return inconclusive(
            "head FTA " + means,
            f"model at chance: no arm's head FTA resolved ({CONFIDENCE:.0%} t interval) above "
            f"{inputs.chance_fta:.3f} + {CHANCE_TOL}",
            seeds=inputs.seeds,
        )
    idle = [a for a in arms if chance(a)] if learned else []
    if idle:
        return inconclusive(
            "head FTA " + means,
            f"{', '.join(idle)} at chance: head FTA not resolved ({CONFIDENCE:.0%} t interval) "
            f"above {inputs.chance_fta:.3f} + {CHANCE_TOL}, so the comparison says nothing about "
            "it",
            seeds=inputs.seeds,
        )
    return None


def _ffn(claim: Claim) -> str:
    """The FFN type a claim is stated for: ``A3.<ffn>.<name>``."""
    return claim.id.split(".")[1]


GAP = Declared("paired t of Muon − Adam per seed in the group's FTA, df n − 1", TWO_SIDED)


@declares(GAP)
def check_tail(claim: Claim, inputs: A3Inputs) -> Outcome:
    return _gap_check(claim, inputs, "final", 0)


@declares(GAP)
def check_midtail(claim: Claim, inputs: A3Inputs) -> Outcome:
    return _gap_check(claim, inputs, "half", 2)


def _gap_check(claim: Claim, inputs: A3Inputs, when: str, offset: int) -> Outcome:
    """Muon − Adam in one group, per paired seed, beyond the t interval: above 0 (a direction
    claim, no ``published_gap``) or above the paper's own gap (a magnitude claim, judged on
    the paper's model only)."""
    ffn = _ffn(claim)
    margin = claim.tolerances.get("published_gap", 0.0)
    if margin and inputs.ffn == ffn and (elsewhere := not_in_setting(PAPER_A_QA, inputs.model)):
        return unmeasured(elsewhere, seeds=inputs.seeds)
    if guard := _guard(inputs, ffn, ("muon", "adam"), when):
        return guard
    group = inputs.rarest - offset
    g = slice(group, group + 1)
    c = compare_paired(
        _per_seed(inputs, "muon", when, g), _per_seed(inputs, "adam", when, g),
        margin=margin, resolution=resolution(inputs, g),
    )  # fmt: skip
    ours = f"group {group}: Muon {c.a}, Adam {c.b}; Muon − Adam {c.a.mean - c.b.mean:+.3f}"
    ours += f" ± {c.se:.2g} (paired)" if c.se else ""
    if c.interval is not None:
        ours += " ({:.0%} CI {:+.3f} to {:+.3f})".format(CONFIDENCE, *c.interval)
    if margin:
        ours += f" against the published {margin:.3f} (arXiv v2)"
        if when == "final" and ffn == "plain":
            camera = round(_pub(ffn, 1.0, 0, "muon") - CAMERA_READY_ADAM_RAREST, 3)
            ours += f"; the camera-ready's {camera:.3f}"
    details = {"difference": c.difference, "se": c.se, "interval": c.interval}
    return _under_tuned(inputs, Outcome(c.verdict, ours, c.reason, details, inputs.seeds),
                        "adam", "muon")  # fmt: skip


@declares(Declared(
    "per arm, one-sided t of the head FTA above the floor (the lower side of an equivalence "
    "with 1), df n − 1", ONE_SIDED, "the arms",
    "confirm: every arm required (intersection–union, none needed); refute: Holm over the arms",
))  # fmt: skip
def check_head(claim: Claim, inputs: A3Inputs) -> Outcome:
    """Every arm's head FTA above the floor by a one-sided t test at 5 % (the lower side of
    "≈ 1", an equivalence with 1 whose upper side an FTA cannot break); an arm below it by
    the opposite one-sided test, after Holm's correction over the arms, refutes. An arm at
    chance is a finding here (it did not learn the head), so only a model at chance under
    every arm is undecided."""
    ffn = _ffn(claim)
    values = {"last_head": inputs.head_groups - 1}
    if guard := _guard(inputs, ffn, ARMS, learned=False):
        return dataclasses.replace(guard, values=values)
    heads = _heads(inputs)
    step = resolution(inputs, heads)
    found = {arm: contrast([(1.0, _per_seed(inputs, arm, "final", heads))], margin=claim["floor"],
                           resolution=step) for arm in ARMS}  # fmt: skip
    ours = ", ".join(f"{a} {mean_se(_per_seed(inputs, a, 'final', heads)).floored(step)}"
                     for a in ARMS)  # fmt: skip
    seeds = inputs.seeds
    above = {a: c.one_sided("above") for a, c in found.items()}
    below = [c.one_sided("below") for c in found.values()]
    if any(holm(below)):
        return Outcome("not reproduced", ours, seeds=seeds, values=values)
    if all(p < ONE_SIDED for p in above.values()):
        return Outcome("reproduced", ours, seeds=seeds, values=values)
    undecided = [a for a, p in above.items() if not p < ONE_SIDED]
    reason = (
        f"{', '.join(undecided)} not above the floor by a one-sided t test at {ONE_SIDED:.0%} "
        "(< 3 seeds, within the noise, or below it but not after Holm's correction over the arms)"
    )
    return inconclusive(ours, reason, seeds=seeds, values=values)


@declares(Declared(
    "the hybrid's position t = (x − Adam)/(Muon − Adam) in its band, each edge a paired "
    "per-seed contrast of the three arms, one-sided t, df n − 1 (TOST)", ONE_SIDED,
    "the band's two edges",
    "confirm: both edges required (intersection–union, none needed); refute: Holm over the two",
))  # fmt: skip
def check_hybrid(claim: Claim, inputs: A3Inputs) -> Outcome:
    """The hybrid's position t = (x − Adam)/(Muon − Adam) in the rarest group inside the
    claim's band [lo, hi] — an equivalence with the arm it resembles, the band its margin —
    decided edge by edge on paired seeds (:func:`~tailmem.claims.core.within_band`): t ≥ lo is
    the per-seed contrast x − lo·Muon − (1 − lo)·Adam above 0, t ≤ hi the contrast hi·Muon +
    (1 − hi)·Adam − x, each by a one-sided t test at 5 % (both: reproduced; either below 0 by
    its one-sided test after Holm over the two: not reproduced)."""
    ffn = _ffn(claim)
    arm = claim.id.split(".")[2].split("_like_")[0]
    lo, hi = _band(claim)
    if guard := _guard(inputs, ffn, ("muon", "adam", arm)):
        return guard
    g = slice(inputs.rarest, inputs.rarest + 1)
    step = resolution(inputs, g)
    muon, adam = _per_seed(inputs, "muon", "final", g), _per_seed(inputs, "adam", "final", g)
    x = _per_seed(inputs, arm, "final", g)
    spread = compare_paired(muon, adam, margin=claim["min_spread"], resolution=step)
    ours = f"{mean_se(x).floored(step)} (Muon {spread.a}, Adam {spread.b})"
    if spread.verdict != "reproduced":
        return inconclusive(
            ours, "Muon − Adam not resolved above min_spread " + (spread.reason or ""),
            seeds=inputs.seeds,
        )  # fmt: skip
    t = (mean_se(x).mean - spread.b.mean) / (spread.a.mean - spread.b.mean)
    above = contrast([(1, x), (-lo, muon), (lo - 1, adam)], resolution=step, paired=True)
    below = contrast([(hi, muon), (1 - hi, adam), (-1, x)], resolution=step, paired=True)
    band = within_band([("t ≥ lo", above), ("t ≤ hi", below)])
    ours += (
        f", t = {t:.2f} (t − {lo:g}: {above.estimate:+.3f} ± {above.se or 0:.2g}, {hi:g} − t: "
        f"{below.estimate:+.3f} ± {below.se or 0:.2g}, in FTA, paired; one-sided p "
        f"{band.p_inside[0]:.3g} and {band.p_inside[1]:.3g})"
    )
    details = {"t": t, "above_lo": above.estimate, "below_hi": below.estimate,
               "se_lo": above.se, "se_hi": below.se, "p_inside": list(band.p_inside),
               "p_outside": list(band.p_outside)}  # fmt: skip
    if band.verdict == "inconclusive":
        return inconclusive(ours, band.reason, details=details, seeds=inputs.seeds)
    if edged := [a for a in ("muon", "adam", arm) if a in inputs.edges]:
        reason = (
            f"{', '.join(edged)} chose a rate at an end of its tuning grid (widening spent): a "
            "better rate may move t either way"
        )
        return inconclusive(ours, reason, details=details, seeds=inputs.seeds)
    return Outcome(band.verdict, ours, details=details, seeds=inputs.seeds)


def _band(claim: Claim) -> tuple[float, float]:
    """The band of t: [t, t_max] for "like Muon", [t_min, t] for "like Adam"."""
    if "t_max" in claim.tolerances:
        return claim["t"], claim["t_max"]
    return claim["t_min"], claim["t"]


@declares(Declared("paired t of SGD+M − Adam per seed in the rarest group's FTA, df n − 1",
                   TWO_SIDED))  # fmt: skip
def check_sgd(claim: Claim, inputs: A3Inputs) -> Outcome:
    """SGD+M − Adam in the rarest group, per paired seed, below 0 beyond the t interval:
    reproduced; above: not."""
    ffn = _ffn(claim)
    if guard := _guard(inputs, ffn, ("sgd", "adam")):
        return guard
    g = slice(inputs.rarest, inputs.rarest + 1)
    c = compare_paired(
        _per_seed(inputs, "sgd", "final", g), _per_seed(inputs, "adam", "final", g),
        resolution=resolution(inputs, g),
    )  # fmt: skip
    ours = f"SGD+M {c.a} vs Adam {c.b} (paired difference {c.difference:+.3f} ± {c.se or 0:.2g})"
    outcome = Outcome(
        flipped(c.verdict), ours, c.reason, {"difference": c.difference}, inputs.seeds
    )
    return _under_tuned(inputs, outcome, "sgd", "adam")


_HYBRID_RULE = (
    "t = (x − Adam)/(Muon − Adam) of the rarest-group FTA in {band} (an equivalence with the "
    "arm it resembles, margin the band), each edge a per-seed contrast of the three arms (paired "
    "seeds; t ≥ lo: x − lo·Muon − (1 − lo)·Adam > 0; t ≤ hi alike) decided by a one-sided t "
    f"test at {ONE_SIDED:.0%} (df n − 1; two one-sided tests, TOST): both above 0 → "
    "reproduced, either below 0 by its one-sided test after Holm's correction over the two → "
    "not reproduced, else inconclusive; inconclusive too unless Muon − Adam − {{min_spread}} is "
    "above 0 beyond " + NOISE + ", or with an arm at chance"
)


def _versions(ffn: str) -> dict[str, str]:
    """The other version of the paper's numbers shown beside ours (plain FFN only)."""
    if ffn != "plain":
        return {}
    return {"ICLR 2026 camera-ready": f"Adam {CAMERA_READY_ADAM_RAREST} (secondary sources)"}


def _vs(ffn: str, arm: str, label: str, frac: float = 1.0, offset: int = 0) -> str:
    """The published FTA of ``arm`` beside Adam's at a fraction of training and group offset."""
    adam = _pub(ffn, frac, offset, "adam")
    return f"{label} {_pub(ffn, frac, offset, arm):.3f} vs Adam {adam:.3f}"


def _direction_rule(what: str) -> str:
    """The rule of a direction claim on the FTA of ``what``: Muon above Adam, no threshold."""
    return (
        f"per paired seed (≥ 3) the FTA({what}) of Muon − Adam: above 0 beyond {NOISE} → "
        "reproduced, below 0 beyond it → not reproduced (within it, < 3 seeds, or an arm at "
        f"chance: inconclusive; {EDGE})"
    )


def _magnitude_rule(what: str) -> str:
    """The rule of a magnitude claim on the FTA of ``what``: at least the paper's gap."""
    return (
        f"per paired seed (≥ 3) the FTA({what}) of Muon − Adam − {{published_gap}} (the "
        f"paper's gap, arXiv v2): above 0 beyond {NOISE} → reproduced, below 0 beyond it → "
        f"not reproduced (within it, < 3 seeds, or an arm at chance: inconclusive; {EDGE}); "
        "judged only on paper A's model (12 × 768, m = 15), elsewhere not measured in its "
        "setting"
    )


def _hybrid_claim(ffn: str, arm: str, label: str, like: str, band: dict[str, float]) -> Claim:
    """A hybrid arm behaves like the optimiser it gives most matrices to."""
    return Claim(
        f"A3.{ffn}.{arm}_like_{like}",
        EXPERIMENT,
        SOURCE_TAIL,
        f"{label} behaves like {like.capitalize()} in the tail ({ffn} FFN)",
        f"{_pub(ffn, 1.0, 0, arm):.3f} (Muon {_pub(ffn, 1.0, 0, 'muon'):.3f}, "
        f"Adam {_pub(ffn, 1.0, 0, 'adam'):.3f}) (arXiv v2)",
        _HYBRID_RULE.format(band="[{t}, {t_max}]" if "t_max" in band else "[{t_min}, {t}]"),
        {**band, "min_spread": 0.1},
        check=check_hybrid,
        versions=_versions(ffn),
        why="'behaves like' is two-sided: the hybrid must sit near the arm it resembles, "
        "neither short of it nor beyond it. The band (a quarter of the Muon–Adam spread on "
        "either side) and min_spread (t is meaningless while Muon and Adam nearly coincide) "
        "are ours; the paper's hybrids sit at t = 0.97 and 0.03 (v2), well inside.",
        min_seeds=MIN_SEEDS,
    )


def _tail_claims(ffn: str) -> list[Claim]:
    """'Far better' in the rarest group at the end: its direction and its magnitude."""
    tail_gap = published_gap(ffn)
    camera = (
        {"ICLR 2026 camera-ready": f"gap {_pub(ffn, 1.0, 0, 'muon') - CAMERA_READY_ADAM_RAREST:.3f}"
         f" (Adam {CAMERA_READY_ADAM_RAREST}, secondary sources)"}
        if ffn == "plain"
        else {}
    )  # fmt: skip
    return [
        Claim(
            f"A3.{ffn}.tail_muon_vs_adam",
            EXPERIMENT,
            SOURCE_TAIL,
            f"Muon learns the rarest group better than Adam by the end — the direction of "
            f"'far better' ({ffn} FFN)",
            _vs(ffn, "muon", "Muon") + " (arXiv v2)",
            _direction_rule("rarest group, last step"),
            check=check_tail,
            versions=_versions(ffn),
            why="The direction of 'far better', with no threshold of ours: Muon above Adam "
            "beyond the seeds' noise. How far is the magnitude claim "
            f"A3.{ffn}.tail_gap_magnitude, against the paper's own number.",
            min_seeds=MIN_SEEDS,
        ),
        Claim(
            f"A3.{ffn}.tail_gap_magnitude",
            EXPERIMENT,
            SOURCE_TAIL,
            f"Muon leads Adam on the rarest group at the end by at least the published gap — "
            f"the magnitude of 'far better' ({ffn} FFN)",
            f"Muon − Adam {tail_gap:.3f} (arXiv v2)",
            _magnitude_rule("rarest group, last step"),
            {"published_gap": tail_gap},
            check=check_tail,
            versions=camera,
            why="'Far better' quantified by the paper itself: its gap in the rarest group at "
            "the end (group 15 at 10k steps, arXiv v2, the version whose table was read), a "
            "lower bound — ours must be at least as large. The ICLR 2026 camera-ready reports "
            "Adam at 0.558 there (secondary sources), a gap of 0.418: it is shown beside ours, "
            "not judged. The gap is the paper's measurement of its 160M model on m = 15 groups, "
            "not a bound derived for another model: judged on that model only.",
            min_seeds=MIN_SEEDS,
        ),
    ]


def _midtail_claims(ffn: str) -> list[Claim]:
    """'Learned vs not' halfway through, in group m − 2: direction and magnitude."""
    mid_gap = published_gap(ffn, 0.5, 2)
    return [
        Claim(
            f"A3.{ffn}.midtail_halfway",
            EXPERIMENT,
            "A3, Tables 3-8 (group 13 at 5k)",
            "Halfway through training Muon has learned the second-rarest-but-one group "
            "better than Adam — the direction of 'learned vs not'",
            _vs(ffn, "muon", "Muon", 0.5, 2) + " (arXiv v2)",
            _direction_rule("group m−2 at 50% of the steps"),
            check=check_midtail,
            why="The direction of 'learned vs not', with no threshold of ours; how far is "
            f"A3.{ffn}.midtail_gap_magnitude.",
            min_seeds=MIN_SEEDS,
        ),
        Claim(
            f"A3.{ffn}.midtail_gap_magnitude",
            EXPERIMENT,
            "A3, Tables 3-8 (group 13 at 5k)",
            "Halfway through training Muon leads Adam on the second-rarest-but-one group by "
            "at least the published gap — the magnitude of 'learned vs not'",
            f"Muon − Adam {mid_gap:.3f} (arXiv v2; the camera-ready does not differ here)",
            _magnitude_rule("group m−2 at 50% of the steps"),
            {"published_gap": mid_gap},
            check=check_midtail,
            why="'Learned vs not' quantified by the paper itself: its gap in group 13 at 5k "
            "steps (arXiv v2), a lower bound — ours must be at least as large; a measurement "
            "of the paper's 160M model on m = 15 groups, so judged on that model only.",
            min_seeds=MIN_SEEDS,
        ),
    ]


def _head_claim(ffn: str) -> Claim:
    """Every optimiser learns the head groups."""
    return Claim(
        f"A3.{ffn}.head_all_optimisers",
        EXPERIMENT,
        "A3 (head groups reach ≈ 1.0 with every optimiser)",
        f"Every optimiser, SGD included, learns the head groups ({ffn} FFN)",
        "≈ 1.0 for every arm",
        "per arm, mean ± SE over ≥ 3 seeds of the FTA of groups 0..{last_head} at the last "
        f"step: above {{floor}} by a one-sided t test at {ONE_SIDED:.0%} (df n − 1, the lower "
        "side of an equivalence with 1) for every arm → reproduced; below it by the opposite "
        f"one-sided test for an arm (an arm at chance included), at family-wise {ALPHA:.0%} "
        "(Holm over the arms) → not reproduced; otherwise inconclusive",
        {"floor": 0.9},
        {"last_head": "last head group (config head_groups − 1)"},
        check=check_head,
        why="'≈ 1.0' is a sameness with 1, with the equivalence margin 0.1 (ours); an FTA "
        "cannot exceed 1, so only its lower side needs testing: above 0.9 beyond the "
        "noise. Every arm is required (no correction needed to confirm); a refutation by "
        "any of the five is a family of tests (Holm).",
        min_seeds=MIN_SEEDS,
    )


def _sgd_claim(ffn: str) -> Claim:
    """SGD+M learns the rarest group no better than Adam."""
    return Claim(
        f"A3.{ffn}.sgd_below_adam",
        EXPERIMENT,
        SOURCE_TAIL,
        f"SGD+momentum learns the rarest group no better than Adam ({ffn} FFN)",
        _vs(ffn, "sgd", "SGD+M") + " (arXiv v2)",
        "rarest-group FTA at the last step, per paired seed (≥ 3): SGD+M − Adam below 0 "
        f"beyond {NOISE} → reproduced, above 0 beyond it → not reproduced, else inconclusive "
        f"(also with SGD+M or Adam at chance; {EDGE})",
        check=check_sgd,
        versions=_versions(ffn),
        why="'no better than' is a bound (SGD+M ≤ Adam), tested one-sided with no margin of "
        "ours; the paper has SGD+M well below (0.126 vs 0.264 in v2). An arm that learned "
        "nothing (head at chance) would pass trivially, so it is undecided.",
        min_seeds=MIN_SEEDS,
    )


def _a3_claims(ffn: str) -> list[Claim]:
    """The A3 claims of one FFN type (its published values differ; the mid-tail is plain only)."""
    return [
        *_tail_claims(ffn),
        *(_midtail_claims(ffn) if ffn == "plain" else []),
        _head_claim(ffn),
        _hybrid_claim(
            ffn, "muon_vo_ffn", "Muon(VO+FFN)&Adam(QK)", "muon", {"t": 0.75, "t_max": 1.25}
        ),
        _hybrid_claim(ffn, "muon_qk", "Muon(QK)&Adam(VO+FFN)", "adam", {"t": 0.25, "t_min": -0.25}),
        _sgd_claim(ffn),
    ]


def _not_run(claim: Claim) -> ClaimResult:
    """A claim of an FFN type that was not run: not measured (no head group was measured, so
    a rule that names the last head group reads 0)."""
    outcome = unmeasured(f"the {_ffn(claim)} FFN was not run", values={"last_head": 0})
    return claim.from_outcome(outcome)


def evaluate_per_ffn(per_ffn: Mapping[str, A3Inputs]) -> list[ClaimResult]:
    """Every ``knowledge-qa`` claim, each checked against the inputs of its own FFN type
    (``per_ffn["plain"]``, ``per_ffn["gated"]``); an FFN type not run leaves its claims
    not measured."""
    results = []
    for claim in CLAIMS:
        if claim.experiment != EXPERIMENT:
            continue
        inputs = per_ffn.get(_ffn(claim))
        results += [_not_run(claim)] if inputs is None else claim.evaluate(inputs)
    return results


CLAIMS: list[Claim] = [
    *_a3_claims("plain"),
    *_a3_claims("gated"),
    Claim(
        "A3.beyond.uniform_sweep",
        None,
        "A3, reviewers",
        "The Muon–Adam tail gap shrinks as frequencies go from power law to uniform",
        "— (asked by reviewers; stated in the ICLR 2026 camera-ready)",
        "tail gap against the frequency exponent",
    ),
    Claim(
        "A3.beyond.capacity_controlled",
        None,
        "A3, reviewers",
        "The tail advantage survives a capacity-controlled ablation",
        "— (asked by reviewers)",
        "tail gap at matched model capacity",
    ),
]

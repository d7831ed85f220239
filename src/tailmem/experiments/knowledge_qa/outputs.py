"""Knowledge-QA's tables, figures, results, claims and report of a finished plan, as one
:class:`~tailmem.outputs.Outputs` (the experiment and its file list:
:mod:`tailmem.experiments.knowledge_qa`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tailmem.claims.core import ClaimResult
from tailmem.columns import column_docs, records
from tailmem.data.bios import DataSummary
from tailmem.experiments.knowledge_qa import answers, gaps, plots, tables
from tailmem.experiments.knowledge_qa.config import SCORES, Config
from tailmem.experiments.knowledge_qa.curves import PlanCurves
from tailmem.lm import sweeps
from tailmem.lm.plan import TrainedPlan
from tailmem.lm.spec import diverged_runs
from tailmem.lm.sweeps import ChoiceRow, TrialRow, choice_rows, trial_rows
from tailmem.optim.registry import AdamHParams, MuonHParams
from tailmem.outputs import Figure, Outputs, Report, Table
from tailmem.report.qa_gap_figures import fta_vs_exposures_figure, lag_ratio_figure


def outputs(
    cfg: Config,
    trained: TrainedPlan,
    chance: float,
    data_summary: DataSummary,
    exposures: gaps.Exposures,
) -> Outputs:
    """Tables, figures, results, claims and the report of a finished plan (its tables read the
    runs that did not diverge; ``results.json`` lists those that did). The gap measures lead
    the report, then each FFN type's tail table and figures, then the head–tail gap and the
    tuning."""
    diverged = diverged_runs(list(trained.results.values()))
    plan = trained.completed()
    score = cfg.tuning.score_name(SCORES)
    trials = trial_rows(plan)
    choices = choice_rows(plan)
    captions = (
        f"Tuning: every arm's choice, cost and budget (score {score}: {SCORES[score]})",
        "Every tuning trial",
    )
    tuning = sweeps.tuning_tables(plan, captions if choices else None)  # none tuned: not shown
    curves = PlanCurves.read(plan)
    measured = {ffn: gap_outputs(cfg, plan, curves, ffn, exposures) for ffn in plan.ffns}
    measures = {ffn: found for ffn, (found, _) in measured.items()}
    fracs, offsets, m = cfg.table_fracs, cfg.tail_offsets, cfg.data.m
    long_rows = [row for f in plan.ffns
                 for row in tables.tail_table_long(plan, curves, f, fracs, offsets, m)]  # fmt: skip
    gaps_rows = [row for f in plan.ffns
                 for row in tables.gap_rows(plan, curves, f, cfg.head_groups)]  # fmt: skip
    claims = tables.claims(plan, curves, m, cfg.head_groups, chance, cfg.model.scale(m))
    finals = {ffn: tables.final_by_group(plan, curves, ffn) for ffn in cfg.ffns}
    per_ffn = [_ffn_outputs(cfg, plan, curves, ffn, chance, trials) for ffn in plan.ffns]
    last = (
        Table("tail_table_long.csv", records(long_rows), columns=column_docs(tables.TailRow)),
        Table("head_tail_gap.csv", records(gaps_rows), f"Head (groups 0..{cfg.head_groups - 1}) "
              "vs rarest group at the end: the head–tail gap, mean and std over seeds",
              column_docs(tables.HeadTailRow)),
        *tuning,
    )  # fmt: skip
    results = {
        "data": data_summary.to_json(),
        "chance_fta": chance,
        "best_lr": {f"{ffn}/{arm}": lrs for (ffn, arm), lrs in plan.best.items()},
        "tuning": {
            "score": score,
            "choices": records(choices),
            "trials": records(trials),
        },
        "runs": [plan.results[job].to_json() for jobs in plan.seed_runs.values() for job in jobs],
        "diverged": [d.to_json() for d in diverged],
        "head_tail_gap": records(gaps_rows),
        "tail_table": records(long_rows),
        "gap_measures": {ffn: found.to_json() for ffn, found in measures.items()},
        "final_by_group": finals,
        "config_model": dataclasses.asdict(cfg.model),
    }
    report = Report(
        "Knowledge QA: FTA of rare facts by optimiser (paper A, Sec. 4.3)",
        report_summary(cfg, gaps_rows, claims, choices, data_summary, chance, measures),
        tuple(a for ffn, found in measures.items()
              for a in answers.answers(found, ffn, plan.labels)),
    )  # fmt: skip
    done = Outputs(tables=last, records={"results.json": results}, claims=tuple(claims),
                   report=report)  # fmt: skip
    return sum([shown for _, shown in measured.values()] + per_ffn, Outputs()) + done


def _ffn_outputs(
    cfg: Config,
    plan: TrainedPlan,
    curves: PlanCurves,
    ffn: str,
    chance: float,
    trials: Sequence[TrialRow],
) -> Outputs:
    """One FFN type's tail table and figures (an FFN type whose every seed run diverged has
    none)."""
    m = cfg.data.m
    rows = tables.tail_table(plan, curves, ffn, cfg.table_fracs, cfg.tail_offsets, m)
    table = Table(
        f"tail_table_{ffn}.csv",
        records(rows),
        f"Tail groups (m = {m}) at 20/50/100% of {cfg.train.steps} steps, {ffn} FFN, mean ± SE "
        f"over {cfg.seeds} seed(s); 'paper' columns: the published m = 15 value of the group "
        "at the same distance from the rarest (empty where not published)",
        column_docs(tables.TailTableRow, rows),
        tables.tail_mean_se([plan.arm(arm).label for arm in plan.arms]),
    )
    figures = [
        Figure(
            f"fta_by_group_{ffn}",
            plots.fta_by_group_figure(plan, curves, ffn, chance),
            f"FTA per frequency group over training, {ffn} FFN, mean ± std over "
            f"{cfg.seeds} seed(s) (paper Fig. 3); dashed: chance {chance:.3f}",
        ),
        Figure(
            f"fta_final_{ffn}",
            plots.final_fta_figure(plan, curves, ffn, chance),
            f"First-token accuracy (left) and whole-answer exact match (right: greedy "
            f"decoding reproduces every answer token) at the last step by frequency group, "
            f"{ffn} FFN, mean ± std over seeds",
        ),
    ]
    if any(r.ffn == ffn for r in trials):
        figures.append(Figure(
            f"lr_sweep_{ffn}",
            plots.sweep_figure(trials, ffn, plan.labels),
            f"Tuning, {ffn} FFN: each candidate's score ({cfg.tuning.score_name(SCORES)}), "
            f"mean over the tuning seeds (dots: each seed; star: chosen)",
        ))  # fmt: skip
    return Outputs(tables=(table,), figures=tuple(figures))


def gap_outputs(
    cfg: Config, plan: TrainedPlan, arms: PlanCurves, ffn: str, exposures: gaps.Exposures
) -> tuple[gaps.QAGaps, Outputs]:
    """The gap measures of one FFN type and their tables and figures (per headline pair: the
    fair comparison, then paper A's)."""
    found, curves = gaps.measure(plan, arms, ffn, exposures)
    figures, listed = [], [Table(f"lag_ratio_{ffn}.csv", records(gaps.lag_ratio_rows(ffn, found)),
                                 columns=column_docs(gaps.LagRatioRow))]  # fmt: skip
    tail = sorted({cfg.data.m - o for o in cfg.tail_offsets if o <= cfg.data.m})
    for lead_arm, lag_arm in found.headlines():
        pair = found.pair(lead_arm, lag_arm)
        assert pair is not None
        lead, lag = plan.arm(lead_arm).label, plan.arm(lag_arm).label
        stem = f"{ffn}" if (lead_arm, lag_arm) == found.headline() else f"{ffn}_{lag_arm}"
        labels = {lead_arm: lead, lag_arm: lag}
        reference = found.paper[gaps.REFERENCE].pair(lead_arm, lag_arm)
        paper_note = (
            "beside the paper's tables computed the same way (grey, arXiv v2; the ICLR values "
            "are in the table; the paper's groups 11/13/15 are our m−4/m−2/m)"
            if reference is not None else "(the paper did not run this pair)"
        )  # fmt: skip
        figures += [
            Figure(
                f"fta_vs_exposures_{stem}",
                fta_vs_exposures_figure(
                    curves[lead_arm, lag_arm], lead_arm, lag_arm, groups=tail,
                    taus=found.ours.taus, title=f"{lead} (solid) vs {lag} (dashed), {ffn} FFN",
                    labels=labels,
                ),
                f"FTA of the tail groups against exposures per fact (times one fact has been "
                f"trained), {lead} vs {lag}, {ffn} FFN, mean ± SE band over "
                f"{curves[lead_arm, lag_arm].n_seeds} paired seed(s): how far right {lag}'s "
                "curve sits at an FTA level (dotted) is the exposure-lag ratio",
            ),
            Figure(
                f"lag_ratio_{stem}",
                lag_ratio_figure(
                    pair, reference=reference,
                    reference_label=gaps.VERSION_LABELS[gaps.REFERENCE],
                    title=f"Exposure-lag ratio of {lag} behind {lead}, {ffn} FFN "
                    "(▲ at least, ▼ at most)", labels=labels,
                ),
                f"Exposure-lag ratio, {ffn} FFN: exposures {lag} needs ÷ exposures {lead} needs "
                "to bring a group to FTA τ (read on each curve's monotone envelope, "
                "interpolated between evaluations; geometric mean over seeds with its 95 % t "
                "interval; ▲/▼: bounds where a crossing is not bracketed; pooled: the geometric "
                f"mean over the groups measured in every seed), {paper_note}",
            ),
        ]  # fmt: skip
        listed.append(Table(
            f"lag_ratio_summary_{stem}.csv",
            records(gaps.lag_ratio_table(found, lead_arm, lag_arm, labels)),
            f"Exposure-lag ratio of {lag} behind {lead}, {ffn} FFN, per group (pooled: the "
            "geometric mean over the groups measured in every seed) and FTA level τ; ours "
            "(geometric mean [95 % t interval] over seeds) and the paper's m = 15 tables. "
            f"Every pair of arms: lag_ratio_{ffn}.csv",
            column_docs(gaps.LagRatioCells),
        ))  # fmt: skip
    listed.append(Table(
        f"gap_{ffn}.csv",
        records(gaps.gap_rows(ffn, found, plan.steps)),
        f"FTA gaps per pair of arms, {ffn} FFN: the tail gap (rarest group at the end, the "
        "pre-specified cell) and, descriptive only, the peak gap (the largest seed-mean gap "
        "over groups and evaluations); ours and the paper's",
        column_docs(gaps.GapRow),
    ))  # fmt: skip
    return found, Outputs(tables=tuple(listed), figures=tuple(figures))


def choices_sentence(cfg: Config) -> str:
    """The unpublished QA choices this run made, in words (``qa-sensitivity`` varies them)."""
    answers = {"bpe": "BPE tokens", "single": "one token per answer value"}
    packing = {"cross": "packed items attending to earlier items", "document": "each item "
               "attending only to itself from position 0"}  # fmt: skip
    optim = []
    adam, muon = cfg.optim.get("adam"), cfg.optim.get("muon")
    if adam is not None and isinstance(adam.hparams, AdamHParams):
        optim.append(f"Adam β {tuple(adam.hparams.betas)}")
    if muon is not None and isinstance(muon.hparams, MuonHParams):
        nesterov = "on" if muon.hparams.nesterov else "off"
        optim.append(f"Muon Nesterov {nesterov} with the {muon.hparams.scale} update scale")
    return (
        f"Unpublished choices: loss on {cfg.loss_on} tokens, answers as "
        f"{answers[cfg.data.answer_tokens]}, {packing[cfg.packing]}, "
        f"{cfg.data.templates_per_attribute} template(s) per attribute, "
        + "".join(f"{text}, " for text in optim)
        + f"QK-norm {'on' if cfg.model.qk_norm else 'off'} "
        "(`tailmem run qa-sensitivity` measures the lag ratio as each changes)."
    )


def report_summary(
    cfg: Config,
    head_tail: list[tables.HeadTailRow],
    claims: list[ClaimResult],
    choices: list[ChoiceRow],
    data_summary: DataSummary,
    chance: float,
    measures: dict[str, gaps.QAGaps],
) -> str:
    """One paragraph: the setting, the lag ratio and peak gap of the headline pair beside the
    paper's, the final rarest-group FTA and EM per arm, and the verdicts."""
    model = cfg.model.build(1, "plain", cfg.train.seq_len)
    train = cfg.train
    labels = {g.arm: g.label for g in head_tail}
    parts = [
        f"{model.n_layer} layers × d={model.d_model} (d_ff {model.d_ff}), "
        f"m = {cfg.data.m} ({data_summary.n_people} people, "
        f"{data_summary.n_train_items} QA samples per epoch), {train.steps} steps of "
        f"{train.batch_size}×{train.seq_len} tokens, {cfg.seeds} seed(s), chance FTA {chance:.3f}.",
        choices_sentence(cfg),
    ]
    if cfg.eval_sample is not None:
        parts.append(
            f"Evaluations ask a fixed sample of {cfg.eval_sample} questions per group (all of a "
            "smaller group); FTA over all questions weighs each group by its size."
        )
    for ffn in measures:  # FFN types with a finished run (every run of one may diverge)
        parts += gaps.summary_sentences(measures[ffn], ffn, labels)
        finals = ", ".join(
            f"{labels[g.arm]} {g.rarest_mean:.3f}±{g.rarest_std:.3f} (EM {g.em_rarest_mean:.3f})"
            for g in head_tail
            if g.ffn == ffn
        )
        parts.append(f"Rarest group (group {cfg.data.m}) FTA at the end, {ffn} FFN: {finals}.")
    counts: dict[str, int] = {}
    for c in claims:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    parts.append("Claims: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + ".")
    score = cfg.tuning.score_name(SCORES)
    tuned = [r for r in choices if r.trials]
    if tuned:
        sources = sorted({r.source for r in tuned})
        parts.append(
            f"Every arm tuned its one rate by the same rule ({cfg.tuning.seeds} tuning seeds "
            f"apart from the evaluation seeds, score {score}, up to {cfg.tuning.max_extend} "
            f"widenings; {', '.join(sources)})."
        )
    edges = [f"{r.ffn}/{r.arm}" for r in choices if r.edge]
    if edges:
        parts.append(
            f"Chosen LR at the end of the candidates tried (may not be the optimum): "
            f"{', '.join(edges)}."
        )
    if cfg.note:
        parts.append(cfg.note.strip())
    return " ".join(parts)

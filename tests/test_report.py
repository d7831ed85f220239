import json
import re
from html import escape

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from report_fixture import BENCH_ANSWERS, QA_ANSWERS, cpu_style_folder, make_run
from tailmem.claims.core import ClaimResult
from tailmem.claims.listing import EXPERIMENTS
from tailmem.claims.registry import CLAIMS, claims_of
from tailmem.cli import main
from tailmem.errors import DataError
from tailmem.experiments import headline_questions, study_names
from tailmem.outputs import Outputs, write
from tailmem.report.layout import read_table
from tailmem.report.render import write_report
from tailmem.rundir import RunDir

OPTIMIZERS = ("gd", "adam", "signgd", "muon")


def _make_run(root, name, verdicts, figure=True, complete=True):
    """A run of assoc-capacity whose claims (one optimizer each) carry ``verdicts``."""
    from dataclasses import dataclass

    @dataclass
    class C:
        seed: int = 0

    run = RunDir(root / name)
    run.write_config("assoc-capacity", "smoke", C())
    claims = [
        ClaimResult(f"cabannes.capacity.{OPTIMIZERS[i]}", f"claim {i}", "A4", "1", "1", "rule", v)
        for i, v in enumerate(verdicts)
    ]
    write(run, Outputs(claims=tuple(claims)))
    if figure:
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        run.save_figure(fig, "curve")
    if complete:
        run.mark_complete(1.5)
    return run


def test_report_counts_verdicts_and_embeds_figures(tmp_path):
    _make_run(tmp_path, "exp-a", ["reproduced", "not reproduced"])
    _make_run(tmp_path, "exp-b", ["not measured"], figure=False, complete=False)
    html_path = write_report(tmp_path, headline_questions())
    text = html_path.read_text()
    assert text.count("data:image/png;base64,") == 1
    # The headline counts every claim of the runs' experiment (the registry's that a run lacks
    # as not measured), then, apart, the claims of experiments not in the folder and those no
    # experiment measures.
    others = sum(len(claims_of(e)) for e in EXPERIMENTS if e != "assoc-capacity")
    missing = len(claims_of("assoc-capacity")) - 1  # each run measures the capacity family only
    line = (
        "<li>smoke: <b>1</b> reproduced, <b>1</b> not reproduced, <b>0</b> inconclusive, "
        f"<b>{1 + 2 * missing}</b> not measured (assoc-capacity)</li>"
    )
    assert line in text
    assert (
        f"<li>not measured here: <b>{others}</b> claims of experiments not in this folder, "
        f"<b>{len(claims_of(None))}</b> that no experiment measures yet</li>"
    ) in text
    assert 3 + others + len(claims_of(None)) == len(CLAIMS) + 2  # a family gives 3 results
    assert "incomplete" in text
    md = (tmp_path / "report.md").read_text()
    assert "![curve (smoke: not evidence)](exp-a/curve.png)" in md and "| claim 1 |" in md
    verdicts = json.loads((tmp_path / "verdicts.json").read_text())
    assert [c["verdict"] for c in verdicts["exp-a"]] == ["reproduced", "not reproduced"]


@pytest.mark.parametrize(
    ("damage", "fragment"),
    [
        (lambda r: (r / "claims.json").write_text("[{"), "claims.json is not valid JSON"),
        (lambda r: (r / "claims.json").write_text('{"a": 1}'), "expected a list of claims"),
        (lambda r: (r / "config.yaml").write_text("- 1\n"), "lacks the experiment/config"),
        (lambda r: (r / "report.json").write_text('{"figures": [{"file": "x.png"}]}'), "missing"),
    ],
)
def test_damaged_results_are_one_clear_error(tmp_path, damage, fragment):
    _make_run(tmp_path, "exp", ["reproduced"])
    damage(tmp_path / "exp")
    with pytest.raises(DataError) as info:
        write_report(tmp_path, headline_questions())
    assert fragment in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "report.html").exists()


def test_empty_folder_is_an_error(tmp_path):
    with pytest.raises(DataError, match="holds no run directories"):
        write_report(tmp_path, headline_questions())


def test_tables_show_long_floats_to_four_significant_digits(tmp_path):
    run = _make_run(tmp_path, "exp-a", ["reproduced"])
    rows = [
        {"name": "slope", "value": -0.9438772991412437, "k": 3000000, "p": 0.591},
        {"name": "ratio", "value": 0.9999999999999996, "k": 99, "p": 7.284505333274612e-16},
        {"name": "big", "value": 12345.678901, "k": 1, "p": 0.0012353776397090606},
    ]
    run.write_csv("t.csv", rows)
    run.write_json("report.json", {"tables": [{"file": "t.csv", "caption": "numbers"}]})
    write_report(tmp_path, headline_questions())
    md = (tmp_path / "report.md").read_text()
    assert "| slope | -0.9439 | 3000000 | 0.591 |" in md
    assert "| ratio | 1.000 | 99 | 7.285e-16 |" in md
    assert "| big | 12346 | 1 | 0.001235 |" in md
    assert "-0.9438772991412437" in (tmp_path / "exp-a" / "t.csv").read_text()  # CSV keeps all


def test_claims_show_rule_seeds_reason_and_column_notes(tmp_path):
    run = RunDir(tmp_path / "cap")
    _make_run(tmp_path, "cap", [])
    claim = ClaimResult(
        "cabannes.capacity.gd", "c", "Related", "p", "o", "the rule in words", "inconclusive",
        reason="model at chance", seeds=[0, 1, 2],
    )  # fmt: skip
    write(run, Outputs(claims=(claim,)))
    run.write_csv("t.csv", [{"d": 4, "error": 0.5}])
    columns = {"d": "embedding dimension"}
    run.write_json("report.json", {"tables": [{"file": "t.csv", "columns": columns}]})
    write_report(tmp_path, headline_questions())
    md = (tmp_path / "report.md").read_text()
    why = CLAIMS["cabannes.capacity"].why
    cells = f"| the rule in words — why: {why} | 0, 1, 2 (n = 3) | inconclusive: model at chance"
    assert cells + " (smoke: not evidence) |" in md  # a smoke run's verdict is not evidence
    assert "Columns: **d** embedding dimension" in md
    html = (tmp_path / "report.html").read_text()
    assert '<tr class="v-smoke">' in html and '<tr class="v-inconclusive">' not in html
    # Every table sits in a horizontally scrolling box, so none is clipped at any width.
    assert html.count('<div class="scroll"><table') == html.count("<table")


def test_the_data_behind_a_study_is_printed_under_its_summary(tmp_path):
    run = _make_run(tmp_path, "exp-a", ["reproduced"])
    data = {"corpus": "the embedded Python standard-library documentation corpus",
            "train_tokens": 1234567, "val_tokens": 4321,
            "tokenizer": "byte-level BPE trained on the corpus, 2048 ids"}  # fmt: skip
    run.write_json("report.json", {"summary": "s", "data": data})
    write_report(tmp_path, headline_questions())
    line = ("**Data**: the embedded Python standard-library documentation corpus; 1,234,567 "
            "training tokens, 4,321 validation tokens; tokenizer: byte-level BPE trained on the "
            "corpus, 2048 ids")  # fmt: skip
    assert line in (tmp_path / "report.md").read_text()
    assert "<b>Data</b>: the embedded Python" in (tmp_path / "report.html").read_text()


# ------------------------------------------------------------------ what the report reads


def _entry(**fields):
    """One claims.json entry of assoc-capacity; ``fields`` replace (or, set to ..., drop) keys."""
    entry = {"id": "cabannes.capacity.gd", "claim": "c", "source": "A4", "published": "1",
             "ours": "1", "rule": "r", "verdict": "reproduced"}  # fmt: skip
    entry.update(fields)
    return {k: v for k, v in entry.items() if v is not ...}


def _claims(*entries):
    return lambda run: (run / "claims.json").write_text(json.dumps(list(entries)))


def _config(experiment):
    def damage(run):
        text = (run / "config.yaml").read_text()
        (run / "config.yaml").write_text(text.replace("assoc-capacity", experiment, 1))

    return damage


def _table(text, entry=None):
    def damage(run):
        (run / "t.csv").write_text(text)
        (run / "report.json").write_text(json.dumps({"tables": [entry or {"file": "t.csv"}]}))

    return damage


def _layout(**keys):
    return lambda run: (run / "report.json").write_text(json.dumps(keys))


def _answer(**fields):
    """One answer of report.json; ``fields`` replace (or, set to ..., drop) keys."""
    entry = {"question": "q?", "answer": "yes", "evidence": "1.5 × ± 0.1", "verdict": "faster"}
    entry.update(fields)
    return {k: v for k, v in entry.items() if v is not ...}


def _pair(columns):
    return {"file": "t.csv", "mean_se": {"x": columns}}


def _preset(name):
    def damage(run):
        text = (run / "config.yaml").read_text()
        (run / "config.yaml").write_text(text.replace("preset: smoke", f"preset: {name}", 1))

    return damage


DAMAGED = [
    (_config("nosuch"), "experiment 'nosuch' is not a tailmem experiment; expected one of: "),
    (_config("[1, 2]"), "experiment [1, 2] is not a tailmem experiment"),
    (
        _config("ablation"),
        "claim 'cabannes.capacity.gd' belongs to 'assoc-capacity', but "
        "config.yaml names 'ablation'",
    ),
    (_claims(_entry(verdict=3)), "entry 0 is invalid (verdict 3 is not one of"),
    (_claims(_entry(verdict="great")), "verdict 'great' is not one of"),
    (_claims(_entry(seeds="abc")), "field 'seeds' is 'abc'; expected a list of whole numbers"),
    (_claims(_entry(seeds=[True, 1.5])), "field 'seeds' is [True, 1.5]"),
    (_claims(_entry(published=["a", "b"])), "field 'published' is ['a', 'b']; expected text"),
    (_claims(_entry(claim=None)), "field 'claim' is None; expected text"),
    (_claims(_entry(ours=0.93)), "field 'ours' is 0.93; expected text"),
    (_claims(_entry(id=7)), "field 'id' is 7; expected text"),
    (_claims(_entry(id=...)), "entry 0 lacks the fields"),
    (_claims(_entry(details=[1])), "field 'details' is [1]; expected an object"),
    (_claims(_entry(note="x")), "entry 0 has the unknown field 'note'; expected only id, claim"),
    (_claims(_entry(), _entry(verdict="not reproduced")), "'cabannes.capacity.gd' is listed twice"),
    (_claims(_entry(id="A2.spectral_isotropy")), "unknown claim id"),
    (_table("a,b\n1,2,3\n"), "t.csv: line 2 has 3 cells; expected 2"),
    (_table("a\n1\n", {"file": "t.csv", "note": "x"}), "tables[0] has unknown key 'note'"),
    (_table("a\n1\n", {"file": "../a-good/config.yaml"}), "outside the run directory"),
    (lambda r: (r / "report.json").write_text('{"title": "t", "extra": 1}'), "unknown key 'extra'"),
    (lambda r: (r / "curve.png").write_text("a,b\n"), "curve.png is not a PNG image"),
    (_layout(answers={"question": "q"}), "'answers' must be a list of answers; expected {'q"),
    (_layout(answers=["yes"]), "answers[0] is 'yes'; expected {'question': TEXT, 'answer': TEXT"),
    (_layout(answers=[_answer(verdict=...)]), "answers[0] has no 'verdict'; expected {"),
    (_layout(answers=[_answer(note="x")]), "answers[0] has unknown key 'note'; expected {"),
    (_layout(answers=[_answer(evidence=0.93)]), "answers[0] 'evidence' is 0.93; expected non-emp"),
    (_layout(answers=[_answer(answer=" ")]), "answers[0] 'answer' is ' '; expected non-empty text"),
    (_table("m,s\n1,2\n", _pair(["m"])), "'mean_se' 'x' is ['m']; expected {'shown name'"),
    (_table("m,s\n1,2\n", _pair(["m", "t"])), "'mean_se' 'x' is ['m', 't']; expected"),
    (_table("m,s\n1,2\n", _pair(["m", "m"])), "'mean_se' 'x' is ['m', 'm']; expected"),
    (
        _table("a,b\n1,2\n", {"file": "t.csv", "columns": {"a": "kept", "gone": "stale"}}),
        "t.csv: report.json 'columns' documents 'gone', which is not a column of the table; "
        "expected names from its header (a, b)",
    ),
    (
        _preset("tiny"),
        "preset 'tiny' is not a preset of assoc-capacity; expected one of smoke, cpu",
    ),
    (_preset("custom"), "preset 'custom' without its config_file path; expected the record of"),
    (
        lambda r: (r / "report.json").write_text('{"data": {"corpus": "c", "train_tokens": true}}'),
        "data 'train_tokens' is True; expected a whole number",
    ),
    (
        lambda r: (r / "COMPLETE").write_text(
            (r / "COMPLETE").read_text().replace('"wall_seconds": 1.5', '"wall_seconds": "fast"')
        ),
        "COMPLETE: wall_seconds is 'fast'; expected seconds",
    ),
]


@pytest.mark.parametrize(("damage", "fragment"), DAMAGED)
def test_a_damaged_run_is_not_rendered_in_a_folder_and_refused_alone(
    tmp_path, capsys, damage, fragment
):
    """In a results folder the damaged run is named with its reason and its verdicts are not
    counted (the good run's one "reproduced" is the headline's only one); given on its own, the
    same run is refused in one line."""
    _make_run(tmp_path, "a-good", ["reproduced"])
    _make_run(tmp_path, "b-bad", ["reproduced", "reproduced"], figure=False)
    damage(tmp_path / "b-bad")
    assert main(["report", str(tmp_path)]) == 0
    (warning,) = capsys.readouterr().err.strip().splitlines()
    assert warning.startswith("tailmem: warning: b-bad not rendered: ") and fragment in warning
    md = (tmp_path / "report.md").read_text()
    assert "**1** reproduced" in md
    assert f"- **b-bad** not rendered: {tmp_path / 'b-bad'}" in md and fragment in md
    assert md.count("\n## assoc-capacity\n") == 1  # the good run's section, only
    html = (tmp_path / "report.html").read_text()
    assert "<b>1</b> reproduced" in html and "<b>b-bad</b> not rendered: " in html
    assert list(json.loads((tmp_path / "verdicts.json").read_text())) == ["a-good"]

    with pytest.raises(DataError) as info:
        write_report(tmp_path / "b-bad", headline_questions())
    assert fragment in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "b-bad" / "report.md").exists()


def test_the_summary_names_the_experiment_whose_run_was_not_rendered(tmp_path):
    """A broken ablation run: ablation's registry claims still count as not measured, under a
    row that says its run was not rendered (not "not in this results folder")."""
    _make_run(tmp_path, "cap", ["reproduced"])
    _make_run(tmp_path, "abl", ["reproduced"])
    _config("ablation")(tmp_path / "abl")
    write_report(tmp_path, headline_questions())
    md = (tmp_path / "report.md").read_text()
    n = len(claims_of("ablation"))
    assert f"| ablation (run abl not rendered) | — | 0 | 0 | 0 | {n} |" in md
    others = sum(len(claims_of(e)) for e in EXPERIMENTS if e != "assoc-capacity")
    missing = len(claims_of("assoc-capacity")) - 1  # cap measures only the capacity family
    assert (
        f"- smoke: **1** reproduced, **0** not reproduced, **0** inconclusive, **{missing}**" in md
    )
    assert f"- not measured here: **{others}** claims of experiments not in this folder" in md


def test_a_folder_where_no_run_renders_is_refused(tmp_path):
    for name in ("a", "b"):
        _make_run(tmp_path, name, ["reproduced"])
        _config("nosuch")(tmp_path / name)
    with pytest.raises(DataError, match=r"none of its 2 runs can be rendered; the first, a: "):
        write_report(tmp_path, headline_questions())


def test_long_tables_say_how_many_rows_they_show_and_empty_ones_say_so(tmp_path):
    run = _make_run(tmp_path, "exp-a", ["reproduced"])
    run.write_csv("long.csv", [{"i": i} for i in range(45)])
    run.write_csv("empty.csv", [])
    tables = [{"file": "long.csv", "caption": "long"}, {"file": "empty.csv", "caption": "none"}]
    run.write_json("report.json", {"tables": tables})
    write_report(tmp_path, headline_questions())
    md = (tmp_path / "report.md").read_text()
    assert "| 39 |" in md and "| 40 |" not in md
    assert "*First 40 of 45 rows; every row is in long.csv.*" in md
    assert "**none**\n\n*empty.csv is empty.*" in md


def test_an_incomplete_run_says_why(tmp_path):
    _make_run(tmp_path, "exp-a", ["reproduced"])
    (tmp_path / "exp-a" / "claims.json").write_text(
        (tmp_path / "exp-a" / "claims.json").read_text() + " "
    )
    write_report(tmp_path, headline_questions())
    md = (tmp_path / "report.md").read_text()
    assert "claims.json does not match the hash recorded in COMPLETE); rerun" in md


def test_the_report_knows_exactly_the_registered_experiments():
    from tailmem.report.reader import experiment_names

    assert experiment_names() == study_names()


# ------------------------------------------------------------ a report that answers first


def _sections(html: str) -> list[str]:
    """The ids of the page's sections, in page order."""
    return re.findall(r'<section id="([^"]+)">', html)


def test_the_first_screen_states_the_answers_under_the_preset_banner(tmp_path):
    cpu_style_folder(tmp_path)
    write_report(tmp_path, headline_questions())
    html = (tmp_path / "report.html").read_text()
    main_part = html.split("<main>", 1)[1]
    # Banner, then the answers, then the verdicts: the page opens on what was found.
    banner = '<p class="banner preset-cpu"><b>Preset cpu</b>: a laptop-scale reproduction'
    assert main_part.index(banner) < main_part.index('<section id="answers">')
    assert escape("what it cannot show: the paper's 160M scale") in main_part
    assert _sections(html)[:2] == ["answers", "verdicts"]
    answers = html.split('<table class="answers">', 1)[1].split("</table>", 1)[0]
    assert answers.count("<tr>") == 1 + len(QA_ANSWERS) + len(BENCH_ANSWERS)  # header + one each
    first = QA_ANSWERS[0]
    cells = "".join(f"<td>{escape(first[k])}</td>" for k in ("question", "answer", "evidence"))
    assert f"<tr>{cells}<td>equivalent</td><td>knowledge-qa</td></tr>" in answers
    assert "<td>optim-bench</td>" in answers  # the benchmark's answers follow the QA's
    assert answers.index("knowledge-qa") < answers.index("optim-bench")
    unanswered = html.split('<ul class="unanswered">', 1)[1].split("</ul>", 1)[0]
    assert unanswered.count("<li>") == 1  # knowledge-qa and optim-bench answered; not rule-or-rate
    assert "rule-or-rate answers “is Muon" in unanswered and "--only rule-or-rate" in unanswered
    md = (tmp_path / "report.md").read_text()
    assert md.startswith("# tailmem report\n\n> **Preset cpu: a laptop-scale reproduction")
    row = " | ".join(first[k] for k in ("question", "answer", "evidence", "verdict"))
    assert f"| {row} | knowledge-qa |" in md
    assert md.index("## Answers") < md.index("## Verdicts")


def test_a_smoke_report_says_its_verdicts_are_not_evidence(tmp_path):
    cpu_style_folder(tmp_path, preset="smoke")
    write_report(tmp_path, headline_questions())
    html = (tmp_path / "report.html").read_text()
    assert (
        '<p class="banner preset-smoke"><b>Preset smoke</b>: checks the code runs end to end; '
        "its verdicts are not evidence.</p>"
    ) in html
    assert 'class="banner preset-cpu"' not in html
    md = (tmp_path / "report.md").read_text()
    assert (
        "> **Preset smoke: checks the code runs end to end; its verdicts are not evidence.**" in md
    )


def test_without_answers_the_first_screen_says_which_studies_to_run(tmp_path):
    make_run(tmp_path, "assoc-two-group", "cpu")
    make_run(tmp_path, "knowledge-qa", "cpu")  # a run from before studies stated answers
    write_report(tmp_path, headline_questions())
    html = (tmp_path / "report.html").read_text()
    answers = html.split('<section id="answers">', 1)[1].split("</section>", 1)[0]
    assert '<table class="answers">' not in answers
    rerun = f"tailmem run knowledge-qa --preset cpu --out {tmp_path / 'knowledge-qa'} --force"
    assert f"made before studies stated answers): redo it with <code>{rerun}</code>" in answers
    reproduce = f"tailmem reproduce --preset cpu --only optim-bench --out {tmp_path}"
    assert "optim-bench answers “which optimisers learn the tail?”" in answers
    assert f"not in this report: <code>{reproduce}</code>" in answers
    md = (tmp_path / "report.md").read_text()
    line = "- optim-bench answers “which optimisers learn the tail?” — not in this report"
    assert f"{line}: `{reproduce}`" in md


def test_sections_follow_the_papers_order_and_the_contents_list_them(tmp_path):
    """Folder names and titles sort otherwise ("a-…" first, "Z…" titles last); the sections
    and the table of contents follow docs/PAPERS.md: A1 ablation … A4 memory … C benchmark."""
    make_run(tmp_path, "optim-bench", name="a-bench")
    make_run(tmp_path, "assoc-two-group", name="b-memory")
    make_run(tmp_path, "ablation", name="z-ablation")
    write_report(tmp_path, headline_questions())
    html = (tmp_path / "report.html").read_text()
    runs = ["run-z-ablation", "run-b-memory", "run-a-bench"]
    assert _sections(html) == ["answers", "verdicts", *runs, "uncovered", "environment"]
    assert list(EXPERIMENTS).index("ablation") < list(EXPERIMENTS).index("assoc-two-group")
    toc = html.split('<nav class="toc"', 1)[1].split("</nav>", 1)[0]
    assert re.findall(r'href="#([^"]+)"', toc) == _sections(html)
    assert '<a href="#run-z-ablation">ablation at cpu</a>' in toc
    md = (tmp_path / "report.md").read_text()
    assert "- [ablation at cpu](#run-z-ablation)" in md and '<a id="run-z-ablation"></a>' in md


def test_a_folder_mixing_presets_counts_each_preset_apart_with_a_note(tmp_path):
    """One smoke and one cpu run: two headline lines (never one pooled count), a visible note,
    and each section, row and answer named with its preset."""
    make_run(tmp_path, "assoc-two-group", "smoke", claims=4)  # 2 reproduced, 1 not, 1 inconclusive
    make_run(tmp_path, "knowledge-qa", "cpu", answers=QA_ANSWERS[:1], claims=2)
    write_report(tmp_path, headline_questions())
    html = (tmp_path / "report.html").read_text()
    rest_two = len(claims_of("assoc-two-group")) - 4
    rest_qa = len(claims_of("knowledge-qa")) - 2
    assert (
        "<li>smoke: <b>2</b> reproduced, <b>1</b> not reproduced, <b>1</b> inconclusive, "
        f"<b>{rest_two}</b> not measured (assoc-two-group)</li>"
    ) in html
    assert (
        "<li>cpu: <b>1</b> reproduced, <b>1</b> not reproduced, <b>0</b> inconclusive, "
        f"<b>{rest_qa}</b> not measured (knowledge-qa)</li>"
    ) in html
    assert (
        '<p class="banner mixed">This folder mixes runs of 2 presets (cpu, smoke): every count '
        "is given per preset, never pooled. Smoke verdicts are not evidence.</p>"
    ) in html
    assert 'class="banner preset-smoke"' in html and 'class="banner preset-cpu"' in html
    assert "<h2>assoc-two-group at smoke (smoke)</h2>" in html
    assert "<td>knowledge-qa (cpu)</td></tr>" in html  # the answer's study names its preset
    md = (tmp_path / "report.md").read_text()
    assert "| assoc-two-group at smoke (smoke) | smoke | 2 | 1 | 1 |" in md


def test_two_runs_of_one_study_are_named_by_their_folders(tmp_path):
    make_run(tmp_path, "assoc-two-group", name="steps8")
    make_run(tmp_path, "assoc-two-group", name="steps12")
    write_report(tmp_path, headline_questions())
    html = (tmp_path / "report.html").read_text()
    assert html.index("<h2>assoc-two-group at cpu — steps12</h2>") < html.index(
        "<h2>assoc-two-group at cpu — steps8</h2>"
    )


def test_a_mean_and_its_se_show_as_one_column_while_the_csv_keeps_numbers(tmp_path):
    run = make_run(tmp_path, "knowledge-qa", tables=True)
    write_report(tmp_path, headline_questions())
    md = (tmp_path / "report.md").read_text()
    assert "| arm | rarest FTA | n |" in md
    assert "| muon | 0.9012 ± 0.008 | 3 |" in md and "| adam | 0.625 ± 0.0084 | 3 |" in md
    assert "Columns: **rarest FTA** seed mean ± SE" in md
    assert (run.path / "final.csv").read_text().splitlines()[1] == "muon,0.9012345,0.008,3"
    html = (tmp_path / "report.html").read_text()
    assert "<summary>Table: final FTA of the rarest group (2 rows)</summary>" in html


def test_a_merged_column_shows_its_mean_columns_note_unless_it_has_its_own(tmp_path):
    """Typed rows document the CSV's columns (``m``, ``s``); the report shows ``m ± s`` as ``x``
    with ``m``'s note; a note of the shown name itself wins; an empty table is not checked."""
    table = tmp_path / "t.csv"
    table.write_text("m,s,n\n1.5,0.25,3\n")
    notes = {"m": "the mean", "s": "its SE", "n": "seeds"}
    pair = {"x": ["m", "s"]}
    shown = read_table(table, "c", {"columns": notes, "mean_se": pair})
    assert shown.header == ("x", "n") and shown.rows == (("1.5 ± 0.25", "3"),)
    assert shown.columns == {"x": "the mean", "n": "seeds"}
    own = read_table(table, "c", {"columns": {**notes, "x": "mean ± SE"}, "mean_se": pair})
    assert own.columns == {"x": "mean ± SE", "n": "seeds"}
    empty = tmp_path / "empty.csv"
    empty.write_text("")  # a table of no rows: no header to check the notes against
    assert read_table(empty, "c", {"columns": notes}).total == 0


def test_a_long_study_folds_its_extra_figures_and_tables_away(tmp_path):
    make_run(tmp_path, "knowledge-qa", figures=5, tables=True)
    write_report(tmp_path, headline_questions())
    html = (tmp_path / "report.html").read_text()
    section = html.split('<section id="run-knowledge-qa">', 1)[1].split("</section>", 1)[0]
    shown, folded = section.split("<details><summary>3 more figures</summary>", 1)
    assert shown.count("<img ") == 2 and folded.split("</details>", 1)[0].count("<img ") == 3
    assert '<table class="claims">' in shown  # the claims are not folded


def test_a_custom_config_run_names_its_file_in_the_banner(tmp_path):
    make_run(tmp_path, "assoc-two-group", "custom")
    config = tmp_path / "assoc-two-group" / "config.yaml"
    text = config.read_text().replace(
        "preset: custom\n",
        "preset: custom\nconfig_file:\n  path: /home/me/mine.yaml\n  sha256: ab\n",
    )
    config.write_text(text)
    write_report(tmp_path / "assoc-two-group", headline_questions())
    html = (tmp_path / "assoc-two-group" / "report.html").read_text()
    assert (
        '<p class="banner preset-custom"><b>Preset custom, from /home/me/mine.yaml</b>: a '
        "config of your own: what it can show depends on the sizes it sets.</p>"
    ) in html
    assert "<td>custom (mine.yaml)</td>" in html  # the environment table


def test_every_packaged_preset_has_a_banner():
    from tailmem.config import available_presets
    from tailmem.report.presets import SCOPES
    from tailmem.report.reader import experiment_names

    presets = {p for e in experiment_names() for p in available_presets(e)}
    assert presets == {"smoke", "cpu", "paper"} and presets < set(SCOPES)


def test_an_unfinished_answering_study_is_named_with_the_command_that_finishes_it(tmp_path):
    make_run(tmp_path, "optim-bench", "smoke")
    (tmp_path / "optim-bench" / "COMPLETE").unlink()
    write_report(tmp_path, headline_questions())
    md = (tmp_path / "report.md").read_text()
    command = f"tailmem run optim-bench --preset smoke --out {tmp_path / 'optim-bench'}"
    assert f"its run here is incomplete: finish it with `{command}`" in md

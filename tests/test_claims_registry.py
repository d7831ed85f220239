"""The claims registry: coverage of PAPERS.md, templates and tolerances, report and CLI use."""

import json
import re
from dataclasses import dataclass
from html import escape
from pathlib import Path

import pytest

from scaling_inputs import b_inputs, settings
from tailmem.claims.b_measured import BlockSymmetry
from tailmem.claims.core import ClaimResult, Outcome
from tailmem.claims.listing import as_markdown
from tailmem.claims.registry import (
    CLAIMS,
    NOT_MEASURED_HERE,
    SECTIONS,
    claims_of,
    lookup,
    not_measured,
    section_of,
)
from tailmem.cli import main
from tailmem.errors import DataError
from tailmem.experiments import headline_questions, study_names
from tailmem.outputs import Outputs, write
from tailmem.report.content import SMOKE_VERDICT
from tailmem.report.render import write_report
from tailmem.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]
PAPERS = ROOT / "docs" / "PAPERS.md"


def test_every_claim_belongs_to_a_section_and_every_section_has_claims():
    counts = {key: 0 for key in SECTIONS}
    for claim in CLAIMS.values():
        counts[section_of(claim.source)] += 1
        assert claim.experiment is None or claim.experiment in study_names(), claim.id
    assert all(n >= 1 for n in counts.values()), counts
    # Registry order is PAPERS.md order: the sections appear in one run each, A1 … Related.
    order = [section_of(c.source) for c in CLAIMS.values()]
    assert [key for i, key in enumerate(order) if i == 0 or order[i - 1] != key] == list(SECTIONS)
    assert section_of("A (thesis); beyond A1") == "A1"
    assert section_of("Related: Cabannes, Dohmatob & Bietti (ICLR 2024)") == "Related"
    with pytest.raises(ValueError, match="names none of the sections"):
        section_of("Paper C")


def test_registry_covers_every_section_of_papers_md():
    text = PAPERS.read_text()
    headings = re.findall(r"^### (A\d)\. ", text, flags=re.M)
    assert headings == [k for k in SECTIONS if k.startswith("A")]
    assert "## Paper B" in text and "## Related results" in text
    related = text.split("## Related results", 1)[1].split("\n## ", 1)[0]
    authors = re.findall(r"^- ([A-Z][a-z]+)", related, flags=re.M)
    assert authors[:3] == ["Cabannes", "Kunstner", "Vasudeva"]
    sources = [c.source for c in CLAIMS.values()]
    for key in headings:
        assert any(s.startswith(key) for s in sources), key
    assert any(s.startswith("B ") for s in sources)
    for author in authors:
        assert any(s.startswith("Related") and author in s for s in sources), author


def test_tolerances_fill_the_templates_as_plain_numbers():
    claim = CLAIMS["B.block_symmetry"]
    inputs = b_inputs(
        settings=settings(symmetry_steps=9),
        block_symmetry=BlockSymmetry(muon=3e-16, signgd=0.6, K=40),
    )
    (result,) = claim.evaluate(inputs)
    assert result.verdict == "reproduced" and result.id == "B.block_symmetry"
    assert result.check == "tailmem.claims.b._check_block_symmetry" and result.seeds is None
    printed = re.match(r"Muon ≤ (\S+) \(dense run", result.rule)
    assert printed and float(printed[1]) == claim["max_distance"] and "e-0" not in printed[1]
    rise = CLAIMS["A4.fig4.rise_then_fall"]
    text = rise.fill(rise.rule)
    assert f"< {rise['start_frac']:.0%} and at the end < {rise['end_frac']:.0%} of" in text


def test_docs_claims_md_is_the_registry_listing():
    """docs/claims.md is `tailmem claims --format md`; regenerate it when the registry changes."""
    assert (ROOT / "docs" / "claims.md").read_text() == as_markdown(list(CLAIMS.values())) + "\n"


def test_no_text_in_the_repo_points_outside_it():
    outside = ("../" + "shared", "/work/" + "shared", "shared/" + "PAPERS", "shared/" + "DESIGN")
    pattern = re.compile("|".join(map(re.escape, outside)))
    for path in ROOT.rglob("*"):
        if ".git" in path.parts or not path.is_file() or path.suffix not in TEXT_SUFFIXES:
            continue
        assert not pattern.search(path.read_text(errors="replace")), path


TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".ini"}


def _result(claim, variant=None, **values):
    """A reproduced result of ``claim`` (``variant`` for families), templates filled."""
    return claim.from_outcome(Outcome("reproduced", "x", variant=variant, values=values))


def test_families_need_a_variant_and_resolve_by_stem():
    family = CLAIMS["B.noisy.gd_exponent"]
    result = _result(family, "beta1.5", beta=1.5)
    assert result.id == "B.noisy.gd_exponent.beta1.5" and "β = 1.5:" in result.claim
    assert lookup(result.id) is family and lookup("B.noisy.gd_exponent") is None
    assert lookup("B.gd_stability") is CLAIMS["B.gd_stability"] and lookup("B.nope") is None
    with pytest.raises(ValueError, match="variant"):
        _result(family, beta=2.0)
    with pytest.raises(ValueError, match="variant"):
        _result(CLAIMS["B.gd_stability"], "a")
    with pytest.raises(KeyError):  # a run value the template needs was not passed
        _result(family, "beta2")


def test_not_measured_lists_the_claims_a_run_lacks():
    have = [_result(CLAIMS["cabannes.capacity"], "gd")]
    assert not_measured("assoc-capacity", have) == []
    missing = not_measured("assoc-scaling", [_result(CLAIMS["B.gd_stability"])])
    expected = [c.id for c in claims_of("assoc-scaling") if c.id != "B.gd_stability"]
    assert [r.id for r in missing] == expected
    assert {r.verdict for r in missing} == {"not measured"}
    assert {r.reason for r in missing} == {NOT_MEASURED_HERE}


@dataclass
class _Config:
    seed: int = 0


def _run(root: Path, name: str, experiment: str, results: list[ClaimResult]) -> RunDir:
    run = RunDir(root / name)
    run.write_config(experiment, "smoke", _Config())
    write(run, Outputs(claims=tuple(results)))
    run.mark_complete(1.0)
    return run


def test_report_lists_missing_and_uncovered_claims(tmp_path):
    outcome = Outcome("not reproduced", "C = 8: 16")
    measured = CLAIMS["B.gd_stability"].from_outcome(outcome)
    _run(tmp_path, "scaling", "assoc-scaling", [measured])
    write_report(tmp_path, headline_questions())
    verdicts = json.loads((tmp_path / "verdicts.json").read_text())["scaling"]
    assert [c["id"] for c in verdicts] == ["B.gd_stability"] + [
        c.id for c in claims_of("assoc-scaling") if c.id != "B.gd_stability"
    ]
    assert [c["verdict"] for c in verdicts].count("not measured") == len(verdicts) - 1
    md = (tmp_path / "report.md").read_text()
    shown = f"not measured: {NOT_MEASURED_HERE} ({SMOKE_VERDICT})"  # a smoke run's cells say so
    assert md.count(f"| {shown} |") == len(verdicts) - 1
    uncovered = md.split("## Claims not covered by an experiment", 1)[1].split("## Environment")[0]
    for claim in claims_of(None):
        assert f"| {claim.statement} | {claim.source} |" in uncovered
    assert "Muon is faster than GD" not in uncovered
    html = (tmp_path / "report.html").read_text()
    cell = f"<td>{escape(shown)}</td>"
    assert html.count(cell) == len(verdicts) - 1
    uncovered_html = html.split('<table class="uncovered">', 1)[1].split("</table>", 1)[0]
    assert uncovered_html.count("<tr>") == len(claims_of(None)) + 1  # header row + one a claim


def test_unknown_claim_id_is_one_line_exit_2(tmp_path, capsys):
    bogus = ClaimResult("B.made_up", "c", "B", "1", "1", "rule", "reproduced")
    _run(tmp_path, "scaling", "assoc-scaling", [bogus])
    with pytest.raises(DataError, match=r"unknown claim id 'B\.made_up'") as info:
        write_report(tmp_path, headline_questions())
    assert "\n" not in str(info.value)
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown claim id 'B.made_up'" in err[0]
    assert not (tmp_path / "report.html").exists()


def test_claims_command_prints_the_registry(capsys):
    assert main(["claims", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    ids = [c.id if c.variant is None else f"{c.id}.{c.variant}" for c in CLAIMS.values()]
    assert [e["id"] for e in listed] == ids
    by_id = {e["id"]: e for e in listed}
    for claim in CLAIMS.values():  # every claim: rule text, tolerances and its check
        entry = by_id[claim.id if claim.variant is None else f"{claim.id}.{claim.variant}"]
        assert entry["tolerances"] == dict(claim.tolerances) and entry["rule"]
        assert entry["check"] == (claim.check_name or None)
        tol = claim.tolerances
        assert all(f"{{{k}" in claim.rule or f"{{{k}" in claim.statement for k in tol), claim.id
    assert by_id["A4.thm53.gd_slope"]["check"] == "tailmem.claims.a4._check_gd_slope"
    assert main(["claims", "--experiment", "assoc-capacity"]) == 0
    md = capsys.readouterr().out.splitlines()
    assert md[0] == "# Claims registry (1 claims, PAPERS.md order)"
    assert md[6].startswith("| cabannes.capacity.<optimizer> | assoc-capacity |")
    assert not CLAIMS["cabannes.capacity"].tolerances  # a trend: its tolerance is the range's
    assert "| 1/ln d_max" not in md[6] and "±1/ln d_max" in md[6] and len(md) == 7
    assert main(["claims", "--experiment", "none"]) == 0
    rows = capsys.readouterr().out.splitlines()[6:]
    assert len(rows) == len(claims_of(None)) and all("| — (not covered) |" in r for r in rows)
    assert main(["claims", "--experiment", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown experiment 'nope'" in err[0] and "none" in err[0]

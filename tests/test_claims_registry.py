"""The claims registry: coverage of PAPERS.md, templates and tolerances, report and CLI use."""

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tailmem.cli import main
from tailmem.errors import DataError
from tailmem.experiments import EXPERIMENTS
from tailmem.report.claims import (
    CLAIMS,
    SECTIONS,
    ClaimResult,
    claims_of,
    lookup,
    not_measured,
    section_of,
    write_claims,
)
from tailmem.report.render import write_report
from tailmem.rundir import RunDir

PAPERS = Path(os.environ.get("TAILMEM_PAPERS", "/work/shared/PAPERS.md"))


def test_every_claim_belongs_to_a_section_and_every_section_has_claims():
    counts = {key: 0 for key in SECTIONS}
    for claim in CLAIMS.values():
        counts[section_of(claim.source)] += 1
        assert claim.experiment is None or claim.experiment in EXPERIMENTS, claim.id
    assert all(n >= 1 for n in counts.values()), counts
    # Registry order is PAPERS.md order: the sections appear in one run each, A1 … Related.
    order = [section_of(c.source) for c in CLAIMS.values()]
    assert [key for i, key in enumerate(order) if i == 0 or order[i - 1] != key] == list(SECTIONS)
    assert section_of("A (thesis); beyond A1") == "A1"
    assert section_of("Related: Cabannes, Dohmatob & Bietti (ICLR 2024)") == "Related"
    with pytest.raises(ValueError, match="names none of the sections"):
        section_of("Paper C")


@pytest.mark.skipif(not PAPERS.is_file(), reason=f"{PAPERS} not present (set TAILMEM_PAPERS)")
def test_registry_covers_every_section_of_papers_md():
    text = PAPERS.read_text()
    headings = re.findall(r"^### (A\d)\. ", text, flags=re.M)
    assert headings == [k for k in SECTIONS if k.startswith("A")]
    assert "## Paper B" in text and "## Related results" in text
    related = text.split("## Related results", 1)[1].split("\n## ", 1)[0]
    authors = re.findall(r"^- ([A-Z][a-z]+)", related, flags=re.M)
    assert authors == ["Cabannes", "Kunstner", "Vasudeva"]
    sources = [c.source for c in CLAIMS.values()]
    for key in headings:
        assert any(s.startswith(key) for s in sources), key
    assert any(s.startswith("B ") for s in sources)
    for author in authors:
        assert any(s.startswith("Related") and author in s for s in sources), author


def test_tolerances_fill_the_templates_as_plain_numbers():
    claim = CLAIMS["B.block_symmetry"]
    assert claim["max_distance"] == 1e-9
    result = claim.result("Muon 3.0e-16", True)
    assert result.rule == "Muon ≤ 1e-9 (dense run, random orthonormal embeddings)"
    assert result.verdict == "reproduced" and result.id == "B.block_symmetry"
    rise = CLAIMS["A4.fig4.rise_then_fall"].result("x", False)
    assert "< 10% and at the end < 50% of its maximum" in rise.rule
    assert rise.verdict == "not reproduced"
    assert (
        CLAIMS["A4.thm53.muon_rho"]
        .result("x", None)
        .rule.endswith("in [0, 2] for every K and embedding")
    )


def test_families_need_a_variant_and_resolve_by_stem():
    family = CLAIMS["B.noisy.gd_exponent"]
    result = family.result("x", True, variant="beta1.5", beta=1.5)
    assert result.id == "B.noisy.gd_exponent.beta1.5" and "β = 1.5:" in result.claim
    assert lookup(result.id) is family and lookup("B.noisy.gd_exponent") is None
    assert lookup("B.gd_stability") is CLAIMS["B.gd_stability"] and lookup("B.nope") is None
    with pytest.raises(ValueError, match="variant"):
        family.result("x", True, beta=2.0)
    with pytest.raises(ValueError, match="variant"):
        CLAIMS["B.gd_stability"].result("x", True, variant="a")
    with pytest.raises(KeyError):  # a run value the template needs was not passed
        family.result("x", True, variant="beta2")


def test_not_measured_lists_the_claims_a_run_lacks():
    have = [CLAIMS["cabannes.capacity"].result("gd: -1.0", True, variant="gd")]
    assert not_measured("assoc-capacity", have) == []
    missing = not_measured("assoc-scaling", [CLAIMS["B.gd_stability"].result("x", True)])
    expected = [c.id for c in claims_of("assoc-scaling") if c.id != "B.gd_stability"]
    assert [r.id for r in missing] == expected
    assert {r.verdict for r in missing} == {"not measured"}
    assert {r.ours for r in missing} == {"not measured at this preset"}


@dataclass
class _Config:
    seed: int = 0


def _run(root: Path, name: str, experiment: str, results: list[ClaimResult]) -> RunDir:
    run = RunDir(root / name)
    run.write_config(experiment, "smoke", _Config())
    write_claims(run, results)
    run.mark_complete(1.0)
    return run


def test_report_lists_missing_and_uncovered_claims(tmp_path):
    measured = CLAIMS["B.gd_stability"].result("C = 8: 16", False)
    _run(tmp_path, "scaling", "assoc-scaling", [measured])
    write_report(tmp_path)
    verdicts = json.loads((tmp_path / "verdicts.json").read_text())["scaling"]
    assert [c["id"] for c in verdicts] == ["B.gd_stability"] + [
        c.id for c in claims_of("assoc-scaling") if c.id != "B.gd_stability"
    ]
    assert [c["verdict"] for c in verdicts].count("not measured") == len(verdicts) - 1
    md = (tmp_path / "report.md").read_text()
    assert md.count("| not measured at this preset |") == len(verdicts) - 1
    uncovered = md.split("## Claims not covered by an experiment", 1)[1].split("## Environment")[0]
    for claim in claims_of(None):
        assert f"| {claim.statement} | {claim.source} |" in uncovered
    assert "Muon is faster than GD" not in uncovered
    html = (tmp_path / "report.html").read_text()
    assert html.count("<td>not measured at this preset</td>") == len(verdicts) - 1
    uncovered_html = html.split('<table class="uncovered">', 1)[1].split("</table>", 1)[0]
    assert uncovered_html.count("<tr>") == len(claims_of(None)) + 1  # header row + one a claim


def test_unknown_claim_id_is_one_line_exit_2(tmp_path, capsys):
    bogus = ClaimResult("B.made_up", "c", "B", "1", "1", "rule", "reproduced")
    _run(tmp_path, "scaling", "assoc-scaling", [bogus])
    with pytest.raises(DataError, match=r"unknown claim id 'B\.made_up'") as info:
        write_report(tmp_path)
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
    assert by_id["A4.thm53.gd_slope"]["tolerances"] == {"slope_tol": 0.05}
    assert "within ±0.05 of r − 1" in by_id["A4.thm53.gd_slope"]["rule"]
    assert main(["claims", "--experiment", "assoc-capacity"]) == 0
    md = capsys.readouterr().out.splitlines()
    assert md[0] == "# Claims registry (1 claims, PAPERS.md order)"
    assert md[4].startswith("| cabannes.capacity.<optimizer> | assoc-capacity |")
    assert md[4].endswith("| slope_tol = 0.25 |") and len(md) == 5
    assert main(["claims", "--experiment", "none"]) == 0
    rows = capsys.readouterr().out.splitlines()[4:]
    assert len(rows) == len(claims_of(None)) and all("| — (not covered) |" in r for r in rows)
    assert main(["claims", "--experiment", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown experiment 'nope'" in err[0] and "none" in err[0]

"""Smoke presets of the three associative-memory experiments, end to end, and bad input."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tailmem.claims.core import VERDICTS
from tailmem.claims.registry import CLAIMS, claims_of, lookup, read_claims
from tailmem.cli import main
from tailmem.rundir import RunDir
from tailmem.runner import run_experiment

SRC = str(Path(__file__).resolve().parents[2] / "src")

EXPECTED = {
    "assoc-two-group": {
        "A4.thm53.gd_slope",
        "A4.thm53.gd_min_step",
        "A4.thm53.muon_rho",
        "A4.thm53.muon_update",
        "A4.thm53.signgd_decoupled",
        "A4.thm53.signgd_coupled_slope",
        "A4.thm53.signgd_coupled_r",
        "A4.thm53.signgd_coupled_sv",
        "A4.thm54.muon_multistep",
        "A4.coupled_printed_row",
        "A4.fig4.gd_imbalanced",
        "A4.fig4.muon_balanced",
        "A4.fig4.signgd",
        "A4.fig4.rise_then_fall",
    },
    "assoc-scaling": {
        "B.noiseless.gd_per_item",
        "B.noiseless.gd_total",
        "B.noiseless.muon_exponential",
        "B.preconditioner",
        "B.noisy.gd_exponent.beta2",
        "B.noisy.gd_exponent.beta3",
        "B.noisy.muon_exponent.beta2",
        "B.noisy.muon_exponent.beta3",
        "B.noisy.muon_beta_independent",
        "B.speedup_omega_c",
        "B.block_symmetry",
        "B.tra_signgd_matches_muon",
        "B.signgd_cannot",
        "B.gd_stability",
    },
    "assoc-capacity": {
        "cabannes.capacity.gd",
        "cabannes.capacity.adam",
        "cabannes.capacity.signgd",
        "cabannes.capacity.muon",
    },
}
FIGURES = {
    "assoc-two-group": ["rho_vs_k", "delta_vs_loss", "update_spectra"],
    "assoc-scaling": ["noiseless_group_curves", "noisy_scaling", "steps_to_target"],
    "assoc-capacity": ["capacity"],
}


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunDir]:
    """Each experiment's smoke preset, run once for the whole module."""
    root = tmp_path_factory.mktemp("assoc-smoke")
    runs = {}
    for experiment in sorted(EXPECTED):
        run, status = run_experiment(experiment, "smoke", out=root / experiment)
        assert status == "ran"
        runs[experiment] = run
    return runs


@pytest.mark.parametrize("experiment", sorted(EXPECTED))
def test_expected_ids_are_the_registry_claims_of_the_experiment(experiment: str) -> None:
    """Every registry claim of the experiment is emitted by its smoke run (families by variant)."""
    assert {lookup(i).id for i in EXPECTED[experiment]} == {c.id for c in claims_of(experiment)}


@pytest.mark.parametrize("experiment", sorted(EXPECTED))
def test_smoke_preset_writes_a_complete_run(experiment: str, smoke_runs) -> None:
    run = smoke_runs[experiment]
    assert run.is_complete
    claims = read_claims(run)
    assert {c.id for c in claims} == EXPECTED[experiment]
    assert all(c.verdict in VERDICTS and c.check for c in claims)
    assert all(c.reason for c in claims if c.verdict in ("inconclusive", "not measured"))
    results = json.loads(run.file("results.json").read_text())
    assert results["experiment"] == experiment
    for stem in FIGURES[experiment]:
        assert run.file(f"{stem}.png").stat().st_size > 1000
        assert run.file(f"{stem}.svg").is_file()
    assert list(run.path.glob("*.csv"))
    assert "config" in run.read_config()


def test_two_group_smoke_numbers(smoke_runs) -> None:
    run = smoke_runs["assoc-two-group"]
    verdicts = {c.id: c.verdict for c in read_claims(run)}
    for cid in (
        "A4.thm53.gd_slope",
        "A4.thm53.muon_rho",
        "A4.thm53.signgd_decoupled",
        "A4.coupled_printed_row",
        "A4.thm54.muon_multistep",
    ):
        assert verdicts[cid] == "reproduced", cid
    rho = [r for r in json.loads(run.file("results.json").read_text())["rho"] if r["set"] == "main"]
    for r in rho:
        if r["optimizer"] == "gd":
            exact = CLAIMS["A4.thm53.gd_min_step"]["exact_rel"]
            assert r["rho"] == pytest.approx(r["gd_theory_exact"], rel=exact)


def _reject(constant: str) -> None:
    raise ValueError(f"non-standard JSON constant {constant}")


@pytest.mark.parametrize("experiment", sorted(EXPECTED))
def test_every_json_of_a_smoke_run_is_strict(experiment: str, smoke_runs) -> None:
    run = smoke_runs[experiment]
    files = [*run.path.glob("*.json"), run.file("COMPLETE")]
    assert {"claims.json", "results.json", "report.json"} <= {p.name for p in files}
    for path in files:
        json.loads(path.read_text(), parse_constant=_reject)


def test_scaling_smoke_numbers(smoke_runs) -> None:
    results = json.loads(smoke_runs["assoc-scaling"].file("results.json").read_text())
    exact = CLAIMS["B.block_symmetry"]["max_distance"]
    assert results["block_symmetry"]["muon"] < exact < results["block_symmetry"]["signgd"]
    rate_tol = CLAIMS["B.noiseless.muon_exponential"]["rate_tol"]
    assert abs(results["noiseless"]["muon_rate_over_eta"] - 1) < rate_tol
    # SignGD's grid is refined between its best point's neighbours: the smoke grid's best
    # (0.206 at η = 0.01) is twice the best in between (0.105 at η ≈ 0.0077).
    match = results["matching"]
    grid, coarse = match["signgd_grid"], match["signgd_vs_muon_2eta"]
    best = coarse.index(min(coarse))
    refined = match["signgd_refined"]
    assert all(grid[best - 1] < lr < grid[best + 1] for lr in refined["lrs"])
    assert match["signgd_best"]["mismatch"] == min(refined["mismatch"]) < 0.55 * min(coarse)
    # Every group's half-loss time: GD's in frequency order, Muon's all within a few steps.
    noiseless = results["noiseless"]
    gd, muon = noiseless["gd_group_half_times"], noiseless["muon_group_half_times"]
    assert gd == sorted(gd) and gd[-1] > 10 * gd[0] and max(muon) - min(muon) < 5


def test_cli_runs_an_experiment(tmp_path: Path) -> None:
    args = ["run", "assoc-capacity", "--preset", "smoke", "--out", str(tmp_path / "r")]
    out = subprocess.run(
        [sys.executable, "-m", "tailmem", *args, "dims=[4,8]", "steps=10"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "r" / "COMPLETE").is_file() and (tmp_path / "r" / "claims.json").is_file()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("assoc-two-group", "ks=[100,200]"), "not divisible by 3"),
        (("assoc-two-group", "head_mass=1.5"), "head_mass"),
        (("assoc-two-group", "optimizers=[lion]"), "unknown optimizer 'lion'"),
        (("assoc-scaling", "exponents=[0.5]"), "β > 1"),
        (("assoc-capacity", "optimizers=[sgdx]"), "unknown optimizer"),
    ],
)
def test_bad_parameters_exit_2_with_one_line(
    args: tuple[str, ...], fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code = main(["run", args[0], "--preset", "smoke", "--out", str(tmp_path / "r"), *args[1:]])
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tailmem: error:") and fragment in lines[0]
    assert not (tmp_path / "r").exists()

"""The optimiser benchmark's declared statistics (tailmem.claims.bench): the power of the paired
t test against a simulation of it, the fewest seeds that reach the target, the seed SD the cpu
preset's seed count rests on recomputed from the stored run, the preset running that many, and
``tailmem claims`` stating the protocol."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tailmem.claims.bench import (
    CPU_CHALLENGERS,
    CPU_SEEDS,
    FTA_MARGIN,
    OBSERVED_SEED_SD,
    POWER,
    PROTOCOL,
    TESTS_PER_ROW,
    family_level,
    power,
    seeds_for_power,
)
from tailmem.claims.core import MIN_SEEDS
from tailmem.claims.listing import as_markdown, select
from tailmem.config import load_config
from tailmem.experiments import optim_bench


def simulated_power(n: int, effect: float, sd: float, alpha: float, draws: int = 40_000) -> float:
    """The share of ``draws`` samples of ``n`` normal differences (mean ``effect``, SD ``sd``)
    in which scipy's one-sample t test rejects a mean of 0 at ``alpha``, two-sided."""
    rng = np.random.default_rng(12345)
    sample = rng.normal(effect, sd, size=(draws, n))
    p = stats.ttest_1samp(sample, 0.0, axis=1).pvalue
    return float(np.mean(p < alpha))


@pytest.mark.parametrize(
    ("n", "effect", "sd", "alpha"),
    [(19, 0.05, 0.0448, 0.05 / 48), (6, 1.0, 1.0, 0.05), (4, 0.3, 0.2, 0.01),
     (5, 0.05, 0.0161, 0.05 / 8)],  # the last: scipy's noncentral t cdf is NaN there
)  # fmt: skip
def test_the_power_is_the_rejection_rate_of_the_paired_t_test(n, effect, sd, alpha):
    """Against 40 000 simulated runs (a rate's SE ≤ 0.0025): agreement within 0.01."""
    assert power(n, effect, sd, alpha) == pytest.approx(
        simulated_power(n, effect, sd, alpha), abs=0.01
    )


def test_the_power_at_a_large_sample_is_the_normal_approximations():
    """At 400 seeds the t test is the z test: Φ(δ√n/σ − z) + Φ(−δ√n/σ − z)."""
    n, effect, sd, alpha = 400, 0.01, 0.1, 0.05
    shift = effect * math.sqrt(n) / sd  # 2
    z = stats.norm.ppf(1 - alpha / 2)  # 1.96
    by_hand = stats.norm.cdf(shift - z) + stats.norm.cdf(-shift - z)  # 0.516
    assert power(n, effect, sd, alpha) == pytest.approx(by_hand, abs=0.003)


def test_the_seeds_for_power_are_the_fewest_that_reach_the_target():
    level = family_level(CPU_CHALLENGERS)
    assert level == pytest.approx(0.05 / 48)
    n = seeds_for_power(OBSERVED_SEED_SD, FTA_MARGIN, level)
    assert power(n, FTA_MARGIN, OBSERVED_SEED_SD, level) >= POWER
    assert power(n - 1, FTA_MARGIN, OBSERVED_SEED_SD, level) < POWER
    assert n == CPU_SEEDS == 19
    assert seeds_for_power(0.001, 0.05) == MIN_SEEDS  # 50 SDs wide: the fewest a test takes
    with pytest.raises(ValueError, match="positive"):
        seeds_for_power(0.0)


def test_the_observed_seed_sd_is_the_stored_runs():
    """The median over the pilot cpu run's 12 challengers of the seed SD of Muon − X in the
    rarest group's final FTA (5 evaluation seeds; the pilot's per-seed values are kept in
    ``data/optim_bench_pilot.json``, as the results page once showed them)."""
    pilot = json.loads((Path(__file__).parent / "data" / "optim_bench_pilot.json").read_text())
    assert pilot["run"]["preset"] == "cpu" and pilot["run"]["experiment"] == "optim-bench"
    rarest = {arm: {int(s): fta for s, fta in per_seed.items()}
              for arm, per_seed in pilot["rarest_final_fta"].items()}  # fmt: skip
    muon = rarest["muon"]
    sds = [statistics.stdev([muon[s] - values[s] for s in sorted(muon)])
           for arm, values in rarest.items() if arm not in ("muon", "adam_split")]  # fmt: skip
    assert len(sds) == CPU_CHALLENGERS and len(muon) == 5
    assert statistics.median(sds) == pytest.approx(OBSERVED_SEED_SD, abs=5e-5)
    # the positive control in that run: all-Adam trails Muon at t = 12.8
    gap = [muon[s] - rarest["adam"][s] for s in sorted(muon)]
    t = statistics.fmean(gap) / (statistics.stdev(gap) / math.sqrt(len(gap)))
    assert t == pytest.approx(12.8, abs=0.05)


def test_the_cpu_preset_runs_the_seeds_its_power_computation_chose():
    cfg = load_config(optim_bench.Config, "optim-bench", "cpu")
    challengers = [o for o in cfg.optimizers if o not in ("muon", "adam_split")]
    assert len(challengers) == CPU_CHALLENGERS
    assert cfg.common["seeds"] == CPU_SEEDS
    assert family_level(len(challengers)) == pytest.approx(0.05 / (TESTS_PER_ROW * 12))


def test_tailmem_claims_states_the_benchmarks_protocol():
    text = as_markdown(select("optim-bench"))
    assert PROTOCOL in text and f"±{FTA_MARGIN:g} FTA" in PROTOCOL
    assert f"{CPU_SEEDS} seeds" in PROTOCOL and "underpowered" in PROTOCOL
    assert PROTOCOL not in as_markdown(select("ablation"))

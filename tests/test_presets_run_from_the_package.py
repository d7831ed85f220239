"""Every cpu preset passes its preflight as shipped: a preset that evaluates at stored rates
(``tuning.rates: stored``) finds every rate it needs in the package's rate store
(``tailmem/configs/tuned_rates.json``), so the README's commands start on a fresh clone instead of
being refused for a missing rate."""

from __future__ import annotations

import pytest

from tailmem.config import available_presets, load_config
from tailmem.experiments import EXPERIMENTS, get_experiment


@pytest.mark.parametrize("experiment", [e for e in EXPERIMENTS if "cpu" in available_presets(e)])
def test_every_cpu_preset_passes_its_preflight_with_the_package_store(
    experiment, tmp_path, monkeypatch
):
    monkeypatch.setenv("TAILMEM_CACHE", str(tmp_path / "cache"))
    module = get_experiment(experiment)
    cfg = load_config(module.Config, experiment, "cpu")
    preflight = getattr(module, "preflight", None)  # optional, as for the runner
    if preflight is not None:
        preflight(cfg)  # raises a one-line ConfigError naming a missing stored rate

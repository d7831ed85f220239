"""Every cpu preset passes its preflight as shipped: a preset that evaluates at stored rates
(``tuning.rates: stored``) finds every rate it needs in the package's rate store
(``tailmem/configs/tuned_rates.json``), so the README's commands start on a fresh clone instead of
being refused for a missing rate."""

from __future__ import annotations

import pytest

from tailmem.config import available_presets, load_config
from tailmem.experiments import get_study, study_names


@pytest.mark.parametrize("experiment", [e for e in study_names() if "cpu" in available_presets(e)])
def test_every_cpu_preset_passes_its_preflight_with_the_package_store(
    experiment, tmp_path, monkeypatch
):
    monkeypatch.setenv("TAILMEM_CACHE", str(tmp_path / "cache"))
    study = get_study(experiment)
    cfg = load_config(study.config, experiment, "cpu")
    if study.preflight is not None:  # optional, as for the runner
        study.preflight(cfg)  # raises a one-line ConfigError naming a missing stored rate

"""The config tree every LM study shares: the same key for the same concept in each study."""

from __future__ import annotations

import pytest
import yaml

from tailmem.cli import main
from tailmem.config import load_config
from tailmem.errors import ConfigError
from tailmem.experiments import get_study

STUDIES = ("ablation", "spectra", "knowledge-qa")
SHARED = ["train.steps=7", "model.d_model=48", "optim.muon.lr=0.03", "seeds=2", "workers=1"]
SHARED += ["model.tie_weights=true", "model.pos_encoding=learned"]


@pytest.mark.parametrize("study", STUDIES)
def test_the_shared_keys_mean_the_same_in_every_study(study, capsys):
    assert main(["config", study, "--preset", "smoke", *SHARED]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["train"]["steps"] == 7 and printed["model"]["d_model"] == 48
    assert printed["optim"]["muon"]["lr"] == 0.03
    assert printed["seeds"] == 2 and printed["workers"] == 1
    cfg = load_config(get_study(study).config, study, "smoke", SHARED)
    model = cfg.model.build(100, "plain", cfg.train.seq_len)
    assert model.d_model == 48 and model.tie_weights and model.pos_encoding == "learned"
    assert printed["model"]["tie_weights"] is True and printed["model"]["pos_encoding"] == "learned"
    assert cfg.seed_list == [cfg.seed, cfg.seed + 1]
    muon = cfg.optim["muon"]
    assert muon.lr == 0.03 and not muon.swept  # one number: every arm trains at it
    assert muon.at(muon.lr).record()["lr"] == 0.03  # what each run's spec.json records


OLD_KEYS = [
    ("steps=7", "unknown config field 'steps'"),
    ("n_seeds=2", "unknown config field 'n_seeds'"),
    ("optim.muon_lr=0.01", "optim.muon_lr: got 0.01"),
    ("data.seq_len=32", "unknown config field 'data.seq_len'"),
]


@pytest.mark.parametrize("study", STUDIES)
def test_old_keys_are_rejected_in_one_line(study):
    for old, fragment in OLD_KEYS:
        with pytest.raises(ConfigError) as info:
            load_config(get_study(study).config, study, "smoke", [old])
        assert fragment in str(info.value) and "\n" not in str(info.value)

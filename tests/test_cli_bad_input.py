"""Malformed input through the real CLI: each case is one line ``tailmem: error: ...``, exit 2.

Config validation runs before any file is written, so none of these leaves a run directory.
"""

import pytest

from tailmem.cli import main

CASES = [
    # flags and commands
    (["run"], "required"),
    (["run", "assoc-two-group", "--preset"], "expected one argument"),
    (["run", "assoc-two-group", "--wat"], "unrecognized arguments: --wat"),
    (["run", "assoc-two-group", "stray"], "override 'stray' is not of the form key=value"),
    (["run", "no-such-exp"], "unknown experiment 'no-such-exp'"),
    (["run", "no-such-exp", "--preset", "smoke"], "unknown experiment 'no-such-exp'"),
    (["tune", "no-such-exp", "--preset", "smoke"], "unknown experiment 'no-such-exp'"),
    (["tune", "spectra", "--preset", "smoke"], "knowledge-qa, optim-bench, rule-or-rate)"),
    (["run", "assoc-two-group", "--preset", "huge"], "unknown preset 'huge'"),
    (["reproduce", "--jobs", "two"], "invalid int value"),
    (["reproduce", "--jobs", "0"], "--jobs: got 0"),
    (["reproduce", "--preset", "gpu"], "--preset: got 'gpu'"),
    (["reproduce", "--only", "assoc-two-group,nope"], "--only: unknown experiment 'nope'"),
    (["reproduce", "--launcher", "pbs"], "argument --launcher: invalid choice: 'pbs'"),
    (["reproduce", "--slurm-partition", "gpu"], "--slurm-* options need --launcher slurm"),
    (["reproduce", "--launcher", "slurm", "--slurm-time-min", "0"], "--slurm-time-min: got 0"),
    (["reproduce", "--launcher", "slurm", "--slurm-gpus-per-node", "-1"], "got -1"),
    (["reproduce", "--launcher", "slurm", "--slurm-cpus-per-task", "x"], "invalid int value"),
    (["reproduce", "--launcher", "slurm", "--slurm-partition", " "], "--slurm-partition"),
    (["diagnose", "/no/such/model"], "does not exist"),
    (["report", "/no/such/results"], "is not a directory"),
    # overrides: syntax and types
    (["config", "assoc-two-group", "=3"], "is not of the form key=value"),
    (["config", "assoc-two-group", "eps=[1,"], "is not valid YAML"),
    (["config", "assoc-two-group", "bogus=1"], "unknown config field 'bogus'"),
    (["config", "assoc-two-group", "eps=small"], "eps: got 'small'; expected a number"),
    (["config", "assoc-two-group", "seed=1.5"], "seed: got 1.5; expected an integer"),
    (["config", "assoc-two-group", "ks=7"], "ks: got 7; expected a list"),
    (["config", "assoc-two-group", "ks=[99,x]"], "ks[1]"),
    (["config", "assoc-two-group", "multi_lr=3"], "multi_lr: got 3; expected a mapping"),
    (["config", "ablation", "model.depth=3"], "unknown config field 'model.depth'"),
    (["config", "assoc-capacity", "lr_grid.nosuch=[1.0]"], "lr_grid: unknown optimizer 'nosuch'"),
    (["config", "assoc-two-group", "multi_lr.nosuch=1.0"], "multi_lr: unknown optimizer 'nosuch'"),
    (["config", "ablation", "data.corpus.vocab_size=big"], "data.corpus.vocab_size"),
    (["config", "spectra", "seeds=true"], "seeds: got True; expected an integer"),
    # values the experiments reject
    (["config", "assoc-two-group", "head_mass=1.5"], "head_mass"),
    (["config", "assoc-two-group", "head_fraction=0"], "head_fraction"),
    (["config", "assoc-two-group", "eps=2"], "eps"),
    (["config", "assoc-two-group", "ks=[100]"], "divisible by 3"),
    (["config", "assoc-two-group", "optimizers=[adamax]"], "adamax"),
    (["config", "assoc-two-group", "embeddings=[twisted]"], "twisted"),
    (["config", "assoc-scaling", "label_noise=-0.1"], "label_noise"),
    (["config", "ablation", "arms=[nope]"], "nope"),
    (["config", "ablation", "ffn=moe"], "ffn"),
    (["config", "spectra", "vo_form=sideways"], "vo_form"),
]


def _exit_code(args: list[str]) -> int:
    """``main``'s return code; argparse's own rejections arrive as ``SystemExit``."""
    try:
        return main(args)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize(("args", "fragment"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_malformed_input_is_one_line_and_exit_2(args, fragment, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = _exit_code(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1, err
    assert err[0].startswith("tailmem: error:") and fragment in err[0], err[0]
    assert not any(tmp_path.iterdir()), "bad input must not write anything"

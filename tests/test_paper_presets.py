"""The paper presets' code path, executed on a CPU: the first 2 steps of every paper preset at its
full model size (the 160M GPT of knowledge-qa, ablation and spectra; icl-regression's 12 × 256),
so that a shape, memory or config error of the path the GPUs will take is found here first.

Overrides, the same for every study: ``train.device=cpu train.precision=fp32 train.threads=1
train.steps=2 train.batch_size=2 train.warmup_steps=0 seeds=1 train.keep_checkpoints=none`` (the
final checkpoints, 1.3–1.9 GB each, are written and then dropped; one thread, because torch's
default two spin against other processes on a shared machine: spectra's SVDs of the 160M
weights took 8 minutes a run that way at load 4), plus what each study needs to fit a CPU in
minutes, named in :data:`STUDIES`:

- knowledge-qa: m = 15 as published (196,608 questions), evaluated on a sample of 4 questions per
  group (``eval_sample``); one learning rate per optimiser kind (the preset sweeps grids with
  2000-step runs); arms Muon (Muon + Adam) and SGD, plain and gated FFN: every optimiser kind
  and both FFN shapes in 4 runs;
- ablation and spectra: the stdlib corpus instead of FineWeb (no network here; its BPE stops at
  about 15k ids, so the 50,304-row embedding and head of the paper are not built at full size),
  one evaluation batch of 2 rows; ablation's Full-Muon and all-Adam arms;
- icl-regression: 64 evaluation prompts per group instead of 1024.

qa-sensitivity and qa-map train knowledge-qa's runs; their paper presets are resolved and
checked (``tailmem config``), every point included, without training.

Measured on the shared 2-core machine (load 1–4): about 8–10 minutes in all; the largest process
peaked near 6 GB.
"""

from __future__ import annotations

import json

import pytest

from tailmem.cli import main

PAPER_ON_CPU = ["train.device=cpu", "train.precision=fp32", "train.threads=1", "train.steps=2",
                "train.batch_size=2", "train.warmup_steps=0", "seeds=1",
                "train.keep_checkpoints=none"]  # fmt: skip
CORPUS = ["data.corpus.source=stdlib", "train.eval_batch_size=2", "data.eval_batches=1"]
ONE_RATE_EACH = ["optim.muon.lr=0.02", "optim.adam.lr=1.0e-3", "optim.sgd.lr=0.1"]
STUDIES = {
    "knowledge-qa": ["eval_sample=4", "arms=[muon,sgd]", *ONE_RATE_EACH],
    "ablation": [*CORPUS, "arms=[full,adam]"],
    "spectra": [*CORPUS, "logit_rows=2"],
    "icl-regression": ["data.eval_per_group=64"],
}
RUNS = {"knowledge-qa": 4, "ablation": 2, "spectra": 2, "icl-regression": 2}


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("study", list(STUDIES))
def test_the_paper_preset_trains_its_first_two_steps_on_a_cpu(study, tmp_path, monkeypatch):
    monkeypatch.setenv("TAILMEM_CACHE", str(tmp_path / "cache"))  # the corpus is built here
    out = tmp_path / study
    args = ["run", study, "--preset", "paper", "--out", str(out), *PAPER_ON_CPU, *STUDIES[study]]
    assert main(args) == 0
    assert (out / "COMPLETE").is_file() and (out / "report.json").is_file()
    runs = sorted(p.parent for p in out.glob("runs/*/*/*/spec.json"))
    assert len(runs) == RUNS[study]
    for run in runs:
        spec = json.loads((run / "spec.json").read_text())
        result = json.loads((run / "result.json").read_text())
        assert spec["train"]["precision"] == "fp32" and spec["train"]["device"] == "cpu"
        assert spec["steps"] == 2 and result["status"] == "complete" and result["steps_done"] == 2
        width = 256 if study == "icl-regression" else 768
        assert (spec["model"]["n_layer"], spec["model"]["d_model"]) == (12, width)
    assert not list(out.glob("runs/*/*/*/ckpt/*.pt"))  # dropped after the study


@pytest.mark.slow
@pytest.mark.parametrize(("study", "base"), [("qa-sensitivity", "preset: paper"),
                                             ("qa-map", "base: paper")])  # fmt: skip
def test_the_paper_preset_of_a_qa_grid_resolves_every_point(study, base, capsys):
    assert main(["config", study, "--preset", "paper"]) == 0
    assert base in capsys.readouterr().out.splitlines()

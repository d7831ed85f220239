"""Wall-time estimate of the ``ablation`` and ``spectra`` cpu presets from measured step times.

On one intra-op thread (``torch.set_num_threads(1)``; a shared machine's threads only add
noise), this measures with the real training loop the time per update of the preset's model
under all-Adam (the baseline) and under full Muon, and the time of one evaluation (validation
loss by bucket; for spectra also every isotropy metric and the max logits). Step times are the
fastest logging window of ``--steps`` updates, so other processes on the machine inflate them
less. It prints the Muon / Adam step ratio and extrapolates each preset:

    total = Σ_(arms × seeds) (steps · t_step(arm) + (evaluations + 1) · t_eval) + corpus build

with an arm's step time interpolated between Adam's and full Muon's by its share of Muon
parameters, against the budget (ablation 30 min for all arms of one FFN type, spectra 15 min),
and peak RSS.

    PYTHONPATH=src python benchmarks/lm_presets.py [--steps 20] [--ffn plain|gated]
"""

from __future__ import annotations

import dataclasses
import resource
import tempfile
import time
from collections.abc import Collection
from pathlib import Path

import torch

from tailmem.cli import ScriptParser, script_main
from tailmem.config import load_config
from tailmem.experiments import ablation, spectra
from tailmem.lm.arms import HIDDEN_MATRICES, muon_recipe
from tailmem.lm.config import LMConfig
from tailmem.lm.corpus import CorpusData, LMData
from tailmem.lm.spec import BatchShape
from tailmem.models.gpt import GPT, GPTConfig
from tailmem.optim.routing import parse_recipe, route
from tailmem.train import EvalHook, read_metrics, seed_everything, train
from tailmem.train.distributed import DistContext

BUDGET_S = {"ablation": 30 * 60, "spectra": 15 * 60}


def step_seconds(
    model_cfg: GPTConfig, recipe: str, cfg: LMConfig, data: LMData, steps: int
) -> float:
    """Fastest per-update time over logging windows of 5 updates of the real loop."""
    seed_everything(0)
    model = GPT(model_cfg)
    rates = cfg.fixed_rates("a benchmark of one step")
    kinds = parse_recipe(recipe)
    optimizer = route(model, recipe, {k: cfg.optim[k].at(rates[k]) for k in kinds})
    tcfg = dataclasses.replace(
        cfg.train.loop_config(cfg.train.steps, seed=0, progress=False),
        steps=steps,
        eval_every=0,
        ckpt_every=0,
        log_every=5,
        save_final=False,
        warmup_steps=0,
    )
    with tempfile.TemporaryDirectory() as tmp:
        batch = BatchShape(cfg.train.batch_size, cfg.train.seq_len, cfg.train.eval_batch_size)
        train(model, optimizer, data.batches(0, batch), tcfg, Path(tmp))
        rows = read_metrics(Path(tmp) / "metrics.jsonl")
    tokens_per_step = cfg.train.batch_size * cfg.train.seq_len
    return min(tokens_per_step / r["tokens_per_s"] for r in rows[1:] if r.get("tokens_per_s"))


def eval_seconds(hooks: list[EvalHook], model: torch.nn.Module, repeats: int = 3) -> float:
    times = []
    model.eval()
    for _ in range(repeats):
        start = time.perf_counter()
        with torch.no_grad():
            for hook in hooks:
                hook(0, model)
        times.append(time.perf_counter() - start)
    return min(times)


def muon_share(model: torch.nn.Module, roles: Collection[str]) -> float:
    muon = sum(p.numel() for n, p in model.named_parameters() if n.split(".")[-2] in roles)
    hidden = sum(
        p.numel() for n, p in model.named_parameters() if n.split(".")[-2] in HIDDEN_MATRICES
    )
    return muon / hidden


def main() -> None:
    parser = ScriptParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--ffn", default="plain", choices=("plain", "gated"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    ctx = DistContext()
    for name, module in (("ablation", ablation), ("spectra", spectra)):
        cfg = load_config(module.Config, name, "cpu", [f"ffn={args.ffn}"])
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as cache:
            spec = CorpusData(
                dataclasses.replace(cfg.data, cache_dir=cache),
                cfg.train.seq_len,
                cfg.train.eval_batch_size,
            )
            data = spec.load(ctx)
            corpus_s = time.perf_counter() - start
            model_cfg = cfg.model.build(data.vocab_size, args.ffn, cfg.train.seq_len)
            adam_s = step_seconds(model_cfg, "adam:*", cfg, data, args.steps)
            full = muon_recipe(HIDDEN_MATRICES)
            muon_s = step_seconds(model_cfg, full, cfg, data, args.steps)
            model = GPT(model_cfg)
            hooks = data.hooks(model_cfg, ctx)
            if name == "spectra":
                x = data.val[0][0][: cfg.logit_rows]
                hooks.append(spectra.spectra_hook(model_cfg, cfg.top_k, x, ctx))
            eval_s = eval_seconds(hooks, model)
        steps = cfg.train.steps
        n_evals = steps // cfg.train.eval_every + (steps % cfg.train.eval_every > 0) + 1
        if name == "ablation":
            shares = [muon_share(model, row.roles(args.ffn)) for row in cfg.selected()] * cfg.seeds
        else:
            shares = [1.0, 0.0] * cfg.seeds
        train_s = sum(steps * (adam_s + s * (muon_s - adam_s)) for s in shares)
        total = corpus_s + train_s + len(shares) * n_evals * eval_s
        print(
            f"{name:9s} cpu preset ({args.ffn} FFN, {model_cfg.n_layer}x{model_cfg.d_model}, "
            f"vocab {model_cfg.vocab_size}, batch {cfg.train.batch_size}x{cfg.train.seq_len}): "
            f"Adam step {adam_s * 1e3:.0f} ms (baseline), full-Muon step {muon_s * 1e3:.0f} ms "
            f"(ratio {muon_s / adam_s:.2f}), eval {eval_s:.2f} s, corpus build {corpus_s:.1f} s"
        )
        print(
            f"{'':9s} {len(shares)} runs x {steps} steps + {n_evals} evals each: estimated "
            f"{total / 60:.1f} min on 1 thread = {total / BUDGET_S[name]:.2f} of the "
            f"{BUDGET_S[name] // 60} min budget; {cfg.workers} workers (one core each): "
            f"~{total / cfg.workers / 60:.1f} min"
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {rss:.0f} MiB; step times are the fastest of {args.steps // 5 - 1} windows")


if __name__ == "__main__":
    raise SystemExit(script_main(main, "benchmarks/lm_presets.py"))

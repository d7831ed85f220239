"""``tailmem reproduce``: every experiment at one preset into one results folder, then the report.

Each experiment gets ``OUT/<experiment>``. A run that is complete with the identical config is
skipped; an incomplete one resumes; one whose config changed (a new preset file, say) is redone.
Independent experiments can run in parallel worker processes (``jobs``).
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from tailmem.config import PRESETS, load_config, to_dict
from tailmem.errors import ConfigError
from tailmem.experiments import EXPERIMENTS, get_experiment
from tailmem.report.render import write_report
from tailmem.rundir import RunDir, config_digest
from tailmem.runner import run_experiment


def default_results(preset: str) -> Path:
    return Path("results") / preset


def select_experiments(only: Sequence[str] | None) -> list[str]:
    """The experiments to run, in registry order; unknown names are a ConfigError."""
    if not only:
        return list(EXPERIMENTS)
    unknown = [name for name in only if name not in EXPERIMENTS]
    if unknown:
        raise ConfigError(
            f"--only: unknown experiment {unknown[0]!r}; "
            f"expected names from: {', '.join(EXPERIMENTS)}"
        )
    return [name for name in EXPERIMENTS if name in only]


def _plan(name: str, preset: str, out: Path) -> str:
    """What reproduce will do with ``name``: skip, resume, redo (config changed) or run."""
    module = get_experiment(name)
    cfg = load_config(module.Config, name, preset)
    path = out / name
    if not (path / "config.yaml").is_file():
        return "run"
    previous = RunDir(path).read_config()
    if previous.get("digest") != config_digest(name, to_dict(cfg)):
        return "redo"
    return "skip" if RunDir(path).is_complete else "resume"


def _run_one(name: str, preset: str, out: Path, force: bool) -> tuple[str, float]:
    start = time.perf_counter()
    run_experiment(name, preset, (), out=out / name, force=force)
    return name, time.perf_counter() - start


def reproduce(
    preset: str = "cpu",
    only: Sequence[str] | None = None,
    out: str | Path | None = None,
    jobs: int = 1,
) -> Path:
    """Run the selected experiments at ``preset`` into ``out`` and write the report there."""
    if preset not in PRESETS:
        raise ConfigError(f"--preset: got {preset!r}; expected one of: {', '.join(PRESETS)}")
    if jobs < 1:
        raise ConfigError(f"--jobs: got {jobs}; expected a positive integer")
    names = select_experiments(only)
    out = Path(out) if out is not None else default_results(preset)
    plans = {name: _plan(name, preset, out) for name in names}  # validates every config first
    out.mkdir(parents=True, exist_ok=True)
    todo = [n for n in names if plans[n] != "skip"]
    for name in names:
        if plans[name] == "skip":
            _status(name, "complete, skipped")
    start = time.perf_counter()
    if jobs == 1 or len(todo) <= 1:
        for i, name in enumerate(todo, 1):
            _status(name, f"{_verb(plans[name])} [{i}/{len(todo)}]")
            _, seconds = _run_one(name, preset, out, plans[name] == "redo")
            _status(name, f"done in {seconds:.0f} s")
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            pending = {pool.submit(_run_one, n, preset, out, plans[n] == "redo"): n for n in todo}
            for name in todo:
                _status(name, f"{_verb(plans[name])} (worker pool of {jobs})")
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    name = pending.pop(future)
                    _, seconds = future.result()
                    _status(name, f"done in {seconds:.0f} s; {len(pending)} still running")
    if todo:
        print(f"all experiments finished in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return write_report(out)


def _verb(plan: str) -> str:
    return {"run": "running", "resume": "resuming", "redo": "config changed, redoing"}[plan]


def _status(name: str, message: str) -> None:
    print(f"[reproduce] {name}: {message}", file=sys.stderr, flush=True)

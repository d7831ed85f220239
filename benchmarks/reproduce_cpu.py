"""Wall time and core use of the LM studies on the shared worker pool, against one job at a time.

Runs ``ablation``, ``spectra`` and ``knowledge-qa`` at a preset (default ``cpu``) into fresh
temporary folders, each as its own ``tailmem run`` process, twice in this one invocation:

- pooled: as configured (``workers`` runs at once, 2 × 1 thread in the presets);
- one job at a time: the same work with ``workers=1`` (the baseline);

and prints per study and in total: wall time, average cores busy (CPU time of the study process
and every worker, from ``RUSAGE_CHILDREN``, divided by wall time), peak RSS summed over the
study's processes (each process's ``VmHWM``, sampled every 0.2 s from ``/proc``: Linux only),
and the pooled / one-at-a-time wall ratio. The corpus of ``ablation`` and ``spectra`` is built
before timing (both modes read it from the same cache); knowledge-qa builds its small data set
in each run folder, in both modes alike. Acceptance (issue 10): pooled ≥ 1.7 cores busy and
≤ 0.55 × the one-at-a-time wall time, on a quiet 2-core machine.

    PYTHONPATH=src python benchmarks/reproduce_cpu.py [--preset cpu] [--studies a,b]
        [--baseline-studies a,b]   # the baseline's subset (default: the same studies)
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tailmem.cli import ScriptParser, script_main
from tailmem.config import load_config
from tailmem.experiments import get_study
from tailmem.lm.corpus import CorpusData
from tailmem.train.distributed import DistContext

STUDIES = ("ablation", "spectra", "knowledge-qa")


@dataclass
class Measured:
    """One ``tailmem run`` process tree: wall and CPU seconds, summed peak RSS (MiB), and the
    summed own seconds of its training runs."""

    wall: float
    cpu: float
    rss_mib: float
    in_runs: float = 0.0

    @property
    def cores(self) -> float:
        return self.cpu / self.wall if self.wall > 0 else 0.0

    @staticmethod
    def total(parts: list[Measured]) -> Measured:
        """Studies run one after another: walls and CPU add up, the peak is the largest."""
        return Measured(
            sum(m.wall for m in parts),
            sum(m.cpu for m in parts),
            max(m.rss_mib for m in parts),
            sum(m.in_runs for m in parts),
        )


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _descendants(root: int) -> list[int]:
    """Process ids below ``root`` (from ``/proc/<pid>/stat`` parent ids)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        kids = [pid for pid, ppid in parents.items() if ppid == parent]
        found += kids
        frontier += kids
    return found


def _peak_rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_study(study: str, preset: str, out: Path, overrides: list[str]) -> Measured:
    """``tailmem run study`` into ``out``; wall, CPU of the whole tree, summed peak RSS and the
    training runs' own seconds (see :func:`seconds_in_runs`)."""
    cmd = [sys.executable, "-m", "tailmem", "run", study, "--preset", preset, "--out", str(out)]
    cpu_before = _children_cpu()
    start = time.perf_counter()
    with open(out.with_suffix(".log"), "w") as log:
        proc = subprocess.Popen([*cmd, *overrides], stdout=log, stderr=subprocess.STDOUT)
        peaks: dict[int, int] = {}
        while proc.poll() is None:
            for pid in [proc.pid, *_descendants(proc.pid)]:
                peaks[pid] = max(peaks.get(pid, 0), _peak_rss_kib(pid))
            time.sleep(0.2)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{study} failed (exit {proc.returncode}); see {out.with_suffix('.log')}")
    cpu = _children_cpu() - cpu_before
    return Measured(wall, cpu, sum(peaks.values()) / 1024, seconds_in_runs(out))


def seconds_in_runs(out: Path) -> float:
    """Sum of every training run's own wall seconds (``wall_seconds`` of each sub-run's
    ``result.json``: from its first step's set-up to its last evaluation). Pooled runs share
    the machine, so pooled / one-at-a-time of this sum is how much the runs slow each other
    down; the rest of a study's wall time is start-up, scheduling and the output phase."""
    return sum(
        json.loads(path.read_text()).get("wall_seconds") or 0.0 for path in out.rglob("result.json")
    )


def prebuild_corpora(studies: list[str], preset: str, cache: Path) -> None:
    """Build the corpus of the corpus studies before anything is timed."""
    for study in studies:
        if study in ("ablation", "spectra"):
            cfg = load_config(get_study(study).config, study, preset, [f"data.cache_dir={cache}"])
            CorpusData(cfg.data, cfg.train.seq_len, cfg.train.eval_batch_size).load(DistContext())


def line(name: str, m: Measured) -> str:
    return (
        f"  {name:14s} wall {m.wall:8.1f} s  CPU {m.cpu:8.1f} s  cores busy {m.cores:4.2f}  "
        f"peak RSS (sum over its processes) {m.rss_mib:6.0f} MiB  inside runs {m.in_runs:7.1f} s"
    )


def measure(
    studies: list[str], preset: str, root: Path, cache: Path, extra: list[str]
) -> dict[str, Measured]:
    """Each study in turn; prints a line per study and the total."""
    found = {}
    for study in studies:
        overrides = [*extra]
        if study in ("ablation", "spectra"):
            overrides.append(f"data.cache_dir={cache}")
        found[study] = run_study(study, preset, root / study, overrides)
        print(line(study, found[study]), flush=True)
    print(line("total", Measured.total(list(found.values()))), flush=True)
    return found


def main() -> None:
    parser = ScriptParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--studies", default=",".join(STUDIES))
    parser.add_argument("--baseline-studies", default=None, help="default: --studies")
    args = parser.parse_args()
    studies = [s for s in args.studies.split(",") if s]
    baseline = [s for s in (args.baseline_studies or args.studies).split(",") if s]
    load = os.getloadavg()
    print(
        f"preset {args.preset}; {os.cpu_count()} cores; load average before "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        root, cache = Path(tmp), Path(tmp) / "cache"
        prebuild_corpora(sorted(set(studies) | set(baseline)), args.preset, cache)
        (root / "pooled").mkdir()
        (root / "serial").mkdir()
        print(f"pooled (each study's own workers/threads): {', '.join(studies)}", flush=True)
        pooled = measure(studies, args.preset, root / "pooled", cache, [])
        print(f"one job at a time (workers=1): {', '.join(baseline)}", flush=True)
        serial = measure(baseline, args.preset, root / "serial", cache, ["workers=1"])
    both = Measured.total([pooled[s] for s in baseline])
    alone = Measured.total(list(serial.values()))
    ratio = both.wall / alone.wall
    whole = Measured.total(list(pooled.values()))
    print(
        f"pooled cores busy {whole.cores:.2f} (acceptance >= 1.7); pooled / one-at-a-time wall "
        f"over {', '.join(baseline)} = {ratio:.3f} (acceptance <= 0.55)\n"
        f"runs' own seconds, pooled / one at a time = {both.in_runs / alone.in_runs:.3f} "
        f"(1: the runs do not slow each other down); outside the runs: pooled "
        f"{both.wall - both.in_runs / 2:.1f} s of wall (the runs' seconds halved: 2 workers), "
        f"one at a time {alone.wall - alone.in_runs:.1f} s"
    )


if __name__ == "__main__":
    raise SystemExit(script_main(main, "benchmarks/reproduce_cpu.py"))

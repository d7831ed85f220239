"""The ``tailmem`` command line.

Each command that writes takes the writer lock of the folder it writes and accepts only folders
of its own kind (:func:`tailmem.rundir.claim`): ``run --out`` a new or empty folder or a run
folder; ``reproduce --out`` a new or empty folder or a results folder; ``diagnose --out`` a new
or empty folder or a diagnose folder; ``report DIR`` a results folder or a run folder, into
which it writes ``report.html``, ``report.md`` and ``verdicts.json``. None writes into a folder
of the user's own (one holding files tailmem did not write) or inside a run folder.

Bad input of any kind ends with one line ``tailmem: error: ...`` on stderr and exit code 2:
:class:`~tailmem.errors.TailmemError` and the failures a user's machine or files cause
(:func:`expected_failure`: OS errors such as a full disk, a read-only folder or a symlink loop,
text files that are not UTF-8, running out of memory). Anything else is a bug and keeps its
traceback; ``--debug`` (anywhere on the command line) shows the traceback of every error.
"""

from __future__ import annotations

import argparse
import errno
import io
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeAlias

from tailmem import __version__
from tailmem.errors import ConfigError, DataError, TailmemError
from tailmem.install import missing_dependency

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit 2 (argparse's usage dump is noise)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"tailmem: error: {message} (see '{self.prog} --help')\n")


class ScriptParser(argparse.ArgumentParser):
    """The argument parser of a script in ``scripts/`` or ``benchmarks/``: like the CLI's, an
    error is one line ``PROG: error: ...`` and exit 2 (subcommands inherit it)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def script_main(body: Callable[[], int | None], prog: str) -> int:
    """Run a script's ``body`` under the CLI's contract: bad input (:func:`expected_failure`)
    is one line ``PROG: error: ...`` and exit 2, an interrupt exit 130; a bug keeps its
    traceback. Returns the exit code (``body``'s, 0 for None)."""
    try:
        return body() or 0
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        message = expected_failure(exc, debug_flag=False)
        if message is None:
            raise
        print(f"{prog}: error: {' '.join(message.split())}", file=sys.stderr)
        return EXIT_USAGE


def _cmd_list(args: argparse.Namespace) -> int:
    from tailmem.experiments import presets_text, studies

    for study in studies():
        text = f"{study.reproduces:58s} | {presets_text(study)}"
        print(f"{study.name:16s} {text}{'' if study.in_reproduce else ' | --only'}")
    print(
        "(times: wall clock on a quiet 2-core machine; smoke presets are toy sizes; "
        "'--only': not in a plain `tailmem reproduce`, add it with --only)"
    )
    return 0


def _cmd_config(args: argparse.Namespace) -> int:
    from tailmem.config import dump_yaml, load_config
    from tailmem.experiments import get_study

    study = get_study(args.experiment)
    preset = DEFAULT_CONFIG_PRESET if args.preset is None and args.config is None else args.preset
    cfg = load_config(study.config, args.experiment, preset, args.overrides, args.config)
    print(dump_yaml(cfg), end="")
    return 0


DEFAULT_CONFIG_PRESET = "cpu"
"""The preset ``tailmem config`` prints when none is given (``run`` takes none by default)."""


def _cmd_run(args: argparse.Namespace) -> int:
    from tailmem.report.summary import run_summary
    from tailmem.run_progress import run_shown
    from tailmem.train.distributed import is_main_process

    if args.preset is None and args.config is None:
        from tailmem.config import parse_override

        for item in args.overrides:  # a malformed override is named before the missing preset
            parse_override(item)
        raise ConfigError(_preset_missing(args.experiment))
    run, status = run_shown(
        args.experiment,
        args.preset,
        args.overrides,
        out=args.out,
        force=args.force,
        config=args.config,
        command=args.command_line,
    )
    if status == "skipped":
        print(f"{run.path}: already complete with this config (use --force to redo)")
    else:
        print(f"{args.experiment} ({args.preset or args.config}) finished: {run.path}")
    if is_main_process():  # under torchrun, rank 0 wrote claims.json
        print(run_summary(run.path))
    return 0


def _cmd_tune(args: argparse.Namespace) -> int:
    """Train a study's tuning trials only (every rate given as a grid), write the choices with
    their provenance to ``OUT/tuned_rates.json`` and, with ``--store``, into the package's rate
    store, where ``tuning.rates: stored`` finds them."""
    from tailmem.experiments import get_study, studies
    from tailmem.lm import store
    from tailmem.run_progress import run_shown

    if args.preset is None and args.config is None:
        raise ConfigError(_preset_missing(args.experiment))
    extra = get_study(args.experiment).tune_overrides
    if extra is None:
        tuning = [s.name for s in studies() if s.tune_overrides is not None]
        raise ConfigError(
            f"{args.experiment} tunes no learning rate; expected a study that does "
            f"({', '.join(tuning)})"
        )
    if args.missing:
        if "tuning.rates=sweep" not in extra:
            sections = [
                s.name for s in studies() if "tuning.rates=sweep" in (s.tune_overrides or ())
            ]
            raise ConfigError(
                f"--missing: {args.experiment} tunes at grid points of its own; expected a study "
                f"with one tuning section ({', '.join(sections)})"
            )
        extra = tuple("tuning.rates=fill" if o == "tuning.rates=sweep" else o for o in extra)
    for item in args.overrides:
        key = item.split("=", 1)[0].strip()
        for mine in (own.split("=", 1)[0] for own in extra):
            if key == mine or mine.startswith(f"{key}.") or key.startswith(f"{mine}."):
                what = "it" if key == mine else f"{mine}, inside it" if len(mine) > len(key) else (
                    f"{mine}, which holds it")  # fmt: skip
                raise ConfigError(f"{key}: tailmem tune sets {what}; expected it left out")
    if args.store:  # refused before any trial trains, not after
        store.check_writable(store.PACKAGE_STORE)
    out = args.out or f"runs/{args.experiment}-{args.preset or 'custom'}-tune"
    run, _ = run_shown(args.experiment, args.preset, [*args.overrides, *extra], out=out,
                       force=args.force, config=args.config,
                       command=args.command_line)  # fmt: skip
    rates = store.gather(run.path)
    if not rates:
        print(f"{run.path}: no learning rate was given as a grid; nothing tuned")
        return 0
    for rate in sorted(rates, key=lambda r: (r.ffn, r.arm)):
        edge = f", at the {rate.edge} end of the candidates tried" if rate.edge else ""
        print(f"{rate.ffn}/{rate.arm}: {rate.point:g} ({len(rate.trials)}/{rate.budget} trials, "
              f"score {rate.score}{edge})")  # fmt: skip
    print(f"choices: {run.path / store.STORE_NAME}")
    if args.store:
        held = store.write_store(store.PACKAGE_STORE, rates)
        print(f"stored in {store.PACKAGE_STORE} ({held} tuned entries): tuning.rates=stored "
              "now evaluates at them")  # fmt: skip
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from tailmem.report.summary import folder_summary
    from tailmem.reproduce import SlurmOptions, reproduce

    only = None  # every study; "--only ''" names none and is refused
    if args.only is not None:
        only = [name.strip() for name in args.only.split(",") if name.strip()]
    given = {
        key: getattr(args, f"slurm_{key}")
        for key in ("partition", "time_min", "gpus_per_node", "cpus_per_task")
        if getattr(args, f"slurm_{key}") is not None
    }
    slurm = SlurmOptions(**given) if given else None
    report = reproduce(
        args.preset, only=only, out=args.out, jobs=args.jobs, launcher=args.launcher,
        slurm=slurm, command=args.command_line, force=args.force,
    )  # fmt: skip
    print(folder_summary(report.parent))
    print(f"report: {report.resolve()}")
    return 0


def _preset_missing(experiment: str) -> str:
    """The refusal of ``tailmem run EXP`` without a preset: each preset's sizes and times."""
    from tailmem.config import available_presets
    from tailmem.experiments import get_study, presets_text

    study = get_study(experiment)  # an unknown experiment is named first
    names = available_presets(experiment)
    sizes = f" ({presets_text(study)})" if study.presets else ""
    return (
        f"run {experiment}: no preset given; expected --preset {' | '.join(names)}{sizes}, or "
        "--config FILE (a YAML file of your own)"
    )


REPORTABLE = ("results", "run")
"""The folders ``tailmem report`` writes into: a results folder or one run folder."""


def _cmd_report(args: argparse.Namespace) -> int:
    from tailmem.experiments import headline_questions
    from tailmem.report.render import write_report
    from tailmem.rundir import claim

    folder = Path(args.results)
    if not folder.is_dir():
        raise DataError(
            f"{folder} is not a directory; expected a results folder from reproduce or a run folder"
        )
    with claim(folder, REPORTABLE, "report", new=False, record_new=True):
        report = write_report(folder, headline_questions())
    print(f"report: {report.resolve()}")
    return 0


def _cmd_claims(args: argparse.Namespace) -> int:
    from tailmem.claims.listing import as_json, as_markdown, select

    claims = select(args.experiment)
    print(as_json(claims) if args.format == "json" else as_markdown(claims))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from tailmem.atomic import atomic_write_text
    from tailmem.compare import compare, render_markdown, summary
    from tailmem.compare_curves import STEM, curves, figure
    from tailmem.compare_page import render_html
    from tailmem.rundir import claim

    found = compare(args.runs)
    written: list[Path] = []
    if args.out is not None:
        out = Path(args.out)
        drawn = curves(found)
        with claim(out, ("compare",), "compare", record_new=True) as folder:
            png = None
            if drawn is not None:
                smoke = any(r.preset.name == "smoke" for r in found.runs)
                saved = folder.save_figure(figure(drawn, found.labels, smoke), STEM)
                png = saved[0].read_bytes()
                written += saved
            pages = {
                "compare.md": render_markdown(found, out, f"{STEM}.png" if png else None),
                "compare.html": render_html(found, png),
            }
            for name, text in pages.items():
                atomic_write_text(out / name, text)
                written.append(out / name)
    print(summary(found, written))
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from tailmem.report.export import export

    print(export(args.run, args.table, args.format), end="")
    return 0


def _cmd_diagnose(args: argparse.Namespace) -> int:
    from tailmem.diagnose_view import command

    return command(args.path, args.out, args.top_k)


Commands: TypeAlias = "argparse._SubParsersAction[_Parser]"
"""The subcommands of :func:`build_parser`; each ``_add_*`` adds one (or two sharing options)."""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tailmem",
        description="How optimisers (Muon, Adam, ...) learn heavy-tailed associative memories.",
    )
    parser.add_argument("--version", action="version", version=f"tailmem {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the traceback of any error",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    _add_list(sub)
    _add_run_and_config(sub)
    _add_tune(sub)
    _add_reproduce(sub)
    _add_diagnose(sub)
    _add_report(sub)
    _add_compare(sub)
    _add_export(sub)
    _add_claims(sub)
    return parser


def _add_list(sub: Commands) -> None:
    """``tailmem list``."""
    p = sub.add_parser("list", help="list the experiments and their presets")
    p.set_defaults(func=_cmd_list)


def _add_run_and_config(sub: Commands) -> None:
    """``tailmem run`` and ``tailmem config``: one experiment, by preset or file, with overrides."""
    for name, func, help_text in (
        ("run", _cmd_run, "run one experiment into a run directory"),
        ("config", _cmd_config, "print the resolved config of an experiment"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("experiment", help="experiment name (see 'tailmem list')")
        p.add_argument(
            "--preset",
            default=None,
            help="smoke | cpu | paper: a packaged preset, by name"
            + (" (required unless --config)" if name == "run" else " (default: cpu)"),
        )
        p.add_argument(
            "--config",
            default=None,
            metavar="FILE",
            help="a YAML file of your own in place of a preset (e.g. 'tailmem config EXP "
            "--preset cpu' saved and edited); recorded in the run's config.yaml by path and "
            "SHA-256",
        )
        p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
        if name == "run":
            p.add_argument(
                "--out",
                default=None,
                help="run folder: a new or empty folder, or a run folder of tailmem run "
                "(default: runs/EXP-PRESET)",
            )
            p.add_argument(
                "--force",
                action="store_true",
                help="redo the run: first remove what tailmem wrote into the folder (the "
                "previous run's files, sub-runs and data caches, a report of it)",
            )
        p.set_defaults(func=func)


def _add_tune(sub: Commands) -> None:
    """``tailmem tune``: a study's learning rates alone, optionally stored."""
    p = sub.add_parser("tune", help="tune a study's learning rates alone and store the choices")
    p.add_argument("experiment", help="a study that tunes (knowledge-qa, optim-bench, ...)")
    p.add_argument("--preset", default=None, help="smoke | cpu | paper (or --config FILE)")
    p.add_argument("--config", default=None, metavar="FILE", help="a YAML file of your own")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    p.add_argument("--out", default=None, help="run folder (default: runs/EXP-PRESET-tune)")
    p.add_argument("--force", action="store_true", help="redo the tuning from nothing")
    p.add_argument(
        "--store",
        action="store_true",
        help="also merge the choices into the package's rate store (configs/tuned_rates.json), "
        "which presets with tuning.rates: stored read",
    )
    p.add_argument(
        "--missing",
        action="store_true",
        help="tune only the arms the rate store holds no rate for (tuning.rates=fill): after a "
        "change to one optimiser's settings, only the arms that train with it",
    )
    p.set_defaults(func=_cmd_tune)


def _add_reproduce(sub: Commands) -> None:
    """``tailmem reproduce``: every experiment at a preset, locally or as a Slurm array."""
    p = sub.add_parser("reproduce", help="run every experiment at a preset and write the report")
    p.add_argument("--preset", default="cpu", help="smoke | cpu | paper (default: cpu)")
    p.add_argument("--only", default=None, metavar="EXP,...", help="run only these experiments")
    p.add_argument(
        "--out",
        default=None,
        help="results folder: a new or empty folder, or a results folder of tailmem reproduce "
        "(default: results/PRESET)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a run in --out whose config differs (another preset, or a preset changed "
        "since), reusing its sub-runs whose own settings are unchanged; refused without it",
    )
    p.add_argument(
        "--jobs", type=int, default=1, help="experiments run at once (processes or array tasks)"
    )
    p.add_argument(
        "--launcher",
        choices=("local", "slurm"),
        default="local",
        help="local processes, or a Slurm job array through submitit (default: local)",
    )
    p.add_argument("--slurm-partition", default=None, help="Slurm partition of the jobs")
    p.add_argument(
        "--slurm-time-min", type=int, default=None, help="time limit per job in minutes (720)"
    )
    p.add_argument("--slurm-gpus-per-node", type=int, default=None, help="GPUs per job")
    p.add_argument("--slurm-cpus-per-task", type=int, default=None, help="CPUs per job")
    p.set_defaults(func=_cmd_reproduce)


def _add_diagnose(sub: Commands) -> None:
    """``tailmem diagnose``: spectral isotropy of any model."""
    p = sub.add_parser("diagnose", help="spectral isotropy of a model's matrices by role and layer")
    p.add_argument(
        "path",
        help="checkpoint, training run dir, Hugging Face model folder, or a study or results "
        "folder (every run in it that kept a checkpoint, side by side)",
    )
    p.add_argument(
        "--out",
        default=None,
        help="folder for isotropy.csv and isotropy.png/.svg: a new or empty folder, or one "
        "diagnose wrote",
    )
    p.add_argument("--top-k", type=int, default=10, help="k of the top-k energy (default: 10)")
    p.set_defaults(func=_cmd_diagnose)


def _add_report(sub: Commands) -> None:
    """``tailmem report``."""
    p = sub.add_parser("report", help="write report.html and report.md for a results folder")
    p.add_argument(
        "results",
        help="a results folder written by reproduce, or one run folder; the report is written "
        "into it (under its writer lock)",
    )
    p.set_defaults(func=_cmd_report)


def _add_compare(sub: Commands) -> None:
    """``tailmem compare``."""
    p = sub.add_parser("compare", help="runs of one experiment side by side")
    p.add_argument(
        "runs", nargs="+", metavar="RUN", help="two or more run folders of one experiment"
    )
    p.add_argument(
        "--out",
        default=None,
        help="folder for compare.md and compare.html: a new or empty folder, or one compare "
        "wrote (without it, only the summary is printed)",
    )
    p.set_defaults(func=_cmd_compare)


def _add_export(sub: Commands) -> None:
    """``tailmem export``."""
    p = sub.add_parser("export", help="print one results table of a run as LaTeX or CSV")
    p.add_argument("run", metavar="RUN", help="a finished run folder")
    p.add_argument(
        "--table",
        default="claims",
        help="claims (default), answers, or one of the run's CSV files by name "
        "(e.g. tail_table_plain.csv); a wrong name lists them",
    )
    p.add_argument(
        "--format",
        choices=("latex", "csv"),
        default="latex",
        help="latex (a booktabs table, as the report shows it; default) | csv (every column "
        "and digit)",
    )
    p.set_defaults(func=_cmd_export)


def _add_claims(sub: Commands) -> None:
    """``tailmem claims``."""
    p = sub.add_parser("claims", help="print the registry of published claims and their rules")
    p.add_argument("--experiment", default=None, help="only this experiment's ('none': uncovered)")
    p.add_argument("--format", choices=("md", "json"), default="md", help="md (default) | json")
    p.set_defaults(func=_cmd_claims)


_OS_HINTS = {
    errno.ENOSPC: "the disk is full; free some space and rerun (completed work is kept)",
    errno.EDQUOT: "the disk quota is exhausted; free some space and rerun",
    errno.EROFS: "expected a writable location",
    errno.EACCES: "expected a location this user may read and write",
    errno.EPERM: "expected a location this user may read and write",
    errno.ELOOP: "expected a path without a symbolic-link loop",
    errno.ENOTDIR: "expected a folder where the path has a file",
    errno.EISDIR: "expected a file where the path has a folder",
    errno.EEXIST: "expected a folder or a free path",
    errno.ENOENT: "expected an existing path, or a folder in which it can be made",
    errno.ENAMETOOLONG: "expected a shorter path",
}

_OOM_TEXT = ("can't allocate memory", "not enough memory", "out of memory")


def expected_failure(exc: BaseException, debug_flag: bool = True) -> str | None:
    """The one-line message of a failure that is not a bug (None: it is a bug); with
    ``debug_flag`` a message may suggest ``--debug`` (a script has no such flag)."""
    if isinstance(exc, TailmemError):
        return str(exc)
    if (missing := missing_dependency(exc)) is not None:
        return missing
    if isinstance(exc, OSError):
        where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
        what = exc.strerror or type(exc).__name__
        hint = _OS_HINTS.get(exc.errno or 0, "expected a readable, writable location")
        return f"{where or 'file system'}: {what}; {hint}"
    if isinstance(exc, UnicodeDecodeError):
        which = " (rerun with --debug to see which)" if debug_flag else ""
        return (
            f"a file that should be text is not UTF-8 ({exc.reason} at byte {exc.start}); "
            f"expected a text file{which}"
        )
    if isinstance(exc, MemoryError) or (
        isinstance(exc, RuntimeError) and any(t in str(exc).lower() for t in _OOM_TEXT)
    ):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return (
            f"out of memory ({first[:160]}); expected a config that fits this machine "
            "(a smaller preset or smaller sizes)"
        )
    return None


def _check_output() -> None:
    """Refuse, before any work, a standard output nothing can be written to (``> /dev/full``, a
    descriptor opened read-only): otherwise a run trains to the end and fails on its summary.
    Writing zero bytes asks the device; standard output that is no file (a test's capture)
    is not probed."""
    expected = "expected an output that can be written (a terminal, a pipe, or a file on a disk "
    expected += "with space)"
    if sys.stdout is None:  # Python's stand-in for a closed descriptor 1 (``1>&-``)
        raise DataError(f"standard output is closed; {expected}")
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return
    try:
        os.write(fd, b"")
    except BrokenPipeError:
        raise  # the reader is gone: stop quietly, as below
    except OSError as exc:
        raise DataError(
            f"standard output: {exc.strerror or type(exc).__name__}; {expected}"
        ) from None


PATH_ARGUMENTS = {
    "out": ("--out", "a folder ('.' for this one)"),
    "config": ("--config", "a YAML file"),
    "path": ("PATH", "a checkpoint, run folder or model folder ('.' for this one)"),
    "results": ("DIR", "a results or run folder ('.' for this one)"),
}
"""Path arguments by attribute, with what each expects: an empty one is refused, not read as
the current folder."""


def _check_paths(args: argparse.Namespace) -> None:
    """Refuse an empty path argument (``--out ''``): it would be read as the current folder."""
    for attr, (name, expected) in PATH_ARGUMENTS.items():
        value = getattr(args, attr, None)
        if value is not None and not value.strip():
            raise ConfigError(f"{name}: got an empty path; expected {expected}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [item for item in argv if item != "--debug"]  # accepted anywhere on the line
    # Overrides may come before or after options (argparse alone would reject `EXP --preset P k=v`).
    args, extra = parser.parse_known_args(argv)
    stray = [item for item in extra if item.startswith("-") or "=" not in item]
    if stray or (extra and not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(stray or extra)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    args.command_line = " ".join(argv)  # what a run records as the command that started it
    try:
        _check_paths(args)
        _check_output()
        return args.func(args)
    except KeyboardInterrupt:
        print("tailmem: interrupted; completed runs are kept, rerun to resume", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        message = expected_failure(exc)
        if message is None or debug:
            raise
        print(f"tailmem: error: {' '.join(message.split())}", file=sys.stderr)
        return EXIT_USAGE

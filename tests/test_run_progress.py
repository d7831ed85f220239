"""``tailmem run`` shows reproduce's display for its one experiment: plain ``[run]`` lines when
stderr is not a terminal, a live table on one with the run's output (its workers' too) printed
above it; a refusal or a run found complete shows nothing but its own line."""

from __future__ import annotations

import os
import re
import sys
import threading
import time

from tailmem import progress
from tailmem.cli import main


def _slow_run(seen: dict):
    """A fake experiment's run: 3 steps of 0.6 s, a line of its own and one from a child
    process, and whether its stderr looked like a terminal."""

    def run(cfg, run_dir) -> None:
        seen["stderr_isatty"] = sys.stderr.isatty()
        progress.plan(3, "steps")
        print("a line of the run's own", file=sys.stderr, flush=True)
        os.system("echo a line of a child process >&2")
        for _ in range(3):
            time.sleep(0.6)
            progress.advance(1)
        run_dir.write_json("results.json", {"values": [1.0]})

    return run


def test_plain_lines_when_stderr_is_no_terminal(fake_experiment, tmp_path, capsys):
    fake_experiment.run = _slow_run({})
    out = tmp_path / "run"
    assert main(["run", "fake", "--preset", "smoke", "--out", str(out)]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[run]")]
    assert re.fullmatch(r"\[run\] run: running, \d+% \(\d/3 steps\), elapsed \d+s.*", lines[0])
    assert lines[1].startswith("[run] 0/1 finished, elapsed ")
    assert re.fullmatch(r"\[run\] run: done, in \d+s", lines[-2])
    assert lines[-1].startswith("[run] 1/1 finished, elapsed ")
    # Found complete: no display, only the run's own line.
    assert main(["run", "fake", "--preset", "smoke", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "[run]" not in captured.err and "already complete" in captured.out
    # Refused before it starts: one line.
    assert main(["run", "fake", "--preset", "smoke", "--out", str(out), "steps=0"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == "tailmem: error: steps: got 0; expected a positive integer"


def test_a_live_table_on_a_terminal_with_the_output_above_it(
    fake_experiment, tmp_path, monkeypatch
):
    seen: dict = {}
    fake_experiment.run = _slow_run(seen)
    master, slave = os.openpty()
    received = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    saved = os.dup(2)
    os.dup2(slave, 2)  # descriptor 2 is the terminal, as for a user
    try:
        with open(2, "w", buffering=1, closefd=False) as terminal:
            monkeypatch.setattr(sys, "stderr", terminal)
            code = main(["run", "fake", "--preset", "smoke", "--out", str(tmp_path / "run")])
            monkeypatch.undo()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(slave)
    reader.join(timeout=5)
    os.close(master)
    assert code == 0
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", received.decode(errors="replace"))
    assert "tailmem run fake --preset smoke" in text  # the table's title
    assert re.search(r"│ run\s+│ done\s+│ 100% \(3/3 steps\)", text)
    assert "1/1 finished" in text
    lines = text.replace("\r", "").splitlines()
    assert "a line of the run's own" in lines and "a line of a child process" in lines
    # The run printed through the display, not to the terminal: no progress bar of its own.
    assert seen["stderr_isatty"] is False

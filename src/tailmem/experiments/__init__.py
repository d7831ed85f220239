"""The experiment registry.

Each experiment is a module defining ``NAME``, a ``Config`` dataclass (with a ``seed`` field) and
``run(cfg, run: RunDir) -> None``. It writes ``results.json``, CSVs, figures and ``claims.json``
into the run directory and never imports another experiment.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tailmem.errors import ConfigError

EXPERIMENTS: dict[str, str] = {
    "assoc-two-group": "tailmem.experiments.assoc_two_group",
    "assoc-scaling": "tailmem.experiments.assoc_scaling",
    "assoc-capacity": "tailmem.experiments.assoc_capacity",
    "knowledge-qa": "tailmem.experiments.knowledge_qa",
    "qa-sensitivity": "tailmem.experiments.qa_sensitivity",
    "qa-map": "tailmem.experiments.qa_map",
    "ablation": "tailmem.experiments.ablation",
    "spectra": "tailmem.experiments.spectra",
    "icl-regression": "tailmem.experiments.icl_regression",
    "optim-bench": "tailmem.experiments.optim_bench",
}


def get_experiment(name: str) -> ModuleType:
    """Import experiment ``name``; an unknown name is a ConfigError listing the known ones."""
    try:
        module_path = EXPERIMENTS[name]
    except KeyError:
        known = ", ".join(EXPERIMENTS) or "none registered"
        raise ConfigError(f"unknown experiment {name!r}; expected one of: {known}") from None
    return importlib.import_module(module_path)

"""The experiment registry.

Each experiment is a module defining ``NAME``, a ``Config`` dataclass (with a ``seed`` field) and
``run(cfg, run: RunDir) -> None``. It writes ``results.json``, CSVs, figures and ``claims.json``
into the run directory and never imports another experiment (the knowledge-QA grid studies drive
knowledge-QA through its library). A study whose learning rates can be tuned alone (``tailmem
tune``) also defines ``TUNE_OVERRIDES``: the overrides that make its run train the tuning trials
only and write the choices as ``tuned_rates.json``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tailmem.errors import ConfigError

EXPERIMENTS: dict[str, str] = {
    "assoc-two-group": "tailmem.experiments.assoc_two_group",
    "assoc-scaling": "tailmem.experiments.assoc_scaling",
    "assoc-capacity": "tailmem.experiments.assoc_capacity",
    "assoc-embeddings": "tailmem.experiments.assoc_embeddings",
    "knowledge-qa": "tailmem.experiments.knowledge_qa",
    "qa-sensitivity": "tailmem.experiments.qa_sensitivity",
    "qa-map": "tailmem.experiments.qa_map",
    "ablation": "tailmem.experiments.ablation",
    "spectra": "tailmem.experiments.spectra",
    "icl-regression": "tailmem.experiments.icl_regression",
    "optim-bench": "tailmem.experiments.optim_bench",
    "rule-or-rate": "tailmem.experiments.rule_or_rate",
}


TUNE_OVERRIDES_OF_LM_STUDIES = ("tuning.rates=sweep", "tuning.only=true")
"""The overrides that make an LM study's run tune only (:class:`~tailmem.lm.tuning.
TuningSection`)."""


def get_experiment(name: str) -> ModuleType:
    """Import experiment ``name``; an unknown name is a ConfigError listing the known ones."""
    try:
        module_path = EXPERIMENTS[name]
    except KeyError:
        known = ", ".join(EXPERIMENTS) or "none registered"
        raise ConfigError(f"unknown experiment {name!r}; expected one of: {known}") from None
    return importlib.import_module(module_path)

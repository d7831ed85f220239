"""The language-model library shared by the LM studies (``ablation``, ``spectra``,
``knowledge-qa``): a small GPT trained with role-routed optimisers.

- :mod:`.config`: the typed config tree every study shares — ``model``, ``train``, ``optim``,
  ``seeds``, ``workers`` (same key for the same concept in every study);
- :mod:`.arms`: :class:`~.arms.Arm`, a named role recipe;
- :mod:`.subrun`: :func:`~.subrun.run_job` trains one arm at one seed into its own sub-run
  directory, with one reuse/resume rule;
- :mod:`.plan`: which jobs a study trains (LR sweep per arm, widened until the choice is
  interior where asked, then seeds) and in which order; several studies' plans on one pool;
- :mod:`.pool`: the worker pool that runs them (and the experiments of ``tailmem reproduce``);
- :mod:`.corpus`: text-corpus data and the validation-loss metric (``ablation``, ``spectra``).

A study module declares its arms, its data and its metrics, and calls :func:`.plan.run_plan`.
"""

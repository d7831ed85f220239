"""Pieces of the ``knowledge-qa`` experiment (paper A, Sec. 4.3; PAPERS.md A3).

- :mod:`.arms`: the optimiser arms as role recipes, and which learning rate each arm sweeps;
- :mod:`.evaluate`: first-token accuracy per frequency group, as a training eval hook;
- :mod:`.single`: one training run (arm, learning rates, seed) in its own resumable directory;
- :mod:`.schedule`: the order of the runs (LR sweeps, then seeds) and a worker pool;
- :mod:`.summary`: tables over seeds, head–tail gap, claims; :mod:`.plots`: figures.
"""

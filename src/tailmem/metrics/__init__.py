"""Measurements of models and training runs: spectral isotropy (:mod:`.spectrum`)."""

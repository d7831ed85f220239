"""Data sets for the experiments: synthetic biographies and knowledge QA (:mod:`.bios`)."""

"""One intra-op thread: on a shared 2-core machine torch's thread pool spins against other
processes and small-model steps get 10x slower; results do not depend on it."""

import torch

torch.set_num_threads(1)

import torch

from tailmem.optim import Muon, muon_update

mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
hidden_matrices = [mlp[0].weight, mlp[2].weight]  # Muon trains matrices; biases go to Adam
opt = Muon(hidden_matrices)  # == torch.optim.Muon(hidden_matrices): lr 1e-3, weight_decay 0.1,
                             # momentum 0.95, nesterov, ns_coefficients/eps/ns_steps/adjust_lr_fn
opt = Muon(hidden_matrices, lr=0.02, weight_decay=0.0, method="polar_express", dtype=None,
           normuon=True)     # tailmem's superset (dtype None = the gradient's; default bfloat16)
grad, momentum_buffer = torch.randn(256, 64), torch.zeros(256, 64)
update = muon_update(grad, momentum_buffer)  # the functional core: W -= lr * update

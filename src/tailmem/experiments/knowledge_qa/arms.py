"""The optimiser arms of knowledge-QA, written as role recipes (PAPERS.md A3).

=============  =========================  ==============================================
arm            label                      recipe (roles -> optimiser)
=============  =========================  ==============================================
muon           Muon                       Muon on q,k,v,o,w_in,w_gate,w_out; Adam on the rest
adam_split     Adam (own rate)            Adam on q,k,v,o,w_in,w_gate,w_out at its own rate;
                                          Adam on the rest at the Adam arm's
adam           Adam                       Adam on everything
sgd            SGD+M                      SGD with momentum on everything
muon_vo_ffn    Muon(VO+FFN)&Adam(QK)      Muon on v,o,w_in,w_gate,w_out; Adam on the rest
muon_qk        Muon(QK)&Adam(VO+FFN)      Muon on q,k; Adam on the rest
=============  =========================  ==============================================

``adam_split`` is the fair reference for Muon: both train the hidden matrices at a rate of their
own, tuned by the same rule, over the same Adam-trained embedding, head and norms at the Adam
arm's rate, so the two differ in the update rule alone. Paper A compares Muon with ``adam`` —
Adam everywhere at one rate, one tuned rate against Muon's two — which the claims that
reproduce its statements keep.

"The rest" is the token embedding, the LM head and the RMSNorm gains: Adam, as in the paper
(A1: "token embedding and LM head are always optimised by Adam"). Only the pure SGD arm trains
them with SGD too — the paper's SGD+M arm is a baseline for the whole model, and an Adam-trained
embedding would make it a hybrid.

Fair tuning (:mod:`tailmem.lm.rates`). Each arm sweeps the learning rate of the kind that
trains most of its hidden matrices (``optim.<kind>.lr`` as a grid). Its other kinds run at the
rate chosen for the arm that trains every hidden matrix with that kind (Adam's for the
Adam-trained embedding/head of the Muon arms, Muon's for the QK matrices of ``muon_qk``), or at
``optim.<kind>.lr`` when that is one number — the paper likewise holds the Muon learning rate
fixed across its ablation arms. ``arms`` may also give recipes, e.g. a user's optimiser
``mine:q,k,v,o,w_in,w_gate,w_out adam:*``.
"""

from __future__ import annotations

from tailmem.lm.arms import Arm, matrix_recipe

ARMS: dict[str, Arm] = {
    arm.name: arm
    for arm in (
        Arm.of_recipe(matrix_recipe("muon")),
        Arm.of_recipe(matrix_recipe("adam_split")),
        Arm.of_recipe("adam:*"),
        Arm.of_recipe("sgd:*"),
        Arm("muon_vo_ffn", "Muon(VO+FFN)&Adam(QK)", "muon:v,o,w_in,w_gate,w_out adam:*"),
        Arm("muon_qk", "Muon(QK)&Adam(VO+FFN)", "muon:q,k adam:*"),
    )
}

"""The optimiser arms of knowledge-QA, written as role recipes (PAPERS.md A3).

=============  =========================  ==============================================
arm            label                      recipe (roles -> optimiser)
=============  =========================  ==============================================
muon           Muon                       Muon on q,k,v,o,w_in,w_gate,w_out; Adam on the rest
adam           Adam                       Adam on everything
sgd            SGD+M                      SGD with momentum on everything
muon_vo_ffn    Muon(VO+FFN)&Adam(QK)      Muon on v,o,w_in,w_gate,w_out; Adam on the rest
muon_qk        Muon(QK)&Adam(VO+FFN)      Muon on q,k; Adam on the rest
=============  =========================  ==============================================

"The rest" is the token embedding, the LM head and the RMSNorm gains: Adam, as in the paper
(A1: "token embedding and LM head are always optimised by Adam"). Only the pure SGD arm trains
them with SGD too — the paper's SGD+M arm is a baseline for the whole model, and an Adam-trained
embedding would make it a hybrid.

Fair tuning. Each arm sweeps the learning rate of one optimiser kind, :data:`SWEPT`: the kind
that trains most of its hidden matrices. Its other kinds run at the best learning rate found for
the arm that uses that kind alone (its *base arm*: Adam's for the Adam-trained embedding/head of
the Muon arms, Muon's for the QK matrices of ``muon_qk``), or at ``optim.<kind>.lr`` when that
arm is not run — the paper likewise holds the Muon learning rate fixed across its ablation arms.
"""

from __future__ import annotations

from collections.abc import Sequence

from tailmem.lm.arms import HIDDEN_MATRICES, Arm, muon_recipe

ARMS: dict[str, Arm] = {
    arm.name: arm
    for arm in (
        Arm("muon", "Muon", muon_recipe(HIDDEN_MATRICES)),
        Arm("adam", "Adam", "adam:*"),
        Arm("sgd", "SGD+M", "sgd:*"),
        Arm("muon_vo_ffn", "Muon(VO+FFN)&Adam(QK)", "muon:v,o,w_in,w_gate,w_out adam:*"),
        Arm("muon_qk", "Muon(QK)&Adam(VO+FFN)", "muon:q,k adam:*"),
    )
}
SWEPT = {"muon": "muon", "adam": "adam", "sgd": "sgd", "muon_vo_ffn": "muon", "muon_qk": "adam"}
"""The kind whose learning rate each arm sweeps."""
BASE_ARM = {"muon": "muon", "adam": "adam", "sgd": "sgd"}
"""The arm that uses each kind alone; its tuned LR is reused by the hybrids."""


def dependencies(name: str, running: Sequence[str]) -> list[str]:
    """Arms among ``running`` whose tuned LR arm ``name`` needs before its own sweep."""
    return [
        BASE_ARM[kind]
        for kind in ARMS[name].kinds
        if kind != SWEPT[name] and BASE_ARM[kind] in running and BASE_ARM[kind] != name
    ]

"""Each arm's learning rates from one ``optim.<kind>.lr`` per optimiser kind: the ``optim``
section (a number or a grid per kind, typed hyper-parameters, a user's optimiser by import
path), what an arm is made of (its kinds, the kind it tunes, the arm a kind's rate is borrowed
from) and the plan entries :func:`~tailmem.lm.rates.rate_entries` makes of them."""

from __future__ import annotations

import sys

import pytest

from tailmem.errors import ConfigError
from tailmem.lm.arms import Arm, matrix_recipe, select_arms
from tailmem.lm.config import OptimSection
from tailmem.lm.rates import base_arm, rate_entries
from tailmem.lm.tuning import Sweep, TuningSection
from tailmem.optim.registry import REGISTRY, AdamHParams, FactoryHParams, MuonHParams

MUON = Arm.of_recipe(matrix_recipe("muon"))
ADAM = Arm.of_recipe("adam:*")
SGD = Arm.of_recipe("sgd:*")
MUON_QK = Arm("muon_qk", "Muon(QK)&Adam(VO+FFN)", "muon:q,k adam:*")
MUON_VO_FFN = Arm("muon_vo_ffn", "Muon(VO+FFN)&Adam(QK)", "muon:v,o,w_in,w_gate,w_out adam:*")

USER = '''
import torch


class Damped(torch.optim.SGD):
    """SGD whose step is lr * damping; damping has no default."""

    def __init__(self, params, lr, damping):
        super().__init__(params, lr=lr * damping)
'''


@pytest.fixture
def user(tmp_path, monkeypatch) -> str:
    """The import path of a user's optimiser class (a module outside tailmem)."""
    (tmp_path / "tailmem_rates_user_optim.py").write_text(USER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tailmem_rates_user_optim", raising=False)
    return "tailmem_rates_user_optim:Damped"


def optim(**lrs) -> OptimSection:
    return OptimSection.from_config({kind: {"lr": lr} for kind, lr in lrs.items()}, "optim")


# --------------------------------------------------------------------------- the optim section


def test_a_rate_is_a_number_or_a_grid_and_unset_fields_keep_the_registrys_defaults():
    section = OptimSection.from_config(
        {"muon": {"lr": [0.01, 0.02], "momentum": 0.9}, "adam": {"lr": 1e-3}, "sgd": {}}, "optim"
    )
    muon, adam, sgd = section["muon"], section["adam"], section["sgd"]
    assert (muon.lr, muon.swept, muon.grid) == ((0.01, 0.02), True, (0.01, 0.02))
    assert (adam.lr, adam.swept, adam.grid) == (1e-3, False, (1e-3,))
    assert (sgd.lr, sgd.swept) == (0.1, False)  # the registry's rate
    assert muon.hparams == MuonHParams(momentum=0.9) and adam.hparams == AdamHParams()
    setting = muon.at(0.02)
    assert setting.lr == 0.02 and setting.record()["momentum"] == 0.9
    assert OptimSection.from_config(section.to_config(), "optim") == section  # config.yaml
    assert section.to_config()["muon"]["lr"] == [0.01, 0.02]
    defaults = OptimSection.defaults("muon", "adam", "sgd")
    assert {k: s.lr for k, s in defaults.items()} == {"muon": 0.02, "adam": 3e-3, "sgd": 0.1}
    assert defaults.with_kinds(["adam", "signgd"])["signgd"].lr == REGISTRY["signgd"].lr


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"muon": {"lr": []}}, "optim.muon.lr: got []; expected a learning rate or a list"),
        ({"muon": {"lr": [0.01, 0.01]}}, "optim.muon.lr: got [0.01, 0.01]; expected each"),
        ({"muon": {"lr": [0.01, -0.02]}}, "optim.muon.lr: got -0.02"),
        ({"muon": {"lr": [0.01, "fast"]}}, "expected a number or a list of numbers"),
        ({"muon": {"lr": True}}, "optim.muon.lr: got True; expected a number"),
        ({"muon": {"lr": 0}}, "optim.muon.lr: got 0"),
        ({"nosuchopt": {"lr": 1e-3}}, "unknown optimiser kind 'nosuchopt'; expected one of muon"),
        ({"muon": 0.02}, "optim.muon: got 0.02; expected a mapping of hyperparameters"),
        ([1, 2], "optim: got [1, 2]; expected a mapping of optimiser kinds"),
        ({"adam": {"beta": 0.9}}, "unknown config field 'optim.adam.beta'"),
        ({"muon": {"momentum": 1.5}}, "optim.muon.momentum: got 1.5"),
        ({"muon": {"scale": "big"}}, "optim.muon.scale: got 'big'; expected one of"),
    ],
)
def test_a_bad_optim_section_is_one_line_naming_the_field(value, message):
    with pytest.raises(ConfigError) as err:
        OptimSection.from_config(value, "optim")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_users_optimiser_is_a_kind_whose_keys_its_signature_checks(user):
    section = OptimSection.from_config(
        {"mine": {"factory": user, "lr": [0.1, 0.2], "damping": 0.5}}, "optim"
    )
    mine = section["mine"]
    assert (
        mine.kind.path == user
        and mine.grid == (0.1, 0.2)
        and section.kinds() == {"mine": mine.kind}
    )
    assert mine.hparams == FactoryHParams((("damping", 0.5),))
    assert mine.at(0.1).record() == {"factory": user, "code": mine.kind.code, "lr": 0.1,
                                     "damping": 0.5}  # fmt: skip
    assert mine.kind.code is not None and len(mine.kind.code) == 16  # the digest of its code
    assert OptimSection.from_config(section.to_config(), "optim") == section
    # A recipe may name it once the section defines it.
    assert section.with_kinds(["mine", "adam"])["adam"].lr == 3e-3


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"lr": 0.1, "damping": 0.5, "dampin": 1},
         "unknown hyperparameter 'optim.mine.dampin' of {user}; expected one of: damping, lr"),
        ({"lr": 0.1}, "optim.mine.damping: {user} requires it; expected a value"),
        ({"damping": 0.5}, "optim.mine.lr: expected a learning rate for your optimiser"),
        ({"lr": [0.1, 0.1], "damping": 0.5}, "optim.mine.lr: got [0.1, 0.1]; expected each"),
    ],
)  # fmt: skip
def test_a_users_optimiser_with_a_wrong_missing_or_unknown_key_is_refused(user, given, message):
    with pytest.raises(ConfigError) as err:
        OptimSection.from_config({"mine": {"factory": user, **given}}, "optim")
    assert message.format(user=user) in str(err.value) and "\n" not in str(err.value)


def test_a_user_kind_may_not_take_a_registered_name(user):
    with pytest.raises(ConfigError, match="'adam' is a built-in optimiser kind"):
        OptimSection.from_config({"adam": {"factory": user, "lr": 0.1, "damping": 1}}, "optim")


def test_a_twin_kind_takes_only_its_rate_and_every_other_setting_of_its_twin():
    section = OptimSection.from_config(
        {"adam": {"lr": 1e-3, "betas": [0.9, 0.99]}, "adam_split": {"lr": [2e-4, 4e-4]}}, "optim"
    )
    split, adam = section["adam_split"], section["adam"]
    assert split.hparams == adam.hparams == AdamHParams(betas=(0.9, 0.99))
    assert split.grid == (2e-4, 4e-4) and adam.grid == (1e-3,)
    assert section.to_config()["adam_split"] == {"lr": [2e-4, 4e-4]}  # its rate alone
    assert OptimSection.from_config(section.to_config(), "optim") == section
    alone = OptimSection.from_config({"adam_split": {"lr": 1e-3}}, "optim")
    assert alone["adam_split"].hparams == AdamHParams()  # Adam's defaults without its section
    assert alone.with_kinds(["adam"])["adam_split"].hparams == AdamHParams()
    with pytest.raises(ConfigError) as err:
        OptimSection.from_config({"adam_split": {"lr": 1e-3, "eps": 1e-6}}, "optim")
    assert str(err.value) == (
        "optim.adam_split.eps: adam_split is adam at a learning rate of its own and takes only "
        "lr; expected optim.adam.eps (it sets both)"
    )


# --------------------------------------------------------------------------- arms


def test_an_arm_tunes_the_kind_that_trains_most_of_its_hidden_matrices():
    assert (MUON.tuned, ADAM.tuned, SGD.tuned) == ("muon", "adam", "sgd")
    assert MUON_VO_FFN.tuned == "muon"  # five of seven hidden matrices
    assert MUON_QK.tuned == "adam"  # Q and K only: Adam trains the other five
    # A tie goes to the kind named first in the recipe.
    assert Arm.of_recipe("adamw:q,k,v sgd:o,w_in,w_out adam:*").tuned == "adamw"
    assert Arm.of_recipe("sgd:o,w_in,w_out adamw:q,k,v adam:*").tuned == "sgd"
    # Kinds in registry order, whatever the recipe's order.
    assert Arm.of_recipe("adam:* sgd:v,o muon:q,k").kinds == ("muon", "adam", "sgd")
    assert MUON_QK.routes["muon"] == ["q", "k"]


def test_trains_every_hidden_is_all_seven_block_matrices():
    assert MUON.trains_every_hidden("muon") and not MUON.trains_every_hidden("adam")
    assert ADAM.trains_every_hidden("adam") and not ADAM.trains_every_hidden("muon")
    assert not MUON_VO_FFN.trains_every_hidden("muon")  # Q and K are Adam's
    assert not MUON_QK.trains_every_hidden("adam")
    assert not MUON.trains_every_hidden("sgd")  # a kind the arm does not use


def test_an_arm_given_as_a_recipe_is_named_after_its_kind_or_its_clauses():
    assert Arm.of_recipe("adam:*") == Arm("adam", "Adam", "adam:*")
    assert Arm.of_recipe(matrix_recipe("sgd")) == Arm("sgd", "SGD+M", matrix_recipe("sgd"))
    assert matrix_recipe("sgd") == "sgd:q,k,v,o,w_in,w_gate,w_out adam:*"
    mine = Arm.of_recipe("mine:q,k,v,o,w_in,w_gate,w_out adam:*")  # a user's kind: its name
    assert (mine.name, mine.label, mine.kinds) == ("mine", "mine", ("adam", "mine"))
    other = Arm.of_recipe("  sgd:v,o   adam:* ")  # whitespace normalised
    assert other == Arm("sgd-v_o+adam-all", "sgd:v,o adam:*", "sgd:v,o adam:*")
    assert "/" not in Arm.of_recipe("sgd:v,o adamw:q,k adam:*").name  # a folder name


def test_select_arms_takes_names_and_recipes_and_refuses_unknown_empty_and_repeated():
    known = {"muon": MUON, "adam": ADAM}
    assert select_arms(["adam", "sgd:v,o adam:*"], known) == [ADAM, Arm.of_recipe("sgd:v,o adam:*")]
    with pytest.raises(ConfigError, match="arms: unknown arm 'bogus'; expected names from muon"):
        select_arms(["bogus"], known)
    with pytest.raises(ConfigError, match="arms: got an empty list"):
        select_arms([], known)
    with pytest.raises(ConfigError, match="arms: 'adam' is listed twice"):
        select_arms(["adam", "adam:*"], known)  # the recipe is the adam arm again


# --------------------------------------------------------------------------- plan entries


TUNING = TuningSection()
SCORES = {"val_loss": "the validation loss"}


def entries_of(ffns, arms, section, steps=40):
    return rate_entries(ffns, arms, section, TUNING, 0, steps, SCORES)


def test_an_arm_sweeps_its_tuned_kind_and_borrows_the_others_from_their_base_arms():
    section = optim(muon=[0.01, 0.02], adam=[1e-3, 3e-3])
    arms = [MUON, ADAM, MUON_QK, MUON_VO_FFN]
    assert base_arm("adam", arms) is ADAM and base_arm("muon", arms) is MUON
    assert base_arm("sgd", arms) is None
    entries = {(e.ffn, e.arm.name): e for e in entries_of(["plain", "gated"], arms, section)}
    assert list(entries) == [(f, a.name) for f in ("plain", "gated") for a in arms]
    muon, adam, qk = entries["plain", "muon"], entries["plain", "adam"], entries["gated", "muon_qk"]
    assert muon.sweep == Sweep((0.01, 0.02), (1000, 1001), 40, "val_loss", 2)
    assert (muon.rates.swept, muon.rates.lenders) == (("muon",), ("adam",))
    assert muon.rates.borrowed == {"adam": ("adam", "adam")} and not muon.rates.fixed
    assert adam.sweep is not None and adam.sweep.grid == (1e-3, 3e-3)
    assert (adam.rates.swept, adam.rates.lenders) == (("adam",), ())
    assert qk.sweep is not None and qk.sweep.grid == (1e-3, 3e-3)  # Adam tuned, Muon borrowed
    assert (qk.rates.swept, qk.rates.lenders) == (("adam",), ("muon",))
    assert entries["plain", "muon_vo_ffn"].rates.lenders == ("adam",)
    # Every arm tunes one rate by the same rule: the same budget for each.
    assert {e.sweep.budget for e in entries.values() if e.sweep} == {(2 + 2) * 2}
    assert muon.rates.at(0.01, {"adam": {"adam": 3e-3}}) == {"adam": 3e-3, "muon": 0.01}
    gated_muon = {"muon": {"muon": 0.02, "adam": 1e-3}}  # the gated Muon arm's choice
    assert qk.rates.at(1e-3, gated_muon) == {"muon": 0.02, "adam": 1e-3}


def test_the_sweep_takes_the_tuning_sections_seeds_length_score_and_widening():
    tuning = TuningSection(seeds=3, score="fta", max_extend=1, steps=7)
    (muon,) = rate_entries(
        ["plain"], [MUON], optim(muon=[0.01, 0.02], adam=1e-3), tuning, 5, 40,
        {"val_loss": "", "fta": ""},
    )  # fmt: skip
    assert muon.sweep == Sweep((0.01, 0.02), (1005, 1006, 1007), 7, "fta", 1)
    assert muon.sweep.budget == (2 + 1) * 3


def test_a_kind_given_one_number_is_fixed_and_borrowed_from_no_arm():
    section = optim(muon=[0.01, 0.02], adam=2e-3, sgd=0.3)
    (muon, qk, sgd) = entries_of(["plain"], [MUON, MUON_QK, SGD], section)
    assert muon.sweep is not None and muon.sweep.grid == (0.01, 0.02)
    assert muon.rates.lenders == () and muon.rates.fixed == {"adam": 2e-3}  # no Adam arm needed
    assert muon.rates.at(0.02, {}) == {"adam": 2e-3, "muon": 0.02}
    assert qk.sweep is None and qk.rates.lenders == ("muon",)  # Adam set: nothing to tune
    assert qk.rates.at(1.0, {"muon": {"muon": 0.01, "adam": 2e-3}}) == {
        "muon": 0.01,
        "adam": 2e-3,
    }
    assert (sgd.sweep, sgd.rates.lenders, sgd.rates.at(1.0, {})) == (None, (), {"sgd": 0.3})
    # A one-point list is a set rate too.
    (one,) = entries_of(["plain"], [SGD], optim(sgd=[0.3]))
    assert one.sweep is None and one.rates.fixed == {"sgd": 0.3}


def test_a_swept_kind_with_no_base_arm_run_is_refused():
    with pytest.raises(ConfigError) as err:
        entries_of(["plain"], [MUON], optim(muon=[0.01, 0.02], adam=[1e-3, 3e-3]))
    assert str(err.value) == (
        "arm muon borrows optim.adam.lr from the arm that trains every hidden matrix with adam, "
        "and none is run; expected that arm in arms, or optim.adam.lr set to one number"
    )
    entries_of(["plain"], [MUON], optim(muon=[0.01, 0.02], adam=1e-3))  # a number: fine


def test_arms_that_borrow_from_each_other_are_refused():
    hidden = "q,k,v,o,w_in,w_gate,w_out"
    a = Arm("a", "A", f"adam:{hidden} sgd:*")  # tunes Adam, borrows SGD from b
    b = Arm("b", "B", f"sgd:{hidden} adam:*")  # tunes SGD, borrows Adam from a
    section = optim(adam=[1e-3, 3e-3], sgd=[0.1, 0.3])
    with pytest.raises(ConfigError, match=r"arms borrow learning rates in a cycle \(a -> b -> a\)"):
        entries_of(["plain"], [a, b], section)
    # Either rate fixed breaks the cycle: b then waits on a, which waits on nothing.
    (ea, eb) = entries_of(["plain"], [a, b], optim(adam=[1e-3, 3e-3], sgd=0.1))
    assert (ea.rates.lenders, eb.rates.lenders) == ((), ("a",))

"""The optimiser registry: every kind's defaults (the papers' settings), typed hyper-parameters
checked by range and choice, what a setting records and builds, and a user's optimiser entering
by import path with its keywords checked against its signature."""

from __future__ import annotations

import math
import sys

import pytest
import torch

from tailmem.errors import ConfigError
from tailmem.models.gpt import GPT, GPTConfig
from tailmem.optim.muon import Muon
from tailmem.optim.registry import (
    REGISTRY,
    AdamHParams,
    FactoryHParams,
    MuonHParams,
    NorMuonHParams,
    OptimizerSetting,
    SGDHParams,
    get_kind,
    kind_order,
    user_kind,
)
from tailmem.optim.routing import route
from tailmem.optim.user_code import code_digest

USER = '''
import torch


class Damped(torch.optim.SGD):
    """SGD whose step is lr * damping; damping has no default."""

    def __init__(self, params, lr, damping):
        super().__init__(params, lr=lr * damping)


class NoLr(torch.optim.SGD):
    def __init__(self, params, rate=0.1):
        super().__init__(params, lr=rate)


def anything(params, **kwargs):
    return torch.optim.SGD(params, lr=kwargs["lr"])
'''


@pytest.fixture
def user(tmp_path, monkeypatch) -> str:
    """The name of an importable module holding a user's optimisers (outside tailmem)."""
    (tmp_path / "tailmem_user_optim.py").write_text(USER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tailmem_user_optim", raising=False)
    return "tailmem_user_optim"


# --------------------------------------------------------------------------- the kinds


def test_the_defaults_are_the_papers_settings():
    # the order tables list them in; adam_split (Adam at a rate of its own) beside Adam
    assert list(REGISTRY)[:4] == ["muon", "adam", "adam_split", "sgd"]
    assert {"adamw", "signgd", "normuon"} <= set(REGISTRY)
    muon, adam, sgd = REGISTRY["muon"], REGISTRY["adam"], REGISTRY["sgd"]
    assert (muon.label, adam.label, sgd.label) == ("Muon", "Adam", "SGD+M")
    assert (muon.lr, adam.lr, sgd.lr) == (0.02, 3e-3, 0.1)
    assert muon.hparams() == MuonHParams(momentum=0.95, nesterov=False, method="ns5",
                                         scale="original", weight_decay=0.0)  # fmt: skip
    assert adam.hparams() == AdamHParams(betas=(0.8, 0.95), eps=1e-8, weight_decay=0.0)
    assert sgd.hparams() == SGDHParams(momentum=0.9, nesterov=False, weight_decay=0.0)
    only = {k: REGISTRY[k].matrices_only for k in ("muon", "normuon", "adam", "sgd", "signgd")}
    assert only == {"muon": True, "normuon": True, "adam": False, "sgd": False, "signgd": False}
    assert all(kind.path is None and kind.lr > 0 for kind in REGISTRY.values())
    # adam_split is Adam's twin: the same update, hyper-parameters and default rate.
    split = REGISTRY["adam_split"]
    assert (split.twin, split.label, split.factory, split.hparams) == (
        "adam", "Adam (own rate)", adam.factory, adam.hparams,
    )  # fmt: skip
    assert (split.lr, split.family, split.matrices_only) == (adam.lr, adam.family, False)
    assert [k.name for k in REGISTRY.values() if k.twin is not None] == ["adam_split"]


def test_an_unknown_kind_is_one_line_listing_the_known_ones_and_kinds_sort_by_registry():
    with pytest.raises(ConfigError) as err:
        get_kind("nosuchopt")
    message = str(err.value)
    assert message.startswith(
        "unknown optimiser kind 'nosuchopt'; expected one of muon, adam, adam_split, sgd"
    )
    assert message.endswith("(or your own: optim.nosuchopt.factory=package.module:Class)")
    assert all(name in message for name in REGISTRY) and "\n" not in message
    mine = user_kind("mine", "torch.optim:SGD", lr=0.1)
    assert get_kind("mine", {"mine": mine}) is mine and get_kind("adam") is REGISTRY["adam"]
    assert kind_order(["zed", "adam", "mine", "muon", "adam"]) == ["muon", "adam", "mine", "zed"]


@pytest.mark.parametrize(
    ("hparams", "message"),
    [
        (MuonHParams(momentum=1.0), "momentum: got 1.0"),
        (MuonHParams(method="ns7"), "method: got 'ns7'; expected one of"),
        (MuonHParams(scale="big"), "scale: got 'big'; expected one of original, match_rms_adamw"),
        (AdamHParams(betas=(0.9, -0.1)), "betas[1]: got -0.1"),
        (AdamHParams(eps=0.0), "eps: got 0.0"),
        (SGDHParams(weight_decay=-1.0), "weight_decay: got -1.0"),
    ],
)
def test_typed_hyperparameters_are_checked_by_range_and_choice(hparams, message):
    with pytest.raises(ConfigError) as err:
        hparams.validate()
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_kind_parses_its_section_and_names_the_place_of_a_bad_field():
    adam = REGISTRY["adam"]
    assert adam.parse({"betas": [0.9, 0.99]}, "optim.adam.") == AdamHParams(betas=(0.9, 0.99))
    with pytest.raises(ConfigError, match=r"unknown config field 'optim\.adam\.beta'"):
        adam.parse({"beta": 0.9}, "optim.adam.")
    with pytest.raises(ConfigError, match=r"^optim\.adam\.eps: got 0"):
        adam.parse({"eps": 0}, "optim.adam.")
    with pytest.raises(ConfigError, match=r"^optim\.muon\.method: got 'ns7'"):
        REGISTRY["muon"].parse({"method": "ns7"}, "optim.muon.")


# --------------------------------------------------------------------------- settings


def test_a_setting_records_its_rate_and_hyperparameters_and_builds_its_optimiser():
    param = torch.nn.Parameter(torch.zeros(4, 3))
    adam = REGISTRY["adam"].setting(1e-3)
    assert adam.record() == {"lr": 1e-3, "betas": [0.8, 0.95], "eps": 1e-8, "weight_decay": 0.0}
    built = adam.build([{"params": [param]}])
    assert isinstance(built, torch.optim.Adam)
    group = built.param_groups[0]
    assert (group["lr"], group["betas"], group["eps"]) == (1e-3, (0.8, 0.95), 1e-8)
    muon = REGISTRY["muon"].setting()
    assert muon.record() == {"lr": 0.02, "momentum": 0.95, "nesterov": False, "method": "ns5",
                             "scale": "original", "weight_decay": 0.0}  # fmt: skip
    built = muon.build([{"params": [param], "fan_out_dim": 0}])
    assert isinstance(built, Muon) and built.param_groups[0]["momentum"] == 0.95
    normuon = OptimizerSetting(REGISTRY["normuon"], 0.01, NorMuonHParams(beta2=0.9))
    group = normuon.build([{"params": [param], "fan_out_dim": 0}]).param_groups[0]
    assert group["normuon"] and group["normuon_beta2"] == 0.9


def test_normuon_records_its_own_fields_not_the_constructor_switches_they_become():
    """``spec.json`` and the resolved ``optim`` section hold what a config may set."""
    normuon = OptimizerSetting(REGISTRY["normuon"], 0.01, NorMuonHParams(beta2=0.9))
    assert normuon.record() == {"lr": 0.01, "momentum": 0.95, "nesterov": False, "method": "ns5",
                                "scale": "original", "weight_decay": 0.0, "beta2": 0.9}  # fmt: skip


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_kinds_recorded_hyperparameters_parse_back_to_the_same(name):
    kind = REGISTRY[name]
    recorded = kind.setting().record()
    assert recorded.pop("lr") == kind.lr
    assert kind.parse(recorded, f"optim.{name}.") == kind.hparams()


def test_a_setting_refuses_a_rate_not_above_zero_and_a_value_its_optimiser_rejects():
    with pytest.raises(ConfigError, match=r"adam\.lr: got 0\.0"):
        OptimizerSetting(REGISTRY["adam"], 0.0, AdamHParams())
    with pytest.raises(ConfigError, match=r"sgd\.lr: got -1"):
        REGISTRY["sgd"].setting(-1.0)
    unchecked = OptimizerSetting(REGISTRY["adam"], 1e-3, AdamHParams(betas=(0.9, 1.5)))
    with pytest.raises(ConfigError) as err:  # built without validate(): torch says no
        unchecked.build([torch.nn.Parameter(torch.zeros(2))])
    assert str(err.value).startswith("adam rejected its hyperparameters {'lr': 0.001, 'betas'")
    assert "\n" not in str(err.value)


# --------------------------------------------------------------------------- a user's optimiser


def test_a_user_optimiser_is_checked_against_its_signature(user):
    damped = user_kind("damped", f"{user}:Damped", lr=1.0)
    assert damped.options() == {"lr", "damping"} and damped.path == f"{user}:Damped"
    hparams = damped.parse({"damping": 0.5}, "optim.damped.")
    assert hparams == FactoryHParams((("damping", 0.5),))
    with pytest.raises(ConfigError) as err:
        damped.parse({"damping": 0.5, "dampin": 1}, "optim.damped.")
    assert str(err.value) == (
        f"unknown hyperparameter 'optim.damped.dampin' of {user}:Damped; expected one of: "
        "damping, lr"
    )
    with pytest.raises(ConfigError) as err:
        damped.parse({}, "optim.damped.")
    assert str(err.value) == f"optim.damped.damping: {user}:Damped requires it; expected a value"
    with pytest.raises(ConfigError, match=r"optim\.damped\.damping: got nan; expected finite"):
        damped.parse({"damping": math.nan}, "optim.damped.")
    with pytest.raises(ConfigError, match=r"optim\.nolr\.factory .*:NoLr' takes no lr"):
        user_kind("nolr", f"{user}:NoLr", lr=1.0).parse({}, "optim.nolr.")
    anything = user_kind("any", f"{user}:anything", lr=1.0)  # **kwargs: any name
    assert anything.options() is None
    assert anything.parse({"beta": [1, 2]}, "optim.any.").record() == {"beta": [1, 2]}


def test_a_user_optimiser_records_its_factory_and_trains_its_roles(user):
    damped = user_kind("damped", f"{user}:Damped", lr=1.0)
    setting = damped.setting(0.1, damped.parse({"damping": 0.5}, "optim.damped."))
    code = code_digest(f"{user}:Damped")  # the user's code enters the record (a resume checks it)
    assert setting.record() == {"factory": f"{user}:Damped", "code": code, "lr": 0.1,
                                "damping": 0.5}  # fmt: skip
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=32, n_layer=1, n_head=2, d_model=8, d_ff=16, max_seq_len=8))
    optimizer = route(model, "damped:v,o adam:*", {"damped": setting})
    mine = [g for g in optimizer.param_groups if g["kind"] == "damped"]
    assert sorted(g["role"] for g in mine) == ["o", "v"]
    assert all(g["lr"] == pytest.approx(0.05) for g in mine)  # lr × damping, as its class says
    assert {g["lr"] for g in optimizer.param_groups if g["kind"] == "adam"} == {3e-3}


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("torch.optim.SGD", "expected an import path package.module:Class"),
        ("tailmem_no_such_module:Opt", "cannot import 'tailmem_no_such_module'"),
        ("torch.optim:Nope", "module 'torch.optim' has no 'Nope'"),
        ("math:pi", "expected a class or function, got 3.14"),
    ],
)
def test_a_bad_factory_path_is_one_line(path, message):
    with pytest.raises(ConfigError) as err:
        user_kind("mine", path, lr=1.0)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_user_kind_cannot_reuse_a_registered_name():
    with pytest.raises(ConfigError, match="'adam' is a built-in optimiser kind"):
        user_kind("adam", "torch.optim:SGD", lr=0.1)


def test_a_library_kind_refuses_in_one_line_when_a_module_it_needs_is_missing():
    from tailmem.optim.registry import LibraryFactory

    factory = LibraryFactory("torch.optim", "SGD", "torch", ("tailmem_no_such_module",))
    with pytest.raises(ConfigError) as err:
        factory([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
    assert "needs tailmem_no_such_module" in str(err.value) and "\n" not in str(err.value)

"""The options that let knowledge-QA express an independent implementation's experiment: names
as whole tokens, a birth-date pool, exact epochs, the rest's rate fixed and the norms' ε — each
changing what it says and nothing else (data sets, run digests and stored rates at the defaults
keep their identity)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from tailmem.config import load_config
from tailmem.data import bios
from tailmem.data.bios import BiosConfig, build_dataset
from tailmem.data.stream import QATrainStream
from tailmem.errors import ConfigError
from tailmem.experiments import knowledge_qa as kqa
from tailmem.experiments.knowledge_qa.config import check_epochs, epoch_steps
from tailmem.experiments.rule_or_rate.arms import factorial_arms, factorial_entries
from tailmem.lm.arms import Arm, matrix_recipe
from tailmem.lm.config import ModelSection, OptimSection
from tailmem.lm.rates import rate_entries
from tailmem.lm.tuning import TuningSection
from tailmem.typecheck import replaced

SMALL = dict(m=4, n_first_names=40, n_surnames=60, n_cities=30, n_universities=40)
SMALL |= dict(n_majors=20, n_employers=30, vocab_size=512)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("reference-options")


# --------------------------------------------------------------------------- data


def test_later_data_fields_at_their_defaults_leave_the_identity_unchanged():
    cfg = BiosConfig(**SMALL)
    before = dataclasses.asdict(cfg)
    for name in bios.LATER_FIELDS:
        del before[name]
    assert cfg.record() == before
    assert bios.fingerprint(cfg) != bios.fingerprint(dataclasses.replace(cfg, name_tokens="single"))
    assert "name_tokens" in dataclasses.replace(cfg, name_tokens="single").record()


def test_single_name_tokens_make_every_name_word_one_token(cache):
    # whole answers too: a surname is also a word of some universities' names
    base = BiosConfig(**SMALL, middle_name_prob=0.0, answer_tokens="single")
    bpe = build_dataset(base, cache)
    word = build_dataset(dataclasses.replace(base, name_tokens="single"), cache)
    tokenizer, pools = word.tokenizer, word.people.pools
    for text in [" " + w for w in pools.first_names + pools.surnames]:
        assert len(tokenizer.encode(text, add_special_tokens=False).ids) == 1
    items = np.unique(word.train_items)
    # every question is two name tokens long where BPE split names into more pieces
    shorter = bpe.items.lengths[items] - word.items.lengths[items]
    assert shorter.min() >= 0 and shorter.mean() > 1
    for item in items[::5]:  # the same one-token answer after a shorter prompt
        answers = [ds.item(item)[ds.item_loss_start[item] :] for ds in (word, bpe)]
        assert [len(a) for a in answers] == [2, 2]  # the answer and EOS
        first = [int(a[0]) for a in answers]
        assert word.tokenizer.id_to_token(first[0]) == bpe.tokenizer.id_to_token(first[1])


def test_a_birth_date_pool_limits_the_distinct_dates(cache):
    wide = build_dataset(BiosConfig(**{**SMALL, "m": 6}), cache)
    pooled = build_dataset(BiosConfig(**{**SMALL, "m": 6}, n_birth_dates=5), cache)
    dates = {pooled.person(p)["birth_date"] for p in range(pooled.n_people)}
    assert len(dates) <= 5
    assert len({wide.person(p)["birth_date"] for p in range(wide.n_people)}) > 5
    # only the dates move: names and the other attributes are the people they were
    for p in range(0, pooled.n_people, 7):
        a, b = wide.person(p), pooled.person(p)
        assert {k: v for k, v in a.items() if k != "birth_date"} == {
            k: v for k, v in b.items() if k != "birth_date"
        }


def test_the_uniform_question_form_asks_every_attribute_with_the_name_last(cache):
    base = BiosConfig(**SMALL, answer_tokens="single", name_tokens="single")
    uniform = build_dataset(dataclasses.replace(base, question_form="uniform"), cache)
    varied = build_dataset(base, cache)
    for item in np.unique(uniform.train_items)[::9]:
        prompt = bios.item_text(dict(uniform.arrays), uniform.people, int(item))
        attr = bios.ATTRIBUTES[int(uniform.arrays["item_attr"][item])].replace("_", " ")
        name = uniform.people.name(int(uniform.arrays["item_person"][item]))
        assert prompt.startswith(f"What is the {attr} of {name}? Answer: ")
    # the same people, facts and answers; only the questions' words differ
    assert np.array_equal(uniform.arrays["attr_values"], varied.arrays["attr_values"])
    texts = [bios.item_text(dict(ds.arrays), ds.people, 0) for ds in (uniform, varied)]
    assert texts[0].split("Answer:")[1] == texts[1].split("Answer:")[1]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"n_birth_dates": 1}, "n_birth_dates: got 1; expected an integer"),
        ({"n_birth_dates": 10**6}, "n_birth_dates: got 1000000; expected an integer"),
        ({"name_tokens": "word"}, "name_tokens: got 'word'; expected 'bpe' or 'single'"),
        ({"question_form": "short"}, "question_form: got 'short'; expected one of varied"),
    ],
)
def test_bad_reference_data_options_are_refused_in_one_line(change, message):
    with pytest.raises(ConfigError, match=message):
        BiosConfig(**SMALL, **change).validate()


# --------------------------------------------------------------------------- exact epochs


@pytest.mark.parametrize("batch_size", [3, 4, 7])
def test_epoch_aligned_batches_present_every_item_exactly_once_an_epoch(cache, batch_size):
    dataset = build_dataset(BiosConfig(**SMALL), cache)
    stream = QATrainStream(dataset, batch_size, 64, seed=2, epoch_aligned=True)
    plain = QATrainStream(dataset, batch_size, 64, seed=2)
    assert plain.rows_per_epoch == stream.packed_rows  # the default stream is unchanged
    per_epoch = stream.steps_per_epoch
    assert per_epoch == int(per_epoch) and stream.rows_per_epoch - stream.packed_rows < batch_size
    expected = np.bincount(dataset.train_items, minlength=len(dataset.items.lengths))
    for epoch in range(2):
        seen = np.zeros_like(expected)
        for step in range(epoch * int(per_epoch), (epoch + 1) * int(per_epoch)):
            packed = stream.packed(step)
            answers = packed.loss_mask.sum()
            assert answers > 0  # no batch of empty rows
            for row_items in _items_of(stream, step):
                np.add.at(seen, row_items, 1)
        assert np.array_equal(seen, expected)


def _items_of(stream: QATrainStream, step: int) -> list[np.ndarray]:
    """The items of each row of batch ``step`` (from the epoch layout)."""
    out = []
    for row in range(step * stream.batch_size, (step + 1) * stream.batch_size):
        epoch, r = divmod(row, stream.rows_per_epoch)
        order, offsets = stream.layout(epoch)
        out.append(order[offsets[r] : offsets[r + 1]])
    return out


def test_epochs_check_names_the_steps_and_at_epochs_sets_them():
    cfg = load_config(kqa.Config, "knowledge-qa", "smoke")
    cfg = replaced(cfg, {"epochs": 2})
    per_epoch = epoch_steps(cfg)
    with pytest.raises(ConfigError, match=rf"train.steps: got 40; expected {2 * per_epoch} for"):
        check_epochs(cfg)
    exact = kqa.at_epochs(cfg)
    check_epochs(exact)
    assert exact.train.steps == 2 * per_epoch
    ratio = exact.train.steps / cfg.train.steps
    assert exact.train.eval_every == max(1, round(cfg.train.eval_every * ratio))
    assert kqa.at_epochs(replaced(cfg, {"epochs": None})) == replaced(cfg, {"epochs": None})


def test_later_config_fields_at_their_defaults_keep_a_tuning_problems_record():
    cfg = load_config(kqa.Config, "knowledge-qa", "cpu")
    record = cfg.tuning_record()
    assert "epochs" not in record and "rest_lr" not in record["tuning"]
    assert "norm_eps" not in record["model"] and "name_tokens" not in record["data"]
    changed = replaced(cfg, {"epochs": 6, "tuning.rest_lr": 1e-3, "model.norm_eps": 1e-5})
    record = changed.tuning_record()
    assert record["epochs"] == 6 and record["tuning"]["rest_lr"] == 1e-3
    assert record["model"]["norm_eps"] == 1e-5


# --------------------------------------------------------------------------- the rest's rate


def _muon_adam_arms() -> list[Arm]:
    recipes = [matrix_recipe("muon"), matrix_recipe("adam_split"), "adam:*", "muon:q,k adam:*"]
    return [Arm.of_recipe(r) for r in recipes]


@pytest.mark.parametrize("rest_lr", [None, 1e-3])
def test_rest_lr_fixes_the_rest_of_every_arm_and_leaves_hidden_kinds_borrowed(rest_lr):
    optim = OptimSection.defaults("muon", "adam", "adam_split").with_rates(
        {"muon": [0.01, 0.02, 0.04], "adam": [1e-3, 2e-3, 4e-3], "adam_split": [1e-4, 2e-4, 4e-4]}
    )
    tuning = TuningSection(rest_lr=rest_lr)
    entries = {e.arm.name: e for e in rate_entries(["plain"], _muon_adam_arms(), optim, tuning,
                                                   0, 100, {"answer_loss": ""})}  # fmt: skip
    for arm in ("muon", "adam_split"):
        rates = entries[arm].rates
        if rest_lr is None:
            assert rates.borrowed == {"adam": ("adam", "adam")} and "adam" not in rates.fixed
        else:
            assert rates.fixed == {"adam": rest_lr} and not rates.borrowed
    assert entries["adam"].rates.swept == ("adam",)  # the all-Adam arm tunes its own rate
    qk = entries["muon-q_k+adam-all"].rates  # Muon trains hidden matrices there: still borrowed
    assert qk.borrowed == {"muon": ("muon", "muon")}


def test_rest_lr_fixes_the_rest_of_the_factorials_own_arms():
    arms = factorial_arms({"muon": ("muon", "Muon"), "adam": ("adam_split", "Adam")})
    grids = {a.name: [1e-3, 2e-3, 4e-3] for a in arms}
    entries = factorial_entries("plain", arms, grids, TuningSection(rest_lr=5e-4), 0, 100,
                                {"answer_loss": ""})  # fmt: skip
    for entry in entries:
        own = not entry.arm.name.endswith("shared")
        assert entry.rates.fixed == ({"adam": 5e-4} if own else {})
        assert not entry.rates.borrowed


@pytest.mark.parametrize("bad", [0.0, -1e-3, float("inf"), float("nan")])
def test_a_rest_lr_that_is_not_a_positive_rate_is_refused(bad):
    with pytest.raises(ConfigError, match=r"tuning\.rest_lr: got"):
        TuningSection(rest_lr=bad).validate()


# --------------------------------------------------------------------------- the norms' epsilon


def test_norm_eps_reaches_every_norm():
    import torch

    from tailmem.models.gpt import GPT

    cfg = ModelSection(size="tiny", norm="layer", norm_eps=1e-5).build(64, "plain", 16)
    assert cfg.norm_eps == 1e-5
    norms = [m for m in GPT(cfg).modules() if isinstance(m, torch.nn.LayerNorm)]
    assert norms and all(m.eps == 1e-5 for m in norms)
    assert ModelSection(size="tiny").build(64, "plain", 16).norm_eps == 1e-6


# --------------------------------------------------------------------------- the shipped configs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "reference"


@pytest.mark.parametrize(("name", "walk"), [("d128_plain", 0), ("d256_gated", 1)])
def test_the_reference_configs_are_the_walks_starting_points_at_the_references_rates(name, walk):
    from tailmem.experiments import rule_or_rate as ror

    cfg = load_config(kqa.Config, "knowledge-qa", None, config=EXAMPLES / f"{name}.yaml")
    check_epochs(cfg)  # exactly 6 epochs
    study = load_config(ror.Config, "rule-or-rate", "cpu", ["rates=sweep"])
    start = study.configs()[study.walks[walk].labels()[0]][1]
    assert (cfg.data, cfg.model, cfg.loss_on, cfg.packing, cfg.epochs, cfg.ffn) == (
        start.data,
        start.model,
        start.loss_on,
        start.packing,
        start.epochs,
        start.ffn,
    )
    same = ("batch_size", "seq_len", "schedule", "decay_frac", "grad_clip", "steps")
    assert {k: getattr(cfg.train, k) for k in same} == {k: getattr(start.train, k) for k in same}
    for kind in ("adam", "muon"):  # the optimisers' settings other than their rates
        assert dataclasses.replace(cfg.optim[kind], lr=0.0) == dataclasses.replace(
            start.optim[kind], lr=0.0
        )

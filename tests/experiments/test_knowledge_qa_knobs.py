"""knowledge-qa's set-up knobs (issue 17's sensitivity study): a tied embedding/head under the
arms' optimisers, document packing against each item on its own, one token per answer, and the
knobs through the CLI into the run's config."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch
import yaml

from tailmem.cli import main
from tailmem.data import bios
from tailmem.data.bios import BiosConfig, build_dataset
from tailmem.data.stream import QATrainStream
from tailmem.experiments.knowledge_qa.arms import ARMS
from tailmem.experiments.knowledge_qa.fta import (
    FTAEvaluator,
    QABatches,
    answer_loss_sum,
    split_inputs,
)
from tailmem.lm.config import ModelSection, OptimSection
from tailmem.models.gpt import GPT
from tailmem.optim.routing import route

SMALL = dict(m=4, n_first_names=40, n_surnames=60, n_cities=30, n_universities=40)
SMALL |= dict(n_majors=20, n_employers=30, vocab_size=512)
KEYS = ("person", "attr", "template")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("kqa-knobs-data")


@pytest.fixture(scope="module")
def dataset(cache):
    return build_dataset(BiosConfig(**SMALL), cache)


def tiny_gpt(vocab_size: int, **section) -> GPT:
    torch.manual_seed(0)
    return GPT(ModelSection(size="tiny", **section).build(vocab_size, "plain", 64))


# --------------------------------------------------------------------------- tied weights


@pytest.mark.parametrize("arm", ["muon", "adam"])
def test_a_tied_embedding_and_head_is_one_parameter_updated_once(arm, dataset):
    model = tiny_gpt(dataset.vocab_size, tie_weights=True)
    tied = model.embed.weight
    assert model.head.weight is tied
    optim = OptimSection.defaults(*ARMS[arm].kinds)
    settings = {kind: optim[kind].at(optim[kind].lr) for kind in ARMS[arm].kinds}
    optimizer = route(model, ARMS[arm].recipe, settings)  # as every run of the arm is built
    holders = [g for g in optimizer.param_groups for p in g["params"] if p is tied]
    assert [(g["kind"], g["role"]) for g in holders] == [("adam", "embed")]
    x, y = QABatches(QATrainStream(dataset, 4, 64, seed=0)).batch(0)
    untied = tiny_gpt(dataset.vocab_size)
    untied.load_state_dict(model.state_dict())  # both keys hold the tied matrix
    answer_loss_sum(untied, x, y).backward()
    answer_loss_sum(model, x, y).backward()
    # The tied matrix's gradient is the embedding's plus the head's.
    expected = untied.embed.weight.grad + untied.head.weight.grad
    torch.testing.assert_close(tied.grad, expected, atol=1e-7, rtol=1e-5)
    grad, before = tied.grad.clone(), tied.detach().clone()
    optimizer.step()
    # Adam's first step moves each entry by lr * g / (|g| + eps): once (twice would be 2 lr).
    adam = optim["adam"]
    step = -adam.lr * grad / (grad.abs() + adam.hparams.eps)
    torch.testing.assert_close(tied.detach() - before, step, atol=1e-9, rtol=1e-4)
    assert (tied.detach() - before).abs().max() == pytest.approx(adam.lr, rel=1e-4)


# --------------------------------------------------------------------------- document packing


class Wrapper(torch.nn.Module):
    """A module around the GPT that passes its arguments on (as DDP does)."""

    def __init__(self, gpt: GPT) -> None:
        super().__init__()
        self.gpt = gpt

    def forward(self, idx: torch.Tensor, **documents: torch.Tensor) -> tuple:
        return self.gpt(idx, **documents)


def spans(doc_ids: torch.Tensor) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of equal ids in one row."""
    edges = [0, *(torch.nonzero(doc_ids[1:] != doc_ids[:-1])[:, 0] + 1).tolist(), len(doc_ids)]
    return list(itertools.pairwise(edges))


def test_document_packing_trains_each_item_as_evaluation_asks_it_alone(dataset):
    stream = QATrainStream(dataset, 4, 64, seed=1, packing="document")
    x, y = QABatches(stream).batch(0)
    assert x.shape == (4, 64, 3)
    tokens, documents = split_inputs(x)
    cross_x, cross_y = QABatches(QATrainStream(dataset, 4, 64, seed=1)).batch(0)
    assert torch.equal(tokens, cross_x) and torch.equal(y, cross_y)  # same rows and targets
    order, offsets = stream.layout(0)
    model = tiny_gpt(dataset.vocab_size)
    packed, cross = model(tokens, **documents)[0], model(tokens)[0]
    alone_loss = torch.zeros(())
    for row in range(4):
        items = order[offsets[row] : offsets[row + 1]]
        runs = spans(documents["doc_ids"][row])[: len(items)]  # then single padding tokens
        for item, (lo, hi) in zip(items, runs, strict=True):
            # every item is one document, at positions 0.. (the row's last EOS is a target)
            assert hi - lo in (len(dataset.item(item)), len(dataset.item(item)) - 1)
            assert torch.equal(documents["positions"][row, lo:hi], torch.arange(hi - lo))
            alone = model(tokens[row : row + 1, lo:hi])[0][0]
            torch.testing.assert_close(packed[row, lo:hi], alone, atol=1e-5, rtol=1e-5)
            if lo:  # across items, an item sees the ones before it
                assert (cross[row, lo:hi] - alone).abs().max() > 1e-3
            alone_loss += answer_loss_sum(
                model, tokens[row : row + 1, lo:hi], y[row : row + 1, lo:hi]
            )
    # The training loss of the packed batch is the sum of the items' losses, each on its own,
    # also through a wrapper (DDP's path: the full forward).
    torch.testing.assert_close(answer_loss_sum(model, x, y), alone_loss, atol=1e-4, rtol=1e-5)
    wrapped = answer_loss_sum(Wrapper(model), x, y)
    torch.testing.assert_close(wrapped, alone_loss, atol=1e-4, rtol=1e-5)
    assert (answer_loss_sum(model, cross_x, y) - alone_loss).abs() > 1e-2


def test_document_packing_leaves_out_targets_whose_input_is_another_item(dataset):
    cross = QATrainStream(dataset, 4, 64, 1, "all").packed(2)
    doc = QATrainStream(dataset, 4, 64, 1, "all", "document").packed(2)
    starts = doc.positions[:, 1:] == 0  # the target is the first token of the next slot
    assert np.array_equal(doc.loss_mask[:, :-1], cross.loss_mask[:, :-1] & ~starts)
    assert (cross.loss_mask[:, :-1] & starts).sum() >= 4  # an item boundary in every row
    assert not (doc.loss_mask & ~cross.loss_mask).any()
    answers = [
        QATrainStream(dataset, 4, 64, 1, "answer", p).packed(2) for p in ("cross", "document")
    ]
    assert np.array_equal(answers[0].loss_mask, answers[1].loss_mask)


# --------------------------------------------------------------------------- answer tokens


def test_single_answer_tokens_make_each_answer_one_token(cache, dataset):
    cfg = BiosConfig(**SMALL, answer_tokens="single")
    single = build_dataset(cfg, cache)
    assert single.fingerprint != dataset.fingerprint and single.path != dataset.path
    items = np.unique(single.train_items)
    assert (single.items.lengths[items] - 1 - single.item_loss_start[items] == 1).all()
    bpe_answers = dataset.items.lengths[items] - 1 - dataset.item_loss_start[items]
    assert bpe_answers.min() >= 1 and bpe_answers.max() > 3  # the same items, split by BPE
    for item in items[::7]:
        start = single.item_loss_start[item]
        prompt = single.item(item)[:start]
        assert np.array_equal(prompt, dataset.item(item)[: dataset.item_loss_start[item]])
        person, attr, template = (int(single.arrays[f"item_{k}"][item]) for k in KEYS)
        answer = single.people.qa(person, attr, template)[1]
        assert single.tokenizer.id_to_token(int(single.item(item)[start])) == answer
    texts = bios._value_texts(single.pools, single.arrays["attr_values"])
    assert single.vocab_size == dataset.vocab_size + len(set(texts))
    again = bios.generate(cfg).arrays
    for name, array in single.arrays.items():
        assert np.array_equal(array, again[name]), name


def trained_scores(dataset, steps: int = 60) -> dict:
    """FTA and EM of a tiny GPT after ``steps`` Adam updates on the QA batches."""
    model = tiny_gpt(dataset.vocab_size)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    source = QABatches(QATrainStream(dataset, 8, 64, seed=0))
    for step in range(steps):
        optimizer.zero_grad()
        x, y = source.batch(step)
        (answer_loss_sum(model, x, y) / (y != -100).sum()).backward()
        optimizer.step()
    return FTAEvaluator(dataset, batch_size=64)(steps, model.eval())


def test_with_single_answer_tokens_fta_is_exact_match(cache, dataset):
    single = trained_scores(build_dataset(BiosConfig(**SMALL, answer_tokens="single"), cache))
    assert single["fta_all"] > 0  # some questions answered, the rest not
    assert single["fta"] == single["em"] and single["fta_all"] == single["em_all"]
    split = trained_scores(dataset)  # BPE answers: a right first token is not a right answer
    assert split["em_all"] < split["fta_all"]


# --------------------------------------------------------------------------- the CLI


KNOBS = ["packing=document", "model.tie_weights=true", "model.pos_encoding=learned",
         "data.answer_tokens=single", "train.steps=8", "optim.muon.lr=[0.02]",
         "eval_sample=4"]  # fmt: skip


def test_every_knob_is_an_override_recorded_in_the_run(tmp_path):
    out = tmp_path / "run"
    assert main(["run", "knowledge-qa", "--preset", "smoke", "--out", str(out), *KNOBS]) == 0
    config = yaml.safe_load((out / "config.yaml").read_text())["config"]
    assert config["packing"] == "document" and config["data"]["answer_tokens"] == "single"
    assert config["model"]["tie_weights"] is True and config["model"]["pos_encoding"] == "learned"
    assert config["eval_sample"] == 4
    specs = [json.loads(p.read_text()) for p in out.glob("runs/*/*/*/spec.json")]
    # A one-point list is a set rate: no tuning trial, one evaluation run per arm of the preset.
    assert sorted(spec["arm"]["name"] for spec in specs) == ["adam", "adam_split", "muon"]
    assert all(spec["seed"] == 0 and spec["steps"] == 8 for spec in specs)
    muon = next(spec for spec in specs if spec["arm"]["name"] == "muon")
    assert muon["lrs"]["muon"] == 0.02
    for spec in specs:
        assert spec["data"]["packing"] == "document" and spec["data"]["eval_sample"] == 4
        assert spec["model"]["tie_weights"] and spec["model"]["pos_encoding"] == "learned"
    for run in json.loads((out / "results.json").read_text())["runs"]:
        for evaluation in run["evals"]:
            assert evaluation["fta"] == evaluation["em"]

"""Synthetic biographies / heavy-tailed QA: counts, tokens, evaluation set, stream and cache."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from tailmem.data import bios
from tailmem.data.bios import (
    ATTRIBUTES,
    KIND_BIO,
    KIND_QA,
    BiosConfig,
    bios_text,
    build_dataset,
    fta_by_group,
    group_of_person,
    group_sizes,
    num_train_qa,
    selections_per_group,
)
from tailmem.data.pools import Pools
from tailmem.data.ragged import Ragged, concat_rows
from tailmem.data.stream import QATrainStream, pack_rows
from tailmem.data.templates import N_QA_TEMPLATES, QA_TEMPLATES
from tailmem.errors import ConfigError, DataError
from tailmem.typecheck import from_dict

SMALL = dict(m=6, n_first_names=40, n_surnames=60, n_cities=30, n_universities=40)
SMALL |= dict(n_majors=20, n_employers=30, vocab_size=1024)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("bios-cache")


@pytest.fixture(scope="module")
def ds10(cache):
    """The paper-sized pools with m = 10 (1,024 people)."""
    return build_dataset(BiosConfig(m=10), cache)


@pytest.fixture(scope="module")
def ds_para(cache):
    """Small pools, three training templates, two QA per attribute per selection, biographies."""
    cfg = BiosConfig(**SMALL, templates_per_attribute=3, n_qa=12, train_on="qa+bios")
    return build_dataset(cfg, cache)


def _person_attr_counts(ds):
    items = ds.train_items
    qa = ds.item_kind[items] == KIND_QA
    person = ds.arrays["item_person"][items][qa]
    attr = ds.arrays["item_attr"][items][qa].astype(np.int64)
    return np.bincount(person * 6 + attr, minlength=ds.n_people * 6).reshape(-1, 6)


# --------------------------------------------------------------------------- frequency scheme


def test_published_m15_counts_from_the_closed_forms():
    assert group_sizes(15).sum() == 32768
    s = selections_per_group(15)
    assert s[0] * 6 == 196_608 and s[15] * 6 == 6
    assert np.array_equal(s, 2 ** (15 - np.arange(16)))
    # 2**15 selections for the head + 15 groups of 2**(g-1) people with 2**(15-g) each.
    assert num_train_qa(15) == 6 * (2**15 + 15 * 2**14) == 1_671_168
    assert np.array_equal(selections_per_group(15, 0.0), np.ones(16, dtype=np.int64))
    p = np.arange(1 << 12)
    expected = np.array([int(x).bit_length() for x in p])
    assert np.array_equal(group_of_person(12), expected)


def test_counts_per_group_match_n_g_and_s_g(ds10):
    m = 10
    groups = ds10.group_of_person
    assert np.array_equal(np.bincount(groups, minlength=m + 1), group_sizes(m))
    per_pa = _person_attr_counts(ds10)
    s = selections_per_group(m)
    # every person of group g: S_g QA per attribute, S_g * n_qa in all
    assert np.array_equal(per_pa, np.repeat(s[groups][:, None], 6, axis=1))
    assert len(ds10.train_items) == num_train_qa(m) == 6 * (2**10 + 10 * 2**9)


@pytest.mark.parametrize("rho", [0.0, 0.5, 1.5])
def test_frequency_exponent_sweeps_power_law_to_uniform(cache, rho):
    cfg = BiosConfig(**SMALL, frequency_exponent=rho)
    ds = build_dataset(cfg, cache)
    s = selections_per_group(cfg.m, rho)
    expected = np.maximum(1, np.rint(2.0 ** (rho * (cfg.m - np.arange(cfg.m + 1)))))
    assert np.array_equal(s, expected)
    per_person = _person_attr_counts(ds).sum(axis=1)
    assert np.array_equal(per_person, 6 * s[ds.group_of_person])
    assert len(ds.train_items) == num_train_qa(cfg.m, rho)
    if rho == 0.0:
        assert np.all(per_person == 6)


def test_two_qa_per_attribute_and_one_bio_per_selection(ds_para):
    s = selections_per_group(ds_para.cfg.m)[ds_para.group_of_person]
    assert np.array_equal(_person_attr_counts(ds_para), np.repeat(2 * s[:, None], 6, axis=1))
    bio_items = ds_para.train_items[ds_para.item_kind[ds_para.train_items] == KIND_BIO]
    bio_person = ds_para.arrays["item_person"][bio_items]
    assert np.array_equal(np.bincount(bio_person, minlength=ds_para.n_people), s)
    # selections cycle through the person's biography variants
    variants = ds_para.arrays["item_template"][bio_items]
    head = bio_person == 0
    assert np.array_equal(np.bincount(variants[head]), [s[0] // 2, s[0] // 2])


# --------------------------------------------------------------------------- people and tokens


def test_full_names_are_unique_and_values_come_from_the_pools(ds10):
    names = [ds10.people.name(p) for p in range(ds10.n_people)]
    assert len(set(names)) == ds10.n_people
    assert any(len(n.split()) == 3 for n in names) and any(len(n.split()) == 2 for n in names)
    pools = ds10.pools
    sizes = dict(first_names=400, surnames=1000, cities=200, universities=300, majors=100)
    for field, size in (sizes | {"employers": 300}).items():
        pool = getattr(pools, field)
        assert len(pool) == len(set(pool)) == size
    person = ds10.person(7)
    assert person["birth_city"] in pools.cities and person["employer"] in pools.employers
    assert person["university"] in pools.universities and person["major"] in pools.majors
    month, day, year = person["birth_date"].replace(",", "").split()
    assert month in bios.MONTHS and 1 <= int(day) <= 31 and 1900 <= int(year) <= 2099


def test_names_and_values_tokenize_to_several_tokens(ds10):
    tok, pools = ds10.tokenizer, ds10.pools

    def mean_tokens(words):
        return np.mean([len(e.ids) for e in tok.encode_batch([" " + w for w in words])])

    assert mean_tokens(pools.first_names) >= 2
    assert mean_tokens(pools.surnames) >= 2
    assert mean_tokens(pools.cities) >= 1.5  # cities recur inside university names
    assert mean_tokens([ds10.people.name(p) for p in range(200)]) >= 5
    assert 300 < ds10.vocab_size <= 4096


def test_composed_ids_equal_tokenizing_the_full_text(ds_para):
    tok = ds_para.tokenizer
    rng = np.random.default_rng(1)
    for item in rng.choice(len(ds_para.items), size=300, replace=False):
        ids = ds_para.item(item).tolist()
        assert ids[-1] == ds_para.eos_id
        text = ds_para.item_text(item)
        assert tok.encode(text).ids == ids[:-1]
        if ds_para.item_kind[item] == KIND_QA:
            start = ds_para.item_loss_start[item]
            prompt, answer = text.split("\nAnswer:")
            assert tok.encode(prompt + "\nAnswer:").ids == ids[:start]
            assert tok.encode(answer).ids == ids[start:-1]


def test_first_answer_token_decodes_to_the_start_of_the_answer(ds10):
    tok = ds10.tokenizer
    for index in range(0, len(ds10.eval_items), 97):
        person, attr = divmod(index, 6)
        answer = " " + ds10.people.value(person, attr)
        first = tok.decode([int(ds10.eval_first_token[index])])
        assert len(first) >= 2 and answer.startswith(first)
        assert tok.decode(ds10.eval_answer(index).tolist()) == answer
        assert tok.decode(ds10.eval_prompt(index).tolist()).endswith("?\nAnswer:")


def test_bios_text_states_all_six_facts(ds_para):
    texts = bios_text(ds_para, people=[0, 5], variant=1)
    for person, text in zip([0, 5], texts, strict=True):
        record = ds_para.person(person)
        assert text.count(record["name"]) == 6
        assert all(record[a] in text for a in ATTRIBUTES)
    assert len(bios_text(ds_para)) == ds_para.n_people


def test_bios_text_is_available_without_training_on_bios(ds10):
    (text,) = bios_text(ds10, people=[3])
    assert text.startswith(ds10.people.name(3)) and text.count(". ") == 5
    assert not (ds10.item_kind == KIND_BIO).any()


# --------------------------------------------------------------------------- evaluation set


def test_eval_set_asks_each_person_each_attribute_once_as_trained(ds_para):
    p = ds_para.n_people
    assert len(ds_para.eval_items) == p * 6
    assert np.array_equal(ds_para.eval_person, np.repeat(np.arange(p), 6))
    assert np.array_equal(ds_para.eval_attr, np.tile(np.arange(6), p))
    assert np.isin(ds_para.eval_items, ds_para.train_items).all()
    assert np.all(ds_para.arrays["item_template"][ds_para.train_items] < 3)


def test_heldout_eval_templates_are_never_trained(cache):
    cfg = BiosConfig(**SMALL, templates_per_attribute=2, eval_templates="heldout")
    ds = build_dataset(cfg, cache)
    assert len(ds.eval_items) == ds.n_people * 6
    assert not np.isin(ds.eval_items, ds.train_items).any()
    eval_t = ds.arrays["item_template"][ds.eval_items]
    assert eval_t.min() >= 2 and eval_t.max() < N_QA_TEMPLATES
    assert set(np.unique(ds.arrays["item_template"][ds.train_items])) == {0, 1}
    prompt = ds.tokenizer.decode(ds.eval_prompt(3).tolist())
    assert prompt == QA_TEMPLATES["major"][eval_t[3]].format(name=ds.people.name(0))


def test_eval_batch_pads_on_the_right(ds10):
    batch = ds10.eval_batch(np.array([5, 0, 4000]))
    for row, index in enumerate([5, 0, 4000]):
        prompt = ds10.eval_prompt(index)
        assert batch.lengths[row] == len(prompt)
        assert np.array_equal(batch.tokens[row, : len(prompt)], prompt)
        assert np.all(batch.tokens[row, len(prompt) :] == ds10.eos_id)
    assert np.array_equal(batch.group, ds10.group_of_person[[0, 0, 666]])
    assert sum(len(b.index) for b in ds10.eval_batches(1000)) == len(ds10.eval_items)


def test_fta_by_group_averages_per_group(ds10):
    rng = np.random.default_rng(0)
    correct = rng.random(len(ds10.eval_items)) < 0.3
    fta = ds10.fta_by_group(correct)
    for g in range(ds10.n_groups):
        assert fta[g] == pytest.approx(correct[ds10.eval_group == g].mean())
    assert np.isnan(fta_by_group(np.ones(2), np.array([0, 2]), 3)[1])
    chance = ds10.first_token_chance()
    assert 1 / 12 <= chance["birth_date"] < 0.2 and chance["university"] < 0.05


# --------------------------------------------------------------------------- determinism


def test_same_seed_same_arrays_different_seed_different():
    cfg = BiosConfig(**SMALL)
    a, b = bios.generate(cfg).arrays, bios.generate(cfg).arrays
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    c = bios.generate(dataclasses.replace(cfg, seed=1)).arrays
    assert not np.array_equal(a["item_tokens"][:2000], c["item_tokens"][:2000])
    assert not np.array_equal(a["name_parts"], c["name_parts"])


# --------------------------------------------------------------------------- training stream


def test_batches_are_a_pure_function_of_seed_and_step(ds_para):
    a = QATrainStream(ds_para, batch_size=4, seq_len=160, seed=3)
    later = [a.batch(s) for s in (7, 2, 40)]
    b = QATrainStream(ds_para, batch_size=4, seq_len=160, seed=3)
    for step, (x, y, mask) in zip((7, 2, 40), later, strict=True):
        x2, y2, mask2 = b.batch(step)
        assert np.array_equal(x, x2) and np.array_equal(y, y2) and np.array_equal(mask, mask2)
        assert x.shape == (4, 160) and x.dtype == np.int64 and mask.dtype == bool
    assert np.array_equal(x[:, 1:], y[:, :-1])
    other = QATrainStream(ds_para, batch_size=4, seq_len=160, seed=4)
    assert not np.array_equal(other.batch(2)[0], later[1][0])


@pytest.mark.parametrize("capacity", [7, 30, 129])
def test_pack_rows_packs_a_perfectly_packable_multiset_into_full_rows(capacity):
    """200 full rows cut into random pieces and shuffled: packing must rebuild 200 full rows."""
    rng = np.random.default_rng(capacity)
    pieces = []
    for _ in range(200):
        left = capacity
        while left:
            pieces.append(int(rng.integers(1, min(left, 28) + 1)))
            left -= pieces[-1]
    lengths = rng.permutation(pieces)
    row_of, n_rows = pack_rows(lengths, capacity)
    assert n_rows == 200
    assert (np.bincount(row_of, weights=lengths, minlength=n_rows) == capacity).all()


def test_pack_rows_beats_best_fit_decreasing_and_rejects_oversized_entries():
    # best-fit decreasing: (4, 4), (3, 3, 3), (3) = 3 rows; the fullest-row greedy: 2 rows
    row_of, n_rows = pack_rows(np.array([4, 4, 3, 3, 3, 3]), 10)
    assert n_rows == 2 and sorted(np.bincount(row_of, weights=[4, 4, 3, 3, 3, 3])) == [10, 10]
    assert pack_rows(np.array([], dtype=np.int64), 10)[1] == 0
    with pytest.raises(ValueError, match="lengths must lie in"):
        pack_rows(np.array([11]), 10)


def _epoch_rows(stream, epoch):
    """The epoch's rows (seq_len + 1 tokens each) read back from the batches (batch_size 1)."""
    rows = []
    for r in range(stream.rows_per_epoch):
        x, y, _ = stream.batch(epoch * stream.rows_per_epoch + r)
        rows.append(np.concatenate([x[0], y[0, -1:]]))
    return rows


def test_every_item_appears_once_per_epoch_whole_in_one_row(ds_para):
    stream = QATrainStream(ds_para, batch_size=1, seq_len=160, seed=0)
    for epoch in (0, 1):
        order, offsets = stream.layout(epoch)
        assert np.array_equal(np.sort(order), np.sort(ds_para.train_items))
        assert len(offsets) == stream.rows_per_epoch + 1 and offsets[-1] == len(order)
        for r, row in enumerate(_epoch_rows(stream, epoch)):
            items = order[offsets[r] : offsets[r + 1]]
            packed = np.concatenate([ds_para.item(i) for i in items])
            assert np.array_equal(row[: len(packed)], packed)
            assert (row[len(packed) :] == ds_para.eos_id).all()
    assert not np.array_equal(stream.item_order(0), stream.item_order(1))
    assert stream.tokens_per_epoch == stream.rows_per_epoch * 160
    assert stream.steps_per_epoch == stream.rows_per_epoch
    assert stream.fill > 0.99


def test_a_batch_may_span_several_epochs(cache):
    ds = build_dataset(BiosConfig(**(SMALL | {"m": 1})), cache)
    stream = QATrainStream(ds, batch_size=16, seq_len=64, seed=2)
    assert stream.items_per_epoch == 18 and stream.rows_per_epoch < 16 / 2
    single = QATrainStream(ds, batch_size=1, seq_len=64, seed=2)
    rows = [row for e in range(8) for row in _epoch_rows(single, e)]
    x, y, _ = stream.batch(1)
    assert np.array_equal(x, np.stack([row[:-1] for row in rows[16:32]]))
    assert np.array_equal(y, np.stack([row[1:] for row in rows[16:32]]))


def test_loss_mask_marks_answers_and_biographies_never_padding(ds_para):
    stream = QATrainStream(ds_para, batch_size=3, seq_len=160, seed=1)
    step = 5
    _, _, mask = stream.batch(step)
    order, offsets = stream.layout(0)
    for b in range(3):
        r = step * 3 + b
        want = np.zeros(161, dtype=bool)  # by position in the row; targets are positions 1..
        pos = 0
        for item in order[offsets[r] : offsets[r + 1]]:
            n = len(ds_para.item(item))
            first = ds_para.item_loss_start[item] if ds_para.item_kind[item] == KIND_QA else 1
            want[pos + first : pos + n - 1] = True
            pos += n
        assert np.array_equal(mask[b], want[1:])
        every = QATrainStream(ds_para, 3, 160, 1, loss_on="all").batch(step)[2][b]
        assert every[: pos - 1].all() and not every[pos - 1 :].any()
    assert mask.any()


def test_every_answer_token_is_trained_its_scheduled_number_of_times_per_epoch(ds10):
    """Read one epoch's batches back, split each row into items at EOS, and count the masked
    answer tokens of every (person, attribute): each must be trained exactly S_g times (one
    QA sample per selection) times its answer length, first token S_g times."""
    stream = QATrainStream(ds10, batch_size=8, seq_len=128, seed=0)
    person_of = ds10.arrays["item_person"]
    attr_of = ds10.arrays["item_attr"].astype(np.int64)
    by_tokens = {tuple(ds10.item(i).tolist()): i for i in np.unique(ds10.train_items)}
    first_trained = np.zeros(ds10.n_people * 6, dtype=np.int64)
    tokens_trained = np.zeros(ds10.n_people * 6, dtype=np.int64)
    n_steps = -(-stream.rows_per_epoch // 8)
    rows = []
    for step in range(n_steps):
        x, y, mask = stream.batch(step)
        rows += list(zip(np.concatenate([x, y[:, -1:]], axis=1), mask, strict=True))
    for row, mask in rows[: stream.rows_per_epoch]:
        ends = np.flatnonzero(row == ds10.eos_id)
        start = 0
        for end in ends:
            if end == start:  # padding
                break
            item = by_tokens[tuple(row[start : end + 1].tolist())]
            key = person_of[item] * 6 + attr_of[item]
            answer = np.arange(start + ds10.item_loss_start[item], end)
            assert mask[answer - 1].all()
            first_trained[key] += 1
            tokens_trained[key] += len(answer)
            start = end + 1
    selections = ds10.selections_per_group()[ds10.group_of_person]
    answer_length = np.array([len(ds10.eval_answer(i)) for i in range(len(ds10.eval_items))])
    scheduled = np.repeat(selections, 6)
    assert np.array_equal(first_trained, scheduled)
    assert np.array_equal(tokens_trained, scheduled * answer_length)
    total_mask = sum(int(mask.sum()) for _, mask in rows[: stream.rows_per_epoch])
    assert total_mask == int(tokens_trained.sum())  # nothing but answers is a target


def test_stream_rejects_bad_arguments(ds10):
    with pytest.raises(ConfigError, match="seq_len: got 8; expected an integer of at least"):
        QATrainStream(ds10, batch_size=2, seq_len=8, seed=0)
    with pytest.raises(ConfigError, match="batch_size"):
        QATrainStream(ds10, batch_size=0, seq_len=64, seed=0)
    with pytest.raises(ConfigError, match="loss_on"):
        QATrainStream(ds10, batch_size=2, seq_len=64, seed=0, loss_on="prompt")
    with pytest.raises(ConfigError, match="packing: got 'diagonal'; expected 'cross' or"):
        QATrainStream(ds10, batch_size=2, seq_len=64, seed=0, packing="diagonal")


# --------------------------------------------------------------------------- cache


def test_cache_is_reused_and_keyed_by_the_config(tmp_path, monkeypatch):
    cfg = BiosConfig(**SMALL)
    first = build_dataset(cfg, tmp_path)
    monkeypatch.setattr(bios, "generate", lambda *a, **k: pytest.fail("rebuilt a cached entry"))
    again = build_dataset(cfg, tmp_path)
    assert again.path == first.path and again.fingerprint == first.fingerprint
    assert np.array_equal(again.items.flat, first.items.flat)
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.path.name]
    changes = [("seed", 1), ("n_qa", 12), ("answer_tokens", "single")]
    changed = [dataclasses.replace(cfg, **{k: v}) for k, v in changes]
    prints = {bios.fingerprint(c) for c in [cfg, *changed]}
    assert len(prints) == 4
    same = dataclasses.replace(cfg, frequency_exponent=1, tokenizer_path=None)
    assert bios.fingerprint(same) == bios.fingerprint(cfg)
    meta = json.loads((first.path / "meta.json").read_text())
    assert meta["fingerprint"] == bios.fingerprint(cfg) and meta["n_people"] == 64
    assert (first.path / "tokenizer.json").is_file()
    assert Tokenizer.from_str(first.tokenizer_json()).get_vocab_size() == first.vocab_size


def test_corrupt_cache_raises_data_error_and_rebuild_repairs_it(tmp_path):
    cfg = BiosConfig(**SMALL)
    ds = build_dataset(cfg, tmp_path)
    tokens = ds.path / "item_tokens.npy"
    data = bytearray(tokens.read_bytes())
    data[-1] ^= 0xFF
    tokens.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"corrupt.*item_tokens\.npy does not match") as info:
        build_dataset(cfg, tmp_path)
    assert str(info.value).endswith("delete that folder and rerun: it is built again")
    assert "rebuild=True" not in str(info.value)  # a Python argument, not something a user types
    repaired = build_dataset(cfg, tmp_path, rebuild=True)
    assert np.array_equal(repaired.items.flat[:-1], ds.items.flat[:-1])
    (repaired.path / "meta.json").unlink()
    with pytest.raises(DataError, match=r"meta\.json unreadable"):
        build_dataset(cfg, tmp_path)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    fresh = build_dataset(cfg, tmp_path, rebuild=True)
    meta = json.loads((fresh.path / "meta.json").read_text())
    meta["fingerprint"] = "0" * 64
    (fresh.path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match="built from a different config"):
        build_dataset(cfg, tmp_path)
    with pytest.raises(DataError, match="does not exist"):
        bios.load_dataset(tmp_path / "nothing")


def test_pools_json_round_trips_and_a_mistyped_value_is_a_type_error(ds10):
    pools = ds10.pools
    assert Pools.from_json(json.loads(json.dumps(pools.to_json()))) == pools
    for key, bad in (("cities", "Ashford"), ("majors", [1, 2]), ("birth_year_min", "1950")):
        with pytest.raises(TypeError, match=key):  # what load_dataset reports as corrupt
            Pools.from_json({**pools.to_json(), key: bad})
    with pytest.raises(KeyError):
        Pools.from_json({k: v for k, v in pools.to_json().items() if k != "surnames"})


def test_given_tokenizer_file_is_used_and_fingerprinted(tmp_path, ds10):
    path = tmp_path / "tok.json"
    ds10.tokenizer.save(str(path))
    cfg = BiosConfig(**SMALL, tokenizer_path=str(path))
    ds = build_dataset(cfg, tmp_path / "cache")
    assert ds.vocab_size == ds10.vocab_size
    assert ds.tokenizer.encode(ds.item_text(0)).ids == ds.item(0)[:-1].tolist()
    assert bios.fingerprint(cfg) != bios.fingerprint(BiosConfig(**SMALL))
    with pytest.raises(DataError, match="does not exist"):
        build_dataset(dataclasses.replace(cfg, tokenizer_path=str(tmp_path / "no.json")), tmp_path)


def test_tokenizer_that_merges_across_pieces_is_rejected(tmp_path):
    cfg = BiosConfig(**SMALL)
    people = bios.make_config_pools(cfg)
    text = [f"What is the birth date of {n} {n}" for n in people.first_names] * 5
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(text, trainer)
    path = tmp_path / "whole.json"
    tok.save(str(path))
    with pytest.raises(DataError, match="merges across template pieces"):
        build_dataset(dataclasses.replace(cfg, tokenizer_path=str(path)), tmp_path)
    with pytest.raises(DataError, match="has no token '<eos>'"):
        build_dataset(
            dataclasses.replace(cfg, tokenizer_path=str(path), eos_token="<eos>"), tmp_path
        )


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"m": 0}, "m: got 0; expected an integer in [1, 20]"),
        ({"vocab_size": 100}, "vocab_size: got 100; expected an integer in [300, 1048576]"),
        ({"n_qa": 4}, "n_qa: got 4; expected a positive multiple of 6"),
        ({"n_qa": 9}, "n_qa: got 9; expected a positive multiple of 6"),
        ({"seed": -1}, "seed: got -1; expected an integer of at least 0"),
        ({"frequency_exponent": -1.0}, "frequency_exponent: got -1.0; expected a number in [0, 4]"),
        ({"templates_per_attribute": 7}, "templates_per_attribute: got 7; expected an integer"),
        (
            {"templates_per_attribute": 6, "eval_templates": "heldout"},
            "templates_per_attribute: got 6; expected at most 5 with eval_templates='heldout'",
        ),
        ({"train_on": "bios"}, "train_on: got 'bios'; expected 'qa' or 'qa+bios'"),
        ({"answer_tokens": "word"}, "answer_tokens: got 'word'; expected 'bpe' or 'single'"),
        ({"middle_name_prob": 2}, "middle_name_prob: got 2; expected a number in [0, 1]"),
        (
            {"m": 12, "n_first_names": 10, "n_surnames": 20, "n_universities": 100},
            "2**m = 4096 people need at least",
        ),
        ({"m": 20}, "training samples; expected at most"),
        ({"birth_year_max": 1800}, "birth_year_max: got 1800; expected an integer in [1900, 9999]"),
    ],
)
def test_bad_config_raises_one_line_config_error(change, message):
    with pytest.raises(ConfigError) as info:
        dataclasses.replace(BiosConfig(), **change).validate()
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_config_loads_through_the_framework():
    cfg = from_dict(BiosConfig, {"m": 8, "eval_templates": "heldout", "tokenizer_path": None})
    assert cfg.m == 8 and cfg.templates_per_attribute == 1
    with pytest.raises(ConfigError, match="eval_templates"):
        from_dict(BiosConfig, {"eval_templates": "test"})
    with pytest.raises(ConfigError, match="m: got 0"):
        from_dict(BiosConfig, {"m": 0})


# --------------------------------------------------------------------------- ragged helper


def test_concat_rows_matches_list_concatenation():
    rng = np.random.default_rng(0)
    tables = [
        Ragged.from_lists([list(rng.integers(100, size=rng.integers(0, 5))) for _ in range(7)])
        for _ in range(3)
    ]
    index = [rng.integers(7, size=20) for _ in range(3)]
    out, starts = concat_rows(list(zip(tables, index, strict=True)), np.int64)
    for i in range(20):
        pieces = [t.row(ix[i]).tolist() for t, ix in zip(tables, index, strict=True)]
        assert out.row(i).tolist() == [t for piece in pieces for t in piece]
        assert starts[i].tolist() == [0, len(pieces[0]), len(pieces[0]) + len(pieces[1])]


@pytest.mark.slow
def test_paper_scale_m15_counts(tmp_path):
    ds = build_dataset(BiosConfig(m=15), tmp_path)
    assert ds.n_people == 32768 and len(ds.eval_items) == 6 * 32768
    assert len(ds.train_items) == 1_671_168
    per_person = np.bincount(ds.arrays["item_person"][ds.train_items], minlength=32768)
    assert per_person[0] == 196_608 and np.all(per_person[16384:] == 6)

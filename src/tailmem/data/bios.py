"""Heavy-tailed knowledge QA over synthetic biographies (paper A, Sec. 4.3; PAPERS.md A3).

People and facts
    Every person has a unique full name (first, optional middle, surname) and six attributes —
    birth date, birth city, university, major, employer, work city — drawn uniformly from the
    generated pools of :mod:`tailmem.data.pools`.

Frequency scheme (integer ``m``, exponent ``rho``)
    Groups ``g = 0..m``: group 0 holds one person, group ``g >= 1`` holds ``N_g = 2**(g-1)``, so
    there are ``2**m`` people and person ``p`` is in group ``p.bit_length()``. Every person of
    group ``g`` gets ``S_g = max(1, round(2**(rho * (m - g))))`` selections; each selection yields
    ``n_qa`` QA samples, ``n_qa / 6`` per attribute, each with a template drawn uniformly from
    the first ``templates_per_attribute`` templates. ``rho = 1`` is the paper (samples per person
    ∝ 1/rank, Zipf exponent ≈ 1; m = 15 gives 196,608 QA samples for the head person and 6 for
    each of the 16,384 people of group 15, 1,671,168 in all); ``rho = 0`` is uniform (one
    selection each); values in between sweep from power law to uniform. The total is
    ``n_qa * sum_g N_g * S_g`` (:func:`num_train_qa`). With ``train_on="qa+bios"`` every
    selection also yields one biography (variant ``s mod bio_variants`` of the person's
    ``bio_variants`` biographies, each with its own sentence templates).

Evaluation
    One question per person and attribute (``6 * 2**m`` items) scored by first-token accuracy,
    reported per group. ``eval_templates="train"`` (default, the paper's setting: FTA measures
    memorisation of the QA seen in training) asks exactly the person's first training question
    for that attribute; ``"heldout"`` asks with a template never used in training (templates
    ``templates_per_attribute..5``), which measures transfer to paraphrases instead.

Tokens
    A byte-level BPE (:mod:`tailmem.data.bpe`) is trained on the *inventory* — every pool value,
    date piece and template literal once or twice — not on the frequency-weighted samples: a
    tokenizer trained on the samples would turn head people's names into single tokens and tail
    names into many, confounding frequency with tokenization. Names then split into about three
    tokens, like real names. ``tokenizer_path`` uses a given ``tokenizer.json`` instead.

    A QA sample is ``ids(prompt) + ids(" " + value) + [EOS]``: the answer starts at a token
    boundary by construction. ``answer_tokens="single"`` makes every answer one token: each
    answer text (every city, university, major and employer of the pools, every person's birth
    date) is added to the tokenizer as a whole token (after the BPE's ids), so first-token
    accuracy is whole-answer accuracy; ``"bpe"`` (default) splits answers like any text, and
    the first token of a date or a city is then shared by many answers. ``name_tokens="single"``
    does the same for names: every first name and surname is one token (a full name is two or
    three), as in a word-level vocabulary; ``"bpe"`` (default) splits them into about three
    syllable pieces shared with other names. ``n_birth_dates`` draws birth dates from a pool of
    that many dates (default: any day of the year range). ``question_form="uniform"`` asks every
    attribute as "What is the <attribute> of NAME?" (template 0; ``"varied"``, the default, asks
    four of six with the name mid-sentence, :func:`~tailmem.data.templates.qa_templates`). With
    ``"single"`` tokens and small pools the data set is the word-level one of an implementation
    that gives every word a token.

    Ids are composed from pieces tokenized once (template literals, names, values); with a
    byte-level pre-tokenizer the composition equals tokenizing the full text, which the build
    verifies on a sample of rows (a tokenizer that merges across the pieces is rejected with
    :class:`~tailmem.errors.DataError`).

Cache
    :func:`build_dataset` writes token arrays (``.npy``), ``tokenizer.json``, ``pools.json`` and
    ``meta.json`` (config, fingerprint = SHA-256 of the config and data-format version, SHA-256
    of every file) into ``<cache_dir>/bios-m<m>-<fingerprint[:12]>``, built in a temporary
    directory and renamed into place. A later call with the same config loads it; a corrupt
    entry (missing file, hash mismatch) raises :class:`~tailmem.errors.DataError` naming the
    directory, which the user deletes to have it built again (``rebuild=True`` replaces it from
    Python).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from tokenizers import Tokenizer

from tailmem.atomic import file_sha256, strict_json
from tailmem.data.bpe import (
    add_whole_tokens,
    encode_pieces,
    load_tokenizer,
    token_dtype,
    token_id,
    train_bpe,
)
from tailmem.data.pools import MONTHS, VALUE_FORMS, Pools, make_pools, n_days
from tailmem.data.ragged import Ragged, concat_rows, stack_rows
from tailmem.data.templates import (
    ATTRIBUTES,
    BIO_TEMPLATES,
    N_BIO_TEMPLATES,
    N_QA_TEMPLATES,
    QUESTION_FORMS,
    bio_pieces,
    bio_text,
    qa_answer,
    qa_pieces,
    qa_prompt,
    qa_templates,
)
from tailmem.errors import ConfigError, DataError

DATA_FORMAT = "tailmem-bios"
DATA_VERSION = 1
N_ATTRIBUTES = len(ATTRIBUTES)
MAX_M = 20
MIN_VOCAB = 300
MAX_TRAIN_ITEMS = 1 << 26
N_VERIFY_ROWS = 256

KIND_QA = 0
KIND_BIO = 1

# The arrays of a data set, each stored as <name>.npy in the cache entry.
ARRAYS = (
    "group_of_person",
    "name_parts",
    "attr_values",
    "bio_templates",
    "item_tokens",
    "item_offsets",
    "item_loss_start",
    "item_kind",
    "item_person",
    "item_attr",
    "item_template",
    "train_items",
    "eval_items",
)


# Sub-stream tags: each random decision has its own generator derived from (seed, tag), so
# changing one option (say the template count) does not reshuffle the people.
_RNG_POOLS, _RNG_PEOPLE, _RNG_TEMPLATES, _RNG_EVAL, _RNG_BIOS, _RNG_DATES = range(1, 7)


def _rng(seed: int, tag: int, *more: int) -> np.random.Generator:
    return np.random.default_rng([seed, tag, *more])


LATER_FIELDS: dict[str, object] = {
    "name_tokens": "bpe",
    "n_birth_dates": None,
    "question_form": "varied",
}
""":class:`BiosConfig` fields added after data sets were first fingerprinted, with their
defaults (:meth:`BiosConfig.record`)."""


@dataclass(frozen=True)
class BiosConfig:
    """Everything that determines the data set (all of it enters the cache fingerprint)."""

    m: int = 15
    n_qa: int = 6
    frequency_exponent: float = 1.0
    n_first_names: int = 400
    n_surnames: int = 1000
    n_cities: int = 200
    n_universities: int = 300
    n_majors: int = 100
    n_employers: int = 300
    middle_name_prob: float = 0.5
    birth_year_min: int = 1900
    birth_year_max: int = 2099
    templates_per_attribute: int = 1
    eval_templates: Literal["train", "heldout"] = "train"
    answer_tokens: Literal["bpe", "single"] = "bpe"
    name_tokens: Literal["bpe", "single"] = "bpe"
    n_birth_dates: int | None = None
    question_form: Literal["varied", "uniform"] = "varied"
    train_on: Literal["qa", "qa+bios"] = "qa"
    bio_variants: int = 2
    vocab_size: int = 4096
    tokenizer_path: str | None = None
    eos_token: str = "<|endoftext|>"
    seed: int = 0

    def validate(self) -> None:
        """Raise :class:`ConfigError` (one line: field, value, what was expected) if invalid."""
        _int_in(self, "m", 1, MAX_M)
        for name in ("answer_tokens", "name_tokens"):
            if getattr(self, name) not in ("bpe", "single"):
                raise ConfigError(
                    f"{name}: got {getattr(self, name)!r}; expected 'bpe' or 'single'"
                )
        n_qa = self.n_qa
        if isinstance(n_qa, bool) or not isinstance(n_qa, int) or n_qa < 1 or n_qa % N_ATTRIBUTES:
            raise ConfigError(
                f"n_qa: got {n_qa!r}; expected a positive multiple of {N_ATTRIBUTES} "
                "(each selection asks every attribute equally often)"
            )
        rho = self.frequency_exponent
        if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not 0 <= rho <= 4:
            raise ConfigError(
                f"frequency_exponent: got {rho!r}; expected a number in [0, 4] "
                "(1 = the paper's power law, 0 = uniform)"
            )
        _int_in(self, "n_first_names", 2, 5000)
        _int_in(self, "n_surnames", 2, 20000)
        _int_in(self, "n_cities", 2, 5000)
        _int_in(self, "n_universities", 2, None)
        _int_in(self, "n_majors", 2, 5000)
        _int_in(self, "n_employers", 2, 5000)
        from_cities = min(self.n_universities // 2, 4 * self.n_cities)
        if self.n_universities - from_cities > 3 * self.n_surnames:
            raise ConfigError(
                f"n_universities: got {self.n_universities}; expected at most "
                f"{from_cities + 3 * self.n_surnames} for these city and surname pools"
            )
        p = self.middle_name_prob
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
            raise ConfigError(f"middle_name_prob: got {p!r}; expected a number in [0, 1]")
        _int_in(self, "birth_year_min", 1, 9999)
        _int_in(self, "birth_year_max", self.birth_year_min, 9999)
        _int_in(self, "templates_per_attribute", 1, N_QA_TEMPLATES)
        if self.eval_templates not in ("train", "heldout"):
            raise ConfigError(
                f"eval_templates: got {self.eval_templates!r}; expected 'train' or 'heldout'"
            )
        if self.eval_templates == "heldout" and self.templates_per_attribute >= N_QA_TEMPLATES:
            raise ConfigError(
                f"templates_per_attribute: got {self.templates_per_attribute}; expected at most "
                f"{N_QA_TEMPLATES - 1} with eval_templates='heldout' (a template must be held out)"
            )
        if self.n_birth_dates is not None:
            _int_in(self, "n_birth_dates", 2, n_days(self.birth_year_min, self.birth_year_max))
        if self.question_form not in QUESTION_FORMS:
            raise ConfigError(f"question_form: got {self.question_form!r}; expected one of "
                              f"{', '.join(QUESTION_FORMS)}")  # fmt: skip
        if self.train_on not in ("qa", "qa+bios"):
            raise ConfigError(f"train_on: got {self.train_on!r}; expected 'qa' or 'qa+bios'")
        _int_in(self, "bio_variants", 1, 64)
        _int_in(self, "vocab_size", MIN_VOCAB, 1 << 20)
        if self.tokenizer_path is not None and not isinstance(self.tokenizer_path, str):
            raise ConfigError(
                f"tokenizer_path: got {self.tokenizer_path!r}; expected a file path or null"
            )
        if not isinstance(self.eos_token, str) or not self.eos_token:
            raise ConfigError(f"eos_token: got {self.eos_token!r}; expected a non-empty string")
        _int_in(self, "seed", 0, None)
        n_people = 1 << self.m
        combos = self.n_first_names * self.n_surnames
        if p > 0:
            combos *= self.n_first_names + (1 if p < 1 else 0)
        if 2 * n_people > combos:
            raise ConfigError(
                f"m: got {self.m}; 2**m = {n_people} people need at least {2 * n_people} "
                f"possible full names, these name pools give {combos}"
            )
        total = self.train_items
        if total > MAX_TRAIN_ITEMS:
            raise ConfigError(
                f"m: got m={self.m}, frequency_exponent={rho} giving {total:,} training samples; "
                f"expected at most {MAX_TRAIN_ITEMS:,}"
            )

    def record(self) -> dict[str, Any]:
        """The config as plain data for the data set's identity (:func:`fingerprint`, a tuning
        problem's record): the fields added after data sets were first fingerprinted
        (:data:`LATER_FIELDS`) only where they differ from their defaults, so a data set built
        at the defaults keeps the identity (cache entry, run digests, stored rates) it had."""
        out = dataclasses.asdict(self)
        for name, default in LATER_FIELDS.items():
            if out[name] == default:
                del out[name]
        return out

    @property
    def train_items(self) -> int:
        """Training items of the data set: its QA samples, plus one biography per selection
        with ``train_on="qa+bios"``."""
        total = num_train_qa(self.m, self.frequency_exponent, self.n_qa)
        return total + total // self.n_qa if self.train_on == "qa+bios" else total

    def check_tokenizer(self) -> None:
        """Refuse (one-line error naming ``data.tokenizer_path``) a given tokenizer file that
        does not load or lacks ``eos_token``, before anything is built."""
        if self.tokenizer_path is None:
            return
        try:
            token_id(load_tokenizer(self.tokenizer_path), self.eos_token)
        except DataError as exc:
            raise DataError(f"data.tokenizer_path: {exc}") from None


def _int_in(cfg: BiosConfig, name: str, low: int, high: int | None) -> None:
    value = getattr(cfg, name)
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
    if ok and (high is None or value <= high):
        return
    span = f"of at least {low}" if high is None else f"in [{low}, {high}]"
    raise ConfigError(f"{name}: got {value!r}; expected an integer {span}")


# --------------------------------------------------------------------------- frequency scheme


def group_sizes(m: int) -> np.ndarray:
    """``N_g`` for ``g = 0..m``: 1, 1, 2, 4, ..., 2**(m-1) (they sum to ``2**m``)."""
    return np.array([1] + [1 << (g - 1) for g in range(1, m + 1)], dtype=np.int64)


def selections_per_group(m: int, exponent: float = 1.0) -> np.ndarray:
    """``S_g = max(1, round(2**(exponent * (m - g))))`` for ``g = 0..m``."""
    g = np.arange(m + 1, dtype=np.float64)
    return np.maximum(1, np.rint(np.exp2(exponent * (m - g)))).astype(np.int64)


def group_of_person(m: int) -> np.ndarray:
    """Group of every person ``p < 2**m``: 0 for ``p = 0``, else ``p.bit_length()``."""
    bounds = 1 << np.arange(m + 1, dtype=np.int64)
    return np.searchsorted(bounds, np.arange(1 << m, dtype=np.int64), side="right")


def num_train_qa(m: int, exponent: float = 1.0, n_qa: int = 6) -> int:
    """Number of training QA samples, ``n_qa * sum_g N_g * S_g``."""
    return int(n_qa * (group_sizes(m) * selections_per_group(m, exponent)).sum())


def fta_by_group(correct: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Mean of ``correct`` per group (NaN for a group with no items): FTA per frequency group."""
    correct = np.asarray(correct, dtype=np.float64)
    totals = np.bincount(groups, weights=correct, minlength=n_groups)
    counts = np.bincount(groups, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)


# --------------------------------------------------------------------------- generation


def make_config_pools(cfg: BiosConfig) -> Pools:
    """The pools of ``cfg`` (a pure function of the config)."""
    return make_pools(
        _rng(cfg.seed, _RNG_POOLS),
        n_first_names=cfg.n_first_names,
        n_surnames=cfg.n_surnames,
        n_cities=cfg.n_cities,
        n_universities=cfg.n_universities,
        n_majors=cfg.n_majors,
        n_employers=cfg.n_employers,
        birth_year_min=cfg.birth_year_min,
        birth_year_max=cfg.birth_year_max,
    )


def sample_people(cfg: BiosConfig, pools: Pools) -> tuple[np.ndarray, np.ndarray]:
    """Unique names and attribute values of the ``2**m`` people.

    Returns ``name_parts`` (P, 3): first, middle (-1 for none), surname indices, all full names
    distinct; and ``attr_values`` (P, 6): the value index of each attribute in its pool (the
    birth date as a day offset, see :meth:`Pools.date`).
    """
    rng = _rng(cfg.seed, _RNG_PEOPLE)
    n = 1 << cfg.m
    n_f, n_s = len(pools.first_names), len(pools.surnames)
    chosen = np.empty((0, 3), dtype=np.int64)
    while len(chosen) < n:
        k = 2 * (n - len(chosen)) + 64
        middle = np.where(rng.random(k) < cfg.middle_name_prob, rng.integers(n_f, size=k), -1)
        candidates = np.stack([rng.integers(n_f, size=k), middle, rng.integers(n_s, size=k)], 1)
        everyone = np.concatenate([chosen, candidates])
        key = (everyone[:, 0] * (n_f + 1) + everyone[:, 1] + 1) * n_s + everyone[:, 2]
        _, first_seen = np.unique(key, return_index=True)
        chosen = everyone[np.sort(first_seen)][:n]
    dates = birth_date_pool(cfg, pools)
    sizes = [len(dates), len(pools.cities), len(pools.universities), len(pools.majors)]
    sizes += [len(pools.employers), len(pools.cities)]
    values = np.stack([rng.integers(size, size=n) for size in sizes], axis=1)
    values[:, 0] = dates[values[:, 0]]
    return chosen, values


def birth_date_pool(cfg: BiosConfig, pools: Pools) -> np.ndarray:
    """The day offsets a birth date is drawn from: every day of the year range, or
    ``n_birth_dates`` distinct ones drawn once (sorted) from its own random stream."""
    if cfg.n_birth_dates is None:
        return np.arange(pools.n_dates)
    chosen = _rng(cfg.seed, _RNG_DATES).choice(pools.n_dates, cfg.n_birth_dates, replace=False)
    return np.sort(chosen)


def full_name(pools: Pools, parts: np.ndarray) -> str:
    """ "First [Middle] Surname" from a ``name_parts`` row."""
    first, middle, last = (int(x) for x in parts)
    names = [pools.first_names[first]]
    if middle >= 0:
        names.append(pools.first_names[middle])
    return " ".join([*names, pools.surnames[last]])


def value_string(pools: Pools, attr: int, index: int) -> str:
    """Text of value ``index`` of attribute ``attr`` (an index into :data:`ATTRIBUTES`)."""
    name = ATTRIBUTES[attr]
    if name == "birth_date":
        return pools.date(index)
    table = {
        "birth_city": pools.cities,
        "work_city": pools.cities,
        "university": pools.universities,
        "major": pools.majors,
        "employer": pools.employers,
    }[name]
    return table[int(index)]


def tokenizer_corpus(pools: Pools, question_form: str = "varied") -> list[str]:
    """The inventory the BPE is trained on.

    Every distinct word of the pools (names, place and brand words, ...) and every year appears
    once; months, day numbers, the kind words of values ("University", "ology", "Logistics")
    and the template text appear twice. A merge needs a pair seen twice, so the repeated pieces
    can become whole-word tokens while a name, seen once, keeps splitting into the syllable
    pieces it shares with other names — also when it recurs inside another value (a city in
    "<City> University").
    """
    values = pools.first_names + pools.surnames + pools.cities
    values += pools.universities + pools.majors + pools.employers
    words = sorted({word for value in values for word in value.split()})
    texts = [" " + w for w in words]
    texts += [f" {y}" for y in range(pools.birth_year_min, pools.birth_year_max + 1)]
    common = [" " + month for month in MONTHS] + [f" {d}," for d in range(1, 32)]
    common += [form.format("") for form in VALUE_FORMS] + _literals(question_form)
    return texts + common + common


def _literals(question_form: str = "varied") -> list[str]:
    """Template literals in a fixed order: QA prefixes, QA suffixes, bio middles, bio ends."""
    templates = qa_templates(question_form)
    qa = [qa_pieces(t) for a in ATTRIBUTES for t in templates[a]]
    bio = [bio_pieces(t) for a in ATTRIBUTES for t in BIO_TEMPLATES[a]]
    return (
        [p.prefix for p in qa]
        + [p.suffix for p in qa]
        + [b.middle for b in bio]
        + [b.end for b in bio]
    )


def _qa_training_items(cfg: BiosConfig, groups: np.ndarray) -> tuple[np.ndarray, ...]:
    """(person, attribute, template) of every training QA sample, person-major order."""
    per_person = selections_per_group(cfg.m, cfg.frequency_exponent)[groups]
    person = np.repeat(np.repeat(np.arange(len(groups)), per_person), cfg.n_qa)
    attr = np.tile(np.arange(cfg.n_qa) % N_ATTRIBUTES, int(per_person.sum()))
    rng = _rng(cfg.seed, _RNG_TEMPLATES)
    template = rng.integers(cfg.templates_per_attribute, size=len(person))
    first_item = (np.cumsum(per_person) - per_person) * cfg.n_qa
    return person, attr, template, per_person, first_item


def _eval_templates(cfg: BiosConfig, template: np.ndarray, first_item: np.ndarray) -> np.ndarray:
    """Template of the eval question of every (person, attribute), shape (P, 6)."""
    if cfg.eval_templates == "train":
        return template[first_item[:, None] + np.arange(N_ATTRIBUTES)]
    held_out = N_QA_TEMPLATES - cfg.templates_per_attribute
    rng = _rng(cfg.seed, _RNG_EVAL)
    return cfg.templates_per_attribute + rng.integers(held_out, size=(len(first_item), 6))


@dataclass(frozen=True)
class People:
    """Names and facts of every person, the sentence templates of their biographies and the
    question templates they are asked with (:func:`~tailmem.data.templates.qa_templates`)."""

    pools: Pools
    name_parts: np.ndarray
    attr_values: np.ndarray
    bio_templates: np.ndarray
    bio_variants: int
    qa_templates: dict[str, tuple[str, ...]]

    def name(self, person: int) -> str:
        """Full name of ``person``."""
        return full_name(self.pools, self.name_parts[person])

    def value(self, person: int, attr: int) -> str:
        """Text of attribute ``attr`` of ``person``."""
        return value_string(self.pools, attr, int(self.attr_values[person, attr]))

    def qa(self, person: int, attr: int, template: int) -> tuple[str, str]:
        """(prompt, answer) text of one QA sample; the answer starts with a space."""
        prompt = qa_prompt(self.qa_templates[ATTRIBUTES[attr]][template], self.name(person))
        return prompt, qa_answer(self.value(person, attr))

    def bio(self, person: int, variant: int = 0) -> str:
        """Biography ``variant`` of ``person``: one sentence per attribute."""
        if not 0 <= variant < self.bio_variants:
            raise ValueError(f"variant must be in [0, {self.bio_variants}), got {variant}")
        chosen = self.bio_templates[person * self.bio_variants + variant]
        sentences = [BIO_TEMPLATES[a][t] for a, t in zip(ATTRIBUTES, chosen, strict=True)]
        values = [self.value(person, a) for a in range(N_ATTRIBUTES)]
        return bio_text(sentences, self.name(person), values)


@dataclass(frozen=True)
class _Pieces:
    """Token ids tokenized once and shared by every row that uses them."""

    literals: Ragged
    names_spaced: Ragged
    values: Ragged
    value_row: np.ndarray
    eos: Ragged


@dataclass(frozen=True)
class _ItemTable:
    """Token rows of one kind of item and, per row, where the loss starts, whose and which
    attribute and template it is (attribute −1: a biography); ``train`` lists the row of every
    training sample."""

    rows: Ragged
    loss_start: np.ndarray
    person: np.ndarray
    attr: np.ndarray
    template: np.ndarray
    train: np.ndarray


def _qa_table(
    cfg: BiosConfig, groups: np.ndarray, pieces: _Pieces, dtype: np.dtype
) -> tuple[_ItemTable, np.ndarray]:
    """Rows of every distinct (person, attribute, template) in training or evaluation, and the
    row asked for each (person, attribute) in evaluation.

    A row is ``prefix, " " + name, suffix, " " + value, EOS``; ``loss_start`` is where the value
    begins.
    """
    n_people = len(groups)
    person, attr, template, _, first_item = _qa_training_items(cfg, groups)
    eval_template = _eval_templates(cfg, template, first_item)
    eval_person = np.repeat(np.arange(n_people), N_ATTRIBUTES)
    eval_attr = np.tile(np.arange(N_ATTRIBUTES), n_people)
    keys = np.concatenate(
        [
            (person * N_ATTRIBUTES + attr) * N_QA_TEMPLATES + template,
            (eval_person * N_ATTRIBUTES + eval_attr) * N_QA_TEMPLATES + eval_template.ravel(),
        ]
    )
    qa_keys, row_of_key = _dense_unique(keys, n_people * N_ATTRIBUTES * N_QA_TEMPLATES)
    qa_person = qa_keys // (N_ATTRIBUTES * N_QA_TEMPLATES)
    qa_attr = qa_keys // N_QA_TEMPLATES % N_ATTRIBUTES
    qa_template = qa_keys % N_QA_TEMPLATES
    slot = qa_attr * N_QA_TEMPLATES + qa_template
    rows, starts = concat_rows(
        [
            (pieces.literals, slot),
            (pieces.names_spaced, qa_person),
            (pieces.literals, N_ATTRIBUTES * N_QA_TEMPLATES + slot),
            (pieces.values, pieces.value_row[qa_person, qa_attr]),
            (pieces.eos, np.zeros(len(qa_keys), dtype=np.int64)),
        ],
        dtype,
    )
    table = _ItemTable(
        rows=rows,
        loss_start=starts[:, 3],
        person=qa_person,
        attr=qa_attr,
        template=qa_template,
        train=row_of_key[: len(person)],
    )
    return table, row_of_key[len(person) :]


def _bio_table(
    cfg: BiosConfig,
    people: People,
    groups: np.ndarray,
    pieces: _Pieces,
    tokenizer: Tokenizer,
    dtype: np.dtype,
) -> _ItemTable:
    """Rows of the ``bio_variants`` biographies of every person (``person * V + variant``).

    ``train`` holds, for every selection ``s`` of every person, the row of variant ``s mod V``.
    """
    n_people, n_var = len(groups), cfg.bio_variants
    bio_person = np.repeat(np.arange(n_people), n_var)
    names_bare = _name_tokens(tokenizer, people.pools, people.name_parts, dtype, spaced=False)
    base = 2 * N_ATTRIBUTES * N_QA_TEMPLATES
    n_bio_slots = N_ATTRIBUTES * N_BIO_TEMPLATES
    parts = []
    for a in range(N_ATTRIBUTES):
        slot = a * N_BIO_TEMPLATES + people.bio_templates[:, a]
        parts += [
            (names_bare if a == 0 else pieces.names_spaced, bio_person),
            (pieces.literals, base + slot),
            (pieces.values, pieces.value_row[bio_person, a]),
            (pieces.literals, base + n_bio_slots + slot),
        ]
    parts.append((pieces.eos, np.zeros(len(bio_person), dtype=np.int64)))
    rows, _ = concat_rows(parts, dtype)
    per_person = selections_per_group(cfg.m, cfg.frequency_exponent)[groups]
    selection = np.arange(int(per_person.sum())) - np.repeat(
        np.cumsum(per_person) - per_person, per_person
    )
    sel_person = np.repeat(np.arange(n_people), per_person)
    return _ItemTable(
        rows=rows,
        loss_start=np.ones(len(bio_person), dtype=np.int64),
        person=bio_person,
        attr=np.full(len(bio_person), -1),
        template=np.tile(np.arange(n_var), n_people),
        train=sel_person * n_var + selection % n_var,
    )


@dataclass(frozen=True)
class GeneratedData:
    """A data set built in memory: ``arrays`` (one per name of :data:`ARRAYS`), the value
    pools, the tokenizer and its end-of-text id."""

    arrays: dict[str, np.ndarray]
    pools: Pools
    tokenizer: Tokenizer
    eos_id: int


def generate(cfg: BiosConfig, tokenizer: Tokenizer | None = None) -> GeneratedData:
    """Build the whole data set in memory (a pure function of ``cfg`` and the tokenizer).

    Without ``tokenizer`` a BPE is trained on :func:`tokenizer_corpus`.
    """
    cfg.validate()
    pools = make_config_pools(cfg)
    name_parts, attr_values = sample_people(cfg, pools)
    n_people = len(name_parts)
    bio_templates = _rng(cfg.seed, _RNG_BIOS).integers(
        N_BIO_TEMPLATES, size=(n_people * cfg.bio_variants, N_ATTRIBUTES)
    )
    people = People(pools, name_parts, attr_values, bio_templates, cfg.bio_variants,
                    qa_templates(cfg.question_form))  # fmt: skip
    groups = group_of_person(cfg.m)
    if tokenizer is None:
        tokenizer = train_bpe(
            tokenizer_corpus(pools, cfg.question_form), cfg.vocab_size, cfg.eos_token
        )
    eos = token_id(tokenizer, cfg.eos_token)
    if cfg.name_tokens == "single":
        add_whole_tokens(tokenizer, _name_texts(pools))
    single = cfg.answer_tokens == "single"
    if single:
        add_whole_tokens(tokenizer, _value_texts(pools, attr_values))
    dtype = token_dtype(tokenizer.get_vocab_size())
    values, value_row = _value_tokens(tokenizer, pools, attr_values, dtype, single)
    pieces = _Pieces(
        literals=encode_pieces(tokenizer, _literals(cfg.question_form), dtype),
        names_spaced=_name_tokens(tokenizer, pools, name_parts, dtype, spaced=True),
        values=values,
        value_row=value_row,
        eos=Ragged(np.array([eos], dtype=dtype), np.array([0, 1], dtype=np.int64)),
    )
    qa, eval_rows = _qa_table(cfg, groups, pieces, dtype)
    tables = [qa]
    if cfg.train_on == "qa+bios":
        tables.append(_bio_table(cfg, people, groups, pieces, tokenizer, dtype))
    first_row = np.cumsum([0] + [len(t.rows) for t in tables])
    items = stack_rows([t.rows for t in tables])

    def joined(column: Callable[[_ItemTable], np.ndarray], dtype: type) -> np.ndarray:
        return np.concatenate([column(t) for t in tables]).astype(dtype)

    arrays: dict[str, np.ndarray] = {
        "group_of_person": groups.astype(np.int32),
        "name_parts": name_parts.astype(np.int32),
        "attr_values": attr_values.astype(np.int32),
        "bio_templates": bio_templates.astype(np.int8),
        "item_tokens": items.flat,
        "item_offsets": items.offsets,
        "item_loss_start": joined(lambda t: t.loss_start, np.int32),
        "item_kind": np.repeat([KIND_QA, KIND_BIO][: len(tables)], np.diff(first_row)).astype(
            np.int8
        ),
        "item_person": joined(lambda t: t.person, np.int32),
        "item_attr": joined(lambda t: t.attr, np.int8),
        "item_template": joined(lambda t: t.template, np.int8),
        "train_items": np.concatenate(
            [t.train + first for t, first in zip(tables, first_row, strict=False)]
        ).astype(np.int32),
        "eval_items": eval_rows.astype(np.int32),
    }
    _verify_composition(arrays, people, tokenizer, eos)
    return GeneratedData(arrays, pools, tokenizer, eos)


def _dense_unique(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for keys in ``[0, size)``, in linear time."""
    used = np.bincount(keys, minlength=size) > 0
    row = np.cumsum(used) - 1
    return np.flatnonzero(used), row[keys]


def _name_tokens(
    tokenizer: Tokenizer, pools: Pools, name_parts: np.ndarray, dtype: np.dtype, *, spaced: bool
) -> Ragged:
    """Token ids of every full name, with or without the leading space, from its words' ids."""
    lead = " " if spaced else ""
    first = encode_pieces(tokenizer, [lead + w for w in pools.first_names], dtype)
    middle = encode_pieces(tokenizer, [" " + w for w in pools.first_names] + [""], dtype)
    last = encode_pieces(tokenizer, [" " + w for w in pools.surnames], dtype)
    no_middle = len(pools.first_names)
    mid = np.where(name_parts[:, 1] < 0, no_middle, name_parts[:, 1])
    names, _ = concat_rows(
        [(first, name_parts[:, 0]), (middle, mid), (last, name_parts[:, 2])], dtype
    )
    return names


def _name_texts(pools: Pools) -> list[str]:
    """Every name word as it appears in an item: after a space (a first name in a question, a
    middle name, a surname) and bare (a first name opening a biography)."""
    words = pools.first_names + pools.surnames
    return [" " + w for w in words] + list(pools.first_names)


def _date_tokens(tokenizer: Tokenizer, pools: Pools, days: np.ndarray, dtype: np.dtype) -> Ragged:
    """Token ids of " March 3, 1950" for every day offset, from month, day and year pieces."""
    start = np.datetime64(f"{pools.birth_year_min:04d}-01-01", "D")
    date = start + days.astype("timedelta64[D]")
    month_start = date.astype("datetime64[M]")
    month = month_start.astype(np.int64) % 12
    day = (date - month_start.astype("datetime64[D]")).astype(np.int64)
    year = date.astype("datetime64[Y]").astype(np.int64) + 1970 - pools.birth_year_min
    years = range(pools.birth_year_min, pools.birth_year_max + 1)
    months = encode_pieces(tokenizer, [" " + name for name in MONTHS], dtype)
    day_numbers = encode_pieces(tokenizer, [f" {d}" for d in range(1, 32)], dtype)
    comma = encode_pieces(tokenizer, [","], dtype)
    year_numbers = encode_pieces(tokenizer, [f" {y}" for y in years], dtype)
    zero = np.zeros(len(days), dtype=np.int64)
    dates, _ = concat_rows(
        [(months, month), (day_numbers, day), (comma, zero), (year_numbers, year)], dtype
    )
    return dates


_VALUE_POOLS = ("cities", "universities", "majors", "employers")
"""The pools after the birth dates in the rows of :func:`_value_tokens`."""


def _value_texts(pools: Pools, attr_values: np.ndarray) -> list[str]:
    """The answer text (``" " + value``) of every row of :func:`_value_tokens`."""
    texts = [qa_answer(pools.date(int(day))) for day in attr_values[:, 0]]
    return texts + [qa_answer(v) for name in _VALUE_POOLS for v in getattr(pools, name)]


def _value_tokens(
    tokenizer: Tokenizer, pools: Pools, attr_values: np.ndarray, dtype: np.dtype, single: bool
) -> tuple[Ragged, np.ndarray]:
    """Token ids of every answer ``" " + value`` and the row of each (person, attribute).

    Rows ``0..P-1`` are the people's birth dates; then come the city, university, major and
    employer pools. ``single``: the tokenizer holds every answer as one token
    (:func:`~tailmem.data.bpe.add_whole_tokens`), so each is encoded whole; otherwise a date is
    composed from its month, day and year pieces.
    """
    n_people = len(attr_values)
    if single:
        texts = _value_texts(pools, attr_values)
        values = encode_pieces(tokenizer, texts, dtype)
        sizes = [n_people] + [len(getattr(pools, name)) for name in _VALUE_POOLS]
    else:
        tables = [
            _date_tokens(tokenizer, pools, attr_values[:, 0], dtype),
            *(
                encode_pieces(tokenizer, [" " + v for v in getattr(pools, name)], dtype)
                for name in _VALUE_POOLS
            ),
        ]
        values, sizes = stack_rows(tables), [len(t) for t in tables]
    start = np.cumsum([0, *sizes])
    pool_of_attr = {"birth_city": 1, "university": 2, "major": 3, "employer": 4, "work_city": 1}
    rows = np.empty_like(attr_values, dtype=np.int64)
    rows[:, 0] = np.arange(n_people)
    for a, name in enumerate(ATTRIBUTES[1:], start=1):
        rows[:, a] = start[pool_of_attr[name]] + attr_values[:, a]
    return values, rows


def item_text(arrays: dict[str, np.ndarray], people: People, item: int) -> str:
    """The text of training/eval item ``item`` (without the end-of-text token)."""
    person = int(arrays["item_person"][item])
    if arrays["item_kind"][item] == KIND_BIO:
        return people.bio(person, int(arrays["item_template"][item]))
    prompt, answer = people.qa(
        person, int(arrays["item_attr"][item]), int(arrays["item_template"][item])
    )
    return prompt + answer


def _verify_composition(
    arrays: dict[str, np.ndarray], people: People, tokenizer: Tokenizer, eos: int
) -> None:
    """Check on evenly spaced items that composed ids equal tokenizing the full text."""
    items = Ragged(arrays["item_tokens"], arrays["item_offsets"])
    chosen = np.unique(np.linspace(0, len(items) - 1, min(len(items), N_VERIFY_ROWS)).astype(int))
    bios = np.flatnonzero(arrays["item_kind"] == KIND_BIO)
    if len(bios):
        chosen = np.union1d(chosen, bios[:: max(1, len(bios) // 32)])
    for item in chosen:
        ids = items.row(item)
        text = item_text(arrays, people, int(item))
        full = tokenizer.encode(text, add_special_tokens=False).ids
        if ids[-1] != eos or list(ids[:-1]) != full:
            raise DataError(
                f"the tokenizer merges across template pieces: {text!r} tokenizes to {full} but "
                f"the composed ids are {list(ids[:-1])}; expected a byte-level BPE tokenizer"
            )


# --------------------------------------------------------------------------- cache


def fingerprint(cfg: BiosConfig) -> str:
    """SHA-256 over the data format version, the config and the given tokenizer file's bytes."""
    config = cfg.record()
    tokenizer_path = config.pop("tokenizer_path")
    for name in ("frequency_exponent", "middle_name_prob"):  # 1 and 1.0 are the same data
        config[name] = float(config[name])
    record = {
        "format": DATA_FORMAT,
        "version": DATA_VERSION,
        "config": config,
        "tokenizer_sha256": None if tokenizer_path is None else _tokenizer_sha(tokenizer_path),
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def _tokenizer_sha(path: str) -> str:
    if not Path(path).is_file():
        raise DataError(f"tokenizer_path {path} does not exist; expected a tokenizer.json file")
    return file_sha256(Path(path))


def build_dataset(cfg: BiosConfig, cache_dir: str | Path, *, rebuild: bool = False) -> BiosDataset:
    """Load the cached data set of ``cfg`` from ``cache_dir``, building it first if needed.

    The build goes to a temporary directory that is renamed into place only when complete, so
    an interrupted build leaves no half-written entry; of two concurrent builds one wins and
    the other reads its result. A corrupt entry raises :class:`DataError`; ``rebuild=True``
    replaces it (or any existing entry) with a fresh build.
    """
    cfg.validate()
    expected = fingerprint(cfg)
    entry = Path(cache_dir) / f"bios-m{cfg.m}-{expected[:12]}"
    if entry.exists() and not rebuild:
        return load_dataset(entry, expected)
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.tmp-", dir=entry.parent))
    try:
        tmp.chmod(0o755)
        _write_dataset(cfg, tmp)
        if entry.exists() and rebuild:
            old = Path(tempfile.mkdtemp(prefix=f".{entry.name}.old-", dir=entry.parent))
            os.replace(entry, old / "entry")
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.rename(tmp, entry)
        except OSError:
            if not entry.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return load_dataset(entry, expected)


def _write_dataset(cfg: BiosConfig, folder: Path) -> None:
    start = time.perf_counter()
    tokenizer = load_tokenizer(cfg.tokenizer_path) if cfg.tokenizer_path else None
    built = generate(cfg, tokenizer)
    arrays = built.arrays
    files = {}
    for name, array in arrays.items():
        np.save(folder / f"{name}.npy", array, allow_pickle=False)
        files[f"{name}.npy"] = file_sha256(folder / f"{name}.npy")
    built.tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "pools.json").write_text(json.dumps(built.pools.to_json()))
    for name in ("tokenizer.json", "pools.json"):
        files[name] = file_sha256(folder / name)
    meta = {
        "format": DATA_FORMAT,
        "version": DATA_VERSION,
        "fingerprint": fingerprint(cfg),
        "config": dataclasses.asdict(cfg),
        "vocab_size": built.tokenizer.get_vocab_size(),
        "eos_id": built.eos_id,
        "n_people": len(arrays["group_of_person"]),
        "n_items": len(arrays["item_offsets"]) - 1,
        "n_train_items": len(arrays["train_items"]),
        "n_eval_items": len(arrays["eval_items"]),
        "n_tokens": len(arrays["item_tokens"]),
        "build_seconds": round(time.perf_counter() - start, 3),
        "files": files,
    }
    (folder / "meta.json").write_text(strict_json(meta, indent=1))


def load_dataset(folder: str | Path, expected_fingerprint: str | None = None) -> BiosDataset:
    """Open a cache entry written by :func:`build_dataset`, checking every file's hash.

    With ``expected_fingerprint`` the entry must also have been built from that config.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(
            f"data set {folder} does not exist; expected a directory from build_dataset"
        )
    meta_path = folder / "meta.json"
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(_corrupt(folder, f"meta.json unreadable: {type(exc).__name__}")) from None
    if not isinstance(meta, dict) or meta.get("format") != DATA_FORMAT or "files" not in meta:
        raise DataError(_corrupt(folder, f"meta.json is not a {DATA_FORMAT} record"))
    if meta.get("version") != DATA_VERSION:
        version = f"data format version {meta.get('version')}, expected {DATA_VERSION}"
        raise DataError(_corrupt(folder, version))
    if expected_fingerprint is not None and meta.get("fingerprint") != expected_fingerprint:
        raise DataError(_corrupt(folder, "it was built from a different config"))
    for name in (*[f"{a}.npy" for a in ARRAYS], "tokenizer.json", "pools.json"):
        path = folder / name
        if not path.is_file():
            raise DataError(_corrupt(folder, f"{name} is missing"))
        if file_sha256(path) != meta["files"].get(name):
            raise DataError(_corrupt(folder, f"{name} does not match its recorded hash"))
    try:
        cfg = BiosConfig(**meta["config"])
        arrays = {a: np.load(folder / f"{a}.npy", allow_pickle=False) for a in ARRAYS}
        pools = Pools.from_json(json.loads((folder / "pools.json").read_text()))
    except (TypeError, ValueError, KeyError) as exc:
        raise DataError(_corrupt(folder, f"{type(exc).__name__}: {exc}")) from None
    tokenizer = load_tokenizer(folder / "tokenizer.json")
    return BiosDataset(cfg, folder, meta, arrays, pools, tokenizer)


def _corrupt(folder: Path, why: str) -> str:
    """The message of a damaged cache entry: what is wrong and what the user can do about it."""
    return (
        f"data cache {folder} is corrupt ({why}); delete that folder and rerun: it is built again"
    )


# --------------------------------------------------------------------------- the data set


@dataclass(frozen=True)
class EvalBatch:
    """Eval prompts right-padded with EOS; the prediction for item ``i`` is at ``lengths[i] - 1``.

    Right padding keeps every prompt at positions ``0..length-1`` (a causal model never looks
    at the padding to its right), so the logits at ``lengths - 1`` score the first answer token.
    """

    tokens: np.ndarray
    lengths: np.ndarray
    first_token: np.ndarray
    index: np.ndarray
    group: np.ndarray
    attr: np.ndarray


class BiosDataset:
    """A built data set: token rows ("items"), the training multiset and the evaluation set.

    Items are QA samples (``prompt + " " + value + EOS``) and, with ``train_on="qa+bios"``,
    biographies (``text + EOS``). ``train_items`` lists the item id of every training sample
    (with repetition: item ids recur ``S_g`` times); ``eval_items[p * 6 + a]`` is the QA item
    asking attribute ``a`` of person ``p``. Arrays are read-only.
    """

    def __init__(
        self,
        cfg: BiosConfig,
        path: Path,
        meta: dict[str, Any],
        arrays: dict[str, np.ndarray],
        pools: Pools,
        tokenizer: Tokenizer,
    ) -> None:
        for array in arrays.values():
            array.setflags(write=False)
        self.cfg = cfg
        self.path = path
        self.meta = meta
        self.pools = pools
        self.tokenizer = tokenizer
        self.arrays = arrays
        self.items = Ragged(arrays["item_tokens"], arrays["item_offsets"])
        self.people = People(
            pools,
            arrays["name_parts"],
            arrays["attr_values"],
            arrays["bio_templates"],
            cfg.bio_variants,
            qa_templates(cfg.question_form),
        )
        self.eos_id = int(meta["eos_id"])
        self.vocab_size = int(meta["vocab_size"])
        self.group_of_person = arrays["group_of_person"]
        self.train_items = arrays["train_items"]
        self.eval_items = arrays["eval_items"]
        self.item_loss_start = arrays["item_loss_start"]
        self.item_kind = arrays["item_kind"]
        self.eval_person = arrays["item_person"][self.eval_items]
        self.eval_attr = arrays["item_attr"][self.eval_items].astype(np.int64)
        self.eval_group = self.group_of_person[self.eval_person]
        starts = self.items.offsets[self.eval_items] + self.item_loss_start[self.eval_items]
        self.eval_first_token = self.items.flat[starts].astype(np.int64)
        self.eval_first_token.setflags(write=False)

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the config that built this data set (see :func:`fingerprint`)."""
        return str(self.meta["fingerprint"])

    @property
    def n_people(self) -> int:
        """``2**m`` people."""
        return len(self.group_of_person)

    @property
    def n_groups(self) -> int:
        """``m + 1`` frequency groups."""
        return self.cfg.m + 1

    def selections_per_group(self) -> np.ndarray:
        """``S_g`` of every group."""
        return selections_per_group(self.cfg.m, self.cfg.frequency_exponent)

    def item(self, item: int) -> np.ndarray:
        """Token ids of ``item``, ending with EOS."""
        return self.items.row(item)

    def item_text(self, item: int) -> str:
        """Text of ``item`` (without EOS)."""
        return item_text(self.arrays, self.people, item)

    def eval_prompt(self, index: int) -> np.ndarray:
        """Prompt token ids of eval question ``index`` (the answer's first token comes next)."""
        item = self.eval_items[index]
        return self.items.row(item)[: self.item_loss_start[item]]

    def eval_answer(self, index: int) -> np.ndarray:
        """All answer token ids of eval question ``index`` (without EOS), for exact match."""
        item = self.eval_items[index]
        return self.items.row(item)[self.item_loss_start[item] : -1]

    def eval_batch(self, index: np.ndarray) -> EvalBatch:
        """The eval questions ``index`` as one right-padded batch."""
        index = np.asarray(index, dtype=np.int64)
        items = self.eval_items[index]
        lengths = self.item_loss_start[items].astype(np.int64)
        width = int(lengths.max()) if len(index) else 0
        tokens = np.full((len(index), width), self.eos_id, dtype=np.int64)
        column = np.arange(width)
        mask = column[None, :] < lengths[:, None]
        source = self.items.offsets[items][:, None] + column[None, :]
        tokens[mask] = self.items.flat[source[mask]]
        return EvalBatch(
            tokens=tokens,
            lengths=lengths,
            first_token=self.eval_first_token[index],
            index=index,
            group=self.eval_group[index].astype(np.int64),
            attr=self.eval_attr[index],
        )

    def eval_batches(self, batch_size: int) -> Iterator[EvalBatch]:
        """Every eval question once, in order, ``batch_size`` at a time."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        n = len(self.eval_items)
        for start in range(0, n, batch_size):
            yield self.eval_batch(np.arange(start, min(n, start + batch_size)))

    def fta_by_group(self, correct: np.ndarray) -> np.ndarray:
        """First-token accuracy per group from one correctness flag per eval question."""
        correct = np.asarray(correct)
        if correct.shape != self.eval_items.shape:
            raise ValueError(
                f"need one flag per eval question ({len(self.eval_items)}), got {correct.shape}"
            )
        return fta_by_group(correct, self.eval_group, self.n_groups)

    def first_token_chance(self) -> dict[str, float]:
        """Per attribute, the FTA of always answering that attribute's most common first token.

        The floor a model reaches without recalling anything (dates start with one of twelve
        months, so it is high for ``birth_date``).
        """
        chance = {}
        for a, name in enumerate(ATTRIBUTES):
            counts = np.unique(self.eval_first_token[self.eval_attr == a], return_counts=True)[1]
            chance[name] = float(counts.max() / counts.sum())
        return chance

    def person(self, person: int) -> dict[str, object]:
        """Name, group and the six attribute values of ``person``."""
        record: dict[str, object] = {
            "name": self.people.name(person),
            "group": int(self.group_of_person[person]),
        }
        for a, attribute in enumerate(ATTRIBUTES):
            record[attribute] = self.people.value(person, a)
        return record

    def tokenizer_json(self) -> str:
        """The tokenizer as JSON text, to save next to a run (``run.write_text``)."""
        return self.tokenizer.to_str()

    def summary(self) -> DataSummary:
        """Sizes worth logging with a run."""
        return DataSummary(
            fingerprint=self.fingerprint,
            n_people=self.n_people,
            n_groups=self.n_groups,
            vocab_size=self.vocab_size,
            n_train_items=len(self.train_items),
            n_eval_items=len(self.eval_items),
            selections_per_group=tuple(self.selections_per_group().tolist()),
            first_token_chance=self.first_token_chance(),
        )


@dataclass(frozen=True)
class DataSummary:
    """A data set's sizes worth logging with a run (:meth:`BiosDataset.summary`): its
    fingerprint, people, frequency groups, vocabulary, training and evaluation items, the
    selections ``S_g`` per group and the first-token chance FTA per attribute."""

    fingerprint: str
    n_people: int
    n_groups: int
    vocab_size: int
    n_train_items: int
    n_eval_items: int
    selections_per_group: tuple[int, ...]
    first_token_chance: dict[str, float]

    def to_json(self) -> dict[str, object]:
        """Its record in a run's ``results.json`` (``data``)."""
        return {**dataclasses.asdict(self), "selections_per_group": list(self.selections_per_group)}


def bios_text(
    dataset: BiosDataset, people: np.ndarray | None = None, variant: int = 0
) -> list[str]:
    """Biography ``variant`` of each person in ``people`` (default: everyone), as plain text."""
    chosen = range(dataset.n_people) if people is None else (int(p) for p in people)
    return [dataset.people.bio(p, variant) for p in chosen]

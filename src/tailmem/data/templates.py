"""Question and biography templates, and their split into token-aligned pieces.

QA templates (six per attribute) have one ``{name}`` slot preceded by a space; the prompt ends
with ``"\\nAnswer:"`` and the answer is ``" " + value``. Template 0 of each attribute is the
canonical one ("What is the birth date of NAME?"), the paper's single template per attribute.

Biography sentences (four per attribute) have the form ``"{name}<middle> {value}<end>"``. A
biography is the six sentences, one per attribute in a fixed order, joined by single spaces, with
the full name in every sentence.

Pieces are split where a slot meets literal text, and a space before a slot travels with the slot
(``" Marel Tovan"``), as the byte-level pre-tokenizer splits text: that is what makes token ids
composed piece by piece equal to tokenising the whole text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ATTRIBUTES = ("birth_date", "birth_city", "university", "major", "employer", "work_city")

QA_TEMPLATES: dict[str, tuple[str, ...]] = {
    "birth_date": (
        "What is the birth date of {name}?\nAnswer:",
        "When was {name} born?\nAnswer:",
        "On which date was {name} born?\nAnswer:",
        "What is the date of birth of {name}?\nAnswer:",
        "Which day is the birthday of {name}?\nAnswer:",
        "Tell me when {name} was born.\nAnswer:",
    ),
    "birth_city": (
        "What is the birth city of {name}?\nAnswer:",
        "Where was {name} born?\nAnswer:",
        "In which city was {name} born?\nAnswer:",
        "Which city is the birthplace of {name}?\nAnswer:",
        "What city does {name} come from?\nAnswer:",
        "Name the city where {name} was born.\nAnswer:",
    ),
    "university": (
        "Which university did {name} attend?\nAnswer:",
        "Where did {name} study?\nAnswer:",
        "What university did {name} graduate from?\nAnswer:",
        "Which school awarded a degree to {name}?\nAnswer:",
        "At which university was {name} a student?\nAnswer:",
        "Name the university that {name} attended.\nAnswer:",
    ),
    "major": (
        "What did {name} major in?\nAnswer:",
        "What was the major of {name}?\nAnswer:",
        "Which field did {name} study?\nAnswer:",
        "What subject did {name} specialise in?\nAnswer:",
        "In which discipline did {name} earn a degree?\nAnswer:",
        "Name the field of study of {name}.\nAnswer:",
    ),
    "employer": (
        "Which company does {name} work for?\nAnswer:",
        "Who employs {name}?\nAnswer:",
        "At which company does {name} work?\nAnswer:",
        "What is the employer of {name}?\nAnswer:",
        "Which firm is {name} employed by?\nAnswer:",
        "Name the company that employs {name}.\nAnswer:",
    ),
    "work_city": (
        "Which city does {name} work in?\nAnswer:",
        "In what city is {name} employed?\nAnswer:",
        "Where is the workplace of {name} located?\nAnswer:",
        "What city does {name} work in?\nAnswer:",
        "In which city does {name} have a job?\nAnswer:",
        "Name the city where {name} works.\nAnswer:",
    ),
}

BIO_TEMPLATES: dict[str, tuple[str, ...]] = {
    "birth_date": (
        "{name} was born on {value}.",
        "{name}'s date of birth is {value}.",
        "{name} entered the world on {value}.",
        "{name} has the birth date {value}.",
    ),
    "birth_city": (
        "{name} was born in {value}.",
        "{name} spent the early years in {value}.",
        "{name}'s birthplace is {value}.",
        "{name} comes from {value}.",
    ),
    "university": (
        "{name} studied at {value}.",
        "{name} graduated from {value}.",
        "{name} attended {value}.",
        "{name} received a degree from {value}.",
    ),
    "major": (
        "{name} majored in {value}.",
        "{name} studied the field of {value}.",
        "{name} completed a degree in {value}.",
        "{name} specialised in {value}.",
    ),
    "employer": (
        "{name} works for {value}.",
        "{name} is employed by {value}.",
        "{name} has a job at {value}.",
        "{name} earns a living at {value}.",
    ),
    "work_city": (
        "{name} works in {value}.",
        "{name} is based in {value}.",
        "{name}'s workplace is in {value}.",
        "{name} commutes to an office in {value}.",
    ),
}

N_QA_TEMPLATES = 6
N_BIO_TEMPLATES = 4

QUESTION_FORMS = ("varied", "uniform")
"""The forms of template 0, the question asked when there is one template per attribute:
``varied`` (each attribute in its own words, the name mid-sentence in four of six) or
``uniform`` (``What is the <attribute> of NAME? Answer:`` for all six, the name always last and
no line break: as many tokens as the independent implementation's ``what is the <attribute> of
NAME ? answer :``)."""


def qa_templates(form: str = "varied") -> dict[str, tuple[str, ...]]:
    """The QA templates of a question form (:data:`QUESTION_FORMS`): :data:`QA_TEMPLATES`, with
    template 0 of every attribute made ``What is the <attribute> of {name}? Answer:`` for
    ``uniform``."""
    if form not in QUESTION_FORMS:
        raise ValueError(f"unknown question form {form!r}; expected one of {QUESTION_FORMS}")
    if form == "varied":
        return dict(QA_TEMPLATES)
    return {
        attr: (f"What is the {attr.replace('_', ' ')} of {{name}}? Answer:", *rest)
        for attr, (_, *rest) in QA_TEMPLATES.items()
    }


_QA_FORM = re.compile(r"^([^{}]*) \{name\}([^{}]*)$", re.DOTALL)
_BIO_FORM = re.compile(r"^\{name\}([^{}]+) \{value\}([^{}]*)$")


@dataclass(frozen=True)
class QAPieces:
    """A QA prompt is ``prefix + " " + name + suffix``; ``prefix`` holds no trailing space."""

    prefix: str
    suffix: str


@dataclass(frozen=True)
class BioPieces:
    """A biography sentence is ``name + middle + " " + value + end``."""

    middle: str
    end: str


def qa_pieces(template: str) -> QAPieces:
    """Split a QA template at its ``{name}`` slot (which must follow a space)."""
    match = _QA_FORM.match(template)
    if match is None:
        raise ValueError(f"QA template {template!r} must contain one ' {{name}}' slot")
    return QAPieces(prefix=match.group(1), suffix=match.group(2))


def bio_pieces(template: str) -> BioPieces:
    """Split a biography sentence template of the form ``"{name}<middle> {value}<end>"``."""
    match = _BIO_FORM.match(template)
    if match is None:
        raise ValueError(f"biography template {template!r} must look like '{{name}}... {{value}}.'")
    return BioPieces(middle=match.group(1), end=match.group(2))


def qa_prompt(template: str, name: str) -> str:
    """The question text (the prompt the model sees before the answer)."""
    return template.format(name=name)


def qa_answer(value: str) -> str:
    """The answer text: a space, then the value, so the answer starts at a token boundary."""
    return " " + value


def bio_text(sentence_templates: list[str], name: str, values: list[str]) -> str:
    """A biography: one sentence per attribute, joined by single spaces."""
    return " ".join(
        t.format(name=name, value=v) for t, v in zip(sentence_templates, values, strict=True)
    )

"""Deterministic pools of names and attribute values for the synthetic biographies.

Nothing is downloaded or embedded: first names, surnames, cities and company brands are
pronounceable words built from syllable tables (onset + vowel + optional coda), then given a
suffix typical of their kind ("-son", "-ford", ...). Universities, majors and employers combine
those words with a kind word ("<City> Institute of Technology", "<Root>ology",
"<Brand> Logistics"). Every value starts with its distinctive word, so the first answer token
identifies the value rather than its format (a pool of "University of X" would make the first
answer token " University" for all of them and first-token accuracy meaningless).

Birth dates are not a list: a person's birth date is a day index counted from 1 January of the
first allowed year and printed as "March 3, 1950" by :func:`date_string`.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

ONSETS = (
    "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
    "br", "ch", "cl", "dr", "fl", "gr", "pr", "sh", "st", "th", "tr",
)  # fmt: skip
VOWELS = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "ai", "ea", "ou")
CODAS = ("", "", "", "", "n", "r", "l", "s", "m", "nd", "rt")

FIRST_ENDINGS = ("", "", "a", "o", "el", "ian", "ius", "en", "ina", "ette", "ric")
SURNAME_ENDINGS = ("son", "berg", "ley", "wick", "ez", "ski", "ov", "man", "stein", "ard", "ani")
CITY_ENDINGS = ("ford", "ville", "burg", "port", "haven", "field", "mouth", "dale", "holm", "grad")
BRAND_ENDINGS = ("ex", "on", "ia", "co", "ix", "ar", "a", "um")
MAJOR_FORMS = (
    "{}ology", "{}ics", "{}istry", "{}onomy", "{}ography",
    "{} Studies", "{} Engineering", "{} Science", "{} Arts", "{} Theory",
)  # fmt: skip
UNIVERSITY_FORMS_CITY = (
    "{} University", "{} Institute of Technology", "{} State University", "{} Academy",
)  # fmt: skip
UNIVERSITY_FORMS_SURNAME = ("{} University", "{} College", "{} Polytechnic Institute")
INDUSTRIES = (
    "Systems", "Logistics", "Analytics", "Foods", "Motors", "Pharmaceuticals", "Energy",
    "Capital", "Media", "Robotics", "Airlines", "Textiles", "Labs", "Holdings", "Insurance",
    "Software", "Mining", "Biotech", "Shipping", "Partners",
)  # fmt: skip
INDUSTRY_FORMS = tuple(f"{{}} {w}" for w in INDUSTRIES)
# Every way a value wraps its distinctive word ("{} University", "{}ology", "{} Logistics").
VALUE_FORMS = UNIVERSITY_FORMS_CITY + UNIVERSITY_FORMS_SURNAME + MAJOR_FORMS + INDUSTRY_FORMS
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip

_MAX_TRIES = 200


@dataclass(frozen=True)
class Pools:
    """The value pools. Index ``i`` of a pool is the value id stored in the data arrays."""

    first_names: tuple[str, ...]
    surnames: tuple[str, ...]
    cities: tuple[str, ...]
    universities: tuple[str, ...]
    majors: tuple[str, ...]
    employers: tuple[str, ...]
    birth_year_min: int
    birth_year_max: int

    @property
    def n_dates(self) -> int:
        """Number of days from 1 January ``birth_year_min`` to 31 December ``birth_year_max``."""
        return n_days(self.birth_year_min, self.birth_year_max)

    def date(self, day: int) -> str:
        """Birth date ``day`` (days after 1 January ``birth_year_min``) as text."""
        return date_string(self.birth_year_min, day)

    def to_json(self) -> dict[str, object]:
        """A JSON-serialisable dict (see :meth:`from_json`)."""
        return {
            "first_names": list(self.first_names),
            "surnames": list(self.surnames),
            "cities": list(self.cities),
            "universities": list(self.universities),
            "majors": list(self.majors),
            "employers": list(self.employers),
            "birth_year_min": self.birth_year_min,
            "birth_year_max": self.birth_year_max,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Pools:
        """Inverse of :meth:`to_json`; a missing value is a KeyError, a mistyped one a
        TypeError (what a reader of a damaged file catches)."""

        def pool(key: str) -> tuple[str, ...]:
            values = data[key]
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise TypeError(f"pools {key}: expected a list of strings")
            return tuple(values)

        def year(key: str) -> int:
            value = data[key]
            if not isinstance(value, int):
                raise TypeError(f"pools {key}: got {value!r}; expected an integer")
            return value

        return cls(
            first_names=pool("first_names"),
            surnames=pool("surnames"),
            cities=pool("cities"),
            universities=pool("universities"),
            majors=pool("majors"),
            employers=pool("employers"),
            birth_year_min=year("birth_year_min"),
            birth_year_max=year("birth_year_max"),
        )


def n_days(year_min: int, year_max: int) -> int:
    """Number of days from 1 January ``year_min`` to 31 December ``year_max``."""
    return (datetime.date(year_max, 12, 31) - datetime.date(year_min, 1, 1)).days + 1


def date_string(year_min: int, day: int) -> str:
    """``day`` days after 1 January ``year_min``, written like "March 3, 1950"."""
    d = datetime.date(year_min, 1, 1) + datetime.timedelta(days=int(day))
    return f"{MONTHS[d.month - 1]} {d.day}, {d.year}"


def _syllables(rng: np.random.Generator, n_words: int, n_syllables: np.ndarray) -> list[str]:
    """``n_words`` lowercase words; word ``i`` has ``n_syllables[i]`` syllables."""
    total = int(n_syllables.sum())
    onset = rng.integers(len(ONSETS), size=total)
    vowel = rng.integers(len(VOWELS), size=total)
    coda = rng.integers(len(CODAS), size=total)
    parts = [ONSETS[o] + VOWELS[v] + CODAS[c] for o, v, c in zip(onset, vowel, coda, strict=True)]
    ends = np.cumsum(n_syllables)
    return ["".join(parts[e - k : e]) for e, k in zip(ends, n_syllables, strict=True)]


def make_words(
    rng: np.random.Generator,
    n: int,
    syllables: tuple[int, int],
    endings: Sequence[str],
    exclude: frozenset[str] = frozenset(),
) -> tuple[str, ...]:
    """``n`` distinct capitalised words of ``syllables`` (min, max) syllables plus an ending."""
    words: dict[str, None] = {}
    for _ in range(_MAX_TRIES):
        need = n - len(words)
        if need == 0:
            break
        batch = 2 * need + 16
        counts = rng.integers(syllables[0], syllables[1] + 1, size=batch)
        stems = _syllables(rng, batch, counts)
        ending = rng.integers(len(endings), size=batch)
        for stem, e in zip(stems, ending, strict=True):
            word = (stem + endings[e]).capitalize()
            if word not in exclude and word not in words:
                words[word] = None
                if len(words) == n:
                    break
    if len(words) < n:
        raise ValueError(f"could not generate {n} distinct words from the syllable tables")
    return tuple(words)


def make_combinations(
    rng: np.random.Generator, n: int, stems: Sequence[str], forms: Sequence[str]
) -> tuple[str, ...]:
    """``n`` distinct strings ``form.format(stem)``, each form drawn uniformly.

    When there are enough stems every value gets its own stem, so values differ in their first
    word (and first token) rather than only in the kind word after it.
    """
    if n > len(stems) * len(forms):
        raise ValueError(f"only {len(stems) * len(forms)} combinations exist, {n} requested")
    if n <= len(stems):
        chosen = rng.choice(len(stems), size=n, replace=False)
        form = rng.integers(len(forms), size=n)
        return tuple(forms[f].format(stems[s]) for s, f in zip(chosen, form, strict=True))
    values: dict[str, None] = {}
    for _ in range(_MAX_TRIES):
        need = n - len(values)
        if need == 0:
            break
        stem = rng.integers(len(stems), size=2 * need + 16)
        form = rng.integers(len(forms), size=len(stem))
        for s, f in zip(stem, form, strict=True):
            values.setdefault(forms[f].format(stems[s]), None)
            if len(values) == n:
                break
    if len(values) < n:
        raise ValueError(f"could not draw {n} distinct combinations")
    return tuple(values)


def make_pools(
    rng: np.random.Generator,
    *,
    n_first_names: int,
    n_surnames: int,
    n_cities: int,
    n_universities: int,
    n_majors: int,
    n_employers: int,
    birth_year_min: int,
    birth_year_max: int,
) -> Pools:
    """Generate every pool from ``rng`` (same generator state → same pools)."""
    first = make_words(rng, n_first_names, (1, 2), FIRST_ENDINGS)
    surnames = make_words(rng, n_surnames, (1, 2), SURNAME_ENDINGS)
    cities = make_words(rng, n_cities, (1, 2), CITY_ENDINGS)
    n_city_unis = min(n_universities // 2, len(cities) * len(UNIVERSITY_FORMS_CITY))
    universities = make_combinations(rng, n_city_unis, cities, UNIVERSITY_FORMS_CITY)
    universities += make_combinations(
        rng, n_universities - n_city_unis, surnames, UNIVERSITY_FORMS_SURNAME
    )
    roots = make_words(rng, n_majors, (2, 2), ("",))
    majors = make_combinations(rng, n_majors, roots, MAJOR_FORMS)
    brands = make_words(rng, n_employers, (1, 2), BRAND_ENDINGS)
    employers = make_combinations(rng, n_employers, brands, INDUSTRY_FORMS)
    return Pools(
        first_names=first,
        surnames=surnames,
        cities=cities,
        universities=universities,
        majors=majors,
        employers=employers,
        birth_year_min=birth_year_min,
        birth_year_max=birth_year_max,
    )

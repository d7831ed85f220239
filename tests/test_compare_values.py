"""A claim's measures read from its words, and two runs' differences (tailmem.compare_values)."""

import pytest

from tailmem.claims.core import ClaimResult
from tailmem.compare_values import Measure, differences, measures


def _claim(ours: str, seeds: list[int] | None) -> ClaimResult:
    return ClaimResult("x", "c", "s", "p", ours, "r", "reproduced", seeds=seeds)


def test_each_mean_and_se_is_named_by_the_words_before_it():
    ours = (
        "group 7: Muon 0.9054 ± 0.0092, Adam 0.625 ± 0.0084; 0.9427 ± 0.0015 (L(adam) 4.38 ± "
        "0.0081 vs 4.208 ± 0.0071), g − 0.5·g(full) = +0.13 ± 0.014"
    )
    assert measures(ours) == [
        Measure("group 7: Muon", 0.9054, 0.0092),
        Measure("Adam", 0.625, 0.0084),
        Measure("", 0.9427, 0.0015),
        Measure("L(adam)", 4.38, 0.0081),
        Measure("", 4.208, 0.0071),
        Measure("g − 0.5·g(full)", 0.13, 0.014),
    ]


def test_words_without_a_mean_and_se_give_their_decimal_numbers():
    assert measures("head FTA muon 0.167, adam_split 0.125 at 3 seeds, 1e-3") == [
        Measure("head FTA muon", 0.167, None),
        Measure("adam_split", 0.125, None),
    ]


def test_differences_pair_measures_by_name_and_give_intervals_only_with_seeds():
    a = _claim("Muon 0.90 ± 0.01, Adam 0.60 ± 0.02, SGD 0.30 ± 0.05", [0, 1, 2])
    b = _claim("Adam 0.70 ± 0.02, Muon 0.95 ± 0.01", [0, 1, 2, 3])
    found = {d.label: d for d in differences(a, b)}
    assert set(found) == {"Muon", "Adam"}  # SGD is in one run only
    assert found["Muon"].estimate == pytest.approx(0.05)
    low, high = found["Adam"].interval
    assert low < 0.1 < high and high - 0.1 == pytest.approx(0.1 - low)
    exact = differences(_claim("r = 0.72", None), _claim("r = 0.75", None))
    assert [(d.label, round(d.estimate, 6), d.interval) for d in exact] == [("r", 0.03, None)]
    assert exact[0].text() == "r +0.03"

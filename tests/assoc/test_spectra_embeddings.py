"""Frequency spectra and embeddings: sizes, rounding, orthonormality, bad input."""

import pytest
import torch

import tailmem.assoc as A
from tailmem.assoc.spectra import head_size
from tailmem.errors import ConfigError


def test_two_group_rounding_and_mass() -> None:
    s = A.two_group(999, 0.8, 0.2)
    assert s.info["head_size"] == 201  # block-aligned: nearest multiple of 3 to 199.8
    assert A.two_group(999, 0.8, 0.2, rounding="nearest").info["head_size"] == 200
    assert head_size(1000, 0.2) == 200  # 3 does not divide K: plain nearest
    assert float(s.p.sum()) == pytest.approx(1.0, abs=1e-14)
    assert float(s.group_mass()[0]) == pytest.approx(0.8, abs=1e-14)
    assert s.group_sizes().tolist() == [201, 798]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: A.two_group(30, 1.0, 0.2), "head_mass"),
        (lambda: A.two_group(30, 0.5, 0.0), "head_fraction"),
        (lambda: A.coupled(31), "divisible by 3"),
        (lambda: A.make_embedding("spherical", 9), "unknown embedding"),
        (lambda: A.hierarchical(0, 4, 2.0), "groups"),
    ],
)
def test_bad_parameters_are_config_errors(call, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        call()


def test_hierarchical_power_law() -> None:
    s = A.hierarchical(groups=4, group_size=3, spectrum_exponent=2.0)
    mass = s.group_mass()
    assert torch.allclose(mass / mass[0], torch.tensor([1, 1 / 4, 1 / 9, 1 / 16]).double())
    assert s.p[:3].eq(s.p[0]).all() and s.K == 12


def test_zipf_and_uniform() -> None:
    z = A.zipf(100, 2.0)
    assert float(z.p[0] / z.p[9]) == pytest.approx(100.0)
    assert z.group.diff().ge(0).all() and z.n_groups >= 2
    assert A.uniform(5).p.eq(0.2).all()


def test_embeddings_are_what_they_claim() -> None:
    eye = torch.eye(9, dtype=torch.float64)
    for emb in (A.decoupled(9), A.coupled(9), A.orthonormal(9, seed=1)):
        E, Et = emb.dense()
        assert emb.orthonormal
        assert torch.allclose(E.T @ E, eye, atol=1e-12)
        assert torch.allclose(Et.T @ Et, eye, atol=1e-12)
    g = A.gaussian(50, 10, seed=0)
    assert g.key.shape == (10, 50) and not g.orthonormal
    assert float(g.key.square().sum(0).mean()) == pytest.approx(1.0, abs=0.15)
    R = A.rotation_zyz(0.3, 1.1, -0.7)
    assert torch.allclose(R @ R.T, torch.eye(3, dtype=torch.float64), atol=1e-14)
    assert float(torch.linalg.det(R)) == pytest.approx(1.0)
    E, _ = A.coupled(6).dense()
    assert torch.equal(E[3:, 3:], A.rotation_zyz(3.638, 2.949, 5.218))
    assert A.custom(eye, eye).orthonormal

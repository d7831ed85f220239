"""Key and object embeddings of the one-layer associative memory (PAPERS.md A4, B).

Keys are the columns of ``E`` (``d_s × K``), objects the columns of ``Ẽ`` (``d_o × K``). Five kinds:

* ``decoupled``: ``E = Ẽ = I_K`` (paper A).
* ``coupled``: ``E = I_{K/3} ⊗ R(3.638, 2.949, 5.218)``, ``Ẽ = I_{K/3} ⊗ R(1.715, 0.876, 3.098)``
  with the Z-Y-Z Euler rotation ``R(a, b, c)`` of paper A (its SignGD counter-example).
* ``orthonormal``: a random orthogonal ``K × K`` matrix each (QR of a Gaussian, signs fixed so the
  draw is Haar), the setting of paper B.
* ``gaussian``: i.i.d. ``N(0, 1/d)`` entries with ``d < K`` (capacity regime of Cabannes et al.).
* ``custom``: user-supplied matrices.

Block-structured embeddings (identity and the coupled construction) keep their ``u × u`` unit
blocks (``unit``, ``key_block``, ``object_block``) so the structured engine (``structure.py``) never
has to build the ``K × K`` matrices; :meth:`Embedding.dense` builds them on demand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from tailmem.errors import ConfigError

PAPER_KEY_ANGLES = (3.638, 2.949, 5.218)
"""Euler angles of the key rotation of paper A's coupled construction (E = I ⊗ R(these))."""
PAPER_OBJECT_ANGLES = (1.715, 0.876, 3.098)
"""Euler angles of the object rotation of paper A's coupled construction (Ẽ = I ⊗ R(these))."""

EMBEDDINGS = ("decoupled", "coupled", "orthonormal", "gaussian")


def rotation_zyz(a: float, b: float, c: float, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The 3×3 rotation ``R(a, b, c) = R_z(a) R_y(b) R_z(c)`` written out in PAPERS.md A4."""
    ca, sa, cb, sb, cc, sc = (
        math.cos(a),
        math.sin(a),
        math.cos(b),
        math.sin(b),
        math.cos(c),
        math.sin(c),
    )
    return torch.tensor(
        [
            [ca * cb * cc - sa * sc, -ca * cb * sc - sa * cc, ca * sb],
            [sa * cb * cc + ca * sc, -sa * cb * sc + ca * cc, sa * sb],
            [-sb * cc, sb * sc, cb],
        ],
        dtype=dtype,
    )


@dataclass(frozen=True)
class Embedding:
    """Key embedding ``E`` (``d_s × K``) and object embedding ``Ẽ`` (``d_o × K``).

    For block-diagonal embeddings ``E = I ⊗ key_block`` and ``Ẽ = I ⊗ object_block`` with blocks of
    size ``unit``, ``key``/``obj`` are left ``None`` and built by :meth:`dense` when needed.
    """

    name: str
    K: int
    d_key: int
    d_obj: int
    orthonormal: bool
    unit: int | None = None
    key_block: torch.Tensor | None = None
    object_block: torch.Tensor | None = None
    key: torch.Tensor | None = None
    obj: torch.Tensor | None = None

    @property
    def block_structured(self) -> bool:
        """True when ``E`` and ``Ẽ`` are ``I ⊗ block`` (identity or the coupled construction)."""
        return self.unit is not None

    def dense(self, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
        """``(E, Ẽ)`` as dense matrices."""
        if self.key is not None and self.obj is not None:
            return self.key.to(dtype), self.obj.to(dtype)
        assert self.unit is not None and self.key_block is not None
        assert self.object_block is not None
        eye = torch.eye(self.K // self.unit, dtype=dtype)
        return (
            torch.kron(eye, self.key_block.to(dtype)),
            torch.kron(eye, self.object_block.to(dtype)),
        )


def decoupled(K: int) -> Embedding:
    """``E = Ẽ = I_K``."""
    _check_k(K)
    eye = torch.eye(1, dtype=torch.float64)
    return Embedding("decoupled", K, K, K, True, unit=1, key_block=eye, object_block=eye)


def coupled(
    K: int,
    key_angles: tuple[float, float, float] = PAPER_KEY_ANGLES,
    object_angles: tuple[float, float, float] = PAPER_OBJECT_ANGLES,
) -> Embedding:
    """Paper A's coupled construction ``E = I_{K/3} ⊗ R(key_angles)``, ``Ẽ = I_{K/3} ⊗ R(obj)``."""
    _check_k(K)
    if K % 3:
        raise ConfigError(f"K={K}: the coupled embedding needs K divisible by 3")
    return Embedding(
        "coupled",
        K,
        K,
        K,
        True,
        unit=3,
        key_block=rotation_zyz(*key_angles),
        object_block=rotation_zyz(*object_angles),
    )


def haar_orthogonal(n: int, generator: torch.Generator) -> torch.Tensor:
    """A Haar-random ``n × n`` orthogonal matrix: QR of a Gaussian with the signs of R fixed."""
    q, r = torch.linalg.qr(torch.randn(n, n, generator=generator, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r)).unsqueeze(0)


def orthonormal(K: int, seed: int = 0) -> Embedding:
    """Independent Haar-random orthogonal ``E`` and ``Ẽ`` (``K × K``)."""
    _check_k(K)
    gen = torch.Generator().manual_seed(seed)
    key = haar_orthogonal(K, gen)
    obj = haar_orthogonal(K, gen)
    return Embedding("orthonormal", K, K, K, True, key=key, obj=obj)


def gaussian(K: int, d: int, seed: int = 0, n_objects: int | None = None) -> Embedding:
    """Random embeddings with i.i.d. ``N(0, 1/d)`` entries (columns of norm ≈ 1).

    ``E`` is ``d × K``; ``Ẽ`` is ``d × n_objects`` (default ``K``: every fact its own object;
    fewer objects model Cabannes et al.'s labels ``y = x mod M``, see ``DenseMemory``).
    """
    _check_k(K)
    if d < 1:
        raise ConfigError(f"d={d}: the embedding dimension must be a positive integer")
    n_obj = K if n_objects is None else n_objects
    if n_obj < 2:
        raise ConfigError(f"n_objects={n_obj}: expected at least 2 objects")
    gen = torch.Generator().manual_seed(seed)
    scale = 1.0 / math.sqrt(d)
    key = torch.randn(d, K, generator=gen, dtype=torch.float64) * scale
    obj = torch.randn(d, n_obj, generator=gen, dtype=torch.float64) * scale
    return Embedding("gaussian", K, d, d, False, key=key, obj=obj)


def custom(key: torch.Tensor, obj: torch.Tensor, name: str = "custom") -> Embedding:
    """User-supplied ``E`` (``d_s × K``) and ``Ẽ`` (``d_o × n_objects``).

    ``n_objects = K`` unless the memory is given an ``answers`` map; orthonormality is detected.
    """
    if key.ndim != 2 or obj.ndim != 2:
        raise ConfigError(
            f"custom embeddings: expected matrices E (d_s×K) and Ẽ (d_o×n_objects), got "
            f"{tuple(key.shape)} and {tuple(obj.shape)}"
        )
    key = key.to(torch.float64)
    obj = obj.to(torch.float64)
    K = key.shape[1]
    square = key.shape[0] == K and obj.shape == (K, K)
    eye = torch.eye(K, dtype=torch.float64)
    ortho = (
        square
        and torch.allclose(key.T @ key, eye, atol=1e-10)
        and torch.allclose(obj.T @ obj, eye, atol=1e-10)
    )
    return Embedding(name, K, key.shape[0], obj.shape[0], bool(ortho), key=key, obj=obj)


def make_embedding(name: str, K: int, d: int | None = None, seed: int = 0) -> Embedding:
    """Build the embedding called ``name`` (one of :data:`EMBEDDINGS`)."""
    if name == "decoupled":
        return decoupled(K)
    if name == "coupled":
        return coupled(K)
    if name == "orthonormal":
        return orthonormal(K, seed)
    if name == "gaussian":
        if d is None:
            raise ConfigError("the gaussian embedding needs its dimension d")
        return gaussian(K, d, seed)
    raise ConfigError(f"unknown embedding {name!r}; expected one of: {', '.join(EMBEDDINGS)}")


def _check_k(K: int) -> None:
    if not isinstance(K, int) or K < 2:
        raise ConfigError(f"K={K!r}: the number of facts must be an integer ≥ 2")

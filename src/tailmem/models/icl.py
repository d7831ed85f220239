"""The GPT as an in-context regressor: vectors in, one number out per position.

In-context regression (Garg et al. 2022 format) feeds a sequence of vectors — ``x_1, y_1, x_2,
y_2, …`` each written as one ``features``-wide token — and reads a real prediction at every
position. :class:`ICLRegressor` is a :class:`~tailmem.models.gpt.GPT` whose token embedding is a
linear read-in ``features -> d_model`` and whose LM head is a linear read-out ``d_model -> 1``;
the blocks, norms, rotary positions and the roles of every matrix are the GPT's, so optimiser
recipes route Q, K, V, O, W_in, W_out exactly as for the language models (the read-in has role
``embed`` and the read-out role ``head``: Adam in every arm of paper A).
"""

from __future__ import annotations

from dataclasses import replace

from torch import Tensor, nn

from tailmem.errors import ConfigError
from tailmem.models.gpt import GPT, GPTConfig


class ICLRegressor(GPT):
    """``model(tokens (B, T, features)) -> predictions (B, T)``; see the module docstring.

    ``cfg.vocab_size`` is not used (the read-in replaces the embedding table); both new layers
    are initialised like the GPT's embedding and head, Normal(0, ``init_std``).
    """

    def __init__(self, cfg: GPTConfig, features: int) -> None:
        if cfg.tie_weights:
            raise ConfigError(
                "ICLRegressor: tie_weights must be false (read-in and read-out differ)"
            )
        if features < 1:
            raise ConfigError(f"ICLRegressor: features must be >= 1, got {features}")
        super().__init__(replace(cfg, vocab_size=1))
        self.features = features
        self.input_axes = ("B", "T", f"features={features}")
        self.embed = nn.Linear(features, cfg.d_model, bias=False)
        self.head = nn.Linear(cfg.d_model, 1, bias=False)
        for layer in (self.embed, self.head):
            nn.init.normal_(layer.weight, 0.0, cfg.init_std)

    def forward(self, tokens: Tensor) -> Tensor:  # type: ignore[override]
        """Predictions ``(B, T)`` for token vectors ``(B, T, features)`` (the loss is the
        study's: no ``targets`` argument)."""
        if tokens.ndim != 3 or tokens.shape[-1] != self.features:
            raise ValueError(f"expected tokens (B, T, {self.features}), got {tuple(tokens.shape)}")
        return self.head(self.hidden(tokens)).squeeze(-1)

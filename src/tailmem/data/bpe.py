"""Byte-level BPE tokenizers for the synthetic data (Hugging Face ``tokenizers``).

The tokenizer uses GPT-2's byte-level pre-tokenizer: text is first split into words (a leading
space stays with its word, digits and punctuation form their own pieces) and BPE merges never
cross those splits. Strings that are concatenated at such a split therefore tokenize to the
concatenation of their token ids, which is what lets the QA builder tokenize every name and value
once and compose hundreds of thousands of samples from the cached pieces.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from tailmem.data.ragged import Ragged
from tailmem.errors import DataError

MIN_FREQUENCY = 2


def train_bpe(
    texts: Iterable[str], vocab_size: int, eos_token: str, min_frequency: int = MIN_FREQUENCY
) -> Tokenizer:
    """Train a byte-level BPE of at most ``vocab_size`` tokens: ``eos_token`` (id 0), 256 bytes,
    merges.

    A merge needs a pair seen at least ``min_frequency`` times, so a small corpus may stop
    before ``vocab_size``; read the real size from ``tokenizer.get_vocab_size()``. The trainer is
    deterministic for a fixed input and ``tokenizers`` version.
    """
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[eos_token],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Read a ``tokenizer.json`` file; a missing or unreadable file raises :class:`DataError`."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"tokenizer file {path} does not exist; expected a tokenizer.json file")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust library raises a bare Exception on malformed JSON
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(
            f"tokenizer file {path} is not a valid tokenizers JSON file ({first_line})"
        ) from None


def token_id(tokenizer: Tokenizer, token: str) -> int:
    """Id of ``token`` in the vocabulary; :class:`DataError` if the tokenizer lacks it."""
    index = tokenizer.token_to_id(token)
    if index is None:
        raise DataError(f"tokenizer has no token {token!r}; expected it as end-of-text token")
    return int(index)


def add_whole_tokens(tokenizer: Tokenizer, texts: Iterable[str]) -> None:
    """Make each distinct text one token of ``tokenizer`` (appended after its ids, in first-seen
    order). Added tokens are matched in the raw text before pre-tokenization, so a text then
    encodes to its one id wherever it occurs."""
    distinct = dict.fromkeys(texts)
    tokenizer.add_tokens([AddedToken(text, normalized=False) for text in distinct])


def encode_pieces(tokenizer: Tokenizer, strings: Sequence[str], dtype: np.dtype | type) -> Ragged:
    """Token ids of every string (no special tokens added), as a ragged array."""
    encodings = tokenizer.encode_batch(list(strings), add_special_tokens=False)
    return Ragged.from_lists([e.ids for e in encodings], dtype=dtype)


def token_dtype(vocab_size: int) -> np.dtype:
    """``uint16`` when every token id fits, else ``uint32``."""
    return np.dtype(np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.uint32)

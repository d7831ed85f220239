"""The GPT's position encodings (RoPE, learned, none) and packed documents (per-token positions
and a block-diagonal causal mask), against the model's own unpacked forward."""

from __future__ import annotations

import pytest
import torch

from tailmem.errors import ConfigError
from tailmem.models.gpt import GPT, POS_ENCODINGS, count_params, document_mask, gpt_config

VOCAB = 40


def tiny(**overrides) -> GPT:
    torch.manual_seed(0)
    return GPT(gpt_config("tiny", vocab_size=VOCAB, **overrides)).eval()


def packed_row(lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, ...]:
    """One row of documents of ``lengths``: tokens, positions restarting at 0, document ids."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, VOCAB, (1, sum(lengths)), generator=g)
    positions = torch.cat([torch.arange(n) for n in lengths])[None]
    doc_ids = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))[None]
    return tokens, positions, doc_ids


@pytest.mark.parametrize("pos_encoding", POS_ENCODINGS)
def test_a_packed_document_sees_exactly_what_it_sees_alone(pos_encoding):
    model = tiny(pos_encoding=pos_encoding)
    lengths = [5, 7, 4]
    tokens, positions, doc_ids = packed_row(lengths)
    packed = model(tokens, positions=positions, doc_ids=doc_ids)[0]
    cross = model(tokens)[0]
    start = 0
    for n in lengths:
        alone = model(tokens[:, start : start + n])[0]
        torch.testing.assert_close(packed[:, start : start + n], alone, atol=1e-5, rtol=1e-5)
        if start:  # with cross-document attention a later document sees the earlier ones
            assert (cross[:, start : start + n] - alone).abs().max() > 1e-3
        start += n


def test_default_positions_and_a_single_document_are_the_plain_causal_forward():
    model = tiny()
    x = torch.randint(0, VOCAB, (3, 11))
    plain = model(x)[0]
    assert torch.equal(model(x, positions=torch.arange(11))[0], plain)
    one_doc = model(x, doc_ids=torch.zeros(3, 11, dtype=torch.long))[0]
    torch.testing.assert_close(one_doc, plain, atol=1e-6, rtol=1e-5)


def test_rope_depends_on_offsets_only_and_learned_positions_on_absolute_ones():
    x = torch.randint(0, VOCAB, (2, 9))
    shifted = torch.arange(9) + 20
    rope, learned = tiny(), tiny(pos_encoding="learned")
    torch.testing.assert_close(rope(x, positions=shifted)[0], rope(x)[0], atol=1e-5, rtol=1e-5)
    assert (learned(x, positions=shifted)[0] - learned(x)[0]).abs().max() > 1e-3


def test_without_positions_one_layer_cannot_see_the_order_before_the_last_token():
    """One layer of NoPE attention reads the earlier tokens as a set (deeper layers see the
    order through the causal mask)."""
    x = torch.randint(0, VOCAB, (1, 10), generator=torch.Generator().manual_seed(3))
    swapped = x.clone()
    swapped[0, [1, 6]] = x[0, [6, 1]]
    for encoding, blind in (("none", True), ("rope", False), ("learned", False)):
        model = tiny(pos_encoding=encoding, n_layer=1)
        last, last_swapped = model(x)[0][0, -1], model(swapped)[0][0, -1]
        if blind:
            torch.testing.assert_close(last, last_swapped, atol=1e-5, rtol=1e-5)
        else:
            assert (last - last_swapped).abs().max() > 1e-4, encoding


def test_learned_positions_are_an_embedding_role_that_trains():
    model = tiny(pos_encoding="learned")
    assert model.pos_embed.weight.shape == (model.cfg.max_seq_len, model.cfg.d_model)
    roles = model.param_roles()
    assert roles["pos_embed.weight"] == "embed" and roles["embed.weight"] == "embed"
    assert not hasattr(model, "rope_cos") and not hasattr(tiny(pos_encoding="none"), "rope_cos")
    x = torch.randint(0, VOCAB, (2, 12))
    model(x, x)[1].backward()
    assert model.pos_embed.weight.grad[:12].abs().sum() > 0
    assert model.pos_embed.weight.grad[12:].abs().sum() == 0  # positions never used
    table = model.cfg.max_seq_len * model.cfg.d_model
    rope_cfg = tiny().cfg
    assert count_params(model.cfg) == count_params(rope_cfg) + table
    assert count_params(model.cfg, non_embedding=True) == count_params(rope_cfg, non_embedding=True)


def test_document_mask_is_block_diagonal_and_causal():
    mask = document_mask(torch.tensor([[0, 0, 1, 1, 1, 2]]))[0, 0]
    expected = torch.zeros(6, 6, dtype=torch.bool)
    for lo, hi in ((0, 2), (2, 5), (5, 6)):
        expected[lo:hi, lo:hi] = torch.ones(hi - lo, hi - lo, dtype=torch.bool).tril()
    assert torch.equal(mask, expected)


def test_bad_pos_encoding_is_a_config_error():
    with pytest.raises(ConfigError, match="pos_encoding must be one of rope, learned, none"):
        gpt_config("tiny", vocab_size=VOCAB, pos_encoding="alibi")
    # An odd head dimension is fine without RoPE.
    assert gpt_config("tiny", vocab_size=VOCAB, d_model=36, n_head=4, pos_encoding="none")

"""The compiled uint8 table lookup (fusedsim.core.cpu.table) equals PyTorch's indexing, and refuses what it cannot take."""

from __future__ import annotations

import pytest
import torch

from fusedsim.core.cpu.table import lookup_u8


def test_equals_indexing_for_every_code_and_layout():
    table = torch.rand(256, dtype=torch.float64) * 3 - 1
    codes = torch.randint(0, 256, (2, 3, 37, 41), dtype=torch.uint8)
    codes.view(-1)[:256] = torch.arange(256, dtype=torch.uint8)
    for x in (codes, codes.transpose(-1, -2), codes[:, :, 3:, ::2]):
        got = lookup_u8(x, table)
        assert got.shape == x.shape and got.dtype == table.dtype and torch.equal(got, table[x.long()])


def test_refuses_other_inputs():
    with pytest.raises(ValueError, match="uint8 CPU codes"):
        lookup_u8(torch.zeros(3, dtype=torch.int16), torch.zeros(256))
    with pytest.raises(ValueError, match=r"\(256,\) table"):
        lookup_u8(torch.zeros(3, dtype=torch.uint8), torch.zeros(255))

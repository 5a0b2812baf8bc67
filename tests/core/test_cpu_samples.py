"""Integer frames handed to the numba kernels (:mod:`fusedsim.core.cpu.samples`): the same sample values in the
two dtypes the kernels are compiled for, without a copy where the storage already holds them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fusedsim.core.cpu.samples import unsigned_samples


def test_int16_storage_of_16_bit_samples_is_read_as_uint16_without_a_copy():
    # the video readers store 16-bit samples in int16: 40000 reads as -25536
    values = np.array([[0, 1023, 32767, 32768, 40000, 65535]], dtype=np.uint16)
    stored = torch.from_numpy(values.view(np.int16).copy())
    got = unsigned_samples(stored)
    assert got.dtype == np.uint16 and np.array_equal(got, values)
    assert np.shares_memory(got, stored.numpy())


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint16])
def test_wider_and_unsigned_dtypes_give_the_same_uint16_values(dtype):
    values = torch.tensor([[0, 1, 4095, 65535]], dtype=torch.int64)
    got = unsigned_samples(values.to(dtype))
    assert got.dtype == np.uint16 and got.tolist() == values.tolist()


def test_uint8_stays_uint8_and_views_become_contiguous():
    frames = torch.arange(24, dtype=torch.uint8).reshape(2, 3, 4)
    got = unsigned_samples(frames[:, :, 1:3])
    assert got.dtype == np.uint8 and got.flags.c_contiguous
    assert np.array_equal(got, frames.numpy()[:, :, 1:3])

"""Triton integer-SSIM kernel against its PyTorch twin: per-pixel terms and pooled scores compared with ``==``.

Random clips of many sizes (1x1, odd, primes, non-multiples of the blocks, several row bands and column blocks),
8/10/12 bit and the 16-bit intended variant, uint8/uint16/int32 storage, non-contiguous views. On the GPU when
there is one, else through Triton's interpreter (small sizes).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fusedsim.vmaf.integer_ssim_kernel import integer_ssim_fwd, integer_ssim_terms_fwd
from fusedsim.vmaf.integer_ssim_twin import integer_ssim_ref, integer_ssim_terms_ref
from _offline_compile import carried_per_loop


def _clip(n, h, w, bit_depth, seed, dtype=None, noise=24):
    rng = np.random.default_rng(seed)
    top = (1 << bit_depth) - 1
    # smooth-ish content plus noise, so that SSIM takes varied values (not only near 0)
    base = rng.integers(0, top + 1, size=(n, 1, 1)) + np.cumsum(rng.integers(-3, 4, size=(n, h, w)), axis=2)
    ref = np.clip(base, 0, top)
    dist = np.clip(ref + rng.integers(-noise, noise + 1, size=ref.shape) * (top // 255 + 1), 0, top)
    np_dtype = dtype or (np.uint8 if bit_depth == 8 else np.uint16)
    return torch.from_numpy(ref.astype(np_dtype)), torch.from_numpy(dist.astype(np_dtype))


SHAPES = [(1, 1, 1, 8), (2, 1, 9, 8), (1, 9, 1, 8), (2, 7, 13, 8), (1, 13, 7, 8), (1, 17, 31, 8), (3, 5, 5, 8),
          (1, 40, 37, 8), (2, 7, 13, 10), (1, 17, 31, 10), (1, 40, 37, 10), (1, 1, 1, 12), (2, 13, 7, 12),
          (1, 40, 37, 12)]


@pytest.mark.parametrize("n, h, w, bit_depth", SHAPES)
def test_kernel_equals_twin(n, h, w, bit_depth, kernel_device):
    ref, dist = _clip(n, h, w, bit_depth, seed=h * 1000 + w * 10 + bit_depth)
    want = integer_ssim_ref(ref, dist, bit_depth)
    got = integer_ssim_fwd(ref.to(kernel_device), dist.to(kernel_device), bit_depth).cpu()
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("block_w, rows, bands", [(16, 4, 4), (8, 8, 4), (32, 16, 1)])
def test_terms_equal_twin_across_block_edges(block_w, rows, bands, kernel_device):
    # several column blocks and row bands per frame, bands of different frames in one program
    ref, dist = _clip(2, 13, 37, 10, seed=7)
    want = integer_ssim_terms_ref(ref, dist, 10).reshape(2, -1)
    got = integer_ssim_terms_fwd(ref.to(kernel_device), dist.to(kernel_device), 10, block_w=block_w, rows=rows,
                                 bands=bands).cpu()
    assert torch.equal(got, want)


def test_16_bit_intended_uses_wide_moments(kernel_device):
    ref, dist = _clip(1, 23, 19, 16, seed=3)
    assert int(ref.to(torch.int32).max()) > 32767  # exercises uint16 samples above the int16 range
    want = integer_ssim_ref(ref, dist, 16)
    got = integer_ssim_fwd(ref.to(kernel_device), dist.to(kernel_device), 16).cpu()
    assert got.tolist() == want.tolist()


def test_storage_dtypes_and_strides(kernel_device):
    ref, dist = _clip(2, 24, 30, 10, seed=11, dtype=np.int32)
    want = integer_ssim_ref(ref, dist, 10)
    r, d = ref.to(kernel_device), dist.to(kernel_device)
    assert integer_ssim_fwd(r, d, 10).cpu().tolist() == want.tolist()
    # transposed (non-contiguous) frames
    want_t = integer_ssim_ref(ref.transpose(1, 2), dist.transpose(1, 2), 10)
    got_t = integer_ssim_fwd(r.transpose(1, 2), d.transpose(1, 2), 10).cpu()
    assert got_t.tolist() == want_t.tolist()
    # a cropped view with row and frame strides
    big_r, big_d = _clip(3, 30, 40, 8, seed=12)
    sl = (slice(None, None, 2), slice(3, 26), slice(5, 36))
    want_s = integer_ssim_ref(big_r[sl], big_d[sl], 8)
    got_s = integer_ssim_fwd(big_r.to(kernel_device)[sl], big_d.to(kernel_device)[sl], 8).cpu()
    assert got_s.tolist() == want_s.tolist()


def test_small_buffer_groups_frames(kernel_device):
    ref, dist = _clip(5, 11, 12, 8, seed=5)
    want = integer_ssim_ref(ref, dist, 8)
    got = integer_ssim_fwd(ref.to(kernel_device), dist.to(kernel_device), 8, max_buffer_bytes=2 * 11 * 12 * 8).cpu()
    assert got.tolist() == want.tolist()


def test_compiled_loop_carries_the_whole_row_window():
    """The 8 older rows of all 5 moment windows are carried through the compiled row loop: 40 values."""
    sig = {"ref_ptr": "*u8", "dist_ptr": "*u8", "out_ptr": "*fp64", "const_ptr": "*fp64", "N": "i32", "H": "i32",
           "W": "i32", "NBANDS": "i32", "s_rn": "i32", "s_rh": "i32", "s_rw": "i32", "s_dn": "i32", "s_dh": "i32",
           "s_dw": "i32", "s_on": "i32", "BAND": "constexpr", "BLOCK_W": "constexpr", "ROWS": "constexpr",
           "DT": "constexpr", "MASK16": "constexpr"}
    consts = {"BAND": 1, "BLOCK_W": 128, "ROWS": 32, "DT": "tl.int32", "MASK16": False}
    assert carried_per_loop("fusedsim.vmaf.integer_ssim_kernel:_integer_ssim_fwd_kernel", sig, consts, num_warps=4) == [40]

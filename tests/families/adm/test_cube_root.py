"""glibc's ``powf(x, 1/3f)`` as a Triton function (``fusedsim.families.adm.cube_root``): ADM's cube roots on the
device, bit for bit.

Expected values: glibc 2.36's ``powf`` printed by C (the same list as ``test_adm.py::test_powf_third_is_glibc_powf``,
including an input where glibc is not correctly rounded), and the C library of the machine running the test, called
through ctypes on 60,000 floats spread over every exponent (where that library is glibc: another C library's
``powf`` is another function). The comparison is exact (``==`` on the bits). Runs through Triton's interpreter
without a GPU.
"""

from __future__ import annotations

import ctypes.util
import platform

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from fusedsim.families.adm.cube_root import powf_third, powf_third_tables
from fusedsim.families.adm.twin import powf_third_array


@triton.jit
def _powf_third_kernel(x_ptr, y_ptr, dbl_ptr, bits_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok, other=1.0)
    tl.store(y_ptr + offs, powf_third(x, dbl_ptr, bits_ptr), mask=ok)


def _device_powf_third(x: np.ndarray, device: torch.device) -> np.ndarray:
    xt = torch.from_numpy(np.ascontiguousarray(x, np.float32)).to(device)
    out = torch.empty_like(xt)
    dbl, bits = powf_third_tables(device)
    block = 1024 if device.type == "cuda" else 1 << 16
    _powf_third_kernel[(triton.cdiv(xt.numel(), block),)](xt, out, dbl, bits, xt.numel(), BLOCK=block,
                                                          enable_fp_fusion=False)
    return out.cpu().numpy()


def test_printed_glibc_values(kernel_device):
    x = [1.0, 8.0, 27.0, 1e-30, 3.5e12, 0.0, 1e-42, 123.456, 2.0 ** -149, 3.4e38, float.fromhex("0x1.0001ccp-26")]
    want = [1.0, 2.0, 3.0, 9.999993194620416e-11, 15182.94921875, 0.0, 1.0001747253486886e-14, 4.979328155517578,
            1.1190335437051406e-15, 6979538386944.0, float.fromhex("0x1.428aeep-9")]
    got = _device_powf_third(np.array(x, np.float32), kernel_device)
    assert got.tolist() == np.array(want, np.float32).tolist()


@pytest.mark.skipif(ctypes.util.find_library("m") is None or platform.libc_ver()[0] != "glibc",
                    reason="the reference is the host's glibc powf")
def test_equals_the_c_library_on_every_exponent(kernel_device):
    rng = np.random.default_rng(7)
    exponents = np.repeat(np.arange(0, 255, dtype=np.uint32), 200)  # 200 floats of each binade, subnormals too
    mantissas = rng.integers(0, 1 << 23, exponents.size, dtype=np.uint32)
    edges = np.concatenate([np.arange(0, 64), np.arange(0x3F2F0000, 0x3F370000, 97),  # log2's table boundaries
                            np.arange(0x007FFFC0, 0x00800040), np.arange(0x7F7FFFC0, 0x7F800000)]).astype(np.uint32)
    x = np.concatenate([(exponents << 23) | mantissas, edges]).view(np.float32)
    got = _device_powf_third(x, kernel_device)
    want = powf_third_array(x)
    bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert bad.size == 0, [(float(x[i]), float(got[i]), float(want[i])) for i in bad[:5]]

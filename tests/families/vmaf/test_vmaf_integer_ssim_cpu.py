"""The numba CPU path of integer_ssim (``fusedsim.vmaf.integer_ssim_cpu``) ``==`` the PyTorch twin.

Random clips (odd sizes down to 1x1, 8/10/12 bit, several frames, both threading strategies: frames across
threads and row bands of one frame) and every fixture frame (also ``==`` libvmaf's own values).
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
import torch

import fusedsim
import fusedsim.vmaf.integer_ssim_cpu as mod
from fusedsim.core.registry import op as registered_op
from fusedsim.vmaf.integer_ssim_twin import (
    integer_ssim_constants,
    integer_ssim_ref,
    integer_ssim_weight_sum,
)
from fusedsim.vmaf import integer_ssim

SHAPES = [(1, 1, 1), (3, 7, 13), (2, 37, 70), (1, 37, 70), (4, 1, 9), (2, 9, 1), (1, 5, 4), (3, 64, 50)]


def _clip(shape, bits, seed, noise=40):
    gen = torch.Generator().manual_seed(seed)
    ref = torch.randint(0, 1 << bits, shape, generator=gen)
    dist = (ref + torch.randint(-noise, noise + 1, shape, generator=gen)).clamp(0, (1 << bits) - 1)
    dtype = torch.uint8 if bits == 8 else torch.int16
    return ref.to(dtype), dist.to(dtype)


def _by_band(ref, dist, bits, bands):
    k1, k2 = integer_ssim_constants(bits)
    sums = torch.from_numpy(mod._sums_by_band(mod._as_array(ref), mod._as_array(dist), k1, k2, bands))
    return sums / torch.full_like(sums, float(integer_ssim_weight_sum(*ref.shape[1:])))


@pytest.mark.parametrize("bits", [8, 10, 12])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_numba_equals_twin_random(shape, bits):
    ref, dist = _clip(shape, bits, seed=hash((shape, bits)) % 1000)
    twin = integer_ssim_ref(ref, dist, bits)
    assert torch.equal(mod.integer_ssim_numba(ref, dist, bits), twin)
    for bands in (1, 2, 3, 5):
        assert torch.equal(_by_band(ref, dist, bits, bands), twin), bands


@pytest.mark.parametrize("bits", [8, 10, 12])
def test_numba_equals_twin_extremes(bits):
    peak = (1 << bits) - 1
    dtype = torch.uint8 if bits == 8 else torch.int16
    flat = torch.full((1, 19, 23), peak, dtype=dtype)
    zero = torch.zeros_like(flat)
    ramp = (torch.arange(19 * 23).reshape(1, 19, 23) * peak // (19 * 23)).to(dtype)
    for r, d in [(flat, zero), (zero, flat), (zero, zero), (flat, flat), (ramp, flat - ramp), (ramp, ramp)]:
        assert torch.equal(mod.integer_ssim_numba(r, d, bits), integer_ssim_ref(r, d, bits))


def test_numba_other_dtypes_and_strides():
    ref, dist = _clip((2, 21, 30), 10, seed=3)
    twin = integer_ssim_ref(ref, dist, 10)
    for dtype in (torch.int32, torch.int64, torch.uint16):
        assert torch.equal(mod.integer_ssim_numba(ref.to(dtype), dist.to(dtype), 10), twin), dtype
    wide_r = torch.zeros(2, 21, 60, dtype=torch.int16)
    wide_r[..., ::2] = ref
    assert torch.equal(mod.integer_ssim_numba(wide_r[..., ::2], dist, 10), twin)


def test_numba_intended_16bit_equals_twin():
    ref, dist = _clip((2, 17, 26), 16, seed=4, noise=3000)
    ref, dist = ref.to(torch.int32), dist.to(torch.int32)
    assert torch.equal(mod.integer_ssim_numba(ref, dist, 16), integer_ssim_ref(ref, dist, 16))


@pytest.mark.parametrize("threads", sorted({1, 2, numba.config.NUMBA_NUM_THREADS}))
def test_numba_threads_give_the_same_bits(threads):
    ref, dist = _clip((3, 45, 33), 8, seed=5)
    twin = integer_ssim_ref(ref, dist, 8)
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        assert torch.equal(mod.integer_ssim_numba(ref, dist, 8), twin)
        assert torch.equal(mod.integer_ssim_numba(ref[:1], dist[:1], 8), twin[:1])
    finally:
        numba.set_num_threads(before)


def test_public_api_uses_numba_on_cpu_and_twin_when_forced(monkeypatch):
    ref, dist = _clip((2, 12, 15), 8, seed=6)
    calls = []
    real = mod.integer_ssim_numba
    op = registered_op("integer_ssim")
    monkeypatch.setattr(op, "_cpu_fn", lambda *a: calls.append(1) or real(*a))
    out = integer_ssim(ref, dist, 8)
    assert calls == [1]
    with fusedsim.use_backend("reference"):
        forced = integer_ssim(ref.numpy(), dist.numpy(), 8)
    assert calls == [1]
    assert torch.equal(out, forced)


def test_numba_equals_twin_and_libvmaf_every_fixture_frame(pair):
    r, d = torch.from_numpy(np.ascontiguousarray(pair.ref[0])), torch.from_numpy(np.ascontiguousarray(pair.dist[0]))
    got = mod.integer_ssim_numba(r, d, pair.bit_depth)
    assert torch.equal(got, integer_ssim_ref(r, d, pair.bit_depth))
    assert [float(v) for v in got] == pair.expected("integer_ssim")
    assert torch.equal(_by_band(r, d, pair.bit_depth, 3), got)

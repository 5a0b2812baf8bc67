"""integer_ssim (libvmaf feature ``ssim``) against libvmaf's own per-frame values, with ``==`` on the double.

Every frame of every fixture pair (9 pairs, 39 frames, 8 and 10 bit, even and odd sizes) is checked three ways:
the PyTorch twin (CPU path), the Triton kernels (on the GPU when there is one, else on the CPU through Triton's
interpreter, full-size frames: about half a second a frame there), and the public function on the default path.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusedsim
from fusedsim.vmaf.integer_ssim_twin import integer_ssim_ref
from fusedsim.vmaf import integer_ssim


def _exact(values: torch.Tensor, expected: list[float]) -> None:
    got = [float(v) for v in values.cpu()]
    assert got == expected, f"got {[repr(g) for g in got]}, libvmaf {[repr(e) for e in expected]}"


def test_twin_equals_libvmaf_every_frame(pair):
    r, d = torch.from_numpy(pair.ref[0]), torch.from_numpy(pair.dist[0])
    _exact(integer_ssim_ref(r, d, pair.bit_depth), pair.expected("integer_ssim"))


def test_kernel_equals_libvmaf_every_frame(pair, kernel_device):
    from fusedsim.vmaf.integer_ssim_kernel import integer_ssim_fwd

    r = torch.from_numpy(pair.ref[0]).to(kernel_device)
    d = torch.from_numpy(pair.dist[0]).to(kernel_device)
    _exact(integer_ssim_fwd(r, d, pair.bit_depth), pair.expected("integer_ssim"))


def test_public_api_numpy_cpu(pair):
    out = integer_ssim(pair.ref[0], pair.dist[0], pair.bit_depth)
    assert out.dtype == torch.float64 and out.shape == (pair.n,) and out.device.type == "cpu"
    _exact(out, pair.expected("integer_ssim"))
    single = integer_ssim(pair.ref[0][0], pair.dist[0][0], pair.bit_depth)
    assert single.shape == () and float(single) == pair.expected("integer_ssim")[0]


def test_public_api_forced_triton_backend(vmaf_pairs, kernel_device):
    pair = next(p for p in vmaf_pairs if p.name == "e333x217_10b_mixed")
    with fusedsim.use_backend("triton"):
        out = integer_ssim(torch.from_numpy(pair.ref[0]).to(kernel_device),
                           torch.from_numpy(pair.dist[0]).to(kernel_device), 10)
    assert out.device.type == kernel_device.type
    _exact(out, pair.expected("integer_ssim"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_public_api_cuda_every_frame(vmaf_pairs):
    for pair in vmaf_pairs:
        out = integer_ssim(torch.from_numpy(pair.ref[0]).cuda(), torch.from_numpy(pair.dist[0]).cuda(),
                           pair.bit_depth)
        assert out.is_cuda
        _exact(out, pair.expected("integer_ssim"))


def test_identical_frames_score_one(vmaf_pairs):
    # the fixtures' identical frames ("shift (0,0)", "identity") report exactly 1
    pair = next(p for p in vmaf_pairs if p.name == "a576x324_8b_shift")
    assert float(integer_ssim(pair.ref[0][0], pair.ref[0][0], 8)) == 1.0


def test_16_bit_refused_with_reason():
    x = np.zeros((16, 16), np.uint16)
    with pytest.raises(ValueError, match="bit_depth=16.*overflow.*intended_16bit"):
        integer_ssim(x, x, 16)


def test_16_bit_intended_value(vmaf_pairs):
    # libvmaf's README for these fixtures quotes the mathematically intended 16-bit values of clip e (10-bit
    # samples shifted left by 6) to 5 digits: 0.99951, 0.88108, 0.93026. libvmaf itself reports other numbers.
    pair = next(p for p in vmaf_pairs if p.name == "e333x217_10b_mixed")
    r = pair.ref[0].astype(np.int64) << 6
    d = pair.dist[0].astype(np.int64) << 6
    out = integer_ssim(r, d, 16, intended_16bit=True)
    np.testing.assert_allclose(out.numpy(), [0.99951, 0.88108, 0.93026], atol=5e-6)


@pytest.mark.parametrize("bad, exc, match", [
    (lambda x: (x.astype(np.float32), x), TypeError, "ref must hold integer samples"),
    (lambda x: (x, x.astype(np.float64)), TypeError, "dist must hold integer samples"),
    (lambda x: (x, x[:, :-1]), ValueError, "same shape"),
    (lambda x: (x.astype(np.int32) + 300, x), ValueError, r"ref holds the sample [0-9]+, outside \[0, 255\]"),
    (lambda x: (x, x.astype(np.int32) - 1), ValueError, r"dist holds the sample -1, outside"),
    (lambda x: (x[None, None], x[None, None]), ValueError, r"ref must be \(H, W\) or \(N, H, W\)"),
    (lambda x: (x[:0], x[:0]), ValueError, "ref is empty"),
    (lambda x: (x.tolist(), x), TypeError, "ref must be a torch.Tensor or numpy.ndarray"),
    (lambda x: (x.astype(bool), x), TypeError, "ref must hold integer samples"),
])
def test_bad_input(bad, exc, match):
    x = np.random.default_rng(0).integers(0, 256, size=(12, 10)).astype(np.uint8)
    ref, dist = bad(x)
    with pytest.raises(exc, match=match):
        integer_ssim(ref, dist, 8)


@pytest.mark.parametrize("bit_depth, exc", [(9, ValueError), (14, ValueError), (8.0, TypeError), (True, TypeError)])
def test_bad_bit_depth(bit_depth, exc):
    x = np.zeros((12, 12), np.uint8)
    with pytest.raises(exc, match="bit_depth"):
        integer_ssim(x, x, bit_depth)


def test_10_bit_range_checked():
    x = np.full((12, 12), 1024, np.uint16)
    with pytest.raises(ValueError, match=r"holds the sample 1024, outside \[0, 1023\] for 10-bit samples"):
        integer_ssim(x, x, 10)

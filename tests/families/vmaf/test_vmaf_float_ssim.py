"""float_ssim (+ l/c/s) and float_ms_ssim against upstream libvmaf's per-frame values.

Tolerance: none. The twin reproduces libvmaf's float32 pipeline (float32 tap products, double accumulators in
tap order, float32 statistics, C's pow/sqrt), so every value is compared with ``==``; this covers the
auto-downscale by 2 (504x400 pairs) and the /4 scaling of 10-bit samples.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fusedsim.vmaf.float_ssim_twin import float_ssim_scale, iqa_decimate_ref
from fusedsim.vmaf import float_ms_ssim, float_ssim

LCS = ("float_ssim", "float_ssim_l", "float_ssim_c", "float_ssim_s")


def test_float_ssim_equals_libvmaf_every_frame(pair):
    out = float_ssim(pair.ref[0], pair.dist[0], pair.bit_depth)
    for key in LCS:
        assert out[key].dtype == torch.float64 and out[key].shape == (pair.n,)
        assert out[key].tolist() == pair.expected(key), key


def test_float_ms_ssim_equals_libvmaf_every_frame(pair):
    out = float_ms_ssim(pair.ref[0], pair.dist[0], pair.bit_depth)
    assert out["float_ms_ssim"].tolist() == pair.expected("float_ms_ssim")
    assert set(out) == {"float_ms_ssim"} | {f"float_ms_ssim_{k}_scale{i}" for k in "lcs" for i in range(5)}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_tensors_give_the_same_bits(vmaf_pairs):
    for pair in vmaf_pairs:
        r, d = torch.from_numpy(pair.ref[0]).cuda(), torch.from_numpy(pair.dist[0]).cuda()
        out = float_ssim(r, d, pair.bit_depth)
        for key in LCS:
            assert out[key].tolist() == pair.expected(key), (pair.name, key)
        assert float_ms_ssim(r, d, pair.bit_depth)["float_ms_ssim"].tolist() == pair.expected("float_ms_ssim")


@pytest.mark.parametrize("w, h, scale", [(576, 324, 1), (333, 217, 1), (504, 400, 2), (1280, 720, 3),
                                          (1920, 1080, 4), (3840, 2160, 8), (383, 383, 1), (384, 384, 2),
                                          (100, 50, 1)])
def test_auto_scale(w, h, scale):
    assert float_ssim_scale(w, h) == scale


def _c_decimate_in_place(img: np.ndarray, f: int) -> np.ndarray:
    """libvmaf's ``_iqa_decimate`` as written: pixel loops, writing into the image it reads (in place)."""
    h, w = img.shape
    buf = img.astype(np.float32).ravel().copy()
    k = np.float32(1.0) / np.float32(f * f)
    half, even = f // 2, 1 - (f & 1)
    sw, sh = w // f + (w & 1), h // f + (h & 1)

    def sym(x, y):
        x = -1 - x if x < 0 else (2 * w - x - 1 if x >= w else x)
        y = -1 - y if y < 0 else (2 * h - y - 1 if y >= h else y)
        return buf[y * w + x]

    for y in range(sh):
        for x in range(sw):
            acc = 0.0
            for v in range(-half, half - even + 1):
                for u in range(-half, half - even + 1):
                    acc += float(np.float32(sym(x * f + u, y * f + v) * k))
            buf[y * sw + x] = np.float32(acc)
    return buf[: sw * sh].reshape(sh, sw)


@pytest.mark.parametrize("w, h, f", [(41, 31, 2), (40, 30, 2), (61, 47, 3), (67, 53, 4), (71, 33, 5)])
def test_box_downscale_equals_in_place_c_loop(w, h, f):
    # libvmaf downsamples in place; the out-of-place twin must read the same (not yet overwritten) samples
    img = (np.random.default_rng(w * h).random((h, w)) * 255).astype(np.float32)
    box = np.full((f, f), np.float32(1.0) / np.float32(f * f), np.float32)
    got = iqa_decimate_ref(torch.from_numpy(img)[None], torch.from_numpy(box), f)[0].numpy()
    assert np.array_equal(got, _c_decimate_in_place(img, f))


def test_forced_scale_and_single_frames():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, size=(2, 60, 70)).astype(np.uint8)
    y = np.clip(x.astype(int) + rng.integers(-9, 10, size=x.shape), 0, 255).astype(np.uint8)
    auto = float_ssim(x, y, 8)
    assert auto["float_ssim"].tolist() == float_ssim(x, y, 8, scale=1)["float_ssim"].tolist()
    two = float_ssim(x, y, 8, scale=2)["float_ssim"]
    assert two.tolist() != auto["float_ssim"].tolist()
    single = float_ssim(x[1], y[1], 8, scale=2)
    assert single["float_ssim"].shape == () and float(single["float_ssim"]) == float(two[1])
    assert float(float_ssim(x[0], x[0], 8)["float_ssim"]) == 1.0


def test_ms_ssim_minimum_size_is_176():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 1024, size=(176, 176)).astype(np.uint16)
    y = np.clip(x.astype(int) + 3, 0, 1023).astype(np.uint16)
    assert 0.9 < float(float_ms_ssim(x, y, 10)["float_ms_ssim"]) < 1.001  # float32 rounding can pass 1
    for shape in [(175, 400), (400, 175)]:
        with pytest.raises(ValueError, match=r"ref is too small for float_ms_ssim.*176x176"):
            float_ms_ssim(np.zeros(shape, np.uint8), np.zeros(shape, np.uint8), 8)


def test_float_ssim_too_small():
    with pytest.raises(ValueError, match="ref is too small for float_ssim.*11x11"):
        float_ssim(np.zeros((10, 30), np.uint8), np.zeros((10, 30), np.uint8), 8)
    with pytest.raises(ValueError, match="downscaled by 3"):
        float_ssim(np.zeros((30, 30), np.uint8), np.zeros((30, 30), np.uint8), 8, scale=3)


@pytest.mark.parametrize("fn", [float_ssim, float_ms_ssim])
def test_bad_input(fn):
    x = np.zeros((180, 180), np.uint8)
    with pytest.raises(TypeError, match="ref must hold integer samples"):
        fn(x.astype(np.float32), x, 8)
    with pytest.raises(ValueError, match="same shape"):
        fn(x, x[:, :-2], 8)
    with pytest.raises(ValueError, match="bit_depth=9 is not supported"):
        fn(x, x, 9)
    with pytest.raises(ValueError, match=r"dist holds the sample [0-9]+, outside \[0, 1023\]"):
        fn(x.astype(np.uint16), x.astype(np.uint16) + 1024, 10)


def test_bad_scale():
    x = np.zeros((40, 40), np.uint8)
    with pytest.raises(ValueError, match="scale must be"):
        float_ssim(x, x, 8, scale=11)
    with pytest.raises(TypeError, match="scale must be an int"):
        float_ssim(x, x, 8, scale=1.5)

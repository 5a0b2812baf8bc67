"""The feature registry used by ``fusedsim vmaf``: contract, outputs against libvmaf, errors."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fusedsim.core.backend import BackendUnavailableError
from fusedsim.vmaf import features


def _batch(planes, bit_depth, first_index=0):
    y, u, v = planes
    return SimpleNamespace(y=y, u=u, v=v, bit_depth=bit_depth, first_index=first_index)


def test_contract():
    assert features.SUPPORTED_FEATURES == ("ssim", "float_ssim", "float_ms_ssim", "psnr", "vif", "adm", "motion",
                                           "psnr_hvs", "ciede", "speed_chroma", "float_vif", "float_adm",
                                           "float_motion", "cambi")


@pytest.mark.parametrize("feature, keys", [
    ("ssim", {"ssim": "integer_ssim"}),
    ("float_ssim", {"float_ssim": "float_ssim"}),
    ("float_ms_ssim", {"float_ms_ssim": "float_ms_ssim"}),
    ("psnr", {"psnr_y": "psnr_y", "psnr_cb": "psnr_cb", "psnr_cr": "psnr_cr"}),
])
def test_every_feature_equals_libvmaf_on_cpu(vmaf_pairs, feature, keys):
    # one 8-bit odd-size pair and one 10-bit pair (every frame of every pair runs in the per-metric tests)
    for pair in (p for p in vmaf_pairs if p.name in ("c333x217_8b_jpeg", "d504x400_10b_jpeg8")):
        out = features.extract(feature, _batch(pair.ref, pair.bit_depth), _batch(pair.dist, pair.bit_depth), "cpu")
        assert set(out) == set(keys)
        for name, fixture_key in keys.items():
            assert out[name].dtype == np.float64 and out[name].shape == (pair.n,)
            assert out[name].tolist() == pair.expected(fixture_key), (pair.name, name)


def test_batches_of_frames_split_anywhere(vmaf_pairs):
    pair = next(p for p in vmaf_pairs if p.name == "c333x217_8b_mixed")
    parts = []
    for lo, hi in ((0, 2), (2, 3), (3, 5)):
        sub = lambda planes: tuple(p[lo:hi] for p in planes)  # noqa: E731
        parts.append(features.extract("ssim", _batch(sub(pair.ref), 8, lo), _batch(sub(pair.dist), 8, lo), "auto"))
    assert np.concatenate([p["ssim"] for p in parts]).tolist() == pair.expected("integer_ssim")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_every_feature_equals_libvmaf_on_cuda(vmaf_pairs):
    for pair in vmaf_pairs:
        r, d = _batch(pair.ref, pair.bit_depth), _batch(pair.dist, pair.bit_depth)
        assert features.extract("ssim", r, d, "cuda")["ssim"].tolist() == pair.expected("integer_ssim")
        assert features.extract("float_ssim", r, d, "cuda")["float_ssim"].tolist() == pair.expected("float_ssim")
        assert (features.extract("float_ms_ssim", r, d, "cuda")["float_ms_ssim"].tolist()
                == pair.expected("float_ms_ssim"))
        out = features.extract("psnr", r, d, "cuda")
        assert all(out[k].tolist() == pair.expected(k) for k in ("psnr_y", "psnr_cb", "psnr_cr"))


def test_unknown_feature_lists_supported():
    b = _batch((np.zeros((1, 8, 8), np.uint8),) * 3, 8)
    with pytest.raises(ValueError, match="unknown feature 'vmaf'.*ssim, float_ssim, float_ms_ssim, psnr"):
        features.extract("vmaf", b, b)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_cuda_without_gpu_is_an_error():
    b = _batch((np.zeros((1, 8, 8), np.uint8),) * 3, 8)
    with pytest.raises(BackendUnavailableError, match="CUDA is not available"):
        features.extract("ssim", b, b, device="cuda")


def test_bad_device_and_batches():
    b = _batch((np.zeros((1, 8, 8), np.uint8),) * 3, 8)
    with pytest.raises(ValueError, match="device must be"):
        features.extract("ssim", b, b, device="tpu")
    with pytest.raises(TypeError, match="ref must be a frame batch"):
        features.extract("ssim", object(), b, device="cpu")
    b10 = _batch((np.zeros((1, 8, 8), np.uint16),) * 3, 10)
    with pytest.raises(ValueError, match="same bit depth"):
        features.extract("ssim", b, b10, device="cpu")
    small = _batch((np.zeros((1, 100, 100), np.uint8),) * 3, 8)
    with pytest.raises(ValueError, match="176x176"):
        features.extract("float_ms_ssim", small, small, device="cpu")


def test_module_does_not_import_the_reader():
    code = "import sys, fusedsim.vmaf.features; sys.exit('fusedsim.io.video' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0

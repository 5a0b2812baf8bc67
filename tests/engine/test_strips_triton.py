"""Strips through the Triton kernels (the GPU path; on a machine without a GPU, Triton's interpreter).

MS-SSIM's strips call the same per-level ``ssim_reduce`` statistics kernel as SSIM; its smallest image (161 px)
is too slow for the interpreter in CI, so its Triton strips are checked on the GPU by benchmarks/bench_engine.py.
"""

from __future__ import annotations

import pytest
from engine_pairs import image_pair

import fusedsim
from fusedsim.engine import Scorer


@pytest.mark.parametrize("metrics, shape, body", [(["ssim", "psnr"], (40, 48), 12)])
def test_triton_strips_equal_triton_full(kernel_device, metrics, shape, body):
    ref, dist = image_pair(*shape)
    with fusedsim.use_backend("triton"):
        full = Scorer(metrics, device=kernel_device, memory="full").score(ref, dist)
        strips = Scorer(metrics, device=kernel_device, memory=body).score(ref, dist)
    assert set(strips.backends.values()) == {f"{kernel_device.type} strip {body}"}
    for name in metrics:  # float32 reductions in the kernels against float64 sums of strips (see test_strips.py)
        assert strips.values[name] == pytest.approx(full.values[name], abs=1e-4 if name == "psnr" else 1e-6), name

"""Tensors on a GPU that is not the current one are computed on their own GPU, with the results of the current
one: every metric through the engine (cached reference included), each differentiable metric's gradients, the
video features and fused_ssim in training. Triton launches on the current device, so each launch must switch to
its tensors' device (``fusedsim.core.launch.Launcher``); the ops alone are checked in ``ops/test_registry.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import fusedsim
from fusedsim.engine import Scorer
from fusedsim.io.images import ImageData
from fusedsim.metrics.registry import list_metrics

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")

IMAGES = [s for s in list_metrics() if s.kind in ("image", "srgb") and "cuda" in s.devices]
VIDEO = [s for s in list_metrics("video") if "cuda" in s.devices]
SIDE = 200  # above every image metric's minimum size (MS-SSIM's 161, IW-SSIM's 176)


def _pair(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ref = torch.randint(0, 256, (1, 3, SIDE, SIDE + 8), generator=g, dtype=torch.uint8)
    noise = torch.randint(-25, 26, ref.shape, generator=g)
    return ref, (ref.to(torch.int32) + noise).clamp(0, 255).to(torch.uint8)


def _image(pixels: torch.Tensor, name: str) -> ImageData:
    return ImageData(path=Path(name), pixels=pixels, bit_depth=8, channels="RGB")


def _values(spec, device: str, ref: torch.Tensor, dists: list[torch.Tensor]) -> list[dict]:
    scorer = Scorer([spec.name], device=device, memory="full")
    scorer.set_reference(_image(ref, "ref.png"))
    return [scorer.score_prepared(_image(d, f"d{i}.png")).values for i, d in enumerate(dists)]


def _flat(values: list[dict]) -> list[float]:
    out = []
    for row in values:
        for v in row.values():
            out.extend(v.values() if isinstance(v, dict) else [v])
    return out


@pytest.mark.parametrize("spec", IMAGES, ids=lambda s: s.name)
def test_metric_scores_on_the_other_gpu_equal_the_current_ones(spec):
    ref, dist = _pair()
    dists = [dist, ref.clone()]
    with torch.cuda.device(0):
        here = _flat(_values(spec, "cuda:0", ref, dists))
        there = _flat(_values(spec, "cuda:1", ref, dists))
    # same kernels on the same data; 1e-6 allows reductions whose order depends on the scheduling (atomics)
    assert there == pytest.approx(here, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("spec", [s for s in IMAGES if s.differentiable], ids=lambda s: s.name)
def test_gradients_on_the_other_gpu_equal_the_current_ones(spec):
    ref, dist = (t.float() / 255 for t in _pair(1))
    fn = spec.load()
    grads = []
    with torch.cuda.device(0):
        for device in ("cuda:0", "cuda:1"):
            x = ref.to(device).requires_grad_()
            y = dist.to(device).requires_grad_()
            out = fn(x, y, data_range=1.0) if spec.kind == "image" else fn(x, y)
            value = out if isinstance(out, torch.Tensor) else out[0]  # a record: its first field (Butteraugli's max)
            gx, gy = torch.autograd.grad(value.sum(), (x, y))
            assert gx.device == x.device and gy.device == y.device
            grads.append((gx.cpu(), gy.cpu()))
    for here, there in zip(*grads):
        torch.testing.assert_close(there, here, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("spec", VIDEO, ids=lambda s: s.name)
def test_video_features_on_the_other_gpu_equal_the_current_ones(spec):
    g = torch.Generator().manual_seed(2)
    luma = torch.randint(0, 256, (2, SIDE, SIDE + 8), generator=g, dtype=torch.uint8)
    ref = [luma, luma[:, ::2, ::2].clone(), luma[:, 1::2, ::2].clone()]
    dist = [(p.to(torch.int32) + torch.randint(-30, 31, p.shape, generator=g)).clamp(0, 255).to(torch.uint8)
            for p in ref]
    fn = spec.load()
    with torch.cuda.device(0):
        here = fn([p.to("cuda:0") for p in ref], [p.to("cuda:0") for p in dist], 8)
        there = fn([p.to("cuda:1") for p in ref], [p.to("cuda:1") for p in dist], 8)
    for name in spec.outputs:
        torch.testing.assert_close(there[name].cpu(), here[name].cpu(), rtol=1e-6, atol=1e-9)


def test_fused_ssim_training_call_on_the_other_gpu():
    ref, dist = (t.float() / 255 for t in _pair(3))
    results = []
    with torch.cuda.device(0):
        for device in ("cuda:0", "cuda:1"):
            x = dist.to(device).requires_grad_()
            value = fusedsim.fused_ssim(x, ref.to(device))
            (1 - value).backward()
            results.append((value.item(), x.grad.cpu()))
    assert results[1][0] == pytest.approx(results[0][0], rel=1e-6)
    torch.testing.assert_close(results[1][1], results[0][1], rtol=1e-5, atol=1e-8)

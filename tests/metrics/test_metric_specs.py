"""Each built-in MetricSpec states what its metric does: checked by running the metric, not by reading the spec."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fusedsim.metrics.registry import list_metrics

IMAGE = list_metrics("image")
VIDEO = list_metrics("video")


def _pair(side: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(1, 3, side, side, generator=g, dtype=torch.float64) * 255
    y = (x + 40 * torch.randn(x.shape, generator=g, dtype=torch.float64)).clamp(0, 255)
    return x, y


@pytest.mark.parametrize("spec", IMAGE, ids=lambda s: s.name)
def test_image_metric_identical_value_direction_and_range(spec):
    fn = spec.load()
    x, y = _pair(max(spec.min_size, 24))
    same = float(fn(x, x.clone(), data_range=255))
    other = float(fn(x, y, data_range=255))
    assert same == pytest.approx(spec.identical_value, abs=1e-9) or same == spec.identical_value
    assert (other < same) == spec.higher_is_better
    lo, hi = spec.value_range
    assert lo <= other <= hi


@pytest.mark.parametrize("spec", [s for s in IMAGE if s.min_size > 1], ids=lambda s: s.name)
def test_image_metric_minimum_size(spec):
    fn = spec.load()
    x, y = _pair(spec.min_size)
    fn(x, y, data_range=255)  # exactly the minimum works
    with pytest.raises(ValueError):
        fn(x[..., :-1], y[..., :-1], data_range=255)  # one column less does not
    with pytest.raises(ValueError):
        fn(x[..., :-1, :], y[..., :-1, :], data_range=255)


@pytest.mark.parametrize("spec", [s for s in IMAGE if s.differentiable], ids=lambda s: s.name)
def test_image_metric_gradients_reach_both_inputs(spec):
    x, y = (t.requires_grad_() for t in _pair(max(spec.min_size, 24), seed=1))
    gx, gy = torch.autograd.grad(spec.load()(x, y, data_range=255), (x, y))
    for g in (gx, gy):
        assert torch.isfinite(g).all() and g.abs().sum() > 0


def _planes(side: int, seed: int, bit_depth: int = 8) -> list[torch.Tensor]:
    rng = np.random.default_rng(seed)
    top = (1 << bit_depth) - 1
    luma = rng.integers(0, top, size=(2, side, side), endpoint=True).astype(np.uint16 if bit_depth > 8 else np.uint8)
    chroma = luma[:, ::2, ::2].copy()
    return [torch.from_numpy(p) for p in (luma, chroma, chroma.copy())]


def _distort(planes: list[torch.Tensor], seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [(p.to(torch.int32) + torch.randint(-30, 31, p.shape, generator=g)).clamp(0, 255).to(p.dtype)
            for p in planes]


@pytest.mark.parametrize("spec", VIDEO, ids=lambda s: s.name)
def test_video_feature_outputs_identical_value_direction_and_range(spec):
    fn = spec.load()
    ref = _planes(max(spec.min_size, 32), seed=2)
    same = fn(ref, [p.clone() for p in ref], 8)
    other = fn(ref, _distort(ref, 3), 8)
    assert set(spec.outputs) <= set(same) and set(spec.outputs) <= set(other)
    lo, hi = spec.value_range
    for name in spec.outputs:
        assert same[name].shape == (2,) and other[name].shape == (2,)
        if spec.identical_value is not None:
            assert same[name].tolist() == pytest.approx([spec.identical_value] * 2, abs=1e-6)
        assert ((other[name] < same[name]).all().item()) == spec.higher_is_better
        assert lo <= float(other[name].min()) and float(same[name].max()) <= hi


@pytest.mark.parametrize("spec", [s for s in VIDEO if s.min_size > 1], ids=lambda s: s.name)
def test_video_feature_minimum_size(spec):
    fn = spec.load()
    ref = _planes(spec.min_size, seed=4)
    fn(ref, _distort(ref, 5), 8)
    small = [p[:, :-1, :-1] for p in _planes(spec.min_size, seed=4)]
    with pytest.raises(ValueError):
        fn(small, [p.clone() for p in small], 8)


def test_psnr_identical_images_are_infinite():
    x, _ = _pair(8)
    assert math.isinf(float(IMAGE[2].load()(x, x, data_range=255)))

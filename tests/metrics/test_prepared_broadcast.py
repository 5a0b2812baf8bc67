"""A reference prepared from one image scores a batch of distorted images: every metric whose spec says so
(``MetricSpec.prepared_broadcasts``, which the engine relies on to score a group of pairs in one call)."""

from __future__ import annotations

import pytest
import torch

from fusedsim.metrics.registry import list_metrics

BROADCASTING = [spec for spec in list_metrics() if spec.prepared_broadcasts]


def _images(spec, count: int, seed: int) -> torch.Tensor:
    """Smooth content plus noise (uint8), at least the metric's minimum size."""
    h, w = max(48, spec.min_size + 2), max(56, spec.min_size + 10)
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    base = (torch.sin(xx / 7.0) * torch.cos(yy / 11.0) + 1) * 110 + 15
    noise = torch.rand((count, 3, h, w), generator=g) * 40
    return (base + noise).round().clamp(0, 255).to(torch.uint8)


def test_every_perceptual_metric_declares_it():
    assert {s.name for s in BROADCASTING} == {s.name for s in list_metrics() if s.kind == "srgb"}


@pytest.mark.parametrize("spec", BROADCASTING, ids=lambda s: s.name)
def test_one_prepared_reference_scores_each_distorted_image_as_the_one_shot_call(spec):
    ref, dists = _images(spec, 1, seed=1), _images(spec, 3, seed=2)
    state = spec.load("prepare")(ref)
    got = spec.load("score_prepared")(state, dists)
    fields = spec.outputs if hasattr(got, "_fields") else (None,)
    for i in range(3):
        one = spec.load()(ref, dists[i:i + 1])
        for field in fields:
            a, b = (got, one) if field is None else (getattr(got, field), getattr(one, field))
            # the same float64 twins on batch-shaped tensors: equal up to their reduction order
            torch.testing.assert_close(a[i:i + 1], b, rtol=1e-12, atol=0)


@pytest.mark.parametrize("spec", BROADCASTING, ids=lambda s: s.name)
def test_a_batch_against_a_batch_of_another_size_is_refused(spec):
    state = spec.load("prepare")(_images(spec, 2, seed=1))
    with pytest.raises(ValueError, match="dist"):
        spec.load("score_prepared")(state, _images(spec, 3, seed=2))

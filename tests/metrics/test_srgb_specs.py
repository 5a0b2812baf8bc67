"""Each perceptual (sRGB) MetricSpec states what its metric does: checked by running it through the spec's calling
convention (the way the engine, ``Metric`` and the CLI call it), on every registered sRGB metric. A new family is
enrolled here by registering its spec."""

from __future__ import annotations

import pytest
import torch

from fusedsim.metrics.registry import list_metrics

SRGB = list_metrics("srgb")


def _srgb_pair(side: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A smooth sRGB image with texture (uint8 codes) and a noisy copy: a real difference for every metric."""
    g = torch.Generator().manual_seed(seed)
    ramp = torch.linspace(30, 220, side, dtype=torch.float64)
    base = (ramp[None, :] + ramp[:, None].flip(0)) / 2 + 20 * torch.rand(3, side, side, generator=g, dtype=torch.float64)
    x = base.clamp(0, 255).round().to(torch.uint8)[None]
    y = (base + 25 * torch.randn(base.shape, generator=g, dtype=torch.float64)).clamp(0, 255).round().to(torch.uint8)
    return x, y[None]


def _outputs(spec, result) -> dict[str, float]:
    if len(spec.outputs) == 1 and not hasattr(result, "_fields"):
        return {spec.outputs[0]: float(result.reshape(-1)[0])}
    return {name: float(getattr(result, name).reshape(-1)[0]) for name in spec.outputs}


@pytest.mark.parametrize("spec", SRGB, ids=lambda s: s.name)
def test_srgb_metric_identical_value_direction_and_range(spec):
    x, y = _srgb_pair(max(spec.min_size, 32))
    same = _outputs(spec, spec.compute(x, x.clone(), {}))
    other = _outputs(spec, spec.compute(x, y, {}))
    lo, hi = spec.value_range
    for name in spec.outputs:
        # identical inputs give the documented value up to float32 rounding of the metric's arithmetic
        assert same[name] == pytest.approx(spec.identical_value, abs=1e-5), name
        assert (other[name] < same[name]) == spec.higher_is_better, name
        assert lo <= other[name] <= hi, name


@pytest.mark.parametrize("spec", [s for s in SRGB if s.cached_reference], ids=lambda s: s.name)
def test_srgb_prepared_reference_scores_as_the_one_shot_call(spec):
    x, y = _srgb_pair(max(spec.min_size, 32), seed=1)
    prepared = _outputs(spec, spec.score(spec.prepare(x, {}), y, {}))
    assert prepared == _outputs(spec, spec.compute(x, y, {}))


@pytest.mark.parametrize("spec", [s for s in SRGB if s.min_size > 1], ids=lambda s: s.name)
def test_srgb_metric_minimum_size(spec):
    x, y = _srgb_pair(spec.min_size, seed=2)
    spec.compute(x, y, {})  # exactly the minimum works
    with pytest.raises(ValueError, match=str(spec.min_size)):
        spec.compute(x[..., :-1], y[..., :-1], {})  # one column less does not, naming the minimum


def test_every_srgb_metric_is_enrolled():
    """The list above comes from the registry; the registry from the family folders (nothing kept by hand)."""
    assert SRGB and all(s.functions.__module__.startswith("fusedsim.families.") for s in SRGB)

"""The engine feeds 8-bit pixels to the perceptual (sRGB) metrics as uint8 codes, their exact path, and 16-bit
pixels as float in [0, 1] (issue 38: every engine path fed float/255, so SSIMULACRA2 through the Scorer differed
from ``fusedsim.ssimulacra2(uint8)`` and from the reference tools). Grey is replicated to 3 channels."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import fusedsim
from fusedsim.engine import Scorer, scorer as scorer_module
from fusedsim.engine.inputs import metric_input, srgb
from fusedsim.io.images import ImageData
from fusedsim.metrics.registry import get_metric

PERCEPTUAL = ["ssimulacra2", "dssim", "zensim", "butteraugli", "cvvdp"]


def _pair(channels: int = 3, bits: int = 8, size: int = 48, seed: int = 0) -> tuple[ImageData, ImageData]:
    gen = torch.Generator().manual_seed(seed)
    top = (1 << bits) - 1
    x = torch.randint(0, top + 1, (1, channels, size, size), generator=gen)
    y = (x + torch.randint(-top // 20, top // 20 + 1, x.shape, generator=gen)).clamp(0, top)
    dtype = torch.uint8 if bits == 8 else torch.float32
    mode = "RGB" if channels == 3 else "grey"
    return (ImageData(Path("ref.png"), x.to(dtype), bits, mode), ImageData(Path("dist.png"), y.to(dtype), bits, mode))


def _api(name: str, x: torch.Tensor, y: torch.Tensor) -> object:
    return get_metric(name).compute(x, y, {})


def _same(engine_value: object, api_out: object, name: str) -> None:
    spec = get_metric(name)
    if len(spec.outputs) == 1 and not hasattr(api_out, "_fields"):
        assert engine_value == float(api_out.reshape(-1)[0]), name
    else:
        assert engine_value == {f: float(getattr(api_out, f).reshape(-1)[0]) for f in spec.outputs}, name


def test_srgb_input_of_8_bit_is_uint8_codes_and_16_bit_is_unit_float() -> None:
    ref8, _ = _pair(bits=8)
    out = srgb(ref8.pixels, 255, "REF")
    assert out.dtype == torch.uint8 and torch.equal(out, ref8.pixels)
    assert srgb(ref8.pixels.float(), 255, "REF").dtype == torch.uint8  # codes held in float: still codes
    ref16, _ = _pair(bits=16)
    out16 = srgb(ref16.pixels, 65535, "REF")
    assert out16.dtype == torch.float32 and torch.equal(out16, ref16.pixels / 65535)
    grey, _ = _pair(channels=1)
    assert torch.equal(srgb(grey.pixels, 255, "REF"), grey.pixels.expand(-1, 3, -1, -1))
    assert metric_input(get_metric("ssim"), ref8.pixels, 255, "REF").dtype == torch.float32  # image metrics


@pytest.mark.parametrize("name", PERCEPTUAL)
def test_scorer_on_8_bit_equals_the_metric_on_uint8(name: str) -> None:
    ref, dist = _pair()
    value = Scorer([name], device="cpu", memory="full").score(ref, dist).values[name]
    _same(value, _api(name, ref.pixels, dist.pixels), name)


def test_ssimulacra2_scorer_equals_the_uint8_call_exactly() -> None:
    ref, dist = _pair(size=64, seed=3)
    value = Scorer(["ssimulacra2"], device="cpu").score(ref, dist).values["ssimulacra2"]
    assert value == float(fusedsim.ssimulacra2(ref.pixels, dist.pixels))


def test_grey_8_bit_is_replicated_uint8() -> None:
    ref, dist = _pair(channels=1)
    value = Scorer(["ssimulacra2"], device="cpu").score(ref, dist).values["ssimulacra2"]
    want = fusedsim.ssimulacra2(ref.pixels.expand(-1, 3, -1, -1).contiguous(),
                                dist.pixels.expand(-1, 3, -1, -1).contiguous())
    assert value == float(want)


def test_16_bit_reaches_the_metric_as_unit_float() -> None:
    ref, dist = _pair(bits=16)
    value = Scorer(["ssimulacra2"], device="cpu").score(ref, dist).values["ssimulacra2"]
    assert value == float(fusedsim.ssimulacra2(ref.pixels / 65535, dist.pixels / 65535))


@pytest.mark.parametrize("shared", [True, False])
def test_groups_score_uint8_codes(monkeypatch: pytest.MonkeyPatch, shared: bool) -> None:
    """The group path (one stacked call, GPU only by default; let onto the CPU here) reads the same codes."""
    monkeypatch.setattr(scorer_module, "GROUP_DEVICES", ("cpu",))
    pairs = [_pair(seed=s) for s in range(3)]
    if shared:
        pairs = [(pairs[0][0], d) for _, d in pairs]
    scorer = Scorer(["ssimulacra2"], device="cpu", memory="full")
    got = [p.result().values["ssimulacra2"] for p in scorer.submit_group(pairs)]
    want = [float(fusedsim.ssimulacra2(r.pixels, d.pixels)) for r, d in pairs]
    assert got == pytest.approx(want, rel=1e-6, abs=1e-6)
    one_by_one = [Scorer(["ssimulacra2"], device="cpu").score(r, d).values["ssimulacra2"] for r, d in pairs]
    assert got == pytest.approx(one_by_one, rel=1e-6, abs=1e-6)

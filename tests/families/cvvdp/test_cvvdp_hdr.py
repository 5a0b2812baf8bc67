"""ColorVideoVDP with HDR display models (PQ, HLG, linear) against pycvvdp 0.5.7: the JODs of
``cvvdp_hdr_fixtures.json`` (made by ``make_cvvdp_hdr_fixtures.py``, pycvvdp run live on the CPU) for images and
6-frame clips, through the PyTorch twin and through the Triton path (the interpreter on the CPU); the display models'
EOTFs and HLG gamma; the input each EOTF takes and the errors for input that does not fit."""

from __future__ import annotations

import math

import pytest
import torch

import fusedsim
from fusedsim.core.backend import use_backend
from fusedsim.families.cvvdp.api import prepare_cvvdp, score_prepared_cvvdp
from fusedsim.families.cvvdp.data import EOTFS, cvvdp_display, display_eotf, known_displays, supported_displays

from cvvdp_hdr_inputs import load_fixtures, make_input, sha256

# The goal's bound. The CPU twin follows pycvvdp's float32 steps and measured |ΔJOD| = 0 on every entry; the Triton
# path measured <= 1e-5 (float32 rounding of exp/log powers; PQ is decoded in float64 there, where pycvvdp's
# float32 decoding is up to ~1e-4 relative off near the peak). 1e-4 leaves room for other back-ends' summation order.
JOD_TOL = 1e-4
DOC = load_fixtures()
FIXTURES = DOC["entries"]


def _ids(entries):
    return [f"{e['display']}-{e['distortion']}-{'clip' if e.get('fps') else 'image'}"
            f"{''.join(f'-{k}={v}' for k, v in e['overrides'].items())}" for e in entries]


def _input(entry: dict) -> tuple[torch.Tensor, torch.Tensor]:
    ref, dist = make_input(entry)
    assert sha256(ref, dist) == entry["sha256"], "the input is not the one the fixture was made from"
    return ref, dist


def _score(entry: dict, ref: torch.Tensor, dist: torch.Tensor) -> torch.Tensor:
    return fusedsim.cvvdp(ref, dist, display=entry["display"], fps=entry.get("fps"), **entry["overrides"])


def test_fixtures_cover_the_goal():
    """Every EOTF, images and clips, display overrides (exposure: each branch's clip), values named with their
    source."""
    assert "pycvvdp 0.5.7" in DOC["source"] and "predict" in DOC["call"]
    assert {e["eotf"] for e in FIXTURES} == {"PQ", "HLG", "linear"}
    assert {display_eotf(e["display"]) for e in FIXTURES} == {"PQ", "HLG", "linear"}
    assert {e["eotf"] for e in FIXTURES if e.get("fps")} == {"PQ", "HLG", "linear"}
    assert {e["eotf"] for e in FIXTURES if "exposure" in e["overrides"]} == {"PQ", "HLG", "linear"}


@pytest.mark.parametrize("entry", FIXTURES, ids=_ids(FIXTURES))
def test_twin_matches_pycvvdp(entry):
    ref, dist = _input(entry)
    got = _score(entry, ref, dist)
    assert got.shape == (1,) and got.dtype == torch.float32
    assert abs(got.item() - entry["jod"]) <= JOD_TOL, (got.item(), entry["jod"])


TRITON_IMAGES = [next(e for e in FIXTURES if e["eotf"] == eotf and not e.get("fps") and not e["overrides"])
                 for eotf in ("PQ", "HLG", "linear")]


@pytest.mark.parametrize("entry", TRITON_IMAGES, ids=_ids(TRITON_IMAGES))
def test_triton_path_matches_pycvvdp_and_the_twin(entry, kernel_device):
    """Each EOTF is its own branch of the display-model kernel, so each runs end to end (~16 s per image in the
    interpreter); the exposure branches are covered by the kernel's op examples (tests/core/test_registry.py), and
    the prepared-reference path shares the display-model call with this one-shot path (test_cvvdp.py runs it)."""
    ref, dist = (x.to(kernel_device) for x in _input(entry))
    with use_backend("triton"):
        got = _score(entry, ref, dist)
    assert got.device.type == kernel_device.type
    assert abs(got.item() - entry["jod"]) <= JOD_TOL, (got.item(), entry["jod"])
    assert abs(got.item() - _score(entry, ref.cpu(), dist.cpu()).item()) <= JOD_TOL


def test_triton_video_path_equals_the_twin(kernel_device):
    """The video path's HDR-specific step is the display-model kernel (the temporal and band kernels are the SDR
    float path's): a small HLG clip (2 frames at 16 x 16, ~10 s in the interpreter) through Triton and the twin."""
    entry = {"display": "standard_hdr_hlg", "eotf": "HLG", "distortion": "flicker", "frames": 2, "size": [16, 16],
             "fps": 30, "overrides": {}}
    ref, dist = make_input(entry)
    with use_backend("triton"):
        got = _score(entry, ref.to(kernel_device), dist.to(kernel_device))
    assert abs(got.item() - _score(entry, ref, dist).item()) <= JOD_TOL


def test_prepared_reference_equals_one_shot():
    entry = next(e for e in FIXTURES if e["eotf"] == "PQ" and not e.get("fps"))
    ref, dist = _input(entry)
    state = prepare_cvvdp(ref, display=entry["display"])
    assert torch.equal(score_prepared_cvvdp(state, dist), _score(entry, ref, dist))


def test_every_shipped_display_model_is_supported():
    assert supported_displays() == known_displays()
    assert {display_eotf(name) for name in known_displays()} == set(EOTFS)
    hdr = {name: display_eotf(name) for name in known_displays() if display_eotf(name) != "sRGB"}
    assert hdr == {"standard_hdr_pq": "PQ", "standard_hdr_hlg": "HLG", "standard_hdr_linear": "linear",
                   "standard_hdr_linear_dark": "linear", "standard_hdr_linear_zoom": "linear",
                   "iphone_14_pro_hdr": "HLG", "iphone_14_pro_hdr_vert": "HLG", "65inch_hdr_pq_4knit": "PQ",
                   "65inch_hdr_pq_2Knit": "PQ", "65inch_hdr_pq_1Knit": "PQ", "lg_oled_2026_hdr_pq": "PQ"}


def test_display_models_resolve_their_colour_space_and_hlg_gamma():
    pq = cvvdp_display("standard_hdr_pq")
    assert pq.eotf == "PQ" and pq.rgb2xyz[1] == (0.2627, 0.6780, 0.0593)  # BT.2020 primaries
    assert cvvdp_display("standard_hdr_linear").rgb2xyz[1] == (0.2126729, 0.7151522, 0.0721750)  # BT.709
    hlg = cvvdp_display("standard_hdr_hlg")  # 1500 cd/m², 10 lux
    assert hlg.hlg_gamma == pytest.approx(1.2 + 0.42 * math.log10(1.5) - 0.07623 * math.log10(2))
    assert cvvdp_display("standard_hdr_hlg", peak_luminance=1000.0).hlg_gamma == 1.2


def test_unknown_display_lists_the_hdr_models():
    with pytest.raises(ValueError) as info:
        fusedsim.cvvdp(torch.zeros(3, 8, 8), torch.zeros(3, 8, 8), display="standard_hdr")
    for name in ("standard_hdr_pq", "standard_hdr_hlg", "standard_hdr_linear", "standard_4k"):
        assert name in str(info.value)


_U8 = torch.zeros(3, 8, 8, dtype=torch.uint8)
_F = torch.zeros(3, 8, 8)


@pytest.mark.parametrize("display, ref, dist, error, match", [
    ("standard_hdr_pq", _U8, _U8, TypeError, r"'standard_hdr_pq' has a PQ EOTF, so ref must hold floating PQ"),
    ("standard_hdr_hlg", _F, _U8, TypeError, "so dist must hold floating HLG"),
    ("standard_hdr_linear", _U8, _U8, TypeError, "so ref must hold floating absolute linear RGB in cd/m²"),
    ("standard_hdr_pq", torch.full((3, 8, 8), 1.2), _F, ValueError, r"takes floating PQ .* as ref; found 1\.2"),
    ("standard_hdr_hlg", _F, torch.full((3, 8, 8), -0.1), ValueError, "takes floating HLG .* as dist"),
    ("standard_hdr_pq", _F, torch.full((3, 8, 8), math.nan), ValueError, "as dist; found nan"),
    ("standard_hdr_linear", _F, torch.full((3, 8, 8), math.inf), ValueError, "linear RGB in cd/m² as dist"),
    ("standard_hdr_pq", torch.zeros(1, 8, 8), torch.zeros(1, 8, 8), ValueError, "3 sRGB channels"),
])
def test_input_that_does_not_fit_the_eotf_is_refused(display, ref, dist, error, match):
    with pytest.raises(error, match=match):
        fusedsim.cvvdp(ref, dist, display=display)


def test_bad_hdr_input_is_refused_on_every_entry_point():
    u8 = torch.zeros(2, 3, 8, 8, dtype=torch.uint8)
    with pytest.raises(TypeError, match="ref must hold floating PQ"):
        prepare_cvvdp(u8, display="standard_hdr_pq")
    state = prepare_cvvdp(torch.zeros(2, 3, 8, 8), display="standard_hdr_pq")
    with pytest.raises(TypeError, match="dist must hold floating PQ"):
        score_prepared_cvvdp(state, u8)
    clip = torch.zeros(1, 3, 3, 8, 8, dtype=torch.uint8)
    with pytest.raises(TypeError, match="ref must hold floating HLG"):
        fusedsim.cvvdp(clip, clip, display="standard_hdr_hlg", fps=30)
    stream = fusedsim.cvvdp_stream(fps=30, display="standard_hdr_pq")
    with pytest.raises(ValueError, match="as dist; found 2.0"):
        stream.push(torch.zeros(2, 3, 8, 8), torch.full((2, 3, 8, 8), 2.0))


def test_linear_input_below_black_and_above_peak_is_clipped_by_the_display():
    """Linear light is absolute: negative values (out-of-gamut colour conversions) and values above the peak are
    the display's to clip, as in pycvvdp, not errors."""
    ref = torch.full((3, 8, 8), 100.0)
    low = fusedsim.cvvdp(ref, torch.full((3, 8, 8), -5.0), display="standard_hdr_linear")
    black = fusedsim.cvvdp(ref, torch.full((3, 8, 8), 0.005), display="standard_hdr_linear")
    high = fusedsim.cvvdp(ref, torch.full((3, 8, 8), 1e6), display="standard_hdr_linear")
    peak = fusedsim.cvvdp(ref, torch.full((3, 8, 8), 1500.0), display="standard_hdr_linear")
    assert torch.equal(low, black) and torch.equal(high, peak)


def test_every_display_model_takes_the_kernel_where_auto_chooses_triton(monkeypatch):
    """The kernel's HDR branches passed on an H200 (the fixtures above and the op examples), so ``auto`` runs them
    as it runs the sRGB branch: no display is computed by the twin on a GPU."""
    from fusedsim.families.cvvdp import ops
    from fusedsim.families.cvvdp.data import cvvdp_display

    calls = []
    monkeypatch.setattr(type(ops.cvvdp_linear_dkl), "backend_for", lambda self, *t, **kw: "triton")
    monkeypatch.setattr(type(ops.cvvdp_linear_dkl), "triton", lambda self, *a: calls.append("kernel") or self.reference(*a))
    rgb = torch.rand(1, 3, 4, 4, generator=torch.Generator().manual_seed(5))
    for name in ("standard_hdr_pq", "standard_hdr_hlg", "standard_hdr_linear", "standard_4k"):
        calls.clear()
        ops.display_model(rgb, cvvdp_display(name))
        assert calls == ["kernel"], name

"""ColorVideoVDP (still images) against pycvvdp 0.5.7 (refdata/perceptual, README "ColorVideoVDP"): every corpus
pair for the standard_4k and standard_fhd display models, identity, the difference map, display-model parameters,
cached == one-shot, gradients and bad inputs."""

from __future__ import annotations

import csv
import weakref
from collections import defaultdict

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils._python_dispatch import TorchDispatchMode

import fusedsim
from fusedsim.core.backend import use_backend
from fusedsim.families.cvvdp.api import CVVDPResult, prepare_cvvdp, score_prepared_cvvdp
from fusedsim.families.cvvdp.data import cvvdp_display, supported_displays
from fusedsim.families.cvvdp.twin import cvvdp_ref

DISPLAYS = ("standard_4k", "standard_fhd")
# The goal is |ΔJOD| <= 1e-3. The float32 twin follows pycvvdp's float32 arithmetic; on the corpus it
# measured |Δ| = 0 (bit-identical) on the CPU, so this bound only leaves room for float32 summation order in other
# BLAS/convolution back-ends.
JOD_TOL = 1e-5


def _rgb(refdata, name: str) -> torch.Tensor:
    path = refdata / "perceptual" / "images" / name
    return torch.from_numpy(np.array(Image.open(path).convert("RGB"))).permute(2, 0, 1).contiguous()


@pytest.fixture(scope="module")
def corpus(refdata):
    """{(ref, display): [(dist, pycvvdp JOD), ...]} from scores.csv (pycvvdp's predict(test=dist, ref=ref))."""
    rows = defaultdict(list)
    with open(refdata / "perceptual" / "scores.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["metric"] != "cvvdp" or not row["implementation"].startswith("pypi-cvvdp"):
                continue
            display = next(d for d in DISPLAYS if f"display_name='{d}'" in row["extra"])
            rows[(row["ref"], display)].append((row["dist"], float(row["value"])))
    return rows


def test_corpus_is_complete(corpus):
    assert len(corpus) == 12 and sum(len(v) for v in corpus.values()) == 86


@pytest.mark.parametrize("display", DISPLAYS)
def test_every_corpus_pair_matches_pycvvdp(refdata, corpus, display):
    worst = 0.0
    for (ref_name, disp), pairs in sorted(corpus.items()):
        if disp != display:
            continue
        state = prepare_cvvdp(_rgb(refdata, ref_name)[None], display=display)
        dists = torch.stack([_rgb(refdata, name) for name, _ in pairs])
        got = score_prepared_cvvdp(state, dists)  # one reference, a batch of distorted images
        want = torch.tensor([value for _, value in pairs], dtype=torch.float64)
        assert got.shape == (len(pairs),) and got.dtype == torch.float32
        delta = (got.double() - want).abs()
        worst = max(worst, float(delta.max()))
        assert float(delta.max()) <= JOD_TOL, (ref_name, [p for p, d in zip(pairs, delta) if d > JOD_TOL])
    print(f"cvvdp {display}: max |ΔJOD| = {worst:.3g}")


# pycvvdp 0.5.7's raw heatmap (``cvvdp(..., heatmap='raw')``, stored by pycvvdp as float16) for the chelsea crop
# rows 40:88, columns 100:140 (jpeg10 vs the reference): JOD, mean and max of the map, and four pixels (y, x).
MAP_PIXELS = ((0, 0), (10, 20), (47, 39), (30, 5))
PYCVVDP_MAP = {
    "standard_4k": (8.895018577575684, 0.07195978959401449, 0.42822265625,
                    (0.06597900390625, 0.0301666259765625, 0.11676025390625, 0.07330322265625)),
    "standard_fhd": (8.06714916229248, 0.13360710938771567, 0.92724609375,
                     (0.10809326171875, 0.071044921875, 0.1331787109375, 0.142578125)),
}
MAP_TOL = 1e-3  # pycvvdp rounds its map to float16: half a unit in the last place is <= 2.5e-4 below 1


@pytest.fixture(scope="module")
def chelsea_crop(refdata):
    ref = _rgb(refdata, "chelsea_333x217.png")[:, 40:88, 100:140]
    dist = _rgb(refdata, "chelsea_333x217__jpeg10.png")[:, 40:88, 100:140]
    return ref, dist


@pytest.mark.parametrize("display", DISPLAYS)
def test_difference_map_matches_pycvvdp_heatmap(chelsea_crop, display):
    ref, dist = chelsea_crop
    out = fusedsim.cvvdp(ref, dist, display=display, return_map=True)
    assert isinstance(out, CVVDPResult) and out.jod.shape == () and out.diff_map.shape == (1, 48, 40)
    jod, mean, peak, pixels = PYCVVDP_MAP[display]
    assert abs(float(out.jod) - jod) <= JOD_TOL
    dmap = out.diff_map[0].double()
    assert abs(float(dmap.mean()) - mean) <= MAP_TOL and abs(float(dmap.max()) - peak) <= MAP_TOL
    for (y, x), want in zip(MAP_PIXELS, pixels):
        assert abs(float(dmap[y, x]) - want) <= MAP_TOL, (y, x)
    assert torch.equal(out.jod, fusedsim.cvvdp(ref, dist, display=display))


# The masking kernel's powers are exp(e log x), a few float32 ulps from torch.pow (its op tolerance is 5e-5
# relative per pixel); pooled into a JOD that moves by ~1e-6.
TRITON_JOD_TOL = 1e-4


@pytest.mark.parametrize("display", DISPLAYS)
def test_triton_path_matches_pycvvdp_on_a_crop(chelsea_crop, kernel_device, display):
    if kernel_device.type == "cpu" and display != DISPLAYS[0]:
        # the displays differ only in host-side constants (bands, sensitivities), not in the kernels; through the
        # interpreter one pipeline costs ~20 s, so CI runs one display and the GPU run both
        pytest.skip("one display through Triton's interpreter; both on a GPU")
    ref, dist = (x.to(kernel_device) for x in chelsea_crop)
    with use_backend("triton"):
        out = fusedsim.cvvdp(ref, dist, display=display, return_map=True)
        cached = fusedsim.Metric("cvvdp", device=kernel_device, display=display).set_reference(ref).score(dist)
    jod, mean, _, _ = PYCVVDP_MAP[display]
    assert abs(float(out.jod) - jod) <= TRITON_JOD_TOL
    assert abs(float(out.diff_map.double().mean()) - mean) <= MAP_TOL
    assert torch.equal(out.jod, cached)


class _PeakLiveBytes(TorchDispatchMode):
    """The largest total size of tensor storages alive at once, sampled after every tensor operation (a storage
    counts while a tensor on it is alive); storages of ``ignore`` (the inputs) are not counted."""

    def __init__(self, ignore: tuple[torch.Tensor, ...]) -> None:
        super().__init__()
        self.ignore = {t.untyped_storage().data_ptr() for t in ignore}
        self.storages: dict[int, tuple[int, list]] = {}
        self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in self.ignore:
                entry = self.storages.setdefault(t.untyped_storage().data_ptr(), (t.untyped_storage().nbytes(), []))
                entry[1].append(weakref.ref(t))
        live = {ptr: (size, refs) for ptr, (size, refs) in self.storages.items() if any(r() is not None for r in refs)}
        self.storages = live
        self.peak = max(self.peak, sum(size for size, _ in live.values()))
        return out


def test_triton_path_peak_memory(kernel_device):
    """The one-shot fused path keeps, at its largest, two Gaussian levels of each image (3 + 3/4 planes each)
    and one band's six planes: 13.5 float32 planes of the image size (issue 9: it was 25.5, with float copies of
    both images, the reference's whole contrast pyramid and the previous band's buffers)."""
    gen = torch.Generator().manual_seed(3)
    ref = torch.randint(0, 256, (1, 3, 16, 16), dtype=torch.uint8, generator=gen)
    dist = (ref.float() + 8 * torch.randn(ref.shape, generator=gen)).clamp(0, 255).to(torch.uint8)
    ref, dist = ref.to(kernel_device), dist.to(kernel_device)
    with use_backend("triton"):
        fusedsim.cvvdp(ref, dist)  # caches (tables, launchers) made on the first call are not the call's memory
        tracker = _PeakLiveBytes(ignore=(ref, dist))
        with tracker:
            fusedsim.cvvdp(ref, dist)
    planes = tracker.peak / (16 * 16 * 4)
    assert planes <= 14.5, planes  # the interpreter adds a few hundred bytes of its own


def test_identical_images_score_ten_with_an_empty_map():
    gen = torch.Generator().manual_seed(0)
    image = torch.randint(0, 256, (2, 3, 37, 29), dtype=torch.uint8, generator=gen)
    out = fusedsim.cvvdp(image, image.clone(), return_map=True)
    assert torch.equal(out.jod, torch.full((2,), 10.0))
    assert torch.equal(out.diff_map, torch.zeros(2, 1, 37, 29))
    assert fusedsim.get_metric("colorvideovdp").identical_value == 10.0


def test_uint8_and_float_inputs_agree(chelsea_crop):
    ref, dist = chelsea_crop
    assert torch.equal(fusedsim.cvvdp(ref, dist), fusedsim.cvvdp(ref.float() / 255, dist.float() / 255))


def test_strided_inputs_equal_contiguous(chelsea_crop):
    ref, dist = (x[None].float() / 255 for x in chelsea_crop)
    strided = (ref.contiguous(memory_format=torch.channels_last), dist.transpose(-1, -2).contiguous().transpose(-1, -2))
    assert torch.equal(fusedsim.cvvdp(*strided), fusedsim.cvvdp(ref, dist))


def test_cached_reference_equals_one_shot(refdata):
    ref = _rgb(refdata, "tiny_64x64.png")
    dists = [_rgb(refdata, f"tiny_64x64__{d}.png") for d in ("jpeg10", "noise5")]
    for display in DISPLAYS:
        m = fusedsim.Metric("cvvdp", device="cpu", display=display).set_reference(ref)
        for dist in dists:
            assert torch.equal(m.score(dist), fusedsim.cvvdp(ref, dist, display=display))
        with_map = fusedsim.Metric("colorvideovdp", device="cpu", display=display, return_map=True)
        got = with_map.set_reference(ref[None]).score(dists[0][None])
        want = fusedsim.cvvdp(ref[None], dists[0][None], display=display, return_map=True)
        assert torch.equal(got.jod, want.jod) and torch.equal(got.diff_map, want.diff_map)


def test_display_parameters_reproduce_other_display_models(chelsea_crop):
    ref, dist = chelsea_crop[0][:, :24, :24], chelsea_crop[1][:, :24, :24]
    # sdr_4k_30 is standard_4k at 0.6 m and 100 cd/m²; standard_fhd is a 24" 1920x1080 screen at 0.6 m.
    assert torch.equal(fusedsim.cvvdp(ref, dist, display="standard_4k", viewing_distance_m=0.6, peak_luminance=100),
                       fusedsim.cvvdp(ref, dist, display="sdr_4k_30"))
    assert torch.equal(fusedsim.cvvdp(ref, dist, resolution=(1920, 1080), viewing_distance_m=0.6, diagonal_inches=24),
                       fusedsim.cvvdp(ref, dist, display="standard_fhd"))
    assert torch.equal(fusedsim.cvvdp(ref, dist, ppd=cvvdp_display("standard_fhd").ppd),
                       fusedsim.cvvdp(ref, dist, display="standard_fhd"))
    # The README's info string: 75.4 pix/deg, Lblack 0.2, Lrefl 0.3979 cd/m² for standard_4k.
    d = cvvdp_display("standard_4k")
    assert f"{d.ppd:.4g}" == "75.4" and d.black_level == 0.2 and f"{d.reflected:.4g}" == "0.3979"
    darker = fusedsim.cvvdp(ref, dist, e_ambient=0.0, contrast=100.0, k_refl=0.01, exposure=0.5)
    assert float(darker) != float(fusedsim.cvvdp(ref, dist))


def test_gradients_match_finite_differences():
    gen = torch.Generator().manual_seed(1)
    ref = (0.1 + 0.8 * torch.rand(1, 3, 8, 9, generator=gen, dtype=torch.float64)).requires_grad_()
    dist = (ref.detach() + 0.05 * torch.randn(ref.shape, generator=gen, dtype=torch.float64)).clamp(0.05, 0.95)
    dist.requires_grad_()
    assert torch.autograd.gradcheck(lambda r, d: fusedsim.cvvdp(r, d, display="standard_fhd"), (ref, dist),
                                    eps=1e-6, atol=1e-6, rtol=1e-4, fast_mode=True)


def test_loss_module_is_ten_minus_jod_and_backpropagates(chelsea_crop):
    ref = chelsea_crop[0][None].float() / 255
    dist = (chelsea_crop[1][None].float() / 255).requires_grad_()
    loss = fusedsim.CVVDPLoss(display="standard_fhd")(ref, dist)
    assert torch.allclose(loss, 10.0 - fusedsim.cvvdp(ref, dist.detach(), display="standard_fhd"))
    loss.backward()
    assert dist.grad is not None and torch.isfinite(dist.grad).all() and dist.grad.abs().sum() > 0


def test_float64_twin_agrees_with_float32(chelsea_crop):
    ref, dist = chelsea_crop
    got = fusedsim.cvvdp(ref.double() / 255, dist.double() / 255)
    assert got.dtype == torch.float64
    assert abs(float(got) - PYCVVDP_MAP["standard_4k"][0]) <= 1e-4  # float32 rounding of the reference


def test_spec_matches_the_contract():
    spec = fusedsim.get_metric("colorvideovdp")
    assert spec.name == "cvvdp" and spec.kind == "srgb" and spec.higher_is_better and spec.cached_reference
    assert spec.differentiable and spec.min_size == 2


@pytest.mark.parametrize("kwargs, error, match", [
    ({"display": "standard_8k"}, ValueError, (r"unknown display 'standard_8k'; known displays: standard_4k, .*"
                                              r"standard_fhd")),
    ({"display": "standard_hdr_hlg", "e_ambient": 0.0}, ValueError, "needs e_ambient > 0 for its system gamma"),
    ({"display": 4}, TypeError, "display must be a display-model name"),
    ({"peak_luminance": -1.0}, ValueError, "peak_luminance must be > 0"),
    ({"ppd": "75"}, TypeError, "ppd must be a finite number"),
    ({"resolution": (1920,)}, ValueError, "resolution must be"),
])
def test_bad_display_parameters(kwargs, error, match):
    image = torch.zeros(3, 8, 8)
    with pytest.raises(error, match=match):
        fusedsim.cvvdp(image, image, **kwargs)


def test_unknown_display_lists_supported_models():
    with pytest.raises(ValueError) as info:
        fusedsim.cvvdp(torch.zeros(3, 8, 8), torch.zeros(3, 8, 8), display="nope")
    for name in supported_displays():
        assert name in str(info.value)


@pytest.mark.parametrize("ref, dist, error, match", [
    (torch.zeros(3, 8, 8), torch.zeros(3, 8, 9), ValueError, "same shape"),
    (torch.zeros(1, 8, 8), torch.zeros(1, 8, 8), ValueError, "3 sRGB channels"),
    (torch.zeros(3, 1, 8), torch.zeros(3, 1, 8), ValueError, "at least 2 px"),
    (torch.full((3, 8, 8), 1.5), torch.zeros(3, 8, 8), ValueError, r"ref must hold sRGB values in \[0, 1\]"),
    (torch.zeros(3, 8, 8), torch.full((3, 8, 8), float("nan")), ValueError, "dist must hold sRGB values"),
    (torch.zeros(3, 8, 8, dtype=torch.int32), torch.zeros(3, 8, 8), TypeError, "ref must be uint8"),
    (np.zeros((3, 8, 8)), torch.zeros(3, 8, 8), TypeError, "ref must be a torch.Tensor"),
])
def test_bad_inputs(ref, dist, error, match):
    with pytest.raises(error, match=match):
        fusedsim.cvvdp(ref, dist)


def test_bad_prepared_state_and_shapes():
    state = prepare_cvvdp(torch.zeros(2, 3, 8, 8))
    with pytest.raises(TypeError, match="prepare_cvvdp"):
        score_prepared_cvvdp(object(), torch.zeros(3, 8, 8))
    with pytest.raises(ValueError, match="reference's shape"):
        score_prepared_cvvdp(state, torch.zeros(3, 3, 8, 8))
    with pytest.raises(TypeError, match="kind of dtype"):
        score_prepared_cvvdp(state, torch.zeros(2, 3, 8, 8, dtype=torch.float64))


def test_twin_is_reference_first():
    gen = torch.Generator().manual_seed(2)
    a, b = torch.rand(1, 3, 16, 16, generator=gen), torch.rand(1, 3, 16, 16, generator=gen)
    display = cvvdp_display()
    # The CSF adapts to the reference's luminance, so swapping the images changes the score.
    assert float(cvvdp_ref(a, b, display)) != float(cvvdp_ref(b, a, display))
    assert torch.equal(cvvdp_ref(a, b, display), fusedsim.cvvdp(a, b))

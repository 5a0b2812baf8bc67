"""Perceptual-metric ops: ColorVideoVDP (registered when the ``perceptual`` family loads)."""

from __future__ import annotations

import torch

from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.cvvdp.twin import (
    cvvdp_band_pool_ref,
    cvvdp_expand_op_ref,
    cvvdp_linear_dkl_op_ref,
    cvvdp_mask_diff_ref,
    cvvdp_masker_vblur_ref,
    cvvdp_reduce_ref,
    cvvdp_ref_band_ref,
    cvvdp_test_band_ref,
)
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.families.cvvdp.video_twin import (
    cvvdp_temporal_filters,
    cvvdp_temporal_ref,
    cvvdp_video_pair_band_ref,
)


def _cvvdp_mask_examples(device: torch.device) -> list[Example]:
    """Band contrasts of a test/reference pair (~0.1), CSF sensitivities (5..100) and a positive blurred masker."""
    out = []
    for i, (shape, sens_batch) in enumerate([((1, 3, 1, 1), None), ((2, 3, 7, 13), 1), ((1, 3, 16, 9), None)]):
        gen = torch.Generator().manual_seed(140 + i)
        test = 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        ref = test + 0.05 * torch.randn(shape, generator=gen, dtype=torch.float64)
        sens = 5 + 95 * torch.rand((sens_batch or shape[0], *shape[1:]), generator=gen, dtype=torch.float64)
        blurred = (test * sens).abs() * torch.rand(shape, generator=gen, dtype=torch.float64)
        out.append(Example(tuple(t.to(device) for t in (test, ref, sens, blurred)),
                           note=f"{shape} sensitivity batch {sens_batch or shape[0]}"))
    test, ref, sens, blurred = (t.transpose(-1, -2) for t in out[-1].tensors)
    out.append(Example((test, ref, sens, blurred), note="non-contiguous"))
    return out


def _import_triton() -> None:
    """The Triton side of these ops, imported on first GPU use (Triton itself with it): each module registers
    its plans on the ops below."""
    import fusedsim.families.cvvdp.band_kernel  # noqa: F401
    import fusedsim.families.cvvdp.dkl_kernel  # noqa: F401
    import fusedsim.families.cvvdp.mask_diff_kernel  # noqa: F401
    import fusedsim.families.cvvdp.masking_kernel  # noqa: F401
    import fusedsim.families.cvvdp.pair_band_kernel  # noqa: F401
    import fusedsim.families.cvvdp.pyramid_kernel  # noqa: F401
    import fusedsim.families.cvvdp.temporal_kernel  # noqa: F401
    import fusedsim.families.cvvdp.video_band_kernel  # noqa: F401


cvvdp_mask_diff = register_op(KernelOp(
    name="cvvdp_mask_diff",
    schema="(Tensor test, Tensor ref, Tensor sens, Tensor blurred) -> Tensor",
    n_tensors=4,
    load_triton=_import_triton,
    reference=cvvdp_mask_diff_ref,
    fake=lambda test, ref, sens, blurred: test.new_empty(test.shape, dtype=compute_dtype(test.dtype)),
    examples=_cvvdp_mask_examples,
    differentiable=False,
    # float32 only (the metric's GPU dtype): the kernel's powers are exp(e log x), a few ulps from torch.pow,
    # amplified by e log x (|.| <= ~45) to ~3e-6 relative; the float64 path runs the twin.
    tolerance={torch.float32: (5e-5, 0.0)},
    doc="ColorVideoVDP's masking of one band after the phase-uncertainty blur: cross-channel masker, masked and "
        "soft-clamped differences (N, 3, h, w).",
))


# The pyramid and band kernels against the float64 twins: float32 sums in another order than the convolutions
# (~1e-7 relative), log10 / 10^x as log / exp times a constant (~1e-6 relative on sensitivities of ~10..500);
# the pooling kernel's powers are exp(e log x), like cvvdp_mask_diff's.
CVVDP_TOLERANCE = {torch.float32: (2e-5, 0.0)}


def _cvvdp_level(shape, seed: int, device) -> torch.Tensor:
    """A DKL-like level: luminance 0.001..300 cd/m² (below the 0.01 floor and across the CSF table) and
    chromatic channels of either sign."""
    gen = torch.Generator().manual_seed(seed)
    lum = 10 ** (5 * torch.rand((shape[0], 1, *shape[2:]), generator=gen, dtype=torch.float64) - 3)
    chroma = 20 * torch.randn((shape[0], shape[1] - 1, *shape[2:]), generator=gen, dtype=torch.float64)
    return torch.cat([lum, chroma], dim=1).to(device)


def _cvvdp_pyramid_examples(device: torch.device) -> list[Example]:
    shapes = [(1, 3, 7, 13), (2, 1, 8, 9), (1, 3, 6, 6), (1, 2, 5, 4), (1, 1, 2, 3), (1, 3, 33, 70)]
    out = [Example((_cvvdp_level(s, 150 + i, device),), note=f"{s}") for i, s in enumerate(shapes)]
    out.append(Example((out[-1].tensors[0].transpose(-1, -2),), note="non-contiguous"))
    return out


def _cvvdp_expand_examples(device: torch.device) -> list[Example]:
    cases = [((1, 3, 4, 7), 7, 13), ((2, 1, 4, 5), 8, 9), ((1, 1, 2, 2), 3, 4), ((1, 3, 17, 35), 33, 70)]
    return [Example((_cvvdp_level(s, 160 + i, device),), (h, w), note=f"{s} -> {h}x{w}")
            for i, (s, h, w) in enumerate(cases)]


def _cvvdp_band_levels(shape, seed: int, device):
    g = _cvvdp_level(shape, seed, device)
    return g, cvvdp_reduce_ref(g)


def _cvvdp_ref_band_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, rho, scale) in enumerate([((1, 3, 7, 13), 37.7, 1.0), ((2, 3, 8, 9), 12.17, 2.0),
                                             ((1, 3, 40, 70), 0.4, 2.0)]):
        out.append(Example(_cvvdp_band_levels(shape, 170 + i, device), (rho, scale), note=f"{shape} rho {rho}"))
    return out


def _cvvdp_test_band_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, ref_batch) in enumerate([((1, 3, 7, 13), 1), ((2, 3, 8, 9), 1), ((2, 3, 20, 33), 2)]):
        g, g_next = _cvvdp_band_levels(shape, 180 + i, device)
        ref6 = cvvdp_ref_band_ref(*_cvvdp_band_levels((ref_batch, *shape[1:]), 190 + i, device), 18.8, 2.0)
        out.append(Example((g, g_next, ref6[:, :3], ref6[:, 3:]), (2.0,), note=f"{shape} reference batch {ref_batch}"))
    return out


def cvvdp_pair_band_ref(ref_g: torch.Tensor, ref_g_next: torch.Tensor, test_g: torch.Tensor,
                        test_g_next: torch.Tensor, rho: float, scale: float) -> torch.Tensor:
    """Twin of ``cvvdp_pair_band``: the test side of a band against the reference side of the same band."""
    ref6 = cvvdp_ref_band_ref(ref_g, ref_g_next, rho, scale)
    return cvvdp_test_band_ref(test_g, test_g_next, ref6[:, :3], ref6[:, 3:], scale)


def _cvvdp_pair_band_examples(device: torch.device) -> list[Example]:
    out = []
    # rho as in the test-band examples: at low rho the CSF's gain (~200) times a float32 contrast that cancels
    # (G - E ~ 1e-3 G) exceeds the tolerance, although the kernel equals cvvdp_ref_band + cvvdp_test_band
    for i, (shape, rho, scale) in enumerate([((1, 3, 7, 13), 37.7, 1.0), ((2, 3, 20, 33), 18.8, 2.0)]):
        levels = _cvvdp_band_levels(shape, 230 + i, device) + _cvvdp_band_levels(shape, 240 + i, device)
        out.append(Example(levels, (rho, scale), note=f"{shape} rho {rho} scale {scale}"))
    ref_g, ref_next, test_g, test_next = out[0].tensors
    strided = test_g.transpose(-1, -2).contiguous().transpose(-1, -2)  # rows made contiguous by the op
    out.append(Example((ref_g, ref_next, strided, test_next), (12.0, 2.0), note="strided test level"))
    return out


def _cvvdp_masker_examples(device: torch.device) -> list[Example]:
    out = []
    for i, shape in enumerate([(1, 3, 7, 5), (2, 3, 16, 9), (1, 3, 40, 31)]):
        gen = torch.Generator().manual_seed(200 + i)
        out.append(Example(((10 * torch.rand(shape, generator=gen, dtype=torch.float64)).to(device),), note=f"{shape}"))
    band = torch.rand((1, 6, 9, 12), generator=torch.Generator().manual_seed(205), dtype=torch.float64).to(device)
    out.append(Example((band[:, 1:4],), note="a channel view"))
    return out


def _cvvdp_band_pool_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, blur, with_map) in enumerate([((1, 3, 7, 13), True, True), ((2, 3, 9, 8), True, False),
                                                 ((1, 3, 5, 4), False, True), ((2, 3, 3, 40), False, False),
                                                 ((1, 3, 12, 300), True, True)]):
        gen = torch.Generator().manual_seed(210 + i)
        n, _, h, w = shape
        band = torch.cat([5 * torch.rand((n, 3, h, w), generator=gen, dtype=torch.float64),
                          2 * torch.rand((n, 3, h, w), generator=gen, dtype=torch.float64) ** 3], dim=1).to(device)
        vblurred = cvvdp_masker_vblur_ref(band[:, :3]) if blur else band[:, :3]
        out.append(Example((vblurred, band), (blur, with_map), note=f"{shape} blur {blur} map {with_map}"))
    return out


def _cvvdp_band_pool_fake(vblurred, band, blur, with_map):
    n, _, h, w = band.shape
    return band.new_empty((n, 3, h, w + 1 if with_map else 1), dtype=compute_dtype(band.dtype))


def cvvdp_linear_dkl_codes_ref(rgb: torch.Tensor, peak_luminance: float, black_level: float, reflected: float,
                               exposure: float, rgb2xyz: list[float], eotf: int = 0,
                               hlg_gamma: float = 1.2) -> torch.Tensor:
    """Twin of ``cvvdp_linear_dkl``: uint8 codes (sRGB only) are first converted as the metric's input
    (``code / 255``, float32)."""
    if rgb.dtype == torch.uint8:
        rgb = rgb.to(torch.float32) / 255.0
    return cvvdp_linear_dkl_op_ref(rgb, peak_luminance, black_level, reflected, exposure, rgb2xyz, eotf, hlg_gamma)


def dkl_scalars(display) -> tuple:
    """``cvvdp_linear_dkl``'s arguments after the image for a :class:`~.data.CVVDPDisplay`: photometry, the RGB ->
    XYZ rows flattened, the EOTF's index in :data:`~.data.EOTFS` and the HLG system gamma (1.2 when unused)."""
    from fusedsim.families.cvvdp.data import EOTFS

    gamma = display.hlg_gamma if display.eotf == "HLG" else 1.2
    return (display.peak_luminance, display.black_level, display.reflected, display.exposure,
            [v for row in display.rgb2xyz for v in row], EOTFS.index(display.eotf), gamma)


def display_model(rgb: torch.Tensor, display) -> torch.Tensor:
    """``cvvdp_linear_dkl`` of ``rgb`` (N, 3, H, W) for a :class:`~.data.CVVDPDisplay` (its EOTF, photometry and
    colour space as the kernel's scalars)."""
    return cvvdp_linear_dkl(rgb, *dkl_scalars(display))


def _cvvdp_dkl_examples(device: torch.device) -> list[Example]:
    """sRGB values over [0, 1] with dark ones (the linear segment) and a few outside (clamped); standard_4k's
    photometry, and a darker display with exposure 0.5 (the clip branch); uint8 codes (every one of them), read
    without a float copy. HDR: PQ and HLG code values over [0, 1] (a few outside, clamped; HLG's two segments and
    black pixels), with and without exposure, HLG at 1000 cd/m² (gamma 1.2) and 1500 (ambient-dependent gamma);
    linear light from below the black level to above the peak."""
    from fusedsim.families.cvvdp.data import cvvdp_display

    out = []
    cases = [((1, 3, 7, 13), "standard_4k", {}), ((2, 3, 5, 9), "standard_4k", {"exposure": 0.5, "contrast": 100.0}),
             ((1, 3, 7, 13), "standard_hdr_pq", {}), ((2, 3, 5, 9), "65inch_hdr_pq_1Knit", {"exposure": 2.0}),
             ((1, 3, 7, 13), "standard_hdr_hlg", {}), ((2, 3, 5, 9), "standard_hdr_hlg",
                                                        {"exposure": 1.5, "peak_luminance": 1000.0})]
    for i, (shape, name, kwargs) in enumerate(cases):
        gen = torch.Generator().manual_seed(220 + i)
        rgb = torch.rand(shape, generator=gen, dtype=torch.float64) ** 3 * 1.1 - 0.02
        if i == 4:
            rgb[..., 0, :] = 0.0  # black pixels: HLG's OOTF of a zero luminance
        out.append(Example((rgb.to(device),), dkl_scalars(cvvdp_display(name, **kwargs)),
                           note=f"{name} {shape} {kwargs}"))
    gen = torch.Generator().manual_seed(230)
    lum = 10.0 ** (torch.rand((1, 3, 7, 13), generator=gen, dtype=torch.float64) * 6 - 3) - 0.01  # ~0 to 1000 cd/m²
    for name, kwargs in (("standard_hdr_linear", {}), ("standard_hdr_linear_dark", {"exposure": 3.0})):
        out.append(Example((lum.to(device),), dkl_scalars(cvvdp_display(name, **kwargs)), note=f"{name} {kwargs}"))
    codes = torch.randperm(3 * 96, generator=torch.Generator().manual_seed(222)).remainder(256).to(torch.uint8)
    out.append(Example((codes.view(1, 3, 8, 12).to(device),), out[0].scalars, note="uint8 codes"))
    return out


cvvdp_linear_dkl = register_op(KernelOp(
    name="cvvdp_linear_dkl",
    schema="(Tensor rgb, float peak_luminance, float black_level, float reflected, float exposure, "
           "float[] rgb2xyz, int eotf, float hlg_gamma) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=cvvdp_linear_dkl_codes_ref,
    fake=lambda rgb, *args: rgb.new_empty(rgb.shape, dtype=compute_dtype(rgb.dtype)),
    examples=_cvvdp_dkl_examples,
    differentiable=False,
    tolerance=CVVDP_TOLERANCE,
    doc="ColorVideoVDP's display model: input encoded with the display's EOTF (eotf: index into data.EOTFS: sRGB "
        "floating or uint8 codes, PQ, HLG, linear cd/m²) -> emitted light in DKL d65 (N, 3, H, W).",
))

cvvdp_reduce = register_op(KernelOp(
    name="cvvdp_reduce",
    schema="(Tensor x) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=cvvdp_reduce_ref,
    fake=lambda x: x.new_empty((*x.shape[:2], (x.shape[-2] + 1) // 2, (x.shape[-1] + 1) // 2),
                               dtype=compute_dtype(x.dtype)),
    examples=_cvvdp_pyramid_examples,
    differentiable=False,
    tolerance=CVVDP_TOLERANCE,
    doc="ColorVideoVDP's pyramid reduction (5-tap blur + decimation, pycvvdp's edges) (N, C, ceil(H/2), ceil(W/2)).",
))

cvvdp_expand = register_op(KernelOp(
    name="cvvdp_expand",
    schema="(Tensor x, int height, int width) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=cvvdp_expand_op_ref,
    fake=lambda x, height, width: x.new_empty((*x.shape[:2], height, width), dtype=compute_dtype(x.dtype)),
    examples=_cvvdp_expand_examples,
    differentiable=False,
    tolerance=CVVDP_TOLERANCE,
    doc="ColorVideoVDP's pyramid expansion (zero interleave + 5-tap blur, pycvvdp's edges) (N, C, H, W).",
))

cvvdp_ref_band = register_op(KernelOp(
    name="cvvdp_ref_band",
    schema="(Tensor g, Tensor g_next, float rho, float scale) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=cvvdp_ref_band_ref,
    fake=lambda g, g_next, rho, scale: g.new_empty((g.shape[0], 6, *g.shape[2:]), dtype=compute_dtype(g.dtype)),
    examples=_cvvdp_ref_band_examples,
    differentiable=False,
    tolerance=CVVDP_TOLERANCE,
    doc="ColorVideoVDP's reference side of one band: expand, Weber contrast, castleCSF sensitivity (N, 6, h, w).",
))

cvvdp_test_band = register_op(KernelOp(
    name="cvvdp_test_band",
    schema="(Tensor g, Tensor g_next, Tensor ref_contrast, Tensor sens, float scale) -> Tensor",
    n_tensors=4,
    load_triton=_import_triton,
    reference=cvvdp_test_band_ref,
    fake=lambda g, g_next, r, s, scale: g.new_empty((g.shape[0], 6, *g.shape[2:]), dtype=compute_dtype(g.dtype)),
    examples=_cvvdp_test_band_examples,
    differentiable=False,
    tolerance=CVVDP_TOLERANCE,
    doc="ColorVideoVDP's test side of one band: expand, contrast, min(|T'|, |R'|) and |T' - R'| (N, 6, h, w).",
))

cvvdp_pair_band = register_op(KernelOp(
    name="cvvdp_pair_band",
    schema="(Tensor ref_g, Tensor ref_g_next, Tensor test_g, Tensor test_g_next, float rho, float scale) -> Tensor",
    n_tensors=4,
    load_triton=_import_triton,
    reference=cvvdp_pair_band_ref,
    fake=lambda rg, rn, tg, tn, rho, scale: tg.new_empty((tg.shape[0], 6, *tg.shape[2:]),
                                                         dtype=compute_dtype(tg.dtype)),
    examples=_cvvdp_pair_band_examples,
    differentiable=False,
    tolerance=CVVDP_TOLERANCE,
    doc="ColorVideoVDP's band of a (reference, test) pair: both sides' contrast, the reference's CSF sensitivity, "
        "min(|T'|, |R'|) and |T' - R'| (N, 6, h, w), the reference side kept in registers.",
))

cvvdp_masker_vblur = register_op(KernelOp(
    name="cvvdp_masker_vblur",
    schema="(Tensor m) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=cvvdp_masker_vblur_ref,
    fake=lambda m: m.new_empty(m.shape, dtype=compute_dtype(m.dtype)),
    examples=_cvvdp_masker_examples,
    differentiable=False,
    tolerance=CVVDP_TOLERANCE,
    doc="ColorVideoVDP's masking blur, vertical pass (13 taps, reflect edges) (N, 3, h, w).",
))

cvvdp_band_pool = register_op(KernelOp(
    name="cvvdp_band_pool",
    schema="(Tensor vblurred, Tensor band, bool blur, bool with_map) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=cvvdp_band_pool_ref,
    fake=_cvvdp_band_pool_fake,
    examples=_cvvdp_band_pool_examples,
    differentiable=False,
    tolerance={torch.float32: (5e-5, 0.0)},  # cvvdp_mask_diff's powers, then one more (beta)
    doc="ColorVideoVDP's band after its test side: masking blur's horizontal pass, masked difference, per-row "
        "pooled sums (N, 3, h, 1), or (N, 3, h, w + 1) with the difference map.",
))


def _cvvdp_temporal_examples(device: torch.device) -> list[Example]:
    """DKL-like frames and the metric's filters at 30 fps (9 taps) and 24 fps (7 taps); windows with one output
    frame (the first frame's history replicated) and several; 11 frames: two programs' 4 frames and 3 more."""
    out = []
    for i, (n, frames, fps, h, w) in enumerate([(1, 1, 30, 5, 7), (2, 3, 24, 6, 4), (1, 2, 30, 17, 33),
                                                (2, 11, 24, 3, 5)]):
        taps = cvvdp_temporal_filters(fps).to(torch.float64)
        levels = _cvvdp_level((n * (frames + taps.shape[-1] - 1), 3, h, w), 250 + i, "cpu")
        window = levels.view(n, -1, 3, h, w)
        out.append(Example((window.to(device), taps.to(device)), note=f"{n} clips, {frames} frames, {fps} fps"))
    return out


cvvdp_temporal = register_op(KernelOp(
    name="cvvdp_temporal",
    schema="(Tensor window, Tensor filters) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=cvvdp_temporal_ref,
    fake=lambda window, filters: window.new_empty(
        (window.shape[0], window.shape[1] - filters.shape[-1] + 1, 4, *window.shape[3:]),
        dtype=compute_dtype(window.dtype)),
    examples=_cvvdp_temporal_examples,
    differentiable=False,
    tolerance=CVVDP_TOLERANCE,  # float32 sums of L products in tap order
    doc="ColorVideoVDP's temporal channels: Y-sustained, RG, YV and Y-transient FIR filters over a window of DKL "
        "frames (N, S - L + 1, 4, H, W).",
))


def _cvvdp_video_pair_band_examples(device: torch.device) -> list[Example]:
    """Temporal-channel levels: the fourth (transient) channel of either sign like the chromatic ones; and three
    clips of two frames against one shared reference of two frames."""
    out = []
    for i, (shape, rho, scale, clips) in enumerate([((1, 4, 7, 13), 37.7, 1.0, 1), ((3, 4, 20, 33), 18.8, 2.0, 1),
                                                    ((2, 4, 9, 12), 18.8, 2.0, 3)]):
        test_shape = (shape[0] * clips, *shape[1:])
        levels = _cvvdp_band_levels(shape, 260 + i, device) + _cvvdp_band_levels(test_shape, 270 + i, device)
        out.append(Example(levels, (rho, scale), note=f"{shape} rho {rho} scale {scale} clips {clips}"))
    return out


cvvdp_video_pair_band = register_op(KernelOp(
    name="cvvdp_video_pair_band",
    schema="(Tensor ref_g, Tensor ref_g_next, Tensor test_g, Tensor test_g_next, float rho, float scale) -> Tensor",
    n_tensors=4,
    load_triton=_import_triton,
    reference=cvvdp_video_pair_band_ref,
    fake=lambda rg, rn, tg, tn, rho, scale: tg.new_empty((tg.shape[0], 8, *tg.shape[2:]),
                                                         dtype=compute_dtype(tg.dtype)),
    examples=_cvvdp_video_pair_band_examples,
    differentiable=False,
    tolerance=CVVDP_TOLERANCE,  # cvvdp_pair_band's arithmetic on one more channel
    doc="ColorVideoVDP's band of M video frames' four temporal channels: both sides' contrast, the reference's CSF "
        "sensitivity, min(|T'|, |R'|) and |T' - R'| (M, 8, h, w); test levels of K clips against one reference of "
        "M frames give (K*M, 8, h, w).",
))


def _cvvdp_video_masker_examples(device: torch.device) -> list[Example]:
    out = []
    for i, shape in enumerate([(1, 4, 7, 5), (3, 4, 16, 9)]):
        gen = torch.Generator().manual_seed(280 + i)
        out.append(Example(((10 * torch.rand(shape, generator=gen, dtype=torch.float64)).to(device),), note=f"{shape}"))
    band = torch.rand((2, 8, 9, 12), generator=torch.Generator().manual_seed(285), dtype=torch.float64).to(device)
    out.append(Example((band[:, :4],), note="the masker channels of a band buffer"))
    return out


cvvdp_video_masker_vblur = register_op(KernelOp(
    name="cvvdp_video_masker_vblur",
    schema="(Tensor m) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=cvvdp_masker_vblur_ref,
    fake=lambda m: m.new_empty(m.shape, dtype=compute_dtype(m.dtype)),
    examples=_cvvdp_video_masker_examples,
    differentiable=False,
    tolerance=CVVDP_TOLERANCE,
    doc="ColorVideoVDP's masking blur of the four temporal channels, vertical pass (13 taps, reflect edges).",
))


def _cvvdp_video_band_pool_examples(device: torch.device) -> list[Example]:
    out = []
    # 600 columns: the middle steps of 256 lie inside the row (the blur without reflection)
    for i, (shape, blur, with_map) in enumerate([((1, 4, 7, 13), True, True), ((2, 4, 9, 8), True, False),
                                                 ((1, 4, 5, 4), False, True), ((2, 4, 12, 300), True, True),
                                                 ((1, 4, 7, 600), True, False)]):
        gen = torch.Generator().manual_seed(290 + i)
        n, _, h, w = shape
        band = torch.cat([5 * torch.rand((n, 4, h, w), generator=gen, dtype=torch.float64),
                          2 * torch.rand((n, 4, h, w), generator=gen, dtype=torch.float64) ** 3], dim=1).to(device)
        vblurred = cvvdp_masker_vblur_ref(band[:, :4]) if blur else band[:, :4]
        out.append(Example((vblurred, band), (blur, with_map), note=f"{shape} blur {blur} map {with_map}"))
    return out


def _cvvdp_video_band_pool_fake(vblurred, band, blur, with_map):
    n, _, h, w = band.shape
    return band.new_empty((n, 4, h, w + 1 if with_map else 1), dtype=compute_dtype(band.dtype))


cvvdp_video_band_pool = register_op(KernelOp(
    name="cvvdp_video_band_pool",
    schema="(Tensor vblurred, Tensor band, bool blur, bool with_map) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=cvvdp_band_pool_ref,
    fake=_cvvdp_video_band_pool_fake,
    examples=_cvvdp_video_band_pool_examples,
    differentiable=False,
    tolerance={torch.float32: (5e-5, 0.0)},  # cvvdp_band_pool's powers
    doc="ColorVideoVDP's band of video frames after cvvdp_video_pair_band: masking blur's horizontal pass, "
        "four-channel masked difference, per-row pooled sums (M, 4, h, 1), or (M, 4, h, w + 1) with the map.",
))


def cvvdp_temporal_codes_ref(codes: torch.Tensor, filters: torch.Tensor, peak_luminance: float, black_level: float,
                             reflected: float, exposure: float, rgb2xyz: list[float]) -> torch.Tensor:
    """Twin of ``cvvdp_temporal_codes``: the display model of each uint8 frame (``cvvdp_linear_dkl``'s twin), then
    :func:`cvvdp_temporal_ref` (float32 unless the filters are float64)."""
    n, s, c, h, w = codes.shape
    dkl = cvvdp_linear_dkl_codes_ref(codes.reshape(n * s, c, h, w), peak_luminance, black_level, reflected,
                                     exposure, rgb2xyz)
    return cvvdp_temporal_ref(dkl.view(n, s, c, h, w).to(filters.dtype), filters)


def _cvvdp_temporal_codes_examples(device: torch.device) -> list[Example]:
    """Every uint8 code; standard_4k's photometry and a darker display with exposure 0.5 (the clip branch); 17
    frames: four programs' 4 frames and one more."""
    from fusedsim.families.cvvdp.data import cvvdp_display

    out = []
    for i, (n, frames, fps, h, w, kwargs) in enumerate([(1, 1, 30, 8, 12, {}),
                                                         (2, 3, 24, 5, 9, {"exposure": 0.5, "contrast": 100.0}),
                                                         (1, 17, 30, 4, 6, {})]):
        taps = cvvdp_temporal_filters(fps).to(torch.float64)
        count = n * (frames + taps.shape[-1] - 1) * 3 * h * w
        codes = torch.randperm(count, generator=torch.Generator().manual_seed(300 + i)).remainder(256)
        d = cvvdp_display("standard_4k", **kwargs)
        scalars = (d.peak_luminance, d.black_level, d.reflected, d.exposure, [v for row in d.rgb2xyz for v in row])
        window = codes.to(torch.uint8).view(n, -1, 3, h, w)
        out.append(Example((window.to(device), taps.to(device)), scalars, note=f"{n} clips, {frames} frames {kwargs}"))
    return out


cvvdp_temporal_codes = register_op(KernelOp(
    name="cvvdp_temporal_codes",
    schema="(Tensor codes, Tensor filters, float peak_luminance, float black_level, float reflected, "
           "float exposure, float[] rgb2xyz) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=cvvdp_temporal_codes_ref,
    fake=lambda codes, filters, *args: codes.new_empty(
        (codes.shape[0], codes.shape[1] - filters.shape[-1] + 1, 4, *codes.shape[3:]),
        dtype=compute_dtype(filters.dtype)),
    examples=_cvvdp_temporal_codes_examples,
    differentiable=False,
    tolerance=CVVDP_TOLERANCE,  # cvvdp_linear_dkl's and cvvdp_temporal's float32 arithmetic
    doc="ColorVideoVDP's display model fused with its temporal channels: uint8 sRGB frames -> Y-sustained, RG, YV "
        "and Y-transient (N, S - L + 1, 4, H, W), the DKL frames never written.",
))

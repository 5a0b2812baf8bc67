"""The built-in metrics, declared for :mod:`fusedsim.metrics.registry` (torch-free: compute functions are strings).

Working-set coefficients are upper estimates for the PyTorch twins (the larger of the two paths), per pixel and
channel of one pair, inputs included: the engine refines them with measured values.
"""

from __future__ import annotations

import math

from fusedsim.metrics.registry import MetricSpec, register_metric

_WINDOW = 11  # the default Gaussian window of ssim / ms-ssim
_LEVELS = 5  # MS-SSIM levels with the default weights

# ------------------------------------------------------------------------------------------ images (float RGB)
register_metric(MetricSpec(
    name="ssim", kind="image", compute="fusedsim.ssim:ssim",
    summary="SSIM, pytorch-msssim semantics (11-px Gaussian window, valid region)",
    outputs=("ssim",), higher_is_better=True, identical_value=1.0, value_range=(-1.0, 1.0),
    differentiable=True, min_size=_WINDOW, min_size_reason=f"the window is {_WINDOW} px wide",
    halo_rows=_WINDOW // 2, bytes_per_pixel=90.0,  # CPU twin: 81 B measured + the inputs
    strip_sums="fusedsim.metrics._strip_sums:ssim_strip_sums",
    strip_finish="fusedsim.metrics._strip_sums:ssim_strip_finish",
))
register_metric(MetricSpec(
    name="ms-ssim", kind="image", compute="fusedsim.ssim:ms_ssim", aliases=("ms_ssim", "msssim"),
    summary="MS-SSIM, pytorch-msssim semantics (5 levels, 11-px Gaussian window)",
    outputs=("ms-ssim",), higher_is_better=True, identical_value=1.0, value_range=(0.0, 1.0),
    differentiable=True, min_size=(_WINDOW - 1) * 2 ** (_LEVELS - 1) + 1,
    min_size_reason=f"each of the {_LEVELS} levels must hold the {_WINDOW}-px window",
    halo_rows=(_WINDOW // 2 + 1) << (_LEVELS - 1), bytes_per_pixel=90.0,  # CPU twin: 81 B measured + inputs
    strip_sums="fusedsim.metrics._strip_sums:ms_ssim_strip_sums",
    strip_finish="fusedsim.metrics._strip_sums:ms_ssim_strip_finish",
))
register_metric(MetricSpec(
    name="psnr", kind="image", compute="fusedsim.metrics:psnr",
    summary="PSNR over all channels and pixels, 10*log10(data_range^2 / MSE) in dB",
    outputs=("psnr",), higher_is_better=True, identical_value=math.inf, value_range=(0.0, math.inf),
    differentiable=True, min_size=1, min_size_reason="any size", halo_rows=0, bytes_per_pixel=16.0,
    strip_sums="fusedsim.metrics._strip_sums:psnr_strip_sums",
    strip_finish="fusedsim.metrics._strip_sums:psnr_strip_finish",
))

# ------------------------------------------------------------------------ libvmaf features (integer Y'CbCr planes)
_FLOAT_SSIM_OPS = ("sequential_sum", "iqa_decimate", "iqa_ssim_maps")
register_metric(MetricSpec(
    name="vmaf:ssim", kind="video", compute="fusedsim.vmaf.features:integer_ssim_feature",
    summary="libvmaf's integer SSIM (luma), bit-exact",
    outputs=("ssim",), higher_is_better=True, identical_value=1.0, value_range=(-1.0, 1.0),
    min_size=1, min_size_reason="out-of-frame window taps are skipped, as in libvmaf",
    planes=("y",), halo_rows=_WINDOW // 2, bytes_per_pixel=100.0, ops=("integer_ssim",),
))
register_metric(MetricSpec(
    name="vmaf:float_ssim", kind="video", compute="fusedsim.vmaf.features:float_ssim_feature",
    summary="libvmaf's float_ssim (luma, auto-downscale), bit-exact",
    outputs=("float_ssim",), higher_is_better=True, identical_value=1.0, value_range=(-1.0, 1.0),
    min_size=_WINDOW, min_size_reason=f"the {_WINDOW}x{_WINDOW} window must fit in the (downscaled) frame",
    planes=("y",), halo_rows=None, bytes_per_pixel=64.0, ops=_FLOAT_SSIM_OPS,
))
register_metric(MetricSpec(
    name="vmaf:float_ms_ssim", kind="video", compute="fusedsim.vmaf.features:float_ms_ssim_feature",
    summary="libvmaf's float_ms_ssim (luma, 5 scales), bit-exact",
    outputs=("float_ms_ssim",), higher_is_better=True, identical_value=1.0, value_range=(-1.0, 1.0),
    min_size=_WINDOW << (_LEVELS - 1), min_size_reason=f"libvmaf needs {_WINDOW} px at the fifth of 5 scales",
    planes=("y",), halo_rows=None, bytes_per_pixel=86.0, ops=_FLOAT_SSIM_OPS,
))
register_metric(MetricSpec(
    name="vmaf:psnr", kind="video", compute="fusedsim.vmaf.features:psnr_feature",
    summary="libvmaf's psnr: psnr_y, psnr_cb, psnr_cr, capped at 6*bit_depth+12 dB",
    outputs=("psnr_y", "psnr_cb", "psnr_cr"), higher_is_better=True, identical_value=None,
    value_range=(0.0, 6.0 * 16 + 12), min_size=1, min_size_reason="any size", halo_rows=0, bytes_per_pixel=54.0,
))

# --------------------------------------------------------------------------- perceptual (sRGB pairs): Butteraugli
register_metric(MetricSpec(
    name="butteraugli", kind="srgb", compute="fusedsim.metrics._butteraugli:butteraugli",
    summary="Butteraugli (libjxl 0.7 butteraugli_main): max-norm and the tool's 3-norm; the per-pixel distance "
            "map is the result's distmap field",
    outputs=("max_norm", "pnorm3"), higher_is_better=False, identical_value=0.0, value_range=(0.0, math.inf),
    differentiable=True, min_size=8, min_size_reason="libjxl's butteraugli returns an all-zero map below 8 px",
    halo_rows=None, bytes_per_pixel=160.0, cached_reference=True, prepared_broadcasts=True,
    prepare="fusedsim.metrics._butteraugli:prepare_butteraugli",
    score_prepared="fusedsim.metrics._butteraugli:score_prepared_butteraugli",
    params=(("intensity_target", 80.0), ("hf_asymmetry", 0.8)),
))

# -------------------------------------------------------------------------- perceptual (sRGB pairs): SSIMULACRA2
register_metric(MetricSpec(
    name="ssimulacra2", kind="srgb", compute="fusedsim.metrics._ssimulacra2:ssimulacra2", aliases=("ssim2",),
    summary="SSIMULACRA 2.1 (cloudinary/ssimulacra2 C++): XYB, 6 scales, recursive Gaussian, 108 weights; "
            "100 = identical",
    outputs=("ssimulacra2",), higher_is_better=True, identical_value=100.0, value_range=(-math.inf, 100.0),
    differentiable=True, min_size=8,
    min_size_reason="the reference skips every scale of an image smaller than 8 px (it returns 100 for any such "
                    "pair)",
    halo_rows=None, bytes_per_pixel=240.0, cached_reference=True, prepared_broadcasts=True,
    prepare="fusedsim.metrics._ssimulacra2:prepare_ssimulacra2",
    score_prepared="fusedsim.metrics._ssimulacra2:score_prepared_ssimulacra2",
))

# ------------------------------------------------------------------------------- perceptual (sRGB pairs): zensim
register_metric(MetricSpec(
    name="zensim", kind="srgb", compute="fusedsim.metrics._zensim:zensim",
    summary="zensim (imazen/zensim 0.2.7 linear profile PreviewV0_2): XYB, 4 scales, box-blur SSIM/edge/HF "
            "features, 228 weights; 100 = identical",
    outputs=("zensim",), higher_is_better=True, identical_value=100.0, value_range=(-math.inf, 100.0),
    differentiable=True, min_size=1, min_size_reason="any size (sides under 64 px are mirror-padded, as upstream)",
    halo_rows=None, bytes_per_pixel=200.0, cached_reference=True, prepared_broadcasts=True,
    prepare="fusedsim.metrics._zensim:prepare_zensim",
    score_prepared="fusedsim.metrics._zensim:score_prepared_zensim",
))

# -------------------------------------------------------------------------------- perceptual (sRGB pairs): DSSIM
register_metric(MetricSpec(
    name="dssim", kind="srgb", compute="fusedsim.metrics._dssim:dssim",
    summary="DSSIM (kornelski/dssim 3.5.0): multi-scale SSIM in its scaled L*a*b*, 1/SSIM - 1; 0 = identical",
    outputs=("dssim",), higher_is_better=False, identical_value=0.0, value_range=(0.0, math.inf),
    differentiable=True, min_size=1, min_size_reason="any size (images under 8 px use one scale, as dssim)",
    halo_rows=None, bytes_per_pixel=160.0, cached_reference=True, prepared_broadcasts=True,
    prepare="fusedsim.metrics._dssim:prepare_dssim",
    score_prepared="fusedsim.metrics._dssim:score_prepared_dssim",
))

# ------------------------------------------------------------------------------ perceptual (sRGB pairs): IW-SSIM
register_metric(MetricSpec(
    name="iw-ssim", kind="srgb", compute="fusedsim.metrics._iwssim:iw_ssim", aliases=("iwssim", "iw_ssim"),
    summary="IW-SSIM (Wang & Li 2011, the authors' MATLAB code): information-content weighted multi-scale SSIM "
            "of the grey image; 1 = identical",
    outputs=("iw-ssim",), higher_is_better=True, identical_value=1.0, value_range=(0.0, 1.0),
    differentiable=True, min_size=176,
    min_size_reason="5 pyramid levels, each at least as large as the 11x11 window (the authors' code refuses "
                    "smaller)",
    halo_rows=None, bytes_per_pixel=120.0, cached_reference=True, prepared_broadcasts=True,
    prepare="fusedsim.metrics._iwssim:prepare_iw_ssim",
    score_prepared="fusedsim.metrics._iwssim:score_prepared_iw_ssim",
    params=(("luma", "matlab"),),
))

# ------------------------------------------------------------------------ perceptual (sRGB pairs): ColorVideoVDP
register_metric(MetricSpec(
    name="cvvdp", kind="srgb", compute="fusedsim.metrics._cvvdp:cvvdp", aliases=("colorvideovdp",),
    summary="ColorVideoVDP 0.5.7 (pycvvdp) for still images: display model, DKL contrast pyramid, castleCSF, "
            "masking; JOD, 10 = identical",
    outputs=("jod",), higher_is_better=True, identical_value=10.0, value_range=(-math.inf, 10.0),
    differentiable=True, min_size=2, min_size_reason="the Laplacian pyramid needs 2 px per side",
    halo_rows=None, bytes_per_pixel=160.0, cached_reference=True, prepared_broadcasts=True,
    prepare="fusedsim.metrics._cvvdp:prepare_cvvdp",
    score_prepared="fusedsim.metrics._cvvdp:score_prepared_cvvdp",
    params=(("display", "standard_4k"),),
))

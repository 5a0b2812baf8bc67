"""Perceptual-metric ops: DSSIM, IW-SSIM, Butteraugli, SSIMULACRA2 and ColorVideoVDP hot loops."""

from __future__ import annotations

import torch

from fusedsim.ops.catalog._common import (
    _pair,
    _strided_pair,
)
from fusedsim.ops.registry import Example, KernelOp, register_op
from fusedsim.reference.butteraugli_filters_ref import (
    butteraugli_blur_ref,
    butteraugli_malta_ref,
    fuzzy_erosion_ref,
)
from fusedsim.reference.cvvdp_ref import cvvdp_mask_diff_ref
from fusedsim.reference.dssim_ref import (
    dssim_blur_ref,
    dssim_lab_op_ref,
    dssim_ssim_map_ref,
)
from fusedsim.reference.iwssim_ref import (
    binom_filter_ref,
    corrected_eig_ref,
    info_weight_map_op_ref,
    neighbourhood_gram_op_ref,
)
from fusedsim.reference.recursive_gaussian_ref import recursive_gaussian_ref
from fusedsim.reference.ssim_ref import (
    compute_dtype,
)
from fusedsim.reference.ssimulacra2_ref import (
    ssimulacra2_error_pool_ref,
    ssimulacra2_linear_xyb_ref,
    ssimulacra2_reference_blur_ref,
)
from fusedsim.reference.zensim_f32_ref import (
    SCALE_SUMS,
    zensim_downscale_ref,
    zensim_scale_sums_ref,
    zensim_xyb_ref,
)
from fusedsim.reference.zensim_ref import MIN_PYRAMID_DIM, simd_padded_width

# -------------------------------------------------------------------------------------- DSSIM, IW-SSIM
# float32 kernels against the float64 twin: dssim's Lab and blur are a few f32 roundings from it (~1e-7
# relative; the cube root guess and Halley steps add a little); its SSIM map divides by variances of random data,
# ~1e-6. float64: fused multiply-adds in the kernels vs separate roundings in the twin (~1e-15). IW-SSIM's ops are
# float64 only; their sums run in another order (~1e-14 relative; the eigen-solvers differ by ~1e-13).
DSSIM_TOLERANCE = {torch.float64: (1e-12, 0.0), torch.float32: (2e-6, 0.0)}
IWSSIM_TOLERANCE = {torch.float64: (1e-10, 0.0)}


def _dssim_lab_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, has_alpha) in enumerate([((2, 3, 13, 17), False), ((1, 3, 19, 40), True), ((1, 3, 1, 1), True)]):
        gen = torch.Generator().manual_seed(400 + i)
        lin = torch.rand(shape, generator=gen, dtype=torch.float64) ** 2.2  # dark values reach the linear branch
        alpha = torch.rand((shape[0], 1, *shape[2:]), generator=gen, dtype=torch.float64)
        out.append(Example((lin.to(device), (alpha * lin[:, :1] if has_alpha else alpha).to(device)), (has_alpha,),
                           note=f"{shape} alpha={has_alpha}"))
    x, _ = _strided_pair(device, 410)
    out.append(Example((x[:, :1].expand(-1, 3, -1, -1), x[:, 1:2]), (True,), note="non-contiguous"))
    return out


dssim_lab = register_op(KernelOp(
    name="dssim_lab",
    schema="(Tensor lin, Tensor alpha, bool has_alpha) -> Tensor",
    n_tensors=2,
    plan_for="fusedsim.ops.dssim_lab:dssim_lab_fwd",
    reference=dssim_lab_op_ref,
    fake=lambda lin, alpha, has_alpha: lin.new_empty(lin.shape, dtype=compute_dtype(lin.dtype)),
    examples=_dssim_lab_examples,
    differentiable=False,
    tolerance=DSSIM_TOLERANCE,
    doc="DSSIM's scaled L*a*b* of linear (premultiplied) RGB (N, 3, H, W), alpha over its pseudo-checkerboard.",
))


def _dssim_image_examples(device: torch.device, channels: int, seed: int) -> list[Example]:
    out = []
    for i, shape in enumerate([(1, channels, 1, 1), (2, channels, 2, 5), (1, channels, 13, 17), (1, channels, 9, 70)]):
        x, y = _pair(shape, device, seed + i)
        out.append(Example((x,) if channels != 3 else (x, y), note=str(shape)))
    x, y = _strided_pair(device, seed + 9)
    three = (x[:, :1].expand(-1, 3, -1, -1), y[:, :1].expand(-1, 3, -1, -1))
    out.append(Example(three[:1] if channels != 3 else three, note="non-contiguous"))
    return out


dssim_blur = register_op(KernelOp(
    name="dssim_blur",
    schema="(Tensor x) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.dssim_blur:dssim_blur_fwd",
    reference=dssim_blur_ref,
    fake=lambda x: x.new_empty(x.shape, dtype=compute_dtype(x.dtype)),
    examples=lambda device: _dssim_image_examples(device, 2, 420),
    differentiable=False,
    tolerance=DSSIM_TOLERANCE,
    doc="DSSIM's blur (3x3 kernel twice, clamp-to-edge) of every plane of (N, C, H, W).",
))

dssim_ssim_map = register_op(KernelOp(
    name="dssim_ssim_map",
    schema="(Tensor lab1, Tensor lab2) -> Tensor",
    n_tensors=2,
    plan_for="fusedsim.ops.dssim_ssim_map:dssim_ssim_map_fwd",
    reference=dssim_ssim_map_ref,
    fake=lambda lab1, lab2: lab1.new_empty((lab1.shape[0], *lab1.shape[2:]), dtype=compute_dtype(lab1.dtype)),
    examples=lambda device: _dssim_image_examples(device, 3, 430),
    differentiable=False,
    tolerance={torch.float64: (1e-12, 0.0), torch.float32: (2e-5, 0.0)},
    doc="DSSIM's SSIM map (N, H, W) of two Lab images (N, 3, H, W): blurred moments, channel means, formula.",
))


def _band(shape, seed: int, device, scale: float = 20.0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(shape, generator=gen, dtype=torch.float64)).to(device)


def _iwssim_gram_examples(device: torch.device) -> list[Example]:
    return [Example((_band((2, 1, 13, 11), 440, device), _band((2, 1, 13, 11), 441, device)), (True,), note="parent"),
            Example((_band((1, 1, 40, 23), 442, device), _band((1, 1, 40, 23), 443, device)), (False,),
                    note="no parent"),
            Example((_band((1, 1, 3, 3), 444, device), _band((1, 1, 3, 3), 445, device)), (True,), note="3x3")]


iwssim_gram = register_op(KernelOp(
    name="iwssim_gram",
    schema="(Tensor ref_band, Tensor parent, bool has_parent) -> Tensor",
    n_tensors=2,
    plan_for="fusedsim.ops.iwssim_gram:iwssim_gram_fwd",
    reference=neighbourhood_gram_op_ref,
    fake=lambda ref, parent, has_parent: ref.new_empty((ref.shape[0], *(2 * (10 if has_parent else 9,))),
                                                       dtype=torch.float64),
    examples=_iwssim_gram_examples,
    differentiable=False,
    tolerance=IWSSIM_TOLERANCE,
    doc="IW-SSIM's neighbourhood covariance C_u = YᵀY/n (3x3 neighbourhood + parent) per image, (N, K, K).",
))


def _iwssim_eig_examples(device: torch.device) -> list[Example]:
    gen = torch.Generator().manual_seed(450)
    a = torch.randn(2, 4, 6, generator=gen, dtype=torch.float64)
    b = torch.randn(1, 10, 3, generator=gen, dtype=torch.float64)  # rank 3 plus a ridge: 7 equal eigenvalues
    return [Example(((a @ a.mT).to(device),), note="4x4"),
            Example(((b @ b.mT + 1e-3 * torch.eye(10, dtype=torch.float64)).to(device),), note="10x10 degenerate")]


iwssim_eig = register_op(KernelOp(
    name="iwssim_eig",
    schema="(Tensor gram) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.iwssim_eig:iwssim_eig_fwd",
    reference=corrected_eig_ref,
    fake=lambda gram: gram.new_empty((gram.shape[0], gram.shape[1] + 1, gram.shape[1]), dtype=torch.float64),
    examples=_iwssim_eig_examples,
    differentiable=False,
    # the inverse's error is ~cond·eps·|C⁻¹| (cond ~2e4, |C⁻¹| ~1e3 for the degenerate example: ~2e-9 absolute)
    tolerance={torch.float64: (2e-8, 0.0)},
    doc="IW-SSIM's corrected eigenvalues and inverse of a covariance (Jacobi on the GPU, no host sync).",
))


def _iwssim_info_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, has_parent) in enumerate([((2, 1, 23, 19), True), ((1, 1, 11, 30), False)]):
        ref = _band(shape, 460 + i, device)
        dist = ref + _band(shape, 470 + i, device, 5.0)
        parent = _band(shape, 480 + i, device, 30.0)
        ref[0, 0, 6:10, 7:12] = 0.0  # flat patches exercise the tol rules
        dist[-1, 0, 5:9, 8:12] = 3.0
        k = 10 if has_parent else 9
        eig = corrected_eig_ref(neighbourhood_gram_op_ref(ref.cpu(), parent.cpu(), has_parent)).to(device)
        assert eig.shape[-1] == k
        out.append(Example((ref, dist, parent, eig), (has_parent,), note=f"{shape} parent={has_parent}"))
    return out


iwssim_info = register_op(KernelOp(
    name="iwssim_info",
    schema="(Tensor ref_band, Tensor dist_band, Tensor parent, Tensor eig, bool has_parent) -> Tensor",
    n_tensors=4,
    plan_for="fusedsim.ops.iwssim_info:iwssim_info_fwd",
    reference=info_weight_map_op_ref,
    fake=lambda ref, dist, parent, eig, has_parent: ref.new_empty((ref.shape[0], ref.shape[2] - 10,
                                                                   ref.shape[3] - 10), dtype=torch.float64),
    examples=_iwssim_info_examples,
    differentiable=False,
    tolerance=IWSSIM_TOLERANCE,
    doc="IW-SSIM's information-content weights of a band pair (N, 1, H, W) on the 'valid' 11x11 region.",
))


def _iwssim_binom_examples(device: torch.device) -> list[Example]:
    out = []
    cases = [((1, 1, 11, 11), -1, 2), ((1, 1, 11, 11), -2, 2), ((2, 1, 37, 70), -1, 1), ((1, 2, 70, 37), -2, 1),
             ((1, 1, 176, 181), -1, 2), ((1, 1, 3, 5), -2, 2)]
    for i, (shape, dim, step) in enumerate(cases):
        gen = torch.Generator().manual_seed(120 + i)
        x = torch.rand(shape, generator=gen, dtype=torch.float64) * 255
        out.append(Example((x.to(device),), (dim, step), note=f"{shape} dim={dim} step={step}"))
    x, _ = _strided_pair(device, 126)
    out.append(Example((x[:, :1],), (-1, 2), note="non-contiguous"))
    return out


iwssim_binom = register_op(KernelOp(
    name="iwssim_binom",
    schema="(Tensor x, int dim, int step) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.iwssim_binom:iwssim_binom",
    reference=binom_filter_ref,
    fake=lambda x, dim, step: x.new_empty((*x.shape[:2], -(-x.shape[2] // step), x.shape[3]) if dim in (-2, 2)
                                          else (*x.shape[:2], x.shape[2], -(-x.shape[3] // step))),
    examples=_iwssim_binom_examples,
    differentiable=False,
    tolerance=None,  # the twin's products and sums in its order, no FMA: bit-identical
    doc="IW-SSIM's pyramid filter: binom5 with reflect1 edges along W or H of (N, C, H, W), every step-th output.",
))



# ------------------------------------------------------------------------------------------ Butteraugli
# Tolerances against the float64 twin: float64 differs only by summation order (~1e-15 relative); float32 rounds
# each tap product and the renormalising division (~1e-7 relative per value, a few ulps through 33 taps).
BUTTERAUGLI_TOLERANCE = {torch.float64: (1e-10, 0.0), torch.float32: (2e-5, 0.0)}


def _butteraugli_blur_examples(device: torch.device) -> list[Example]:
    cases = [((2, 3, 13, 17), 1.2), ((1, 2, 11, 40), 7.15593339443), ((1, 1, 20, 9), 3.22489901262),
             ((2, 1, 9, 14), 1.56416327805), ((1, 1, 1, 3), 1.2), ((1, 1, 5, 2), 7.15593339443)]
    out = [Example((_pair(shape, device, 70 + i)[0],), (sigma,), note=f"{shape} sigma={sigma}")
           for i, (shape, sigma) in enumerate(cases)]
    x = _strided_pair(device, 79)[1]
    out.append(Example((x,), (1.2,), note="non-contiguous, mirrored borders"))
    out.append(Example((x,), (2.7,), note="non-contiguous, renormalised borders (the masking blur)"))
    return out


butteraugli_blur = register_op(KernelOp(
    name="butteraugli_blur",
    schema="(Tensor x, float sigma) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.butteraugli_blur:butteraugli_blur_plan",
    reference=butteraugli_blur_ref,
    fake=lambda x, sigma: x.new_empty(x.shape, dtype=compute_dtype(x.dtype)),
    examples=_butteraugli_blur_examples,
    differentiable=False,
    tolerance=BUTTERAUGLI_TOLERANCE,
    doc="Butteraugli's (libjxl 0.7) separable Gaussian blur of (N, C, H, W) planes: 5 taps mirrored, longer "
        "windows truncated at 2.25 sigma and renormalised at the borders.",
))


def _butteraugli_malta_examples(device: torch.device) -> list[Example]:
    out = []
    cases = [((1, 8, 8), (18.72, 23.4, 4498534.45, 0.6116, True)), ((2, 13, 17), (1.32, 0.88, 71.78, 0.399, False)),
             ((1, 19, 37), (208.2, 138.8, 5.0, 0.399, True))]
    for i, (shape, scalars) in enumerate(cases):
        gen = torch.Generator().manual_seed(80 + i)
        a = torch.randn(shape, generator=gen, dtype=torch.float64) * 3
        b = torch.where(torch.rand(shape, generator=gen) < 0.3, a * 0.8, a + torch.randn(shape, generator=gen))
        out.append(Example((a.to(device), b.to(device)), scalars, note=f"{shape} low_freq={scalars[-1]}"))
    x, y = _strided_pair(device, 88)  # values in [0, 1]: the band check of the asymmetric term still switches
    out.append(Example((x[0], y[0]), (1.32, 0.88, 71.78, 0.399, False), note="non-contiguous"))
    return out


butteraugli_malta = register_op(KernelOp(
    name="butteraugli_malta",
    schema="(Tensor lum0, Tensor lum1, float w_0gt1, float w_0lt1, float norm1, float mulli, bool low_freq) -> Tensor",
    n_tensors=2,
    plan_for="fusedsim.ops.butteraugli_malta:butteraugli_malta_plan",
    reference=butteraugli_malta_ref,
    fake=lambda lum0, lum1, *scalars: lum0.new_empty(lum0.shape, dtype=compute_dtype(lum0.dtype)),
    examples=_butteraugli_malta_examples,
    differentiable=False,
    tolerance=BUTTERAUGLI_TOLERANCE,
    doc="Butteraugli's Malta line-filter difference of two (N, H, W) planes (HF or LF line set), libjxl 0.7.",
))


def _butteraugli_erosion_examples(device: torch.device) -> list[Example]:
    out = []
    for i, shape in enumerate(((1, 1, 1), (2, 7, 5), (1, 19, 70), (3, 16, 64))):
        gen = torch.Generator().manual_seed(90 + i)
        x = torch.rand(shape, generator=gen, dtype=torch.float64) ** 3  # activity maps: non-negative, skewed
        x[..., ::4, ::3] = 0.0  # ties and zeros
        out.append(Example((x.to(device),), (), note=f"{shape}"))
    x, _ = _strided_pair(device, 96)
    out.append(Example((x[0].abs(),), (), note="non-contiguous"))
    return out


butteraugli_erosion = register_op(KernelOp(
    name="butteraugli_erosion",
    schema="(Tensor x) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.butteraugli_erosion:butteraugli_erosion",
    reference=fuzzy_erosion_ref,
    fake=lambda x: x.new_empty(x.shape),
    examples=_butteraugli_erosion_examples,
    differentiable=False,
    # a selection and three products: exact in float64; float32 against the float64 twin: the rounding of the
    # float32 input and of three products and two sums (< 4 ulp)
    tolerance={torch.float64: (0.0, 0.0), torch.float32: (5e-7, 0.0)},
    doc="Butteraugli's fuzzy erosion of (N, H, W) activity maps (three smallest of 11 candidates, weighted).",
))


# ------------------------------------------------------------------------------------------ SSIMULACRA2
# The kernels compute the reference's float32 arithmetic, as the float32 twin does (FMA evaluated in float64 and
# rounded once, which differs from a true FMA only when the float64 sum lands on a float32 midpoint: ~1 in 2**29
# FMAs, then by 1 ulp); pooled sums are float64 in another order (~1e-16). Hence 1e-6 relative.
SSIMULACRA2_TOLERANCE = {torch.float32: (1e-6, 0.0)}


def _srgb_images(shape, device, seed, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    ref = torch.randint(0, 256, shape, generator=gen)
    dist = (ref + torch.randint(-24, 25, shape, generator=gen)).clamp(0, 255)
    if dtype == torch.uint8:
        return ref.to(device, torch.uint8), dist.to(device, torch.uint8)
    return (ref / 255.0).to(device, dtype), (dist / 255.0).to(device, dtype)


def _xyb_images(shape, device, seed, ref_batch=None):
    ref, dist = _srgb_images(shape, torch.device("cpu"), seed, torch.uint8)
    x1 = ssimulacra2_linear_xyb_ref(ref[: ref_batch or shape[0]], False)[1]
    return x1.to(device), ssimulacra2_linear_xyb_ref(dist, False)[1].to(device)


def _recursive_gaussian_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, sigma) in enumerate([((1, 1, 5, 4), 1.5), ((2, 3, 9, 13), 1.5), ((1, 7, 30), 1.5),
                                        ((2, 12, 11), 1.5), ((1, 1, 12, 25), 2.0),
                                        ((1, 2, 6, 75), 1.5), ((1, 19, 90), 2.0)]):
        gen = torch.Generator().manual_seed(90 + i)
        out.append(Example((torch.rand(shape, generator=gen).to(device),), (sigma,), note=f"{shape} sigma={sigma}"))
    x = torch.rand(1, 2, 22, 30, generator=torch.Generator().manual_seed(95)).to(device)[:, :, 3:20, ::2]
    out.append(Example((x,), (1.5,), note="non-contiguous"))
    return out


recursive_gaussian = register_op(KernelOp(
    name="recursive_gaussian",
    schema="(Tensor x, float sigma) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.recursive_gaussian:recursive_gaussian_plan",
    reference=recursive_gaussian_ref,
    fake=lambda x, sigma: x.new_empty(x.shape),
    examples=_recursive_gaussian_examples,
    differentiable=False,
    tolerance=SSIMULACRA2_TOLERANCE,
    doc="libjxl's recursive Gaussian (Charalampidis IIR, zero padding) of every (H, W) plane, float32 with the "
        "reference's step structure (SSIMULACRA2 uses sigma 1.5).",
))


def _linear_xyb_examples(device: torch.device) -> list[Example]:
    out = [Example((_srgb_images((2, 3, 7, 9), device, 100, torch.uint8)[0],), (False,), note="uint8 sRGB"),
           Example((_srgb_images((1, 3, 8, 5), device, 101)[0],), (False,), note="float sRGB"),
           Example((torch.rand(1, 3, 9, 7, generator=torch.Generator().manual_seed(102)).to(device),), (True,),
                   note="downsample odd sizes")]
    x = torch.rand(1, 3, 22, 30, generator=torch.Generator().manual_seed(103)).to(device)
    out.append(Example((x[:, :, 3:20, ::2],), (False,), note="non-contiguous sRGB"))
    out.append(Example((x.to(memory_format=torch.channels_last)[:, :, 2:13],), (True,), note="channels-last"))
    return out


ssimulacra2_linear_xyb = register_op(KernelOp(
    name="ssimulacra2_linear_xyb",
    schema="(Tensor x, bool downsample) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.xyb:linear_xyb_plan",
    reference=ssimulacra2_linear_xyb_ref,
    fake=lambda x, downsample: x.new_empty(
        (2, x.shape[0], 3, *((s + 1) // 2 if downsample else s for s in x.shape[2:])),
        dtype=torch.float32 if x.dtype == torch.uint8 else x.dtype),
    examples=_linear_xyb_examples,
    differentiable=False,
    tolerance=SSIMULACRA2_TOLERANCE,
    doc="SSIMULACRA2's colour step: sRGB (or the previous scale's linear RGB, 2x2-averaged) -> (linear RGB, XYB).",
))


ssimulacra2_reference_blur = register_op(KernelOp(
    name="ssimulacra2_reference_blur",
    schema="(Tensor x1) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.ssimulacra2:reference_blur_plan",
    reference=ssimulacra2_reference_blur_ref,
    fake=lambda x1: x1.new_empty((2, *x1.shape)),
    examples=lambda device: [Example((_xyb_images(shape, device, 110 + i)[0],), note=str(shape))
                             for i, shape in enumerate([(1, 3, 9, 10), (2, 3, 6, 13)])],
    differentiable=False,
    tolerance=SSIMULACRA2_TOLERANCE,
    doc="SSIMULACRA2's reference-side blurs of one scale: G(x1), G(x1²) (products formed in the kernel).",
))


def _error_pool_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, ref_batch) in enumerate([((2, 3, 8, 9), 1), ((1, 3, 11, 6), None)]):
        x1, x2 = _xyb_images(shape, torch.device("cpu"), 120 + i, ref_batch)
        mu1, s11 = ssimulacra2_reference_blur_ref(x1)
        out.append(Example(tuple(t.to(device) for t in (x1, x2, mu1, s11)),
                           note=f"{shape} reference batch {ref_batch or shape[0]}"))
    return out


ssimulacra2_error_pool = register_op(KernelOp(
    name="ssimulacra2_error_pool",
    schema="(Tensor x1, Tensor x2, Tensor mu1, Tensor s11) -> Tensor",
    n_tensors=4,
    plan_for="fusedsim.ops.ssimulacra2:error_pool_plan",
    reference=ssimulacra2_error_pool_ref,
    fake=lambda x1, x2, mu1, s11: x2.new_empty((x2.shape[0], 3, 2, 3), dtype=torch.float64),
    examples=_error_pool_examples,
    differentiable=False,
    tolerance=SSIMULACRA2_TOLERANCE,
    doc="SSIMULACRA2's comparison of one scale: blurs of x2, x2², x1·x2, SSIM and edge maps, L1/L4 pooling "
        "(N, 3, 2, 3) float64; the blurred maps stay in registers.",
))


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


cvvdp_mask_diff = register_op(KernelOp(
    name="cvvdp_mask_diff",
    schema="(Tensor test, Tensor ref, Tensor sens, Tensor blurred) -> Tensor",
    n_tensors=4,
    plan_for="fusedsim.ops.cvvdp_mask_diff:cvvdp_mask_diff_fwd",
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


# ---------------------------------------------------------------------------------------------------- zensim
def _zensim_planes(shape, device, seed, ref_batch=None):
    """Positive-XYB-like float32 planes: a reference, a distorted copy (noise, a blur-like mix) and a flat patch
    equal in both (where the SSIM error is the float32 residue of the running sums)."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.rand((ref_batch or shape[0], *shape[1:]), generator=gen)
    dst = 0.9 * src + 0.2 * torch.rand(shape, generator=gen)
    src[..., 2:7, 3:11] = 0.4375
    dst[..., 2:7, 3:11] = 0.4375
    return src.to(device), dst.to(device)


def _zensim_scale_sums_examples(device: torch.device) -> list[Example]:
    out = [Example(_zensim_planes((1, 3, 9, 13), device, 500), note="1x3x9x13, one strip"),
           Example(_zensim_planes((2, 3, 37, 70), device, 501), note="2x3x37x70, two strips"),
           Example(_zensim_planes((2, 1, 40, 130), device, 502, ref_batch=1),
                   note="2x1x40x130, reference batch 1, several column blocks")]
    src, dst = _zensim_planes((2, 3, 50, 90), device, 503)
    out.append(Example((src[:1, :, 3:41, ::2].expand(2, -1, -1, -1), dst.to(memory_format=torch.channels_last)
                        [:, :, 5:43, 1::2]), note="non-contiguous: expanded, sliced, stride-2, channels-last"))
    return out


zensim_scale_sums = register_op(KernelOp(
    name="zensim_scale_sums",
    schema="(Tensor src, Tensor dst) -> Tensor",
    n_tensors=2,
    plan_for="fusedsim.ops.zensim:zensim_scale_sums_plan",
    reference=zensim_scale_sums_ref,
    fake=lambda src, dst: dst.new_empty((dst.shape[0], dst.shape[1], SCALE_SUMS), dtype=torch.float64),
    examples=_zensim_scale_sums_examples,
    differentiable=False,
    # float32 only (upstream's arithmetic): the per-pixel float32 values are the twin's bit for bit (the kernel's
    # hardware FMA vs the twin's FMA evaluated in float64 and rounded once differ only at double-rounding ties,
    # ~1 in 2**29 FMAs; the maxima come out identical), but the float64 pooled sums are added in another order
    # (per column over rows, then across columns, vs the twin's per row then rows): measured <= 4e-16 relative.
    tolerance={torch.float32: (1e-12, 0.0)},
    doc="zensim's per-scale sums (float32 replay of upstream's H/V running-sum box blurs, strips of 32 rows, "
        "per-pixel SSIM/edge/HF/MSE features): (N, C, 20) float64 = 17 pooled sums and 3 maxima per plane.",
))


def _zensim_linear(shape, device, seed, dtype=torch.float32):
    """Linear-light RGB: random values with dark ones (small opsin inputs), zeros, ones, and a few negatives (the
    opsin clamp and the cube root's zero branch)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=gen, dtype=torch.float64) ** 2.2
    x.view(-1)[::7] = 0.0
    x.view(-1)[3::11] = 1.0
    x.view(-1)[5::13] = -0.01
    return x.to(dtype).to(device)


def _zensim_lut(device) -> torch.Tensor:
    from fusedsim.reference.zensim_ref import srgb_to_linear_ref

    return srgb_to_linear_ref(torch.arange(256, dtype=torch.float64) / 255.0).to(torch.float32).to(device)


def _zensim_xyb_examples(device: torch.device) -> list[Example]:
    lut = _zensim_lut(device)
    out = [Example((_zensim_linear(shape, device, 510 + i), lut), note=str(shape))
           for i, shape in enumerate([(1, 3, 1, 1), (2, 3, 7, 13), (1, 3, 67, 529)])]
    big = _zensim_linear((2, 3, 30, 41), device, 520)
    out.append(Example((big.to(memory_format=torch.channels_last)[:, :, 3:27, 1::2], lut),
                       note="non-contiguous: channels-last, sliced, stride-2"))
    out.append(Example((big[:1].expand(2, -1, -1, -1), lut), note="expanded batch"))
    out.append(Example((_zensim_linear((1, 3, 9, 10), device, 521, torch.float64), lut), note="float64 input"))
    codes = torch.randint(0, 256, (2, 3, 66, 70), generator=torch.Generator().manual_seed(522), dtype=torch.uint8)
    codes.view(-1)[:256] = torch.arange(256, dtype=torch.uint8)  # every code
    out.append(Example((codes.to(device), lut), note="uint8 sRGB codes through the table"))
    out.append(Example((codes.to(device).to(memory_format=torch.channels_last)[:1, :, 1:6, ::3], lut),
                       note="uint8, non-contiguous"))
    return out


def _zensim_xyb_shape(rgb, lut):
    h, w = rgb.shape[-2:]
    return rgb.new_empty((rgb.shape[0], 3, max(h, MIN_PYRAMID_DIM), simd_padded_width(max(w, MIN_PYRAMID_DIM))),
                         dtype=torch.float32)


zensim_xyb = register_op(KernelOp(
    name="zensim_xyb",
    schema="(Tensor rgb, Tensor lut) -> Tensor",
    n_tensors=2,
    plan_for="fusedsim.ops.zensim_xyb:zensim_xyb_plan",
    reference=zensim_xyb_ref,
    fake=_zensim_xyb_shape,
    examples=_zensim_xyb_examples,
    differentiable=False,
    # bit-identical: the twin's float32 operations in its order; its float64-evaluated FMAs equal the kernel's
    # hardware FMAs but for double-rounding ties (~1 in 2**29), and x*14 + 0.42 is computed in float64 as the twin
    tolerance=None,
    doc="zensim's linear RGB (N, 3, H, W) (or uint8 sRGB codes through a (256,) float32 table) -> positive XYB "
        "float32 in upstream's arithmetic (opsin FMA chain, bit-hack + Halley cube root), mirror-padded for the "
        "pyramid (pad_for_pyramid_ref): (N, 3, H', W').",
))


def _zensim_downscale_examples(device: torch.device) -> list[Example]:
    out = [Example((_zensim_linear(shape, device, 530 + i),), note=str(shape))
           for i, shape in enumerate([(1, 3, 1, 1), (2, 3, 7, 13), (1, 2, 64, 530)])]
    big = _zensim_linear((2, 3, 30, 41), device, 540)
    out.append(Example((big.to(memory_format=torch.channels_last)[:, :, 3:28, 1::2],),
                       note="non-contiguous: channels-last, sliced, stride-2"))
    return out


zensim_downscale = register_op(KernelOp(
    name="zensim_downscale",
    schema="(Tensor x) -> Tensor",
    n_tensors=1,
    plan_for="fusedsim.ops.zensim_xyb:zensim_downscale_plan",
    reference=zensim_downscale_ref,
    fake=lambda x: x.new_empty((*x.shape[:2], x.shape[-2] // 2, x.shape[-1] // 2), dtype=torch.float32),
    examples=_zensim_downscale_examples,
    differentiable=False,
    tolerance=None,  # the twin's float32 additions in its order: bit-identical
    doc="zensim's pyramid step: (N, C, h, w) -> (N, C, h//2, w//2) float32, (((a + b) + c) + d) * 0.25 per 2x2.",
))

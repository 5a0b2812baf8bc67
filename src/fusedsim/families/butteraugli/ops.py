"""Perceptual-metric ops: Butteraugli (registered when the ``perceptual`` family loads)."""

from __future__ import annotations

import torch

from fusedsim.core.examples import example_pair, strided_example_pair
from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.butteraugli.filters_twin import (
    butteraugli_blur_ref,
    butteraugli_malta_add_ref,
    butteraugli_malta_ref,
    fuzzy_erosion_ref,
)
from fusedsim.families.butteraugli.twin import (
    BANDS,
    bands_ref,
    butteraugli_linear_ref,
    butteraugli_norm_sums_ref,
    diffmap_combine_ref,
    frequency_rest_ref,
    hf_pre_ref,
    opsin_xyb_ref,
)
from fusedsim.core.moments.twin import compute_dtype


# Tolerances against the float64 twin: float64 differs only by summation order (~1e-15 relative); float32 rounds
# each tap product and the renormalising division (~1e-7 relative per value, a few ulps through 33 taps).
BUTTERAUGLI_TOLERANCE = {torch.float64: (1e-10, 0.0), torch.float32: (2e-5, 0.0)}
# ``cpu=``: the blur, the Malta filters and the erosion (fusedsim.families.butteraugli.cpu), the opsin, bands and combine
# stages (fusedsim.families.butteraugli.stages_cpu) compiled by numba, CPU under ``auto``


def _butteraugli_blur_examples(device: torch.device) -> list[Example]:
    cases = [((2, 3, 13, 17), 1.2), ((1, 2, 11, 40), 7.15593339443), ((1, 1, 20, 9), 3.22489901262),
             ((2, 1, 9, 14), 1.56416327805), ((1, 1, 1, 3), 1.2), ((1, 1, 5, 2), 7.15593339443)]
    out = [Example((example_pair(shape, device, 70 + i)[0],), (sigma,), note=f"{shape} sigma={sigma}")
           for i, (shape, sigma) in enumerate(cases)]
    x = strided_example_pair(device, 79)[1]
    out.append(Example((x,), (1.2,), note="non-contiguous, mirrored borders"))
    out.append(Example((x,), (2.7,), note="non-contiguous, renormalised borders (the masking blur)"))
    for i, (shape, sigma) in enumerate([((1, 1, 66, 84), 7.15593339443), ((1, 1, 40, 100), 1.2)]):
        out.append(Example((example_pair(shape, device, 77 + i)[0],), (sigma,), note=f"{shape} sigma={sigma}: interior tiles"))
    return out


def _import_triton() -> None:
    """The Triton side of these ops, imported on first GPU use (Triton itself with it): each module registers
    its plans on the ops below."""
    import fusedsim.families.butteraugli.blur_kernel  # noqa: F401
    import fusedsim.families.butteraugli.erosion_kernel  # noqa: F401
    import fusedsim.families.butteraugli.malta_kernel  # noqa: F401
    import fusedsim.families.butteraugli.stages_kernel  # noqa: F401


def _import_cpu() -> None:
    """The compiled CPU kernels of these ops (numba), imported on first CPU call under ``auto``."""
    import fusedsim.families.butteraugli.cpu  # noqa: F401
    import fusedsim.families.butteraugli.stages_cpu  # noqa: F401


butteraugli_blur = register_op(KernelOp(
    name="butteraugli_blur",
    schema="(Tensor x, float sigma) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=butteraugli_blur_ref,
    fake=lambda x, sigma: x.new_empty(x.shape, dtype=compute_dtype(x.dtype)),
    examples=_butteraugli_blur_examples,
    differentiable=False,
    tolerance=BUTTERAUGLI_TOLERANCE,
    load_cpu=_import_cpu,
    doc="Butteraugli's (libjxl 0.7) separable Gaussian blur of (N, C, H, W) planes: 5 taps mirrored, longer "
        "windows truncated at 2.25 sigma and renormalised at the borders.",
))


def _butteraugli_malta_examples(device: torch.device) -> list[Example]:
    out = []
    cases = [((1, 8, 8), (18.72, 23.4, 4498534.45, 0.6116, True)), ((2, 13, 17), (1.32, 0.88, 71.78, 0.399, False)),
             ((1, 19, 37), (208.2, 138.8, 5.0, 0.399, True)),
             ((1, 40, 70), (1.32, 0.88, 71.78, 0.399, False)),  # interior tiles (unmasked taps)
             ((1, 40, 70), (208.2, 138.8, 5.0, 0.399, True))]
    for i, (shape, scalars) in enumerate(cases):
        gen = torch.Generator().manual_seed(80 + i)
        a = torch.randn(shape, generator=gen, dtype=torch.float64) * 3
        b = torch.where(torch.rand(shape, generator=gen) < 0.3, a * 0.8, a + torch.randn(shape, generator=gen))
        out.append(Example((a.to(device), b.to(device)), scalars, note=f"{shape} low_freq={scalars[-1]}"))
    x, y = strided_example_pair(device, 88)  # values in [0, 1]: the band check of the asymmetric term still switches
    out.append(Example((x[0], y[0]), (1.32, 0.88, 71.78, 0.399, False), note="non-contiguous"))
    return out


butteraugli_malta = register_op(KernelOp(
    name="butteraugli_malta",
    schema="(Tensor lum0, Tensor lum1, float w_0gt1, float w_0lt1, float norm1, float mulli, bool low_freq) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=butteraugli_malta_ref,
    fake=lambda lum0, lum1, *scalars: lum0.new_empty(lum0.shape, dtype=compute_dtype(lum0.dtype)),
    examples=_butteraugli_malta_examples,
    differentiable=False,
    tolerance=BUTTERAUGLI_TOLERANCE,
    load_cpu=_import_cpu,
    doc="Butteraugli's Malta line-filter difference of two (N, H, W) planes (HF or LF line set), libjxl 0.7.",
))


def _butteraugli_erosion_examples(device: torch.device) -> list[Example]:
    out = []
    for i, shape in enumerate(((1, 1, 1), (2, 7, 5), (1, 19, 70), (3, 16, 64))):
        gen = torch.Generator().manual_seed(90 + i)
        x = torch.rand(shape, generator=gen, dtype=torch.float64) ** 3  # activity maps: non-negative, skewed
        x[..., ::4, ::3] = 0.0  # ties and zeros
        out.append(Example((x.to(device),), (), note=f"{shape}"))
    x, _ = strided_example_pair(device, 96)
    out.append(Example((x[0].abs(),), (), note="non-contiguous"))
    return out


butteraugli_erosion = register_op(KernelOp(
    name="butteraugli_erosion",
    schema="(Tensor x) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=fuzzy_erosion_ref,
    fake=lambda x: x.new_empty(x.shape),
    examples=_butteraugli_erosion_examples,
    differentiable=False,
    # a selection and three products: exact in float64; float32 against the float64 twin: the rounding of the
    # float32 input and of three products and two sums (< 4 ulp)
    tolerance={torch.float64: (0.0, 0.0), torch.float32: (5e-7, 0.0)},
    load_cpu=_import_cpu,
    doc="Butteraugli's fuzzy erosion of (N, H, W) activity maps (three smallest of 11 candidates, weighted).",
))


def _butteraugli_malta_add_examples(device: torch.device) -> list[Example]:
    out = []
    for ex in _butteraugli_malta_examples(device):
        lum0 = ex.tensors[0]
        gen = torch.Generator().manual_seed(int(lum0.numel()))
        acc = (torch.rand(lum0.shape, generator=gen, dtype=torch.float64) * 50).to(device)
        out.append(Example((acc, *ex.tensors), ex.scalars, note=ex.note))
    return out


butteraugli_malta_add = register_op(KernelOp(
    name="butteraugli_malta_add",
    schema="(Tensor acc, Tensor lum0, Tensor lum1, float w_0gt1, float w_0lt1, float norm1, float mulli, "
           "bool low_freq) -> Tensor",
    n_tensors=3,
    load_triton=_import_triton,
    reference=butteraugli_malta_add_ref,
    fake=lambda acc, lum0, lum1, *scalars: lum0.new_empty(lum0.shape, dtype=compute_dtype(lum0.dtype)),
    examples=_butteraugli_malta_add_examples,
    differentiable=False,
    tolerance=BUTTERAUGLI_TOLERANCE,
    load_cpu=_import_cpu,
    doc="acc + Butteraugli's Malta difference of two (N, H, W) planes: the band sums accumulate in one launch.",
))


# Element-wise stages (ops/butteraugli_stages.py): the twin's float32 operations in its order, so float32 differs
# from the float64 twin by float32 rounding (~1e-7 relative per operation, a few ulp through FastLog2f, the
# reciprocals and the square roots; the float sRGB curve's exp2/log2 a few ulp more); float64 by the same
# operations in float64 (the sRGB curve's exp2·log2 vs pow: ~1e-15).
def _butteraugli_planes(shape, seed: int, scales, device, offset: float = 0.0) -> torch.Tensor:
    """(N, C, H, W) normal planes, channel c scaled by scales[c]: values around the stages' thresholds."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    return (x * torch.tensor(scales, dtype=torch.float64).view(1, -1, 1, 1) + offset).to(device)


def _butteraugli_linear_examples(device: torch.device) -> list[Example]:
    codes = torch.randint(0, 256, (2, 3, 11, 13), generator=torch.Generator().manual_seed(600), dtype=torch.uint8)
    codes.view(-1)[:256] = torch.arange(256, dtype=torch.uint8)  # every code
    out = [Example((codes.to(device),), note="uint8 codes through the table"),
           Example((codes.to(device).to(memory_format=torch.channels_last)[:1, :, 2:9, ::2],),
                   note="uint8, non-contiguous")]
    x = torch.rand(2, 3, 9, 14, generator=torch.Generator().manual_seed(601), dtype=torch.float64)
    x.view(-1)[::5] *= 0.05  # the linear segment below 0.04045
    x.view(-1)[::17] = 0.0
    out.append(Example((x.to(device),), note="float sRGB"))
    out.append(Example((x.to(device).to(memory_format=torch.channels_last)[:, :, 1:8, 1::3],),
                       note="float, non-contiguous"))
    out.append(Example((x[:1, :, :1, :1].to(device),), note="1x1"))
    return out


def _butteraugli_opsin_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, it) in enumerate([((2, 3, 9, 13), 80.0), ((1, 3, 17, 6), 250.0), ((1, 3, 1, 1), 80.0)]):
        gen = torch.Generator().manual_seed(610 + i)
        rgb = torch.rand(shape, generator=gen, dtype=torch.float64) ** 2.2
        rgb.view(-1)[::7] = 0.0  # dark pixels: the sensitivity floor and the output clamp
        out.append(Example((rgb.to(device), butteraugli_blur_ref(rgb, 1.2).to(device)), (it,), note=f"{shape} it={it}"))
    rgb, blurred = (t.transpose(-1, -2) for t in out[0].tensors)
    out.append(Example((rgb, blurred), (80.0,), note="non-contiguous"))
    return out


def _butteraugli_pair_examples(device: torch.device, seed: int, scales) -> list[Example]:
    out = [Example((_butteraugli_planes(shape, seed + i, scales, device, 2.0),
                    _butteraugli_planes(shape, seed + 10 + i, scales, device)), note=str(shape))
           for i, shape in enumerate([(2, 3, 9, 13), (1, 3, 1, 1), (1, 3, 40, 33)])]
    a, b = out[0].tensors
    out.append(Example((a.transpose(-1, -2), b[:1].expand(2, -1, -1, -1).transpose(-1, -2)),
                       note="transposed, expanded batch"))
    return out


def _butteraugli_bands_examples(device: torch.device) -> list[Example]:
    out = []
    for i, shape in enumerate([(2, 9, 13), (1, 1, 1), (1, 40, 33)]):
        n, h, w = shape
        lf = _butteraugli_planes((n, 3, h, w), 630 + i, (5.0, 20.0, 10.0), device)
        mf = _butteraugli_planes((n, 3, h, w), 640 + i, (0.4, 0.15, 2.0), device)
        pre = _butteraugli_planes((n, 2, h, w), 650 + i, (2.0, 40.0), device)
        blur = pre * 0.7 + _butteraugli_planes((n, 2, h, w), 660 + i, (0.05, 6.0), device)
        out.append(Example((lf, mf, pre, blur), note=str(shape)))
    lf, mf, pre, blur = out[0].tensors
    out.append(Example((lf.transpose(-1, -2), mf.transpose(-1, -2), pre.transpose(-1, -2), blur.transpose(-1, -2)),
                       note="non-contiguous"))
    return out


def _butteraugli_combine_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, ref_batch, with_half) in enumerate([((2, 9, 13), 2, True), ((1, 8, 8), 1, False),
                                                        ((3, 17, 10), 1, True), ((1, 1, 1), 1, False)]):
        n, h, w = shape
        gen = torch.Generator().manual_seed(670 + i)
        scales = (3.0, 20.0, 30.0, 0.5, 0.5, 2.0, 1.5, 3.0, 0.05, 1.0, 1.0)
        b0 = _butteraugli_planes((ref_batch, BANDS, h, w), 680 + i, scales, device)
        # the distorted bands: some near the reference (the asymmetric band), some anywhere
        b1 = b0 * (0.2 + 1.2 * torch.rand((n, BANDS, h, w), generator=gen, dtype=torch.float64)).to(device)
        b1 = b1 + _butteraugli_planes((n, BANDS, h, w), 690 + i, scales, device) * 0.3
        ac = (torch.rand((2, n, h, w), generator=gen, dtype=torch.float64) * 100).to(device)
        act0 = (torch.rand((ref_batch, h, w), generator=gen, dtype=torch.float64) * 5).to(device)
        act1 = (torch.rand((n, h, w), generator=gen, dtype=torch.float64) * 5).to(device)
        mask = (torch.rand((ref_batch, h, w), generator=gen, dtype=torch.float64) * 10).to(device)
        half = (torch.rand((n, (h + 1) // 2, (w + 1) // 2), generator=gen, dtype=torch.float64).to(device)
                if with_half else torch.empty(0, dtype=torch.float64, device=device))
        if ref_batch != n:
            b0, act0, mask = (t.expand(n, *t.shape[1:]) for t in (b0, act0, mask))
        out.append(Example((b0, b1, ac[0], ac[1], act0, act1, mask, half), (0.8 if i % 2 == 0 else 1.3,),
                           note=f"{shape} reference batch {ref_batch} half={with_half}"))
    return out


def _butteraugli_stage(name: str, schema: str, n_tensors: int, reference, fake, examples, doc: str,
                       tolerance=BUTTERAUGLI_TOLERANCE, compiled_cpu: bool = False) -> KernelOp:
    """One stage of the pipeline (forward only; its plan lives in ``stages_kernel``)."""
    return register_op(KernelOp(
        name=name, schema=schema, n_tensors=n_tensors, load_triton=_import_triton,
        load_cpu=_import_cpu if compiled_cpu else None,
        reference=reference, fake=fake, examples=examples, differentiable=False, tolerance=tolerance, doc=doc))


def _like(x: torch.Tensor, channels: int | None) -> torch.Tensor:
    n, h, w = x.shape[0], *x.shape[-2:]
    return x.new_empty((n, h, w) if channels is None else (n, channels, h, w),
                       dtype=torch.float32 if x.dtype == torch.uint8 else compute_dtype(x.dtype))


butteraugli_linear = _butteraugli_stage(
    "butteraugli_linear", "(Tensor srgb) -> Tensor", 1, butteraugli_linear_ref, lambda x: _like(x, 3),
    _butteraugli_linear_examples,
    "Butteraugli's input decoding: sRGB (N, 3, H, W) uint8 (256-entry table) or float -> linear RGB.")
butteraugli_opsin = _butteraugli_stage(
    "butteraugli_opsin", "(Tensor rgb, Tensor blurred, float intensity_target) -> Tensor", 2, opsin_xyb_ref,
    lambda rgb, blurred, it: _like(rgb, 3), _butteraugli_opsin_examples,
    "Butteraugli's opsin dynamics (mix, FastLog2f sensitivity of the blurred mix, clamps, XYB) in one pass.",
    # float32: X = m0 - m1 cancels two values ~200-300 whose float32 ulp is ~3e-5 (measured 4.3e-5 absolute)
    {torch.float64: (1e-10, 0.0), torch.float32: (2e-4, 0.0)},
    compiled_cpu=True)
butteraugli_rest = _butteraugli_stage(
    "butteraugli_rest", "(Tensor xyb, Tensor lf) -> Tensor", 2, frequency_rest_ref, lambda x, lf: _like(x, 3),
    lambda device: _butteraugli_pair_examples(device, 700, (1.0, 20.0, 10.0)),
    "Butteraugli's frequency separation: what the low frequencies leave, xyb - lf (N, 3, H, W).")
butteraugli_hf_pre = _butteraugli_stage(
    "butteraugli_hf_pre", "(Tensor rest, Tensor mf) -> Tensor", 2, hf_pre_ref, lambda rest, mf: _like(rest, 2),
    lambda device: _butteraugli_pair_examples(device, 720, (1.0, 8.0, 3.0)),
    "Butteraugli's high frequencies before their blur (N, 2, H, W), X suppressed where Y has energy.")
butteraugli_bands = _butteraugli_stage(
    "butteraugli_bands", "(Tensor lf, Tensor mf, Tensor hf_pre, Tensor hf_blur) -> Tensor", 4, bands_ref,
    lambda lf, mf, pre, blur: _like(lf, BANDS), _butteraugli_bands_examples,
    "Butteraugli's bands of one image (N, 11, H, W): LF vals, MF, HF, UHF with dead zones and soft clamps, and "
    "the unblurred HF activity.", compiled_cpu=True)
butteraugli_combine = _butteraugli_stage(
    "butteraugli_combine", "(Tensor bands0, Tensor bands1, Tensor ac_x, Tensor ac_y, Tensor act0, Tensor act1, "
    "Tensor mask, Tensor half, float hf_asymmetry) -> Tensor", 8, diffmap_combine_ref,
    lambda b0, b1, ax, ay, a0, a1, mask, half, hf: _like(b1, None), _butteraugli_combine_examples,
    "Butteraugli's distance map of one resolution (N, H, W): Malta sums + asymmetric L2 on HF, L2 on MF/LF, "
    "activity difference, AC/DC masks, sqrt, and the half-resolution map mixed in.",
    compiled_cpu=True)



def _butteraugli_norm_examples(device: torch.device) -> list[Example]:
    out = []
    for i, shape in enumerate([(2, 9, 13), (1, 1, 1), (1, 300, 700), (3, 40, 33)]):
        gen = torch.Generator().manual_seed(750 + i)
        out.append(Example(((torch.rand(shape, generator=gen, dtype=torch.float64) * 3).to(device),), note=str(shape)))
    out.append(Example((out[0].tensors[0].transpose(-1, -2),), note="non-contiguous"))
    return out


butteraugli_norm_sums = _butteraugli_stage(
    "butteraugli_norm_sums", "(Tensor diffmap) -> Tensor", 1, butteraugli_norm_sums_ref,
    lambda d: d.new_empty((d.shape[0], 4), dtype=torch.float64), _butteraugli_norm_examples,
    "Butteraugli's score reductions of maps (N, H, W): (N, 4) float64 max, mean d^3, d^6, d^12 (the sums in "
    "another order than the twin's: ~1e-15 relative).")

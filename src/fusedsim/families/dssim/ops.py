"""Perceptual-metric ops: DSSIM (registered when the ``perceptual`` family loads)."""

from __future__ import annotations

import torch

from fusedsim.core.examples import example_pair, strided_example_pair
from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.dssim.twin import (
    dssim_blur_ref,
    dssim_lab_op_ref,
    dssim_prep_ref,
    dssim_srgb8_half_ref,
    dssim_srgb8_prep_ref,
    dssim_ssim_map_ref,
)
from fusedsim.core.moments.twin import compute_dtype


# float32 kernels against the float64 twin: dssim's Lab and blur are a few f32 roundings from it (~1e-7
# relative; the cube root guess and Halley steps add a little); its SSIM map divides by variances of random data,
# ~1e-6. float64: fused multiply-adds in the kernels vs separate roundings in the twin (~1e-15).
DSSIM_TOLERANCE = {torch.float64: (1e-12, 0.0), torch.float32: (2e-6, 0.0)}
# ``cpu=`` (the CPU path under ``auto``): the twins with the blur and Lab compiled by numba (fusedsim.families.dssim.cpu)


def _dssim_lab_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, has_alpha) in enumerate([((2, 3, 13, 17), False), ((1, 3, 19, 40), True), ((1, 3, 1, 1), True)]):
        gen = torch.Generator().manual_seed(400 + i)
        lin = torch.rand(shape, generator=gen, dtype=torch.float64) ** 2.2  # dark values reach the linear branch
        alpha = torch.rand((shape[0], 1, *shape[2:]), generator=gen, dtype=torch.float64)
        out.append(Example((lin.to(device), (alpha * lin[:, :1] if has_alpha else alpha).to(device)), (has_alpha,),
                           note=f"{shape} alpha={has_alpha}"))
    x, _ = strided_example_pair(device, 410)
    out.append(Example((x[:, :1].expand(-1, 3, -1, -1), x[:, 1:2]), (True,), note="non-contiguous"))
    return out


def _import_triton() -> None:
    """The Triton side of these ops, imported on first GPU use (Triton itself with it): each module registers
    its plans on the ops below."""
    import fusedsim.families.dssim.blur_kernel  # noqa: F401
    import fusedsim.families.dssim.lab_kernel  # noqa: F401
    import fusedsim.families.dssim.prep_kernel  # noqa: F401
    import fusedsim.families.dssim.ssim_map_kernel  # noqa: F401


def _import_cpu() -> None:
    """The compiled CPU kernels of these ops (numba), imported on first CPU call under ``auto``."""
    import fusedsim.families.dssim.cpu  # noqa: F401


dssim_lab = register_op(KernelOp(
    name="dssim_lab",
    schema="(Tensor lin, Tensor alpha, bool has_alpha) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=dssim_lab_op_ref,
    load_cpu=_import_cpu,
    fake=lambda lin, alpha, has_alpha: lin.new_empty(lin.shape, dtype=compute_dtype(lin.dtype)),
    examples=_dssim_lab_examples,
    differentiable=False,
    tolerance=DSSIM_TOLERANCE,
    doc="DSSIM's scaled L*a*b* of linear (premultiplied) RGB (N, 3, H, W), alpha over its pseudo-checkerboard.",
))


def _dssim_image_examples(device: torch.device, channels: int, seed: int) -> list[Example]:
    out = []
    for i, shape in enumerate([(1, channels, 1, 1), (2, channels, 2, 5), (1, channels, 13, 17), (1, channels, 9, 70)]):
        x, y = example_pair(shape, device, seed + i)
        out.append(Example((x,) if channels != 3 else (x, y), note=str(shape)))
    x, y = strided_example_pair(device, seed + 9)
    three = (x[:, :1].expand(-1, 3, -1, -1), y[:, :1].expand(-1, 3, -1, -1))
    out.append(Example(three[:1] if channels != 3 else three, note="non-contiguous"))
    return out


dssim_blur = register_op(KernelOp(
    name="dssim_blur",
    schema="(Tensor x) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=dssim_blur_ref,
    load_cpu=_import_cpu,
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
    load_triton=_import_triton,
    reference=dssim_ssim_map_ref,
    load_cpu=_import_cpu,
    fake=lambda lab1, lab2: lab1.new_empty((lab1.shape[0], *lab1.shape[2:]), dtype=compute_dtype(lab1.dtype)),
    examples=lambda device: _dssim_image_examples(device, 3, 430),
    differentiable=False,
    tolerance={torch.float64: (1e-12, 0.0), torch.float32: (2e-5, 0.0)},
    doc="DSSIM's SSIM map (N, H, W) of two Lab images (N, 3, H, W): blurred moments, channel means, formula.",
))


dssim_prep = register_op(KernelOp(
    name="dssim_prep",
    schema="(Tensor lin, Tensor alpha, bool has_alpha) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=dssim_prep_ref,
    load_cpu=_import_cpu,
    fake=lambda lin, alpha, has_alpha: lin.new_empty(lin.shape, dtype=compute_dtype(lin.dtype)),
    examples=_dssim_lab_examples,
    differentiable=False,
    tolerance=DSSIM_TOLERANCE,
    doc="One DSSIM scale: Lab of linear RGB (N, 3, H, W) [+ alpha] with its a/b channels pre-blurred.",
))


def _srgb8_examples(device: torch.device) -> list[Example]:
    out = []
    for i, shape in enumerate([(1, 3, 1, 1), (2, 3, 13, 17), (1, 3, 9, 70)]):
        gen = torch.Generator().manual_seed(440 + i)
        out.append(Example((torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8).to(device),),
                           note=str(shape)))
    gen = torch.Generator().manual_seed(449)
    big = torch.randint(0, 256, (1, 3, 22, 31), generator=gen, dtype=torch.uint8).to(device)
    out.append(Example((big.to(memory_format=torch.channels_last)[:, :, 3:20, 1::2],), note="non-contiguous"))
    return out


# uint8 codes in, float32 out: the same float32 operations in the same order as the twins (tolerance None: equal)
dssim_srgb8_prep = register_op(KernelOp(
    name="dssim_srgb8_prep",
    schema="(Tensor raw) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=dssim_srgb8_prep_ref,
    load_cpu=_import_cpu,
    fake=lambda raw: raw.new_empty(raw.shape, dtype=torch.float32),
    examples=_srgb8_examples,
    differentiable=False,
    doc="DSSIM's first scale from uint8 sRGB (N, 3, H, W): table linearisation, Lab, pre-blurred a/b.",
))

dssim_srgb8_half = register_op(KernelOp(
    name="dssim_srgb8_half",
    schema="(Tensor raw) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=dssim_srgb8_half_ref,
    fake=lambda raw: raw.new_empty((*raw.shape[:2], raw.shape[2] // 2, raw.shape[3] // 2), dtype=torch.float32),
    examples=_srgb8_examples,
    differentiable=False,
    doc="DSSIM's second scale's linear RGB (N, 3, H // 2, W // 2) from uint8 sRGB (N, 3, H, W).",
))

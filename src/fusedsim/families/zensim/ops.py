"""Perceptual-metric ops: zensim (registered when the ``perceptual`` family loads)."""

from __future__ import annotations

import torch

from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.zensim.f32_twin import SCALE_SUMS, zensim_downscale_ref, zensim_scale_sums_ref, zensim_xyb_ref
from fusedsim.families.zensim.twin import MIN_PYRAMID_DIM, simd_padded_width


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


def _import_triton() -> None:
    """The Triton side of these ops, imported on first GPU use (Triton itself with it): each module registers
    its plans on the ops below."""
    import fusedsim.families.zensim.kernel  # noqa: F401
    import fusedsim.families.zensim.xyb_kernel  # noqa: F401


def _import_cpu() -> None:
    """The compiled CPU kernels of these ops (numba), imported on first CPU call under ``auto``."""
    import fusedsim.families.zensim.cpu  # noqa: F401


zensim_scale_sums = register_op(KernelOp(
    name="zensim_scale_sums",
    schema="(Tensor src, Tensor dst) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=zensim_scale_sums_ref,
    load_cpu=_import_cpu,  # numba: the twin's per-pixel bits (CPU, auto)
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
    from fusedsim.families.zensim.twin import srgb_to_linear_ref

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
    load_triton=_import_triton,
    reference=zensim_xyb_ref,
    load_cpu=_import_cpu,  # numba, the twin's bits (the CPU path under auto)
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
    load_triton=_import_triton,
    reference=zensim_downscale_ref,
    fake=lambda x: x.new_empty((*x.shape[:2], x.shape[-2] // 2, x.shape[-1] // 2), dtype=torch.float32),
    examples=_zensim_downscale_examples,
    differentiable=False,
    tolerance=None,  # the twin's float32 additions in its order: bit-identical
    doc="zensim's pyramid step: (N, C, h, w) -> (N, C, h//2, w//2) float32, (((a + b) + c) + d) * 0.25 per 2x2.",
))

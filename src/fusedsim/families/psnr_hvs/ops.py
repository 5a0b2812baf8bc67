"""The PSNR-HVS op: ``psnr_hvs_plane``, libvmaf's PSNR-HVS error of one plane per frame."""

from __future__ import annotations

import torch

from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.psnr_hvs.twin import psnr_hvs_plane_ref


def example_planes(shape: tuple[int, int, int], bits: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A reference with flat, textured and edge regions (zero and non-zero block variances) and a distorted copy:
    noise below and above the masking thresholds, a copy of some blocks, a clipped corner."""
    gen = torch.Generator().manual_seed(seed)
    top = (1 << bits) - 1
    n, h, w = shape
    ref = torch.randint(0, top + 1, shape, generator=gen)
    ref[:, : h // 3] = top // 3  # flat: zero variance
    ref[:, :, : w // 4] = torch.where(torch.arange(w // 4) % 2 == 0, 0, top)  # stripes: high frequencies
    small = torch.randint(-2, 3, shape, generator=gen) << max(0, bits - 8)
    large = torch.randint(-top // 6, top // 6 + 1, shape, generator=gen)
    dist = torch.where(torch.arange(w)[None, None, :] % 16 < 8, ref + small, ref + large)
    dist[:, -8:, -8:] = ref[:, -8:, -8:]
    dist[:, :3, :3] = top
    return ref.clamp(0, top), dist.clamp(0, top)


def _examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, bits, plane) in enumerate([((1, 8, 8), 8, 0), ((2, 15, 22), 8, 1), ((1, 30, 17), 10, 2),
                                               ((1, 16, 29), 12, 0), ((1, 21, 9), 9, 1)]):
        ref, dist = example_planes(shape, bits, 20 + i)
        dtype = torch.uint8 if bits == 8 else torch.int16
        out.append(Example((ref.to(device, dtype), dist.to(device, dtype)), (bits, plane),
                           note=f"{shape} {bits}-bit plane {plane}"))
    return out


def _import_triton() -> None:
    """The Triton kernel, imported on first GPU use: it registers its launcher on the op below."""
    from fusedsim.families.psnr_hvs import kernel

    del kernel  # imported for its registration only


def _import_cpu() -> None:
    """The numba kernel, imported on first CPU call under ``auto``: it registers itself on the op below."""
    from fusedsim.families.psnr_hvs import cpu

    del cpu  # imported for its registration only


psnr_hvs_plane = register_op(KernelOp(
    name="psnr_hvs_plane",
    schema="(Tensor ref, Tensor dist, int bit_depth, int plane) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=psnr_hvs_plane_ref,
    fake=lambda ref, dist, bit_depth, plane: ref.new_empty(ref.shape[0], dtype=torch.float64),
    examples=_examples,
    differentiable=False,
    tolerance=None,  # integer DCT and float32 steps in libvmaf's order: bit-identical to the twin
    # loops over small bodies: the earlier straight-line block kernel took > 35 s to compile on an H200; this one
    # compiles in ~2 s and equals the twin on the GPU
    load_cpu=_import_cpu,
    doc="libvmaf's PSNR-HVS error of one integer plane (N, h, w) per frame, before the dB conversion: (N,) "
        "float64 holding libvmaf's float32 values; plane 0 luma, 1 Cb, 2 Cr (the CSF table).",
))

#: The family's ops (the ``vmaf:psnr_hvs`` feature lists them).
OPS = (psnr_hvs_plane,)

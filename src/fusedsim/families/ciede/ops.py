"""The CIEDE2000 op: ``ciede_de_sum``, libvmaf's per-frame sum of dE00 of luma-size Y'CbCr planes."""

from __future__ import annotations

import torch

from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.ciede.twin import ciede_de_sum_ref


def example_planes(shape: tuple[int, int, int], bits: int, seed: int) -> tuple[torch.Tensor, ...]:
    """Reference planes spanning the colour range (out-of-gamut corners, neutral greys, the sRGB toe) and a
    distorted copy: noise, a hue rotation (Cb and Cr swapped) on one third, an exact copy on another."""
    gen = torch.Generator().manual_seed(seed)
    top = (1 << bits) - 1
    ref = [torch.randint(0, top + 1, shape, generator=gen) for _ in range(3)]
    grey = 128 << (bits - 8)
    ref[1][:, : shape[1] // 4] = grey  # neutral: a = b = 0 where Y is also grey-ish
    ref[2][:, : shape[1] // 4] = grey
    noise = [torch.randint(-top // 30 - 1, top // 30 + 2, shape, generator=gen) for _ in range(3)]
    dist = [(r + e).clamp(0, top) for r, e in zip(ref, noise)]
    third = shape[2] // 3
    dist[1][..., :third], dist[2][..., :third] = ref[2][..., :third], ref[1][..., :third]
    for k in range(3):
        dist[k][..., third: 2 * third] = ref[k][..., third: 2 * third]
    return (*ref, *dist)


def _examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, bits) in enumerate([((1, 4, 6), 8), ((2, 9, 13), 8), ((1, 12, 20), 10), ((1, 7, 9), 12),
                                        ((1, 6, 10), 16)]):
        dtype = torch.uint8 if bits == 8 else torch.int32
        planes = tuple(p.to(device, dtype) for p in example_planes(shape, bits, 40 + i))
        out.append(Example(planes, (bits,), note=f"{shape} {bits}-bit"))
    return out


def _import_triton() -> None:
    """The Triton kernel, imported on first GPU use: it registers its launcher on the op below."""
    from fusedsim.families.ciede import kernel

    del kernel  # imported for its registration only


def _import_cpu() -> None:
    """The numba kernel, imported on first CPU call under ``auto``: it registers itself on the op below."""
    from fusedsim.families.ciede import cpu

    del cpu  # imported for its registration only


ciede_de_sum = register_op(KernelOp(
    name="ciede_de_sum",
    schema="(Tensor ref_y, Tensor ref_u, Tensor ref_v, Tensor dist_y, Tensor dist_u, Tensor dist_v, "
           "int bit_depth) -> Tensor",
    n_tensors=6,
    load_triton=_import_triton,
    reference=ciede_de_sum_ref,
    fake=lambda ry, ru, rv, dy, du, dv, bit_depth: ry.new_empty(ry.shape[0], dtype=torch.float64),
    examples=_examples,
    differentiable=False,
    # the C library's pow/atan2/sin/cos/exp/powf (numba, and the twin's powf) and torch's or CUDA's differ in the
    # last bits of some results; a float32 rounding rarely turns on them (fixture sums agree to 1e-15 relative)
    tolerance={torch.float64: (1e-12, 0.0), torch.float32: (1e-12, 0.0)},
    load_cpu=_import_cpu,
    doc="libvmaf's CIEDE2000 dE00 sum per frame of luma-size integer Y'CbCr planes (N, H, W): (N,) float64.",
))

#: The family's ops (the ``vmaf:ciede`` feature lists them).
OPS = (ciede_de_sum,)

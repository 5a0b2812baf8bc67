"""The motion op: ``integer_motion_sad``, libvmaf's per-frame-pair motion score of a batch of pairs."""

from __future__ import annotations

import torch

from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.motion.twin import integer_motion_sad_ref


def _examples(device: torch.device) -> list[Example]:
    cases = [((1, 3, 3), 8), ((2, 3, 5), 8), ((3, 4, 3), 10), ((2, 9, 13), 8), ((1, 37, 70), 10),
             ((2, 20, 19), 12), ((1, 11, 6), 16), ((2, 66, 131), 8)]
    out = []
    for i, (shape, bits) in enumerate(cases):
        gen = torch.Generator().manual_seed(60 + i)
        top = (1 << bits) - 1
        cur = torch.randint(0, top + 1, shape, generator=gen)
        # a moved copy plus noise: differences of both signs and many sizes (extremes in the tiny cases)
        step = max(1, top // 64)
        prev = (cur.roll(1, -1) + torch.randint(-8, 9, shape, generator=gen) * step).clamp(0, top)
        dtype = torch.uint8 if bits == 8 else (torch.int32 if bits == 16 else torch.int16)
        out.append(Example((prev.to(device, dtype), cur.to(device, dtype)), (bits,), note=f"{shape} {bits}-bit"))
    return out


def _import_triton() -> None:
    """The Triton kernel, imported on first GPU use: it registers its launcher on the op below."""
    from fusedsim.families.motion import kernel

    del kernel  # imported for its registration only


def _import_cpu() -> None:
    """The numba kernel, imported on first CPU call under ``auto``: it registers itself on the op below."""
    from fusedsim.families.motion import cpu

    del cpu  # imported for its registration only


integer_motion_sad = register_op(KernelOp(
    name="integer_motion_sad",
    schema="(Tensor prev, Tensor cur, int bit_depth) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=integer_motion_sad_ref,
    fake=lambda prev, cur, bit_depth: prev.new_empty(prev.shape[0], dtype=torch.float64),
    examples=_examples,
    differentiable=False,
    tolerance=None,  # integer arithmetic and one IEEE division: bit-identical to libvmaf, hence to the twin
    load_cpu=_import_cpu,
    doc="libvmaf's integer motion score per frame pair (prev, cur) of integer luma (N, H, W), float64, bit-exact.",
))

#: Every op of this family.
OPS = (integer_motion_sad,)

"""The VIF op: ``integer_vif``, libvmaf's per-scale num and den of a batch of frame pairs."""

from __future__ import annotations

import torch

from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.vif.twin import integer_vif_ref


def example_frames(shape: tuple[int, int, int], bits: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A reference, flat on the left (variance below sigma_nsq: the non-log branch) and noisy on the right, and a
    distorted copy covering every case: added noise on the flat part; on the noisy part, by thirds of the rows, a
    blur plus noise, a contrast boost (gain 2, above the limit 1) and an inversion (s12 < 0); a clipped corner."""
    gen = torch.Generator().manual_seed(seed)
    top = (1 << bits) - 1
    n, h, w = shape
    left = torch.arange(w) < w // 2
    noise = torch.randint(-top // 5, top // 5 + 1, shape, generator=gen)
    ref = torch.where(left, top // 3, top // 2 + noise)
    blur = ref.clone()
    blur[:, 1:-1] = (ref[:, :-2] + 2 * ref[:, 1:-1] + ref[:, 2:]) // 4
    blur = blur + torch.randint(-top // 50 - 1, top // 50 + 2, shape, generator=gen)
    third = (torch.arange(h) * 3 // h)[:, None]
    dist = torch.where(third == 0, blur, torch.where(third == 1, (ref - top // 2) * 2 + top // 2, top - ref))
    dist = torch.where(left, ref + torch.randint(-top // 20, top // 20 + 1, shape, generator=gen) * (third > 0), dist)
    dist[:, -3:, -3:] = top
    return ref.clamp(0, top), dist.clamp(0, top)


def _examples(device: torch.device) -> list[Example]:
    # sizes from the minimum (16) up, odd ones, 8/10/12/16 bit, both gain limits and one between
    cases = [((1, 16, 16), 8, 100.0), ((2, 17, 23), 8, 1.0), ((1, 33, 40), 10, 100.0), ((1, 19, 31), 12, 1.0),
             ((1, 16, 21), 16, 100.0), ((2, 24, 18), 10, 2.5)]
    out = []
    for i, (shape, bits, gain_limit) in enumerate(cases):
        ref, dist = example_frames(shape, bits, 70 + i)
        dtype = torch.uint8 if bits == 8 else (torch.int32 if bits == 16 else torch.int16)
        out.append(Example((ref.to(device, dtype), dist.to(device, dtype)), (bits, gain_limit),
                           note=f"{shape} {bits}-bit egl {gain_limit}"))
    return out


def _import_triton() -> None:
    """The Triton kernel, imported on first GPU use: it registers its launcher on the op below."""
    from fusedsim.families.vif import kernel

    del kernel  # imported for its registration only


def _import_cpu() -> None:
    """The numba kernel, imported on first CPU call under ``auto``: it registers itself on the op below."""
    from fusedsim.families.vif import cpu

    del cpu  # imported for its registration only


integer_vif = register_op(KernelOp(
    name="integer_vif",
    schema="(Tensor ref, Tensor dist, int bit_depth, float gain_limit) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=integer_vif_ref,
    fake=lambda ref, dist, bit_depth, gain_limit: ref.new_empty((ref.shape[0], 8), dtype=torch.float64),
    examples=_examples,
    differentiable=False,
    tolerance=None,  # integer arithmetic and libvmaf's double/float32 steps: bit-identical to the twin
    load_cpu=_import_cpu,
    doc="libvmaf's integer VIF num and den per scale of integer luma (N, H, W): (N, 8) float64 "
        "[num0, den0, ..., num3, den3], bit-exact.",
))

#: The family's ops (the ``vmaf:vif`` feature lists them).
OPS = (integer_vif,)

"""libvmaf ops: integer_ssim, the float SSIM steps (iqa_decimate, iqa_ssim_maps), sequential_sum."""

from __future__ import annotations

import torch

from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.vmaf.float_ssim_twin import (
    MS_SSIM_LOWPASS,
    iqa_decimate_ref,
    iqa_ssim_maps_ref,
    to_vmaf_float,
)
from fusedsim.families.vmaf.integer_ssim_twin import integer_ssim_ref
from fusedsim.families.vmaf.sequential_sum_twin import sequential_sum_ref


# ----------------------------------------------------------------------------------------------- VMAF
def _integer_ssim_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, bits) in enumerate([((1, 1, 1), 8), ((2, 9, 13), 8), ((1, 37, 70), 10), ((1, 20, 19), 12)]):
        gen = torch.Generator().manual_seed(i)
        ref = torch.randint(0, 1 << bits, shape, generator=gen)
        dist = (ref + torch.randint(-40, 41, shape, generator=gen)).clamp(0, (1 << bits) - 1)
        dtype = torch.uint8 if bits == 8 else torch.int16
        out.append(Example((ref.to(device, dtype), dist.to(device, dtype)), (bits,), note=f"{shape} {bits}-bit"))
    return out


def _import_triton() -> None:
    """The Triton side of these ops, imported on first GPU use (Triton itself with it): each module registers
    its plans on the ops below."""
    import fusedsim.families.vmaf.float_ssim_kernel  # noqa: F401
    import fusedsim.families.vmaf.integer_ssim_kernel  # noqa: F401
    import fusedsim.families.vmaf.sequential_sum_kernel  # noqa: F401


def _import_cpu() -> None:
    """The compiled CPU kernels of these ops (numba), imported on first CPU call under ``auto``."""
    import fusedsim.families.vmaf.integer_ssim_cpu  # noqa: F401


integer_ssim = register_op(KernelOp(
    name="integer_ssim",
    schema="(Tensor ref, Tensor dist, int bit_depth) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=integer_ssim_ref,
    fake=lambda ref, dist, bit_depth: ref.new_empty(ref.shape[0], dtype=torch.float64),
    examples=_integer_ssim_examples,
    differentiable=False,
    tolerance=None,  # bit-identical to libvmaf, hence to the twin
    load_cpu=_import_cpu,  # numba, the twin's bits (CPU path under auto)
    doc="libvmaf's integer SSIM per frame of integer luma (N, H, W), float64, bit-exact.",
))


def _vmaf_float_frames(shape, device, seed: int, bit_depth: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """libvmaf float luma (integer codes / scaler) of a frame pair, as ``to_vmaf_float`` makes it."""
    gen = torch.Generator().manual_seed(seed)
    top = (1 << bit_depth) - 1
    ref = torch.randint(0, top + 1, shape, generator=gen)
    dist = (ref + torch.randint(-40, 41, shape, generator=gen)).clamp(0, top)
    return tuple(to_vmaf_float(t, bit_depth).to(device) for t in (ref, dist))  # type: ignore[return-value]


def _iqa_decimate_examples(device: torch.device) -> list[Example]:
    lpf = torch.from_numpy(MS_SSIM_LOWPASS.copy())
    out = []
    for i, (shape, factor, bits) in enumerate([((1, 22, 22), 2, 8), ((2, 23, 31), 2, 10), ((1, 45, 37), 4, 8),
                                               ((1, 33, 71), 5, 12), ((1, 11, 12), 3, 8)]):
        img, _ = _vmaf_float_frames(shape, device, 40 + i, bits)
        kernel = lpf if factor == 2 else torch.full((factor, factor), 1.0 / (factor * factor)).float()
        out.append(Example((img, kernel.to(device)), (factor,), note=f"{shape} factor {factor}"))
    return out


def _iqa_ssim_maps_examples(device: torch.device) -> list[Example]:
    cases = [((1, 11, 11), 8), ((2, 13, 17), 8), ((1, 40, 61), 10), ((1, 12, 300), 12)]
    out = [Example(_vmaf_float_frames(shape, device, 50 + i, bits), (), note=f"{shape} {bits}-bit")
           for i, (shape, bits) in enumerate(cases)]
    flat = torch.full((1, 15, 14), 77.0, device=device)  # zero variances: the clamps and the s-term rule
    out.append(Example((flat, flat.clone()), (), note="flat frames"))
    return out


iqa_decimate = register_op(KernelOp(
    name="iqa_decimate",
    schema="(Tensor img, Tensor kernel, int factor) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=iqa_decimate_ref,
    fake=lambda img, kernel, factor: img.new_empty(
        (img.shape[0], img.shape[1] // factor + (img.shape[1] & 1), img.shape[2] // factor + (img.shape[2] & 1))),
    examples=_iqa_decimate_examples,
    differentiable=False,
    tolerance=None,  # libvmaf's float32/double arithmetic, operation for operation
    doc="libvmaf's _iqa_decimate: k x k float32 kernel at every factor-th pixel, mirrored borders, (N, H, W).",
))

iqa_ssim_maps = register_op(KernelOp(
    name="iqa_ssim_maps",
    schema="(Tensor ref, Tensor cmp) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=iqa_ssim_maps_ref,
    fake=lambda ref, cmp: ref.new_empty((ref.shape[0], 4, ref.shape[1] - 10, ref.shape[2] - 10),
                                        dtype=torch.float64),
    examples=_iqa_ssim_maps_examples,
    differentiable=False,
    tolerance=None,  # libvmaf's float32/double arithmetic, operation for operation
    doc="libvmaf's _iqa_ssim per-pixel terms (l*c*s, l, c, s) over the valid region, float64 (N, 4, H-10, W-10).",
))


def _seqsum_examples(device: torch.device) -> list[Example]:
    gen = torch.Generator().manual_seed(0)
    rows = torch.randn(2, 1500, generator=gen, dtype=torch.float64) * torch.logspace(-8, 8, 1500, dtype=torch.float64)
    ties = torch.tensor([[2.0**53, 1.0, 1.0, -(2.0**53), 0.5, 2.0**-60, 3.0]], dtype=torch.float64)
    return [Example((rows.to(device),), note="magnitudes over 16 decades"), Example((ties.to(device),), note="ties"),
            Example((torch.zeros(2, 0, dtype=torch.float64, device=device),), note="empty rows")]


sequential_sum = register_op(KernelOp(
    name="sequential_sum",
    schema="(Tensor x) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=sequential_sum_ref,
    fake=lambda x: x.new_empty(x.shape[0]),
    examples=_seqsum_examples,
    differentiable=False,
    tolerance=None,  # bit-identical: the left-to-right double sum
    doc="Left-to-right float64 sum of each row (N, L) -> (N,), bit-identical to the sequential loop.",
))



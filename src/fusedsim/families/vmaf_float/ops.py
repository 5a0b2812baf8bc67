"""The float feature ops: ``float_vif``, ``float_adm`` and ``float_motion_sad`` (libvmaf's per-scale float32 values
of a batch of frame pairs), each with its twin, Triton kernel and numba kernel."""

from __future__ import annotations

import torch

from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.vmaf_float.adm_twin import float_adm_ref
from fusedsim.families.vmaf_float.motion_twin import float_motion_sad_ref
from fusedsim.families.vmaf_float.vif_twin import float_vif_ref


def example_frames(shape: tuple[int, int, int], bits: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A reference, flat on the left and noisy on the right, and a distorted copy: noise on the flat part; on the
    noisy part, by thirds of the rows, a blur plus noise, a contrast boost and an inversion; a clipped corner."""
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


def _dtype(bits: int) -> torch.dtype:
    return torch.uint8 if bits == 8 else (torch.int32 if bits == 16 else torch.int16)


def _vif_examples(device: torch.device) -> list[Example]:
    # (shape, bits, gain limit, kernelscale, sigma_nsq, skip_scale0)
    # small: the registry test runs them through Triton's interpreter too
    cases = [((1, 16, 17), 8, 100.0, 1.0, 2.0, 0), ((1, 17, 16), 12, 1.0, 0.5, 1.0, 1)]
    out = []
    for i, (shape, bits, egl, ks, snsq, skip) in enumerate(cases):
        ref, dist = example_frames(shape, bits, 90 + i)
        out.append(Example((ref.to(device, _dtype(bits)), dist.to(device, _dtype(bits))), (bits, egl, ks, snsq, skip),
                           note=f"{shape} {bits}-bit egl {egl} ks {ks}"))
    return out


def _adm_examples(device: torch.device) -> list[Example]:
    # (shape, bits, scalars after bit_depth: egl, nvd, rdh, nw, p_norm, bypass_cm, skip_scale0, f1s0..f2s3)
    plain = (-1.0,) * 8
    cases = [((1, 33, 33), 8, (100.0, 3.0, 1080, 0.03125, 3.0, 0, 0, *plain)),
             ((1, 34, 35), 10, (1.0, 5.0, 2160, 0.02, 3.0, 1, 1, 0.5, -1.0, -1.0, 2.0, *(-1.0,) * 4))]
    out = []
    for i, (shape, bits, scalars) in enumerate(cases):
        ref, dist = example_frames(shape, bits, 95 + i)
        out.append(Example((ref.to(device, _dtype(bits)), dist.to(device, _dtype(bits))), (bits, *scalars),
                           note=f"{shape} {bits}-bit"))
    return out


def _motion_examples(device: torch.device) -> list[Example]:
    cases = [((1, 5, 5), 8, 5), ((2, 9, 13), 10, 3), ((1, 6, 7), 16, 1)]
    out = []
    for i, (shape, bits, size) in enumerate(cases):
        gen = torch.Generator().manual_seed(80 + i)
        top = (1 << bits) - 1
        cur = torch.randint(0, top + 1, shape, generator=gen)
        prev = (cur.roll(1, -1) + torch.randint(-8, 9, shape, generator=gen) * max(1, top // 64)).clamp(0, top)
        out.append(Example((prev.to(device, _dtype(bits)), cur.to(device, _dtype(bits))), (bits, size),
                           note=f"{shape} {bits}-bit filter {size}"))
    return out


def _import_triton() -> None:
    """The Triton kernels, imported on first GPU use: they register their launchers on the ops below."""
    from fusedsim.families.vmaf_float import kernel

    del kernel  # imported for its registration only


def _import_cpu() -> None:
    """The numba kernels, imported on first CPU call under ``auto``: they register themselves on the ops below."""
    from fusedsim.families.vmaf_float import cpu

    del cpu  # imported for its registration only


float_vif = register_op(KernelOp(
    name="float_vif",
    schema="(Tensor ref, Tensor dist, int bit_depth, float gain_limit, float kernelscale, float sigma_nsq, "
           "int skip_scale0) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=float_vif_ref,
    fake=lambda ref, dist, *scalars: ref.new_empty((ref.shape[0], 8), dtype=torch.float64),
    examples=_vif_examples,
    differentiable=False,
    tolerance=None,  # libvmaf's float32 order of operations everywhere: bit-identical to the twin
    load_cpu=_import_cpu,
    doc="libvmaf's float VIF num and den per scale of integer luma (N, H, W): (N, 8) float64 (float32 values) "
        "[num0, den0, ..., num3, den3].",
))

float_adm = register_op(KernelOp(
    name="float_adm",
    schema="(Tensor ref, Tensor dist, int bit_depth, float gain_limit, float norm_view_dist, "
           "int ref_display_height, float noise_weight, float p_norm, int bypass_cm, int skip_scale0, float f1s0, "
           "float f1s1, float f1s2, float f1s3, float f2s0, float f2s1, float f2s2, float f2s3) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=float_adm_ref,
    fake=lambda ref, dist, *scalars: ref.new_empty((ref.shape[0], 12), dtype=torch.float64),
    examples=_adm_examples,
    differentiable=False,
    tolerance=None,
    load_cpu=_import_cpu,
    doc="libvmaf's float ADM num, den and AIM num per scale of integer luma (N, H, W): (N, 12) float64 (float32 "
        "values) [num0, den0, aim0, ..., aim3].",
))

float_motion_sad = register_op(KernelOp(
    name="float_motion_sad",
    schema="(Tensor prev, Tensor cur, int bit_depth, int filter_size) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=float_motion_sad_ref,
    fake=lambda prev, cur, bit_depth, filter_size: prev.new_empty(prev.shape[0], dtype=torch.float64),
    examples=_motion_examples,
    differentiable=False,
    tolerance=None,
    load_cpu=_import_cpu,
    doc="libvmaf's float motion score (mean absolute difference of the blurred frames) per frame pair (prev, cur) "
        "of integer luma (N, H, W): (N,) float64 (float32 values).",
))

#: Every op of this family (the ``vmaf:float_*`` features list them).
OPS = (float_vif, float_adm, float_motion_sad)

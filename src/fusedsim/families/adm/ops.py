"""The ADM op: ``integer_adm``, libvmaf's per-scale float32 ``(num, den, aim)`` of a batch of frame pairs."""

from __future__ import annotations

import torch

from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.adm.twin import integer_adm_ref


def _pair(shape: tuple[int, int, int], bits: int, seed: int, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A reference of smooth structure plus texture, and a distorted copy: noise, contrast gain (enhancement, the
    1-degree branch), a shift, or the reference itself."""
    gen = torch.Generator().manual_seed(seed)
    top = (1 << bits) - 1
    n, h, w = shape
    y = torch.linspace(0, 1, h)[:, None]
    x = torch.linspace(0, 1, w)[None, :]
    base = 0.5 + 0.3 * torch.sin(6 * x + 4 * y) * torch.cos(5 * y - 3 * x)
    ref = (base + 0.15 * torch.rand(shape, generator=gen)) * top
    if kind == "noise":
        dist = ref + torch.randn(shape, generator=gen) * top / 40
    elif kind == "gain":
        dist = top / 2 + 1.3 * (ref - top / 2)
    elif kind == "shift":
        dist = ref.roll(1, -1) + torch.randn(shape, generator=gen) * top / 200
    else:
        dist = ref.clone()
    return ref.round().clamp(0, top), dist.round().clamp(0, top)


def _examples(device: torch.device) -> list[Example]:
    watson = (0, 3.0, 1080, 0.03125)
    v1 = (2, 3.0, 1080, 0.02)  # the vmaf_v1.0.16 models' CSF blend and noise weight
    cases = [((1, 33, 33), 8, "noise", 100.0, watson), ((2, 35, 47), 10, "gain", 100.0, watson),
             ((1, 40, 37), 12, "shift", 100.0, watson), ((1, 37, 52), 8, "gain", 1.0, watson),
             ((1, 34, 33), 10, "same", 100.0, watson), ((2, 49, 70), 8, "noise", 1.5, watson),
             ((1, 41, 38), 10, "noise", 1.0, v1), ((1, 36, 44), 8, "shift", 1.0, (2, 5.0, 1080, 0.02)),
             ((1, 35, 35), 8, "gain", 100.0, (0, 5.0, 1080, 0.03125))]
    out = []
    for i, (shape, bits, kind, egl, geometry) in enumerate(cases):
        ref, dist = _pair(shape, bits, 80 + i, kind)
        dtype = torch.uint8 if bits == 8 else torch.int16
        out.append(Example((ref.to(device, dtype), dist.to(device, dtype)), (bits, egl, *geometry),
                           note=f"{shape} {bits}-bit {kind} egl={egl} csf/nvd/rdh/nw={geometry}"))
    return out


def _import_triton() -> None:
    """The Triton kernels, imported on first GPU use: they register their launcher on the op below."""
    from fusedsim.families.adm import kernel

    del kernel  # imported for its registration only


def _import_cpu() -> None:
    """The numba kernel, imported on first CPU call under ``auto``: it registers itself on the op below."""
    from fusedsim.families.adm import cpu

    del cpu  # imported for its registration only


integer_adm = register_op(KernelOp(
    name="integer_adm",
    schema="(Tensor ref, Tensor dist, int bit_depth, float gain_limit, int csf_mode, float norm_view_dist, "
           "int ref_display_height, float noise_weight) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=integer_adm_ref,
    fake=lambda ref, dist, *scalars: ref.new_empty(ref.shape[0], 4, 3, dtype=torch.float32),
    examples=_examples,
    differentiable=False,
    tolerance=None,  # integer arithmetic and libvmaf's float steps: bit-identical to libvmaf, hence to the twin
    load_cpu=_import_cpu,
    doc="libvmaf's integer ADM: per-scale float32 (num, den, aim) of integer luma pairs (N, H, W) -> (N, 4, 3); "
        "scalars: bit depth, enhancement gain limit, CSF mode, viewing distance, display height, noise weight.",
))

#: The ops of this family (the ``vmaf:adm`` feature lists them).
OPS = (integer_adm,)

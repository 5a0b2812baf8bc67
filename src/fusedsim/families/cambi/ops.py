"""The CAMBI op: ``cambi_scales``, libvmaf's five per-scale pooled banding scores of a batch of luma frames."""

from __future__ import annotations

import torch

from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.cambi.settings import NUM_SCALES, cambi_settings
from fusedsim.families.cambi.twin import cambi_scales_ref


def example_frames(shape: tuple[int, int, int], bits: int, seed: int) -> torch.Tensor:
    """Banded gradients (flat steps of one or a few codes, so the mask and the c-values fire) with a noisy block
    and a dark corner below the luminance floor."""
    gen = torch.Generator().manual_seed(seed)
    n, h, w = shape
    top = (1 << bits) - 1
    unit = max(1, top // 255)
    ramp = (torch.arange(w)[None, :] * 3 // max(w // 8, 1) + torch.arange(h)[:, None] // max(h // 5, 1)) * unit
    frames = (top // 6 + ramp).expand(n, h, w).clone()
    frames[:, : h // 3, w // 2:] += torch.randint(-3 * unit, 3 * unit + 1, (n, h // 3, w - w // 2), generator=gen)
    frames[:, -h // 4:, : w // 4] = unit * 2
    frames += torch.arange(n)[:, None, None] * unit
    return frames.clamp(0, top)


def _examples(device: torch.device) -> list[Example]:
    # (shape, bits, options): short frames (one side at libvmaf's 216), odd sizes, anti-dithering on and off, the
    # luminance floor, 2, 4 and 8 contrast steps, pooling of every value
    cases = [((1, 24, 216), 8, {}), ((2, 19, 230), 10, {"vis_lum_threshold": 0.06, "enc_bitdepth": 8}),
             ((1, 21, 217), 12, {"max_log_contrast": 3, "topk": 1.0}),
             ((1, 18, 220), 9, {"max_log_contrast": 1, "tvi_threshold": 0.002})]
    out = []
    for i, (shape, bits, options) in enumerate(cases):
        frames = example_frames(shape, bits, 90 + i)
        settings, _ = cambi_settings(shape[2], shape[1], bits, **options)
        dtype = torch.uint8 if bits == 8 else torch.int16
        tvi = torch.tensor(settings.tvi, dtype=torch.int32, device=device)
        out.append(Example((frames.to(device, dtype), tvi),
                           (bits, settings.anti_dither, settings.window, settings.vlt_luma, settings.mask_threshold,
                            settings.topk, settings.high_res), note=f"{shape} {bits}-bit {options}"))
    return out


def _import_triton() -> None:
    """The Triton kernels, imported on first GPU use: they register their launcher on the op below."""
    from fusedsim.families.cambi import kernel

    del kernel  # imported for its registration only


def _import_cpu() -> None:
    """The numba kernel, imported on first CPU call under ``auto``: it registers itself on the op below."""
    from fusedsim.families.cambi import cpu

    del cpu  # imported for its registration only


cambi_scales = register_op(KernelOp(
    name="cambi_scales",
    schema="(Tensor frames, Tensor tvi, int bit_depth, bool anti_dithering, int window, int vlt_luma, "
           "int mask_threshold, float topk, bool high_res) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=cambi_scales_ref,
    fake=lambda frames, tvi, *scalars: frames.new_empty((frames.shape[0], NUM_SCALES), dtype=torch.float64),
    examples=_examples,
    differentiable=False,
    tolerance=None,  # integer counts, one float32 product per term, exact double sums: bit-identical to the twin
    load_cpu=_import_cpu,
    doc="libvmaf's CAMBI per-scale pooled scores of integer luma (N, H, W) at the encode size: (N, 5) float64, "
        "bit-exact.",
))

#: The family's ops (the ``vmaf:cambi`` feature lists them).
OPS = (cambi_scales,)

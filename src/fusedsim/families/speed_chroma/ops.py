"""The SpEED chroma ops: ``speed_residual``, steps 1-5 of libvmaf's SpEED (float conversion, prescale, anti-alias
blur, decimation by 16, local-mean removal) of a batch of integer chroma planes, and ``speed_covariance``, the 25x25
covariance of each residual (the GSM estimation's first step). The rest of the estimation (eigenvalues, a QR
solve, entropies) works on these small residuals on the host (:mod:`.gsm`)."""

from __future__ import annotations

import torch

from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.speed_chroma.twin import METHOD_CODES, residual_shape, speed_covariance_ref, speed_residual_ref


def _examples(device: torch.device) -> list[Example]:
    # (shape, bits, prescale, method): sizes with whole 5x5 blocks after decimation (>= 80 px), odd ones too
    cases = [((1, 81, 83), 8, 1.0, 0), ((2, 90, 97), 10, 1.0, 0), ((1, 135, 140), 8, 0.6, 1),
             ((1, 161, 163), 12, 0.5, 1), ((1, 100, 110), 16, 0.8, 0), ((1, 64, 72), 8, 1.3, 1)]
    out = []
    for i, (shape, bits, prescale, method) in enumerate(cases):
        gen = torch.Generator().manual_seed(340 + i)
        top = (1 << bits) - 1
        n, h, w = shape
        y = torch.linspace(0, 1, h)[:, None]
        x = torch.linspace(0, 1, w)[None, :]
        base = 0.5 + 0.35 * torch.sin(9 * x + 5 * y) * torch.cos(7 * y - 4 * x)
        plane = ((base + 0.1 * torch.rand(shape, generator=gen)) * top).round().clamp(0, top)
        dtype = torch.uint8 if bits == 8 else torch.int32
        out.append(Example((plane.to(device, dtype),), (bits, prescale, method, 1.0),
                           note=f"{shape} {bits}-bit prescale {prescale} method {method}"))
    return out


def _fake(plane: torch.Tensor, bit_depth: int, prescale: float, method: int, kernelscale: float) -> torch.Tensor:
    h, w = residual_shape(plane.shape[-2], plane.shape[-1], prescale, method, kernelscale)
    return plane.new_empty(plane.shape[0], h, w, dtype=torch.float32)


def _covariance_examples(device: torch.device) -> list[Example]:
    # residual-like planes (zero-mean noise at several scales), odd sizes with rows and columns past whole blocks,
    # one integer-valued plane and one constant plane (a zero covariance, the singular branch's input)
    out = []
    for i, (shape, scale) in enumerate([((3, 7, 9), 1.0), ((2, 23, 31), 40.0), ((1, 33, 60), 0.05),
                                        ((2, 12, 26), 3.0)]):
        gen = torch.Generator().manual_seed(350 + i)
        r = torch.randn(shape, generator=gen) * scale
        if i == 3:
            r[0] = r[0].round()
            r[1] = 2.5
        out.append(Example((r.to(device),), (), note=f"{shape} x{scale}"))
    return out


def _covariance_fake(residuals: torch.Tensor) -> torch.Tensor:
    return residuals.new_empty(residuals.shape[0], 25, 25, dtype=torch.float32)


def _import_triton() -> None:
    """The Triton kernels, imported on first GPU use: they register their launchers on the ops below."""
    from fusedsim.families.speed_chroma import covariance_kernel, kernel

    del covariance_kernel, kernel  # imported for their registration only


def _import_cpu() -> None:
    """The numba kernels, imported on first CPU call under ``auto``: they register themselves on the ops below."""
    from fusedsim.families.speed_chroma import cpu

    del cpu  # imported for its registration only


speed_residual = register_op(KernelOp(
    name="speed_residual",
    schema="(Tensor plane, int bit_depth, float prescale, int method, float kernelscale) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=speed_residual_ref,
    fake=_fake,
    examples=_examples,
    differentiable=False,
    tolerance=None,  # float32 steps in libvmaf's order, no contraction: bit-identical to the twin
    load_cpu=_import_cpu,
    doc="libvmaf's SpEED residual (float conversion, prescale, 9-tap blur, decimation by 16, local mean removed) of "
        f"integer planes (N, H, W) -> (N, H', W') float32; method: {METHOD_CODES}.",
))

speed_covariance = register_op(KernelOp(
    name="speed_covariance",
    schema="(Tensor residuals) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=speed_covariance_ref,
    fake=_covariance_fake,
    examples=_covariance_examples,
    differentiable=False,
    tolerance=None,  # libvmaf's sequential float32 and double sums, each in its order: bit-identical to the twin
    load_cpu=_import_cpu,
    doc="libvmaf's SpEED covariance of the 5x5 neighbourhoods of each residual (N, H', W') float32 "
        "-> (N, 25, 25) float32.",
))

#: Every op of this family.
OPS = (speed_residual, speed_covariance)

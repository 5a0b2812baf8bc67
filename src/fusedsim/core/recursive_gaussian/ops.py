"""The ``recursive_gaussian`` op: libjxl's recursive Gaussian as a shared building block (SSIMULACRA2 uses it)."""

from __future__ import annotations

import torch

from fusedsim.core.recursive_gaussian.twin import recursive_gaussian_ref
from fusedsim.core.registry import Example, KernelOp, register_op

# The kernel computes the reference's float32 arithmetic, as the float32 twin does (FMA evaluated in float64 and
# rounded once, which differs from a true FMA only when the float64 sum lands on a float32 midpoint: ~1 in 2**29
# FMAs, then by 1 ulp). Hence 1e-6 relative.
RECURSIVE_GAUSSIAN_TOLERANCE = {torch.float32: (1e-6, 0.0)}


def _recursive_gaussian_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, sigma) in enumerate([((1, 1, 5, 4), 1.5), ((2, 3, 9, 13), 1.5), ((1, 7, 30), 1.5),
                                        ((2, 12, 11), 1.5), ((1, 1, 12, 25), 2.0),
                                        ((1, 2, 6, 75), 1.5), ((1, 19, 90), 2.0)]):
        gen = torch.Generator().manual_seed(90 + i)
        out.append(Example((torch.rand(shape, generator=gen).to(device),), (sigma,), note=f"{shape} sigma={sigma}"))
    x = torch.rand(1, 2, 22, 30, generator=torch.Generator().manual_seed(95)).to(device)[:, :, 3:20, ::2]
    out.append(Example((x,), (1.5,), note="non-contiguous"))
    return out


def _import_triton() -> None:
    """The Triton side, imported on first GPU use: the module registers its plan on the op below."""
    import fusedsim.core.recursive_gaussian.kernel  # noqa: F401


def _import_cpu() -> None:
    """The numba kernel, imported on first CPU call under ``auto``."""
    import fusedsim.core.recursive_gaussian.cpu  # noqa: F401


recursive_gaussian = register_op(KernelOp(
    name="recursive_gaussian",
    schema="(Tensor x, float sigma) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=recursive_gaussian_ref,
    fake=lambda x, sigma: x.new_empty(x.shape),
    examples=_recursive_gaussian_examples,
    differentiable=False,
    tolerance=RECURSIVE_GAUSSIAN_TOLERANCE,
    load_cpu=_import_cpu,
    doc="libjxl's recursive Gaussian (Charalampidis IIR, zero padding) of every (H, W) plane, float32 with the "
        "reference's step structure (SSIMULACRA2 uses sigma 1.5).",
))

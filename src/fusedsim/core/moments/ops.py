"""The ``windowed_moments`` op: the five local moments of two images under a separable window, the building block
of SSIM, LNCC, DSSIM and IW-SSIM (``source.py`` renders its Triton code into their kernels)."""

from __future__ import annotations

import torch

from fusedsim.core.examples import SSIM_TOLERANCE, example_pair, example_window
from fusedsim.core.moments.twin import compute_dtype, windowed_moments_ref
from fusedsim.core.registry import Example, KernelOp, register_op


def _moments_fake(x, y, win, valid):
    shrink = win.shape[-1] - 1 if valid else 0
    return x.new_empty((5, *x.shape[:2], *(s - shrink for s in x.shape[2:])), dtype=compute_dtype(x.dtype))


def _moments_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, taps, valid, box) in enumerate([((1, 1, 11, 11), 11, True, False), ((2, 3, 13, 17), 5, False, True),
                                                   ((1, 2, 9, 8, 10), 3, True, True), ((1, 1, 40, 150), 7, False, False)]):
        x, y = example_pair(shape, device, 20 + i)
        out.append(Example((x, y, example_window(taps, shape[1], device, box=box)), (valid,),
                           note=f"{shape} K={taps} valid={valid} box={box}"))
    return out


def _import_triton() -> None:
    """The Triton side, imported on first GPU use: the module registers its plan on the op below."""
    import fusedsim.core.moments.kernel  # noqa: F401


def _import_cpu() -> None:
    """The numba kernel (2-D), imported on first CPU call under ``auto``."""
    import fusedsim.core.moments.cpu  # noqa: F401


windowed_moments = register_op(KernelOp(
    name="windowed_moments",
    schema="(Tensor x, Tensor y, Tensor win, bool valid) -> Tensor",
    n_tensors=3,
    load_triton=_import_triton,
    reference=windowed_moments_ref,
    fake=_moments_fake,
    examples=_moments_examples,
    differentiable=False,
    tolerance=SSIM_TOLERANCE,
    # 2-D on the CPU compiled by numba (the same products, the taps summed in window order rather than conv2d's)
    load_cpu=_import_cpu,
    doc="The five local moments (mu_x, mu_y, E[x²], E[y²], E[xy]) under a separable window, 2-D and 3-D.",
))

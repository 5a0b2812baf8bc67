"""Public ``integer_ssim``: libvmaf's integer SSIM (feature ``ssim``), bit-exact on CPU and GPU."""

from __future__ import annotations

import numpy as np
import torch

from fusedsim.families.vmaf.ops import integer_ssim as integer_ssim_op
from fusedsim.families.vmaf.integer_ssim_twin import SUPPORTED_BIT_DEPTHS
from fusedsim.families.vmaf.inputs import check_bit_depth, frame_pair

__all__ = ["integer_ssim"]


def integer_ssim(ref: torch.Tensor | np.ndarray, dist: torch.Tensor | np.ndarray, bit_depth: int = 8, *,
                 intended_16bit: bool = False) -> torch.Tensor:
    """libvmaf integer SSIM (the ``ssim`` feature) of each frame, bit-identical to libvmaf.

    Args:
        ref, dist: integer luma samples, ``(H, W)`` or ``(N, H, W)``, as torch tensors (any integer dtype, any
            device, any strides) or numpy arrays. Values must lie in ``[0, 2**bit_depth)``. Any size from 1x1
            works (the window's out-of-frame taps are skipped, as in libvmaf).
        bit_depth: 8, 10 or 12. 16-bit input is refused: libvmaf computes ``L*L`` in a 32-bit int that
            overflows at 16 bits, so its 16-bit scores are not SSIM. ``intended_16bit=True`` computes the
            algorithm's intended value with the exact ``L*L`` (it will **not** match libvmaf's output).
        intended_16bit: allow ``bit_depth=16`` with the intended (non-libvmaf) constants.

    Returns:
        float64 tensor on the inputs' device (CPU for numpy): shape ``(N,)``, or ``()`` for ``(H, W)`` inputs.

    Dispatched through the registered op ``integer_ssim``: CUDA tensors run the Triton kernel
    (``fusedsim.families.vmaf.integer_ssim_kernel``); CPU tensors run the numba kernel (``fusedsim.families.vmaf.integer_ssim_cpu``,
    threads: ``numba.set_num_threads``), or the PyTorch twin when numba is missing or ``reference`` is forced. All
    give the same bits (``FUSEDSIM_BACKEND`` / :func:`fusedsim.use_backend` force a backend).
    """
    if not isinstance(intended_16bit, bool):
        raise TypeError(f"intended_16bit must be a bool; got {type(intended_16bit).__name__}")
    if isinstance(bit_depth, int) and not isinstance(bit_depth, bool) and bit_depth == 16 and not intended_16bit:
        raise ValueError(
            "bit_depth=16 is not supported by integer_ssim: libvmaf's integer SSIM overflows a 32-bit int at 16 bits "
            "(L*L with L=65535), so its 16-bit scores are undefined; pass intended_16bit=True for the algorithm's "
            "mathematically intended value (which does not match libvmaf's output), or use float_ssim"
        )
    supported = SUPPORTED_BIT_DEPTHS + ((16,) if intended_16bit else ())
    bd = check_bit_depth(bit_depth, supported, "integer_ssim")
    r, d, squeeze = frame_pair(ref, dist, bd)
    out = integer_ssim_op(r, d, bd)
    return out[0] if squeeze else out

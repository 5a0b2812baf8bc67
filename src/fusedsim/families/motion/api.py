"""Public ``integer_motion``: libvmaf's integer motion features of a whole reference clip, bit-exact."""

from __future__ import annotations

import numpy as np
import torch

from fusedsim.families.motion.stream import MotionStream, concat_columns
from fusedsim.families.motion.twin import MotionOptions

__all__ = ["integer_motion"]


def integer_motion(ref: torch.Tensor | np.ndarray, bit_depth: int = 8, *, options: MotionOptions | None = None,
                   debug: bool = False) -> dict[str, torch.Tensor]:
    """libvmaf's motion features (``integer_motion2``, ``integer_motion3``, ``VMAF_integer_feature_motion_sad_score``
    and, with ``debug``, ``integer_motion``) of every frame of the reference clip, bit-identical to libvmaf 3.2.0.

    Args:
        ref: the reference clip's integer luma ``(N, H, W)`` (or one frame ``(H, W)``), a torch tensor on any
            device or a numpy array; values in ``[0, 2**bit_depth)``, H and W at least 3. Motion reads only the
            reference.
        bit_depth: 8, 10, 12 or 16.
        options: libvmaf's motion options (:class:`~fusedsim.families.motion.twin.MotionOptions`); the default is
            ``vmaf_v0.6.1``'s, ``MotionOptions(max_val=18.0)`` the v1 models'. Non-default options add libvmaf's
            suffix to the names (``integer_motion2_mmxv_18``).
        debug: add the ``integer_motion`` column (libvmaf's ``motion=debug=true``).

    Returns:
        ``{name: (N,) float64 tensor}`` on the clip's device (CPU for numpy), keyed by libvmaf's printed names.

    One :class:`~fusedsim.families.motion.stream.MotionStream` push of the whole clip and its flush; feed the
    stream directly for clips that do not fit in memory. The per-pair op ``integer_motion_sad`` runs the Triton
    kernel on CUDA tensors and the numba kernel on CPU tensors (or the PyTorch twin), all with the same bits.
    """
    stream = MotionStream(bit_depth, options=options, debug=debug)
    first = stream.push(ref)
    return concat_columns((first, stream.flush()))

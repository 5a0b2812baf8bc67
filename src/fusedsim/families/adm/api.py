"""Public ``integer_adm``: libvmaf's integer ADM features, bit-exact on CPU and GPU."""

from __future__ import annotations

import numpy as np
import torch

from fusedsim.families.adm.ops import integer_adm as integer_adm_op
from fusedsim.families.adm.twin import (
    SUPPORTED_BIT_DEPTHS,
    AdmOptions,
    adm_columns,
    check_frame_size,
)
from fusedsim.families.vmaf.inputs import check_bit_depth, frame_pair

__all__ = ["integer_adm"]


def integer_adm(ref: torch.Tensor | np.ndarray, dist: torch.Tensor | np.ndarray, bit_depth: int, *,
                gain_limit: float = 100.0, debug: bool = False, options: AdmOptions | None = None
                ) -> dict[str, torch.Tensor]:
    """libvmaf's integer ADM (feature ``adm``) of each frame pair, bit-identical to libvmaf 3.2.0.

    Args:
        ref, dist: integer luma samples, ``(H, W)`` or ``(N, H, W)``, as torch tensors (any integer dtype, any
            device, any strides) or numpy arrays, values in ``[0, 2**bit_depth)``, at least 33x33.
        bit_depth: 8, 10 or 12.
        gain_limit: libvmaf's ``adm_enhn_gain_limit`` in ``[1, 100]`` (100: the default; ``vmaf_v0.6.1neg``
            uses 1).
        debug: also return libvmaf's debug columns (``integer_adm``, ``integer_adm_num``/``_den`` and their
            per-scale values).
        options: all of libvmaf's ``adm`` options (:class:`~fusedsim.families.adm.twin.AdmOptions`: CSF mode,
            viewing geometry, noise weight, DLM weight, minimum, gain limit), e.g. the v1 models'
            ``AdmOptions(enhn_gain_limit=1.0, csf_mode=2, dlm_weight=0.7, noise_weight=0.02, min_val=0.5)``;
            give ``gain_limit`` or ``options``, not both.

    Returns:
        libvmaf's columns by libvmaf's names (``integer_adm2``, ``integer_aim``, ``integer_adm3``,
        ``integer_adm_scale0..3``, then the debug ones), with libvmaf's suffix for the options that differ from
        the defaults (e.g. ``integer_adm2_egl_1``): float64 tensors on the inputs' device (CPU for numpy), ``(N,)``, or ``()``
        for ``(H, W)`` inputs.

    Dispatched through the op ``integer_adm``: CUDA tensors run the Triton kernels, CPU tensors the numba kernel
    (threads: ``numba.set_num_threads``), or the PyTorch twin when numba is missing or ``reference`` is forced.
    All give the same bits.
    """
    if not isinstance(debug, bool):
        raise TypeError(f"debug must be a bool; got {type(debug).__name__}")
    if options is None:
        options = AdmOptions(enhn_gain_limit=gain_limit)
    elif not isinstance(options, AdmOptions):
        raise TypeError(f"options must be an AdmOptions; got {type(options).__name__}")
    elif gain_limit != 100.0:
        raise ValueError("give gain_limit or options (whose enhn_gain_limit is the gain limit), not both")
    bd = check_bit_depth(bit_depth, SUPPORTED_BIT_DEPTHS, "integer_adm")
    r, d, squeeze = frame_pair(ref, dist, bd)
    height, width = r.shape[-2:]
    check_frame_size(height, width)
    scales = integer_adm_op(r, d, bd, options.enhn_gain_limit, *options.geometry)
    columns = adm_columns(scales, height, width, options, debug)
    return {name: value[0] for name, value in columns.items()} if squeeze else columns

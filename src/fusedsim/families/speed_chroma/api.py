"""Public ``speed_chroma``: libvmaf's SpEED chroma feature, bit-exact on CPU and GPU."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from fusedsim.core.backend import requested_backend
from fusedsim.families.speed_chroma.ops import speed_covariance, speed_residual
from fusedsim.families.speed_chroma.twin import (
    METHOD_CODES,
    SUPPORTED_BIT_DEPTHS,
    SpeedOptions,
    check_plane_size,
    column_names,
    speed_scores_from_residuals,
)
from fusedsim.families.vmaf.inputs import check_bit_depth, frame_pair

__all__ = ["speed_chroma", "start_speed_chroma"]

Planes = torch.Tensor | np.ndarray


def _compiled_statistics() -> bool:
    """The numba build of the GSM statistics unless the twin is forced (``reference``) or numba is missing."""
    return requested_backend() != "reference" and importlib.util.find_spec("numba") is not None


def speed_chroma(ref_u: Planes, ref_v: Planes, dist_u: Planes, dist_v: Planes, bit_depth: int, *,
                 options: SpeedOptions | None = None) -> dict[str, torch.Tensor]:
    """libvmaf's ``speed_chroma`` of each frame's chroma planes, bit-identical to libvmaf 3.2.0.

    Args:
        ref_u, ref_v, dist_u, dist_v: integer Cb and Cr planes of the reference and distorted frames, ``(H, W)`` or
            ``(N, H, W)``, torch tensors (any integer dtype, any device) or numpy arrays, at the size libvmaf reads
            them (``w/2 x h/2`` for 4:2:0 frames of ``w x h``, integer division), values in ``[0, 2**bit_depth)``.
            After the prescale and a decimation by 16 they must hold a 5x5 block: at least 80x80 without a prescale
            (libvmaf crashes below; this raises a ``ValueError`` naming the minimum).
        bit_depth: 8, 10, 12 or 16.
        options: libvmaf's options (:class:`~fusedsim.families.speed_chroma.twin.SpeedOptions`), e.g. the
            ``vmaf_v1.0.16_3d0h`` model's ``SpeedOptions(sigma_nn=0.19, nn_floor=0.1, weight_var_mode=5,
            max_val=45.0)``; libvmaf's defaults when None.

    Returns:
        ``speed_chroma_u``, ``speed_chroma_v`` and ``speed_chroma_uv`` with libvmaf's option suffix (e.g.
        ``speed_chroma_uv_mxv_45_nnf_0.1_snn_0.19_wvm_5``): float64 tensors ``(N,)`` (``()`` for ``(H, W)``
        inputs) on the inputs' device.

    The per-pixel stage runs through the op ``speed_residual`` (Triton on CUDA tensors, numba on CPU tensors).
    The 5x5-block statistics of the small residuals run in libvmaf's float32 order: on a GPU the 25x25 covariance
    through the op ``speed_covariance``; its eigenvalues, a QR solve and the entropies (serial work on a few dozen
    samples a side) on the host, compiled with numba (the twin :mod:`~fusedsim.families.speed_chroma.gsm` when
    the ``reference`` backend is forced).
    """
    return start_speed_chroma(ref_u, ref_v, dist_u, dist_v, bit_depth, options=options)()


def start_speed_chroma(ref_u: Planes, ref_v: Planes, dist_u: Planes, dist_v: Planes, bit_depth: int, *,
                       options: SpeedOptions | None = None) -> Callable[[], dict[str, torch.Tensor]]:
    """:func:`speed_chroma` started: the inputs are checked and the residuals launched now, and the returned
    function gives the columns. On a GPU the residuals are copied to the host behind their kernels, and the host
    statistics run on a worker thread as soon as they land, while the caller queues other work; the function
    waits for them."""
    options = SpeedOptions() if options is None else options
    if not isinstance(options, SpeedOptions):
        raise TypeError(f"options must be a SpeedOptions; got {type(options).__name__}")
    bd = check_bit_depth(bit_depth, SUPPORTED_BIT_DEPTHS, "speed_chroma")
    ru, du, squeeze = frame_pair(ref_u, dist_u, bd, ("ref_u", "dist_u"))
    rv, dv, _ = frame_pair(ref_v, dist_v, bd, ("ref_v", "dist_v"))
    if ru.shape != rv.shape or ru.device != rv.device:
        raise ValueError(f"ref_u and ref_v must have the same shape and device; got {tuple(ru.shape)} on "
                         f"{ru.device} and {tuple(rv.shape)} on {rv.device}")
    check_plane_size(*ru.shape[-2:], options)
    scalars = (bd, options.prescale, METHOD_CODES[options.prescale_method], options.kernelscale)
    residuals = [speed_residual(p, *scalars) for p in (ru, rv, du, dv)]
    device = ru.device

    def columns(scores: torch.Tensor) -> dict[str, torch.Tensor]:
        named = {name: scores[:, k] for k, name in enumerate(column_names(options))}
        return {name: value[0] for name, value in named.items()} if squeeze else named

    if device.type != "cuda" or not _compiled_statistics():
        scores = speed_scores_from_residuals(*residuals, options, compiled=_compiled_statistics()).to(device)
        return lambda: columns(scores)
    stacked = torch.stack(residuals, 1)
    n, planes, h, w = stacked.shape
    covariances = speed_covariance(stacked.view(n * planes, h, w)).view(n, planes, 25, 25)
    host = [torch.empty(t.shape, dtype=torch.float32, pin_memory=True) for t in (stacked, covariances)]
    for target, source in zip(host, (stacked, covariances)):
        target.copy_(source, non_blocking=True)
    landed = torch.cuda.Event()
    landed.record(torch.cuda.current_stream(device))
    pending = _statistics_worker().submit(_host_scores, landed, *host, options)
    return lambda: columns(torch.from_numpy(pending.result()).to(device))


def _host_scores(landed: torch.cuda.Event, residuals: torch.Tensor, covariances: torch.Tensor,
                 options: SpeedOptions) -> np.ndarray:
    import numba

    from fusedsim.families.speed_chroma.gsm_cpu import speed_scores_many

    # one core fewer than numba's default, for this worker thread only: the caller's thread keeps queueing GPU work
    numba.set_num_threads(max(1, numba.config.NUMBA_NUM_THREADS - 1))
    landed.synchronize()
    return speed_scores_many(residuals.numpy(), options.sigma_nn, options.nn_floor, options.weight_var_mode,
                             options.max_val, covariances.numpy())


_WORKER: list[ThreadPoolExecutor] = []


def _statistics_worker() -> ThreadPoolExecutor:
    """One thread for the GPU path's host statistics (numba's parallel loops release the GIL)."""
    if not _WORKER:
        _WORKER.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="fusedsim-speed"))
    return _WORKER[0]

"""Registry of the VMAF features that ``fusedsim vmaf`` computes on decoded frame batches.

``extract(feature, ref, dist, device)`` takes two frame batches (any object with ``y``, ``u``, ``v`` integer
arrays of shape ``(n, H, W)`` / ``(n, Hc, Wc)``, ``bit_depth`` and ``first_index``, such as
``fusedsim.io.video.FrameBatch``) and returns per-frame float64 arrays keyed by libvmaf's metric names, exactly as
libvmaf's CLI reports them by default:

| feature | outputs | algorithm |
|---|---|---|
| ``ssim`` | ``ssim`` | libvmaf integer SSIM (luma), bit-exact on CPU and GPU |
| ``float_ssim`` | ``float_ssim`` | libvmaf float SSIM (luma, auto-downscale), bit-exact |
| ``float_ms_ssim`` | ``float_ms_ssim`` | libvmaf 5-scale MS-SSIM (luma), bit-exact; frames >= 176x176 |
| ``psnr`` | ``psnr_y``, ``psnr_cb``, ``psnr_cr`` | libvmaf PSNR, capped at 6*bits+12 dB |

A feature is always computed by its own algorithm: a device that cannot run it is an error, never a substitute.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fusedsim.backend import BackendUnavailableError

__all__ = ["SUPPORTED_FEATURES", "extract", "resolve_device"]

SUPPORTED_FEATURES: tuple[str, ...] = ("ssim", "float_ssim", "float_ms_ssim", "psnr")
DEVICES = ("auto", "cpu", "cuda")


def resolve_device(device: torch.device | str = "auto") -> torch.device:
    """``"auto"`` -> CUDA if available else CPU; ``"cuda"`` without a GPU is an error."""
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str):
        name = device.strip().lower()
        if name == "auto":
            return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
        try:
            dev = torch.device(name)
        except RuntimeError as exc:
            raise ValueError(f"device must be one of {', '.join(DEVICES)} (or a torch device); got {device!r}") from exc
    else:
        raise TypeError(f"device must be a str or torch.device; got {type(device).__name__}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise BackendUnavailableError(f"device {device!r} was asked for, but CUDA is not available on this machine; "
                                      "use device='cpu' or 'auto'")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be cpu or cuda; got {device!r}")
    return dev


def _planes(batch: Any, role: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    try:
        y, u, v, bd = batch.y, batch.u, batch.v, batch.bit_depth
    except AttributeError as exc:
        raise TypeError(f"{role} must be a frame batch with y, u, v and bit_depth attributes; got "
                        f"{type(batch).__name__}") from exc
    return y, u, v, int(bd)


def _to_device(a: np.ndarray, dev: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a)).to(dev)


def _numpy(values: torch.Tensor) -> np.ndarray:
    return values.detach().to("cpu", torch.float64).numpy().reshape(-1).copy()


def extract(feature: str, ref: Any, dist: Any, device: torch.device | str = "auto") -> dict[str, np.ndarray]:
    """Per-frame values of one feature for two frame batches; see the module table for the outputs.

    Raises ``ValueError`` for an unknown feature (listing :data:`SUPPORTED_FEATURES`), mismatched batches or bad
    samples, and :class:`~fusedsim.backend.BackendUnavailableError` when ``device="cuda"`` has no GPU.
    """
    if feature not in SUPPORTED_FEATURES:
        raise ValueError(f"unknown feature {feature!r}; supported features: {', '.join(SUPPORTED_FEATURES)}")
    dev = resolve_device(device)
    ry, ru, rv, bd = _planes(ref, "ref")
    dy, du, dv, dbd = _planes(dist, "dist")
    if bd != dbd:
        raise ValueError(f"ref and dist must have the same bit depth; got {bd} and {dbd}")

    from fusedsim import vmaf

    if feature == "ssim":
        values = vmaf.integer_ssim(_to_device(ry, dev), _to_device(dy, dev), bd)
        return {"ssim": _numpy(values)}
    if feature == "float_ssim":
        out = vmaf.float_ssim(_to_device(ry, dev), _to_device(dy, dev), bd)
        return {"float_ssim": _numpy(out["float_ssim"])}
    if feature == "float_ms_ssim":
        out = vmaf.float_ms_ssim(_to_device(ry, dev), _to_device(dy, dev), bd)
        return {"float_ms_ssim": _numpy(out["float_ms_ssim"])}
    # psnr
    out = vmaf.psnr([_to_device(p, dev) for p in (ry, ru, rv)], [_to_device(p, dev) for p in (dy, du, dv)], bd)
    return {name: _numpy(v) for name, v in out.items()}

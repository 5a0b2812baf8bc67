"""libvmaf's ``psnr`` feature (``psnr_y``, ``psnr_cb``, ``psnr_cr``), bit for bit.

Per plane: ``sse`` is the exact integer sum of squared differences, ``mse = double(sse) / (w*h)`` and
``psnr = min(10 * log10(peak^2 / max(mse, 1e-16)), 6*bit_depth + 12)`` with ``peak = 2**bit_depth - 1``.
The cap is 60 dB at 8 bit, 72 dB at 10 bit, 84 dB at 12 bit and 108 dB at 16 bit; identical planes hit it.
The per-frame ``log10`` is the C library's (through :func:`math.log10`), as in libvmaf.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["psnr_cap", "psnr_plane_ref"]


def psnr_cap(bit_depth: int) -> float:
    """libvmaf's ceiling for ``psnr_*``: ``6 * bit_depth + 12`` dB."""
    return float(6 * bit_depth + 12)


def psnr_plane_ref(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int) -> np.ndarray:
    """PSNR per frame of one plane, integer ``(N, H, W)`` tensors; returns a float64 numpy array ``(N,)``."""
    n, h, w = ref.shape
    diff = ref.to(torch.int64) - dist.to(torch.int64)
    sse = (diff * diff).reshape(n, -1).sum(dim=1).cpu().tolist()
    peak = (1 << bit_depth) - 1
    peak2 = float(peak * peak)
    cap = psnr_cap(bit_depth)
    out = np.empty(n, dtype=np.float64)
    for i, s in enumerate(sse):
        mse = float(s) / float(w * h)
        out[i] = min(10.0 * math.log10(peak2 / max(mse, 1e-16)), cap)
    return out

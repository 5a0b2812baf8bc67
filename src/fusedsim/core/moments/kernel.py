"""The windowed-moments building block as an op: the five local moment maps of two images.

    windowed_moments(x, y, win, valid) -> (5, N, C, [D',] H', W'): mu_x, mu_y, E[x²], E[y²], E[xy]

under the separable per-channel window ``win`` (C, K) (any odd K: Gaussian, box = a constant row), zero padding
(``valid=False``, full size) or the valid region. Computed by the same streaming source as the SSIM kernels
(``moments_source.py``); metrics that need the moments themselves (LNCC, DSSIM, IW-SSIM) build on it.
Forward only for now (accumulation dtype float32, float64 for float64 inputs).
"""

from __future__ import annotations

import torch
import triton

from fusedsim.core.codegen import jit_from_source
from fusedsim.core.launch import Launcher
from fusedsim.core.moments.source import render_moments
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.core.moments.ops import windowed_moments
from fusedsim.core.state import cached


@cached(maxsize=None)
def _kernel(taps: int, three_d: bool):
    name = f"_windowed_moments_{'3d' if three_d else '2d'}_k{taps}_kernel"
    return jit_from_source(name, render_moments(taps, three_d, name))


class MomentsPlan:
    def __init__(self, shape, sx, sy, dtype: torch.dtype, taps: int, valid: bool) -> None:
        import triton.language as tl

        three_d = len(shape) == 5
        n, c = shape[:2]
        d, h, w = shape[2:] if three_d else (1, *shape[2:])
        shrink = taps - 1 if valid else 0
        do, ho, wo = (d - shrink if three_d else 1), h - shrink, w - shrink
        s5 = (lambda s: tuple(s) if three_d else (s[0], s[1], 0, s[2], s[3]))
        self.acc = compute_dtype(dtype)
        self.out_shape = (5, n, c) + ((do,) if three_d else ()) + (ho, wo)
        block_w = min(128, max(16, triton.next_power_of_2(wo)))
        rows = 128
        grid = (triton.cdiv(wo, block_w), triton.cdiv(ho, rows), n * c * do)
        self._launch = Launcher(_kernel(taps, three_d), grid, num_warps=max(1, block_w // 32), enable_fp_fusion=True)
        self._tail = (c, d, h, w, do, ho, wo, *s5(sx), *s5(sy), taps // 2 if valid else 0, block_w, rows,
                      tl.float64 if self.acc == torch.float64 else tl.float32)

    def forward(self, x: torch.Tensor, y: torch.Tensor, win: torch.Tensor):
        out = torch.empty(self.out_shape, dtype=self.acc, device=x.device)
        self._launch(x, y, win, out, *self._tail)
        return out, ()


@cached(maxsize=128)
def _plan(shape, sx, sy, dtype, taps, valid) -> MomentsPlan:
    return MomentsPlan(shape, sx, sy, dtype, taps, valid)


@windowed_moments.triton_plan
def moments_op_plan(tensors, scalars) -> MomentsPlan:
    x, y, win = tensors
    (valid,) = scalars
    return _plan(tuple(x.shape), x.stride(), y.stride(), x.dtype, win.shape[-1], bool(valid))

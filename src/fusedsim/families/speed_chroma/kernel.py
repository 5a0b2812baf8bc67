"""SpEED chroma's residual on the GPU (Triton): the anti-alias blur evaluated only at the samples the decimation by
16 keeps, from the integer plane (and the prescale's bilinear or nearest tables) in one pass; then the 3-tap
local-mean removal on the small decimated plane (the twin's elementwise steps on the device).

Bit-identical to the twin: every sample is ``float(s) * 2**-(bpc-8) - 128`` (an exact scaling), the prescale and
both filter passes are float32 multiply-adds in libvmaf's order with contraction off (``enable_fp_fusion=False``).
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from fusedsim.core.launch import on_tensors_device
from fusedsim.families.speed_chroma.ops import speed_residual
from fusedsim.families.speed_chroma.twin import (
    antialias_taps,
    local_mean_residual,
    op_options,
    operating_size,
    sample_tables,
)

__all__ = ["speed_decimated_fwd", "speed_residual_fwd"]

_BLOCK = 128  # decimated samples per program


@triton.jit
def _reflect(i, n):
    i = tl.where(i < 0, -i, i)
    return tl.where(i >= n, 2 * n - 2 - i, i)


@triton.jit
def _sample(src_ptr, r, c, y1_ptr, y2_ptr, dy_ptr, x1_ptr, x2_ptr, dx_ptr, s_row, ok, SCALE, OFFSET,
            SCALED: tl.constexpr):
    """The (prescaled) float sample at row ``r``, column ``c`` of the plane behind ``src_ptr``."""
    if SCALED:
        ya = tl.load(y1_ptr + r, mask=ok, other=0)
        yb = tl.load(y2_ptr + r, mask=ok, other=0)
        dy = tl.load(dy_ptr + r, mask=ok, other=0.0)
        xa = tl.load(x1_ptr + c, mask=ok, other=0)
        xb = tl.load(x2_ptr + c, mask=ok, other=0)
        dx = tl.load(dx_ptr + c, mask=ok, other=0.0)
        a = tl.load(src_ptr + ya * s_row + xa, mask=ok, other=0).to(tl.float32) * SCALE + OFFSET
        b = tl.load(src_ptr + ya * s_row + xb, mask=ok, other=0).to(tl.float32) * SCALE + OFFSET
        c_ = tl.load(src_ptr + yb * s_row + xa, mask=ok, other=0).to(tl.float32) * SCALE + OFFSET
        d = tl.load(src_ptr + yb * s_row + xb, mask=ok, other=0).to(tl.float32) * SCALE + OFFSET
        return ((((1.0 - dy) * (1.0 - dx)) * a + ((1.0 - dy) * dx) * b) + (dy * (1.0 - dx)) * c_) + (dy * dx) * d
    else:
        return tl.load(src_ptr + r * s_row + c, mask=ok, other=0).to(tl.float32) * SCALE + OFFSET


@triton.jit
def _decimate_kernel(src_ptr, out_ptr, taps_ptr, y1_ptr, y2_ptr, dy_ptr, x1_ptr, x2_ptr, dx_ptr,
                     h, w, oh, ow, s_frame, s_row, SCALE, OFFSET,
                     T: tl.constexpr, SCALED: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    frame = tl.program_id(1)
    idx = pid * BLOCK + tl.arange(0, BLOCK)
    ok = idx < oh * ow
    row0 = (idx // ow) * 16
    col0 = (idx % ow) * 16
    src = src_ptr + frame.to(tl.int64) * s_frame
    out = tl.zeros([BLOCK], dtype=tl.float32)
    for t in tl.static_range(T):  # horizontal taps, each over the vertical pass at its column
        c = _reflect(col0 - T // 2 + t, w)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for k in tl.static_range(T):
            r = _reflect(row0 - T // 2 + k, h)
            x = _sample(src, r, c, y1_ptr, y2_ptr, dy_ptr, x1_ptr, x2_ptr, dx_ptr, s_row, ok, SCALE, OFFSET, SCALED)
            acc = acc + tl.load(taps_ptr + k) * x
        out = out + tl.load(taps_ptr + t) * acc
    tl.store(out_ptr + frame.to(tl.int64) * oh * ow + idx, out, mask=ok)


@on_tensors_device
def speed_decimated_fwd(plane: torch.Tensor, bit_depth: int, prescale: float = 1.0, method: int = 0,
                        kernelscale: float = 1.0) -> torch.Tensor:
    """Steps 1-4 (float, prescale, anti-alias blur, decimation): ``(N, H', W')`` float32 on the plane's device."""
    options = op_options(prescale, method, kernelscale)
    n, h, w = plane.shape
    oh, ow = operating_size(h, w, options)
    dev = plane.device
    out = torch.empty(n, oh, ow, dtype=torch.float32, device=dev)
    if n == 0 or oh == 0 or ow == 0:
        return out
    src = plane if plane.dtype in (torch.uint8, torch.int16, torch.int32) else plane.to(torch.int32)
    src = src.contiguous()
    if src.dtype == torch.int16:  # uint16 samples stored as int16: widen so the top bit is not a sign
        src = src.to(torch.int32) & 0xFFFF
    tables = sample_tables(h, w, options, dev)
    scaled = tables is not None
    if not scaled:
        one = torch.zeros(1, dtype=torch.int64, device=dev)
        tables = (one, one, one.float(), one, one, one.float())
    sh = tables[0].shape[0] if scaled else h
    sw = tables[3].shape[0] if scaled else w
    taps = torch.tensor(antialias_taps(kernelscale), dtype=torch.float32, device=dev)
    scale = float(np.float32(1.0) / np.float32({8: 1, 10: 4, 12: 16, 16: 256}[bit_depth]))
    grid = (triton.cdiv(oh * ow, _BLOCK), n)
    _decimate_kernel[grid](src, out, taps, *tables, sh, sw, oh, ow, src.stride(0), src.stride(1), scale, -128.0,
                           T=taps.shape[0], SCALED=scaled, BLOCK=_BLOCK, enable_fp_fusion=False)
    return out


@speed_residual.triton_launcher
def speed_residual_fwd(plane: torch.Tensor, bit_depth: int, prescale: float = 1.0, method: int = 0,
                       kernelscale: float = 1.0) -> torch.Tensor:
    """The op ``speed_residual`` on the plane's device: ``(N, H', W')`` float32, the twin's bits."""
    d = speed_decimated_fwd(plane, bit_depth, prescale, method, kernelscale)
    return local_mean_residual(d, kernelscale)

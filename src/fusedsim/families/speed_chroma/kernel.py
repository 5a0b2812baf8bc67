"""SpEED chroma's residual on the GPU (Triton): the anti-alias blur evaluated only at the samples the decimation by
16 keeps, from the integer plane (and the prescale's bilinear or nearest tables) in one pass; then the local-mean
removal on the small decimated plane in a second. Two launches per plane stack, the filters and sample tables made
once per size (a tensor built on a GPU from host values is a synchronising copy).

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
    local_mean_taps,
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
def _value(ptr, ok, SCALE, OFFSET, UNSIGNED16: tl.constexpr):
    """libvmaf's float sample of the integer at ``ptr``; ``UNSIGNED16``: int16 storage of uint16 samples."""
    x = tl.load(ptr, mask=ok, other=0).to(tl.int32)
    if UNSIGNED16:
        x = x & 0xFFFF
    return x.to(tl.float32) * SCALE + OFFSET


@triton.jit
def _sample(src_ptr, r, c, y1_ptr, y2_ptr, dy_ptr, x1_ptr, x2_ptr, dx_ptr, s_row, ok, SCALE, OFFSET,
            SCALED: tl.constexpr, UNSIGNED16: tl.constexpr):
    """The (prescaled) float sample at row ``r``, column ``c`` of the plane behind ``src_ptr``."""
    if SCALED:
        ya = tl.load(y1_ptr + r, mask=ok, other=0)
        yb = tl.load(y2_ptr + r, mask=ok, other=0)
        dy = tl.load(dy_ptr + r, mask=ok, other=0.0)
        xa = tl.load(x1_ptr + c, mask=ok, other=0)
        xb = tl.load(x2_ptr + c, mask=ok, other=0)
        dx = tl.load(dx_ptr + c, mask=ok, other=0.0)
        a = _value(src_ptr + ya * s_row + xa, ok, SCALE, OFFSET, UNSIGNED16)
        b = _value(src_ptr + ya * s_row + xb, ok, SCALE, OFFSET, UNSIGNED16)
        c_ = _value(src_ptr + yb * s_row + xa, ok, SCALE, OFFSET, UNSIGNED16)
        d = _value(src_ptr + yb * s_row + xb, ok, SCALE, OFFSET, UNSIGNED16)
        return ((((1.0 - dy) * (1.0 - dx)) * a + ((1.0 - dy) * dx) * b) + (dy * (1.0 - dx)) * c_) + (dy * dx) * d
    else:
        return _value(src_ptr + r * s_row + c, ok, SCALE, OFFSET, UNSIGNED16)


@triton.jit
def _decimate_kernel(src_ptr, out_ptr, taps_ptr, y1_ptr, y2_ptr, dy_ptr, x1_ptr, x2_ptr, dx_ptr,
                     h, w, oh, ow, s_frame, s_row, SCALE, OFFSET,
                     T: tl.constexpr, SCALED: tl.constexpr, UNSIGNED16: tl.constexpr, BLOCK: tl.constexpr):
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
            x = _sample(src, r, c, y1_ptr, y2_ptr, dy_ptr, x1_ptr, x2_ptr, dx_ptr, s_row, ok, SCALE, OFFSET, SCALED,
                        UNSIGNED16)
            acc = acc + tl.load(taps_ptr + k) * x
        out = out + tl.load(taps_ptr + t) * acc
    tl.store(out_ptr + frame.to(tl.int64) * oh * ow + idx, out, mask=ok)


@triton.jit
def _local_mean_kernel(d_ptr, out_ptr, taps_ptr, oh, ow, T: tl.constexpr, BLOCK: tl.constexpr):
    """Step 5: each decimated sample minus its local mean (the separable filter, vertical then horizontal, each a
    float32 multiply-add chain in the twin's order, libvmaf's reflection at the borders)."""
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    frame = tl.program_id(1).to(tl.int64)
    ok = idx < oh * ow
    r = idx // ow
    c = idx % ow
    base = d_ptr + frame * oh * ow
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    for t in tl.static_range(T):
        cc = _reflect(c - T // 2 + t, ow)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for k in tl.static_range(T):
            rr = _reflect(r - T // 2 + k, oh)
            acc = acc + tl.load(taps_ptr + k) * tl.load(base + rr * ow + cc, mask=ok, other=0.0)
        mean = mean + tl.load(taps_ptr + t) * acc
    tl.store(out_ptr + frame * oh * ow + idx, tl.load(base + idx, mask=ok, other=0.0) - mean, mask=ok)


_FILTERS: dict[tuple, tuple] = {}


def _filters(h: int, w: int, prescale: float, method: int, kernelscale: float, device: torch.device) -> tuple:
    """Per plane size and options, made once: the anti-alias and local-mean taps, whether a prescale applies,
    the sample tables (placeholders without a prescale) and the prescaled size."""
    key = (h, w, prescale, method, kernelscale, device)
    if key not in _FILTERS:
        options = op_options(prescale, method, kernelscale)
        tables = sample_tables(h, w, options, device)
        scaled = tables is not None
        if not scaled:
            one = torch.zeros(1, dtype=torch.int64, device=device)
            tables = (one, one, one.float(), one, one, one.float())
        size = (tables[0].shape[0], tables[3].shape[0]) if scaled else (h, w)
        _FILTERS[key] = (torch.tensor(antialias_taps(kernelscale), dtype=torch.float32, device=device),
                         torch.tensor(local_mean_taps(kernelscale), dtype=torch.float32, device=device),
                         scaled, tables, size)
    return _FILTERS[key]


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
    if src.stride(-1) != 1:
        src = src.contiguous()
    taps, _, scaled, tables, (sh, sw) = _filters(h, w, prescale, method, kernelscale, dev)
    scale = float(np.float32(1.0) / np.float32({8: 1, 10: 4, 12: 16, 16: 256}[bit_depth]))
    grid = (triton.cdiv(oh * ow, _BLOCK), n)
    _decimate_kernel[grid](src, out, taps, *tables, sh, sw, oh, ow, src.stride(0), src.stride(1), scale, -128.0,
                           T=taps.shape[0], SCALED=scaled, UNSIGNED16=src.dtype == torch.int16, BLOCK=_BLOCK,
                           enable_fp_fusion=False)
    return out


@speed_residual.triton_launcher
def speed_residual_fwd(plane: torch.Tensor, bit_depth: int, prescale: float = 1.0, method: int = 0,
                       kernelscale: float = 1.0) -> torch.Tensor:
    """The op ``speed_residual`` on the plane's device: ``(N, H', W')`` float32, the twin's bits."""
    d = speed_decimated_fwd(plane, bit_depth, prescale, method, kernelscale)
    return _minus_local_mean(d, _filters(*plane.shape[-2:], prescale, method, kernelscale, d.device)[1])


@on_tensors_device
def _minus_local_mean(d: torch.Tensor, taps: torch.Tensor) -> torch.Tensor:
    """Step 5 of decimated planes ``(N, H', W')`` float32: ``d`` minus its local mean (filter ``taps``)."""
    out = torch.empty_like(d)
    n, oh, ow = d.shape
    if d.numel():
        _local_mean_kernel[(triton.cdiv(oh * ow, _BLOCK), n)](d, out, taps, oh, ow, T=taps.shape[0], BLOCK=_BLOCK,
                                                              enable_fp_fusion=False)
    return out

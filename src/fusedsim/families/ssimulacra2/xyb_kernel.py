"""SSIMULACRA2's colour step as one Triton kernel: sRGB (or the previous scale's linear RGB, 2x2-averaged) ->
XYB, and the linear RGB image the next scale averages.

    ssimulacra2_linear_xyb(x, scale) -> (1, N, 3, H, W) [XYB] for scale 0, else (2, N, 3, h, w) [linear RGB, XYB]

x: (N, 3, H, W) any strides. Scales 0 and 1 read the sRGB image, uint8 (read as float32(1/255)·v, like the
reference) or float32 in [0, 1]; scale 1 linearises four samples per output pixel and averages them, so scale
0's full-size linear image (12 bytes a pixel, written and read back) never exists. Scales >= 2 read the float32
linear image of the previous scale. Downsampled outputs are ceil(H/2) x ceil(W/2), the last row/column
repeated. Twin:
:func:`fusedsim.families.ssimulacra2.twin.ssimulacra2_linear_xyb_ref` (formulas in ``reference/xyb_ref.py``).
The arithmetic is the reference's float32, FMA where it fuses, IEEE division (``div_rn``); the kernel compiles
without fp fusion so nothing else is contracted.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
import fusedsim.core.xyb.twin as X
from fusedsim.families.ssimulacra2.ops import ssimulacra2_linear_xyb

_BLOCK = 256

# float32 constants of the reference (exactly representable: Triton types Python floats as fp32)
_M = [tl.constexpr(v) for row in X.OPSIN_MATRIX for v in row]
_BIAS = tl.constexpr(X.OPSIN_BIAS)
_NEG_CBRT_BIAS = tl.constexpr(X.NEG_CBRT_BIAS)
_P = [tl.constexpr(v) for v in X.SRGB_P]
_Q = [tl.constexpr(v) for v in X.SRGB_Q]
_THRESH = tl.constexpr(X.SRGB_THRESHOLD)
_LOW_INV = tl.constexpr(X.SRGB_LOW_INV)
_U8 = tl.constexpr(X.UINT8_SCALE)
_THIRD = tl.constexpr(X._THIRD)
_FOUR_THIRDS = tl.constexpr(X._FOUR_THIRDS)
_X_OFF, _Y_OFF, _B_OFF = tl.constexpr(X._X_OFFSET), tl.constexpr(X._Y_OFFSET), tl.constexpr(X._B_OFFSET)
_M00, _M01, _M02, _M10, _M11, _M12, _M20, _M21, _M22 = _M
_P0, _P1, _P2, _P3, _P4 = _P
_Q0, _Q1, _Q2, _Q3, _Q4 = _Q


@triton.jit
def srgb_to_linear(v):
    """libjxl's rational sRGB EOTF (Horner with FMA, IEEE division), odd-symmetric."""
    x = tl.abs(v)
    yp = tl.fma(tl.fma(tl.fma(tl.fma(_P4, x, _P3), x, _P2), x, _P1), x, _P0)
    yq = tl.fma(tl.fma(tl.fma(tl.fma(_Q4, x, _Q3), x, _Q2), x, _Q1), x, _Q0)
    magnitude = tl.where(x > _THRESH, tl.math.div_rn(yp, yq), x * _LOW_INV)
    return tl.where(v < 0, -magnitude, magnitude)


@triton.jit
def cube_root_and_add(x, add):
    """libjxl's CubeRootAndAdd for x >= 0: Newton on 1/cbrt(x) from an exponent-bit guess, then r²·x + add."""
    bits = x.to(tl.int32, bitcast=True)
    guess = tl.where(bits == 0, 0, 0x54800000 - (bits >> 23) * 0x002AAAAA)
    r = guess.to(tl.float32, bitcast=True)
    x_third = x * _THIRD
    for _ in tl.static_range(3):
        r2 = r * r
        r = tl.fma(-x_third, r2 * r2, r * _FOUR_THIRDS)
    r2 = r * r
    r = tl.fma(_THIRD, tl.fma(-x, r2 * r2, r), r)
    return tl.fma(r * r, x, add)


@triton.jit
def linear_to_xyb(r, g, b):
    """Opsin absorbance, cube root, XYB and SSIMULACRA2's positive offsets (float32)."""
    m0 = cube_root_and_add(tl.maximum(tl.fma(_M00, r, tl.fma(_M01, g, tl.fma(_M02, b, _BIAS))), 0.0), _NEG_CBRT_BIAS)
    m1 = cube_root_and_add(tl.maximum(tl.fma(_M10, r, tl.fma(_M11, g, tl.fma(_M12, b, _BIAS))), 0.0), _NEG_CBRT_BIAS)
    m2 = cube_root_and_add(tl.maximum(tl.fma(_M20, r, tl.fma(_M21, g, tl.fma(_M22, b, _BIAS))), 0.0), _NEG_CBRT_BIAS)
    x = (m0 - m1) * 0.5
    y = (m0 + m1) * 0.5
    return x * 14.0 + _X_OFF, y + _Y_OFF, (m2 - y) + _B_OFF


@triton.jit
def _srgb_u8_table_kernel(OUT):
    """Every byte's linear value, by the same float32 operations as :func:`_srgb_sample` on a uint8 sample."""
    v = tl.arange(0, 256)
    tl.store(OUT + v, srgb_to_linear(v.to(tl.float32) * _U8))


_U8_TABLES: dict[torch.device, torch.Tensor] = {}


def srgb_u8_table(device: torch.device) -> torch.Tensor | None:
    """(256,) float32 on ``device``: the linear value of each sRGB byte, computed once per device by the kernels'
    own float32 formula (so a lookup is bit-identical to the conversion). None while a CUDA graph is being
    captured and the table does not exist yet (the kernels then convert each sample; same numbers)."""
    table = _U8_TABLES.get(device)
    if table is None:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            return None
        table = torch.empty(256, dtype=torch.float32, device=device)
        fill = Launcher(_srgb_u8_table_kernel, (1,), num_warps=4, enable_fp_fusion=False)
        if device.type == "cuda":
            with torch.cuda.device(device):  # Triton launches on the current device
                fill(table)
        else:
            fill(table)
        _U8_TABLES[device] = table
    return table


@triton.jit
def _srgb_sample(X, offs, mask, TABLE, IS_U8: tl.constexpr, USE_TABLE: tl.constexpr):
    """The linearised sRGB sample at ``offs`` (uint8 read as float32(1/255)·v, like the reference; with
    ``USE_TABLE`` looked up in :func:`srgb_u8_table`: the rational function's two Horner chains and IEEE division,
    12 of them per pixel at scale 1, were most of this kernel's instructions)."""
    v = tl.load(X + offs, mask=mask, other=0)
    if USE_TABLE:
        lin = tl.load(TABLE + v.to(tl.int32))
    else:
        v = v.to(tl.float32) * _U8 if IS_U8 else v.to(tl.float32)
        lin = srgb_to_linear(v)
    return lin


@triton.jit
def _load_linear(X, TABLE, base, y, x, in_h, in_w, sxc, sxh, sxw, c: tl.constexpr, mask, DOWNSAMPLE: tl.constexpr,
                 FROM_SRGB: tl.constexpr, IS_U8: tl.constexpr, USE_TABLE: tl.constexpr):
    """Channel c of linear RGB at the output pixels: linearised sRGB, or a 2x2 average of the previous scale's
    linear image (``FROM_SRGB``: of the sRGB image linearised on the fly), summed in the reference's order."""
    cb = base + c * sxc
    if DOWNSAMPLE:
        y0 = (2 * y).to(tl.int64) * sxh
        x0 = (2 * x).to(tl.int64) * sxw
        y1 = tl.minimum(2 * y + 1, in_h - 1).to(tl.int64) * sxh
        x1 = tl.minimum(2 * x + 1, in_w - 1).to(tl.int64) * sxw
        if FROM_SRGB:
            s = _srgb_sample(X, cb + y0 + x0, mask, TABLE, IS_U8, USE_TABLE)
            s = s + _srgb_sample(X, cb + y0 + x1, mask, TABLE, IS_U8, USE_TABLE)
            s = s + _srgb_sample(X, cb + y1 + x0, mask, TABLE, IS_U8, USE_TABLE)
            s = s + _srgb_sample(X, cb + y1 + x1, mask, TABLE, IS_U8, USE_TABLE)
        else:
            s = tl.load(X + cb + y0 + x0, mask=mask, other=0.0)
            s = s + tl.load(X + cb + y0 + x1, mask=mask, other=0.0)
            s = s + tl.load(X + cb + y1 + x0, mask=mask, other=0.0)
            s = s + tl.load(X + cb + y1 + x1, mask=mask, other=0.0)
        lin = s * 0.25
    else:
        lin = _srgb_sample(X, cb + y.to(tl.int64) * sxh + x.to(tl.int64) * sxw, mask, TABLE, IS_U8, USE_TABLE)
    return lin


@triton.jit
def _linear_xyb_kernel(X, OUT, TABLE, in_h, in_w, h, w, sxn, sxc, sxh, sxw, xyb_offset,
                       DOWNSAMPLE: tl.constexpr, FROM_SRGB: tl.constexpr, KEEP_LINEAR: tl.constexpr,
                       IS_U8: tl.constexpr, BLOCK: tl.constexpr, USE_TABLE: tl.constexpr):
    pid = tl.program_id(0)
    n = tl.program_id(1)
    idx = pid * BLOCK + tl.arange(0, BLOCK)
    mask = idx < h * w
    y = idx // w
    x = idx % w
    base = n.to(tl.int64) * sxn
    r = _load_linear(X, TABLE, base, y, x, in_h, in_w, sxc, sxh, sxw, 0, mask, DOWNSAMPLE, FROM_SRGB, IS_U8,
                     USE_TABLE)
    g = _load_linear(X, TABLE, base, y, x, in_h, in_w, sxc, sxh, sxw, 1, mask, DOWNSAMPLE, FROM_SRGB, IS_U8,
                     USE_TABLE)
    b = _load_linear(X, TABLE, base, y, x, in_h, in_w, sxc, sxh, sxw, 2, mask, DOWNSAMPLE, FROM_SRGB, IS_U8,
                     USE_TABLE)
    cx, cy, cb = linear_to_xyb(r, g, b)
    plane = h * w
    out = OUT + n.to(tl.int64) * 3 * plane + idx
    if KEEP_LINEAR:
        tl.store(out, r, mask=mask)
        tl.store(out + plane, g, mask=mask)
        tl.store(out + 2 * plane, b, mask=mask)
    tl.store(out + xyb_offset, cx, mask=mask)
    tl.store(out + xyb_offset + plane, cy, mask=mask)
    tl.store(out + xyb_offset + 2 * plane, cb, mask=mask)


class LinearXybPlan:
    """One (shape, strides, dtype, scale) specialisation: forward(x) -> ((1 or 2, N, 3, h, w), ())."""

    def __init__(self, shape, strides, dtype: torch.dtype, scale: int) -> None:
        n, _, in_h, in_w = shape
        downsample = scale > 0
        h, w = ((in_h + 1) // 2, (in_w + 1) // 2) if downsample else (in_h, in_w)
        outputs = 2 if downsample else 1  # scale 0 keeps no linear image (scale 1 reads the sRGB image again)
        self.out_shape = (outputs, n, 3, h, w)
        grid = (triton.cdiv(h * w, _BLOCK), n)
        self._reads_bytes = dtype == torch.uint8 and scale <= 1
        # one launcher per variant (a launcher's compiled kernel is fixed by its first call's constexprs); the table
        # variant only where bytes are read
        self._launch = {use: Launcher(_linear_xyb_kernel, grid, num_warps=4, enable_fp_fusion=False)
                        for use in ((False, True) if self._reads_bytes else (False,))}
        self._tail = (in_h, in_w, h, w, *strides, (outputs - 1) * n * 3 * h * w, downsample, scale <= 1,
                      downsample, dtype == torch.uint8, _BLOCK)

    def forward(self, x: torch.Tensor):
        out = torch.empty(self.out_shape, dtype=torch.float32, device=x.device)
        table = srgb_u8_table(x.device) if self._reads_bytes else None
        use = table is not None
        self._launch[use](x, out, table if use else out, *self._tail, use)
        return out, ()


@cached(maxsize=128)
def _plan(shape, strides, dtype, scale) -> LinearXybPlan:
    return LinearXybPlan(shape, strides, dtype, scale)


@ssimulacra2_linear_xyb.triton_plan
def linear_xyb_plan(tensors, scalars) -> LinearXybPlan:
    (x,) = tensors
    (scale,) = scalars
    if x.dim() != 4 or x.shape[1] != 3:
        raise ValueError(f"x must be (N, 3, H, W); got shape {tuple(x.shape)}")
    if int(scale) < 0:
        raise ValueError(f"scale must be >= 0; got {scale}")
    allowed = (torch.float32,) if scale >= 2 else (torch.uint8, torch.float32)
    if x.dtype not in allowed:
        raise TypeError(f"x must be one of {allowed} for the Triton colour step (the reference's float32 "
                        f"arithmetic); got {x.dtype} — the reference backend computes float64 exactly")
    return _plan(tuple(x.shape), x.stride(), x.dtype, int(scale))

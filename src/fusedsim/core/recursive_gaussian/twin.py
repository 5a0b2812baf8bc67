"""PyTorch twin of libjxl's recursive Gaussian blur (``FastGaussian``, used by SSIMULACRA2 with sigma 1.5).

    recursive_gaussian_ref(x, sigma) -> blurred x, same shape (..., H, W): horizontal pass, then vertical pass

The filter is Charalampidis' (2016) truncated-cosine recursive Gaussian: three second-order recursions (k = 1, 3,
5) whose summed impulse response is a Gaussian truncated to radius N = round(3.2795·sigma + 0.2546) (5 for 1.5)::

    y_k[n] = n2_k · (x[n - N - 1] + x[n + N - 1]) - d1_k · y_k[n - 1] - y_k[n - 2],    out[n - ...] = Σ_k y_k

run from n = -N + 1 with zero state over a **zero-padded** input (no renormalisation: borders darken).

The reference runs it in float32 with FMA, and its horizontal pass computes four outputs per step from the two
previous ones (coefficients expanded to four steps), so its rounding depends on the column: scalar steps for the
first 8 columns and the last few, 4-wide blocks in between. A float32 input reproduces that arithmetic
(FMA evaluated in float64 and rounded once); a float64 input runs the same steps without intermediate rounding.
Loops run over one axis in Python (per column, per row), vectorised over all other elements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from fusedsim.core.state import cached

__all__ = ["RecursiveGaussian", "horizontal_pass_ref", "recursive_gaussian_coefficients", "recursive_gaussian_ref",
           "vertical_pass_ref"]


@dataclass(frozen=True)
class RecursiveGaussian:
    """Float32 coefficients of the three recursions (index 0..2 for k = 1, 3, 5) and their 4-step expansion:
    output j of a block = Σ_i mul_in[k][j - i]·s_i + mul_prev[k][j]·y[-1] + mul_prev2[k][j]·y[-2]."""

    radius: int
    n2: tuple[float, float, float]
    d1: tuple[float, float, float]
    mul_in: tuple[tuple[float, ...], ...]
    mul_prev: tuple[tuple[float, ...], ...]
    mul_prev2: tuple[tuple[float, ...], ...]


@cached(maxsize=16)
def recursive_gaussian_coefficients(sigma: float) -> RecursiveGaussian:
    """Solve Charalampidis' equations in float64 for ``sigma``; coefficients are then stored as float32."""
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be a positive finite number; got {sigma!r}")
    radius = float(np.round(np.float32(3.2795 * sigma + 0.2546)))
    omega = np.array([1.0, 3.0, 5.0]) * math.pi / (2.0 * radius)
    sign = np.array([1.0, -1.0, 1.0])
    p = sign / np.tan(0.5 * omega)
    r = sign * p * p / np.sin(omega)
    rho = np.exp(-0.5 * sigma * sigma * omega * omega) / radius
    d13 = p[0] * r[1] - r[0] * p[1]
    zeta15 = (p[1] * r[2] - r[1] * p[2]) / d13
    zeta35 = (p[2] * r[0] - r[2] * p[0]) / d13
    a = np.array([p, r, [zeta15, zeta35, 1.0]])
    gamma = np.array([1.0, radius * radius - sigma * sigma, zeta15 * rho[0] + zeta35 * rho[1] + rho[2]])
    beta = np.linalg.solve(a, gamma)
    n2 = -beta * np.cos(omega * (radius + 1.0))
    d1 = -2.0 * np.cos(omega)
    mul_in, mul_prev, mul_prev2 = [], [], []
    for k in range(3):
        # o_j = n2·s_j - d1·o_{j-1} - o_{j-2} with o_{-1} = prev, o_{-2} = prev2, as linear forms in
        # (s_0, prev, prev2): coefficients in float64, then rounded to float32 like the reference's tables
        forms = {-2: np.array([0.0, 0.0, 1.0]), -1: np.array([0.0, 1.0, 0.0])}
        for j in range(4):
            forms[j] = np.array([n2[k] if j == 0 else 0.0, 0.0, 0.0]) - d1[k] * forms[j - 1] - forms[j - 2]
        mul_in.append(tuple(float(np.float32(forms[j][0])) for j in range(4)))
        mul_prev.append(tuple(float(np.float32(forms[j][1])) for j in range(4)))
        mul_prev2.append(tuple(float(np.float32(forms[j][2])) for j in range(4)))
    n2_32, d1_32 = (tuple(float(np.float32(v)) for v in values) for values in (n2, d1))
    return RecursiveGaussian(int(radius), n2_32, d1_32, tuple(mul_in), tuple(mul_prev), tuple(mul_prev2))


def _fma_lanes(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """fma(a, b, c) for float32 tensors via one float64 pass (a·b is exact in float64), else a·b + c."""
    if c.dtype == torch.float32:
        return torch.addcmul(c.double(), a.double(), b.double()).float()
    return torch.addcmul(c, a, b)


def horizontal_pass_ref(x: torch.Tensor, rg: RecursiveGaussian) -> torch.Tensor:
    """The horizontal recursion along the first axis of ``x`` (W, R) (columns first: every step reads contiguous
    memory) -> (W, R), with the reference's step structure: scalar steps, then 4-wide blocks, then scalar."""
    width, rows = x.shape
    big_n = rg.radius
    mul_in, mul_prev, mul_prev2 = (torch.tensor(table, dtype=x.dtype, device=x.device)[..., None]
                                   for table in (rg.mul_in, rg.mul_prev, rg.mul_prev2))  # (3, 4, 1)
    zero = x.new_zeros(rows)
    prev = prev2 = x.new_zeros(3, rows)
    pieces: list[torch.Tensor] = []

    def scalar_step(n: int) -> None:
        nonlocal prev, prev2
        left, right = n - big_n - 1, n + big_n - 1
        s = (x[left] if left >= 0 else zero) + (x[right] if right < width else zero)
        out = mul_in[:, 0] * s  # (3, R)
        out = _fma_lanes(mul_prev2[:, 0], prev2, out)
        prev2 = prev
        out = _fma_lanes(mul_prev[:, 0], prev, out)
        prev = out
        if n >= 0:
            pieces.append((out[0] + (out[1] + out[2]))[None])

    head_end = min(-(-(big_n + 1) // 4) * 4, width)  # first column of the 4-wide blocks (8 for radius 5)
    for n in range(-big_n + 1, head_end):
        scalar_step(n)
    n = head_end
    while n < width - big_n + 1 - 3:  # the reference's loop bound (no read past the last column)
        s = x[n - big_n - 1: n - big_n + 3] + x[n + big_n - 1: n + big_n + 3]  # (4, R): inputs of lanes 0..3
        out = mul_in * s[0]  # (3, 4, R); lane j then adds input i's term with weight mul_in[j - i] (j >= i)
        for i in range(1, 4):
            out = torch.cat((out[:, :i], _fma_lanes(mul_in[:, : 4 - i], s[i], out[:, i:])), dim=1)
        out = _fma_lanes(mul_prev2, prev2[:, None], out)
        out = _fma_lanes(mul_prev, prev[:, None], out)
        prev2, prev = out[:, 2], out[:, 3]
        pieces.append(out[0] + (out[1] + out[2]))
        n += 4
    for tail in range(n, width):
        scalar_step(tail)
    return torch.cat(pieces, dim=0)


def vertical_pass_ref(x: torch.Tensor, rg: RecursiveGaussian) -> torch.Tensor:
    """The vertical recursion along the first axis of ``x`` (H, C) (rows first) -> (H, C), one row per step:
    y_k = fma(n2_k, s, -(d1_k·y_k[-1]) - y_k[-2]) (the inner term is one fused operation as well)."""
    height, cols = x.shape
    big_n = rg.radius
    n2 = torch.tensor(rg.n2, dtype=x.dtype, device=x.device)[:, None]
    neg_d1 = -torch.tensor(rg.d1, dtype=x.dtype, device=x.device)[:, None]
    zero = x.new_zeros(cols)
    y1 = y2 = x.new_zeros(3, cols)
    rows: list[torch.Tensor] = []
    for n in range(-big_n + 1, height):
        top, bottom = n - big_n - 1, n + big_n - 1
        s = (x[top] if top >= 0 else zero) + (x[bottom] if bottom < height else zero)
        y = _fma_lanes(n2, s, _fma_lanes(neg_d1, y1, -y2))
        y1, y2 = y, y1
        if n >= 0:
            rows.append(y[0] + (y[1] + y[2]))
    return torch.stack(rows, dim=0)


def recursive_gaussian_ref(x: torch.Tensor, sigma: float = 1.5) -> torch.Tensor:
    """Blur every (H, W) plane of ``x`` (..., H, W) (float32: the reference's arithmetic; float64: exact) with
    libjxl's zero-padded recursive Gaussian. Returns a tensor of x's shape and dtype."""
    if x.dim() < 2:
        raise ValueError(f"x must have at least 2 dimensions (..., H, W); got shape {tuple(x.shape)}")
    if x.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"x must be float32 or float64; got {x.dtype}")
    rg = recursive_gaussian_coefficients(float(sigma))
    height, width = x.shape[-2:]
    planes = x.reshape(-1, height, width)
    # loop axis first, so that every step of a pass reads and writes contiguous memory
    rows_first = horizontal_pass_ref(planes.permute(2, 0, 1).reshape(width, -1).contiguous(), rg)
    cols = rows_first.reshape(width, -1, height).permute(2, 1, 0).reshape(height, -1).contiguous()
    out = vertical_pass_ref(cols, rg).reshape(height, -1, width).permute(1, 0, 2)
    return out.reshape(x.shape)

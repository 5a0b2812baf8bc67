"""The whole MS-SSIM pyramid of both images in one launch: levels 1 .. L-1 of pytorch-msssim's 2x average pooling
(zero padding of size % 2 per side, counted in the mean), written into one buffer laid out as the per-level
pooling op writes it: level l at ``offsets[l-1]``, (2, N, C, H_l, W_l) contiguous, in the input dtype.

Footprints nest: a program owns a tile of the coarsest level and, at every finer level, the pixels pooled into
it, a tile whose origin follows from the paddings (o_l = 2 o_{l+1} - H_l % 2). It writes its level-1 tile from
the input, then (after a barrier: the same program's stores) each next level from the one it just wrote. Pixels
of a tile outside the image are neither stored nor read (their reads are masked to zero), as in the per-level
kernel. Every pooled value is summed in the same order ((0 + a) + b) + c) + d, times 1/4, from the same stored
inputs as :mod:`fusedsim.families.ssim.avg_pool`: the pyramid is bit-identical to running that kernel level by level.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from fusedsim.core.codegen import indent, jit_from_source
from fusedsim.core.launch import Launcher
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.core.state import cached

_LEVEL1_TILE = (16, 64)  # rows, columns of a program's level-1 tile (a power of 2 each)
_BLOCK = 2048  # most pixels pooled per step


def pyramid_sizes(hw: tuple[int, int], levels: int) -> list[tuple[int, int]]:
    """(H, W) of every level, level 0 first."""
    sizes = [tuple(hw)]
    for _ in range(levels - 1):
        sizes.append(tuple((s + s % 2) // 2 for s in sizes[-1]))
    return sizes


def coarse_tile(levels: int) -> tuple[int, int]:
    """(rows, columns) of the coarsest-level tile of one program: a level-1 tile of about ``_LEVEL1_TILE``."""
    shift = levels - 2
    return max(2, _LEVEL1_TILE[0] >> shift), max(8, _LEVEL1_TILE[1] >> shift)


def _level_lines(lvl: int, levels: int, tile: tuple[int, int]) -> list[str]:
    """Pool this program's level-``lvl`` tile from level ``lvl - 1`` (the input at level 1)."""
    scale = 1 << (levels - 1 - lvl)
    rows, cols = tile[0] * scale, tile[1] * scale
    step = max(2, min(rows, _BLOCK // cols))
    src = "X" if lvl == 1 else f"OUT + OFF{lvl - 1}"
    ysrc = "Y" if lvl == 1 else f"OUT + OFF{lvl - 1} + P{lvl - 1}"
    if lvl == 1:
        xb, yb = "X + n.to(tl.int64) * sxn + c.to(tl.int64) * sxc", "Y + n.to(tl.int64) * syn + c.to(tl.int64) * syc"
        sh, sw, th, tw = ("sxh", "sxw", "syh", "syw")
    else:
        xb = f"{src} + nc.to(tl.int64) * H{lvl - 1} * W{lvl - 1}"
        yb = f"{ysrc} + nc.to(tl.int64) * H{lvl - 1} * W{lvl - 1}"
        sh, sw, th, tw = (f"W{lvl - 1}", "1", f"W{lvl - 1}", "1")
    hp, wp = f"H{lvl - 1}", f"W{lvl - 1}"
    return [
        f"# level {lvl}: a {rows} x {cols} tile, {step} rows per step",
        f"xs = {xb}",
        f"ys = {yb}",
        f"xo = OUT + OFF{lvl} + nc.to(tl.int64) * H{lvl} * W{lvl}",
        f"yo = xo + P{lvl}",
        f"cols = pid_w * {cols} - PW{lvl} + tl.arange(0, {cols})[None, :]",
        f"c0 = 2 * cols - {wp} % 2",
        f"for r in range(0, {rows}, {step}):",
        *indent([
            f"rows = pid_h * {rows} - PH{lvl} + r + tl.arange(0, {step})[:, None]",
            f"ok = (rows >= 0) & (rows < H{lvl}) & (cols >= 0) & (cols < W{lvl})",
            f"r0 = 2 * rows - {hp} % 2",
            f"acc_x = tl.zeros([{step}, {cols}], ACC)",
            f"acc_y = tl.zeros([{step}, {cols}], ACC)",
            "for dr in tl.static_range(2):",
            "    for dc in tl.static_range(2):",
            "        rr = r0 + dr",
            "        cc = c0 + dc",
            f"        m = ok & (rr >= 0) & (rr < {hp}) & (cc >= 0) & (cc < {wp})",
            f"        acc_x += tl.load(xs + rr.to(tl.int64) * {sh} + cc * {sw}, mask=m, other=0.0).to(ACC)",
            f"        acc_y += tl.load(ys + rr.to(tl.int64) * {th} + cc * {tw}, mask=m, other=0.0).to(ACC)",
            f"pix = rows.to(tl.int64) * W{lvl} + cols",
            "tl.store(xo + pix, (acc_x * 0.25).to(OUT.dtype.element_ty), mask=ok)",
            "tl.store(yo + pix, (acc_y * 0.25).to(OUT.dtype.element_ty), mask=ok)",
        ]),
    ]


def render_pyramid(levels: int, name: str) -> str:
    """Source of the pyramid kernel for ``levels`` levels (levels - 1 pooled ones). Per level l >= 1: its size
    H{l}, W{l}, its buffer offset OFF{l}, its image size P{l} = N C H{l} W{l} (the y image follows the x one) and
    the origin shifts PH{l}, PW{l} of a program's tile. (Integer arguments equal to 1 arrive as constexprs: the
    source never calls methods on them.)"""
    tile = coarse_tile(levels)
    pooled = range(1, levels)
    args = ["X", "Y", "OUT", "C", "H0", "W0", "sxn", "sxc", "sxh", "sxw", "syn", "syc", "syh", "syw"]
    for lvl in pooled:
        args += [f"H{lvl}", f"W{lvl}", f"OFF{lvl}", f"P{lvl}", f"PH{lvl}", f"PW{lvl}"]
    sig = ", ".join(args) + ", ACC: tl.constexpr"
    body = ["pid_w = tl.program_id(0)", "pid_h = tl.program_id(1)", "nc = tl.program_id(2)", "n = nc // C",
            "c = nc % C"]
    for lvl in pooled:
        if lvl > 1:
            body.append("tl.debug_barrier()")  # the previous level's stores of this program, visible to all its threads
        body += _level_lines(lvl, levels, tile)
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


@cached(maxsize=None)
def _pyramid_kernel(levels: int):
    name = f"_ms_pyramid_{levels}_kernel"
    return jit_from_source(name, render_pyramid(levels, name))


def _aligned(n: int) -> int:
    """``n`` rounded up to 32 elements: every level keeps the 16-byte alignment Triton specialises on."""
    return -(-n // 32) * 32


class PyramidPlan:
    """Levels 1 .. L-1 of (N, C, H, W) inputs x, y: ``forward(x, y, buffer)`` writes them into ``buffer`` (at
    least ``length`` elements of the input dtype) and returns the levels' (N, C, H_l, W_l) views, x's then y's."""

    def __init__(self, shape, sx, sy, dtype: torch.dtype, levels: int) -> None:
        if levels < 2:
            raise ValueError("a pyramid has at least 2 levels")
        n, c = shape[:2]
        self.sizes = pyramid_sizes(tuple(shape[2:]), levels)
        self.shapes = [(2, n, c, *hw) for hw in self.sizes[1:]]
        self.offsets, total = [], 0
        for shp in self.shapes:
            self.offsets.append(total)
            total += _aligned(math.prod(shp))
        self.length = total
        # one as_strided per view (no slice-then-view on the hot path)
        self._views = []
        for shp, start in zip(self.shapes, self.offsets):
            image, strides = shp[1:], (shp[2] * shp[3] * shp[4], shp[3] * shp[4], shp[4], 1)
            self._views.append((image, strides, start, start + math.prod(image)))
        tile = coarse_tile(levels)
        hc, wc = self.sizes[-1]
        grid = (triton.cdiv(wc, tile[1]), triton.cdiv(hc, tile[0]), n * c)
        acc = tl.float64 if compute_dtype(dtype) == torch.float64 else tl.float32
        tail = []
        for lvl in range(1, levels):
            ph = sum((self.sizes[m][0] % 2) << (m - lvl) for m in range(lvl, levels - 1))
            pw = sum((self.sizes[m][1] % 2) << (m - lvl) for m in range(lvl, levels - 1))
            tail += [*self.sizes[lvl], self.offsets[lvl - 1], math.prod(self.shapes[lvl - 1][1:]), ph, pw]
        self._args = (c, *self.sizes[0], *sx, *sy, *tail, acc)
        self._launch = Launcher(_pyramid_kernel(levels), grid, num_warps=4)

    def forward(self, x: torch.Tensor, y: torch.Tensor,
                buffer: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        self._launch(x, y, buffer, *self._args)
        xs = [buffer.as_strided(shape, strides, ox) for shape, strides, ox, _ in self._views]
        ys = [buffer.as_strided(shape, strides, oy) for shape, strides, _, oy in self._views]
        return xs, ys


@cached(maxsize=64)
def pyramid_plan(shape, sx, sy, dtype: torch.dtype, levels: int) -> PyramidPlan:
    return PyramidPlan(shape, sx, sy, dtype, levels)

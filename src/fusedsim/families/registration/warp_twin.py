"""PyTorch twin of the warp kernels: the specification, the CPU path and the test oracle.

    warp_ref(image, affine, grid, out_shape, is_displacement, mode, padding, align_corners) -> out
    compose_ref(u, v, affine, add_v, align_corners) -> out

Both are ``F.grid_sample`` at the points ``A·x + u(x)`` of an output lattice (``x``: the identity grid of
``F.affine_grid``, normalised coordinates in [-1, 1], last axis ordered (x, y[, z])), which is what the kernels
compute without materialising those points. Absent optional tensors are passed as empty tensors (``numel() ==
0``): no affine means the identity, no grid means no displacement. Batch sizes of 1 broadcast against the others.
Arithmetic runs in float64 when any input is float64, else in float32; the output has the image's dtype. A
sampling point with a NaN or Inf coordinate gives NaN in every channel (any mode and padding) and passes no
gradient.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
import torch.nn.functional as F

MODES = ("bilinear", "nearest")  # grid_sample's interpolation codes
PADDINGS = ("zeros", "border", "reflection")  # grid_sample's padding codes


def warp_compute_dtype(*tensors: torch.Tensor) -> torch.dtype:
    """float64 when any of ``tensors`` is float64, else float32 (fp16/bf16 inputs are computed in float32)."""
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


def sampling_grid_ref(affine: torch.Tensor, grid: torch.Tensor, batch: int, out_shape: Sequence[int],
                      is_displacement: bool, align_corners: bool, dtype: torch.dtype) -> torch.Tensor:
    """The sampling points ``A·x + u(x)`` (or ``φ(x)`` for a full field), shape (B, *S, d), in ``dtype``.

    affine: (1 or B, d, d+1) or empty (identity); grid: (1 or B, *S, d) or empty. S is the grid's lattice, or
    ``out_shape`` without a grid.
    """
    nd = len(out_shape)
    if grid.numel():
        out_shape = list(grid.shape[1:-1])
    if not is_displacement:
        return grid.to(dtype).expand(batch, *grid.shape[1:])
    if affine.numel() == 0:
        affine = torch.eye(nd, nd + 1, dtype=dtype, device=grid.device if grid.numel() else affine.device)[None]
    theta = affine.to(dtype).expand(batch, nd, nd + 1)
    if align_corners and 1 in out_shape:  # torch warns that this changed in 1.3; its value (0) is the spec
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            points = F.affine_grid(theta, [batch, 1, *out_shape], align_corners=align_corners)
    else:
        points = F.affine_grid(theta, [batch, 1, *out_shape], align_corners=align_corners)
    if grid.numel():
        points = points + grid.to(dtype)
    return points


def warp_ref(image: torch.Tensor, affine: torch.Tensor, grid: torch.Tensor, out_shape: Sequence[int],
             is_displacement: bool, mode: int, padding: int, align_corners: bool) -> torch.Tensor:
    """``image`` sampled at ``A·x + u(x)`` on the lattice of ``grid`` (``out_shape`` when there is no grid).

    image: (Bi, C, H, W) or (Bi, C, D, H, W); affine: (Ba, d, d+1) or empty; grid: (Bg, *S, d) or empty,
    channel-last, normalised coordinates; each batch size 1 or B. ``mode``: 0 bilinear/trilinear, 1 nearest;
    ``padding``: 0 zeros, 1 border, 2 reflection. Returns (B, C, *out_shape) in image.dtype.
    """
    dtype = warp_compute_dtype(image, affine, grid)
    batch = max(image.shape[0], affine.shape[0] if affine.numel() else 1, grid.shape[0] if grid.numel() else 1)
    points = sampling_grid_ref(affine, grid, batch, list(out_shape), is_displacement, align_corners, dtype)
    if image.dim() - 2 != points.shape[-1]:
        raise ValueError(f"warp_ref: a {image.dim() - 2}-D image needs {image.dim() - 2}-component points")
    source = image.to(dtype).expand(batch, *image.shape[1:])
    # a non-finite point (NaN/Inf in the field or the affine) gives NaN in every channel, whatever the mode and
    # padding: grid_sample itself has no one answer (on the CPU NaN for bilinear with zeros, 0 for nearest, an
    # edge value for border; on CUDA 0), and a zero or an edge value would hide a diverged field. The point is
    # replaced by 0 before sampling so that no gradient flows from it (the output there is NaN anyway).
    finite = torch.isfinite(points).all(-1)
    points = torch.where(finite[..., None], points, 0.0)
    out = F.grid_sample(source, points, mode=MODES[mode], padding_mode=PADDINGS[padding],
                        align_corners=align_corners)
    out = torch.where(finite[:, None], out, torch.nan)
    return out.to(image.dtype)


def compose_ref(u: torch.Tensor, v: torch.Tensor, affine: torch.Tensor, add_v: bool,
                align_corners: bool) -> torch.Tensor:
    """``v + u∘(A·x + v)`` (``add_v``) or ``u∘(A·x + v)``: the field u sampled bilinearly with zero padding.

    u: (Bu, *Su, d) channel-last on its own lattice; v: (Bv, *Sv, d); affine: (Ba, d, d+1) or empty.
    Returns (B, *Sv, d) in u.dtype.
    """
    sampled = warp_ref(u.movedim(-1, 1), affine, v, list(v.shape[1:-1]), True, 0, 0, align_corners)
    sampled = sampled.movedim(1, -1)
    return sampled + v.to(sampled.dtype) if add_v else sampled

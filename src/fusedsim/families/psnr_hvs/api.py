"""Public ``psnr_hvs``: libvmaf's feature ``psnr_hvs`` (``psnr_hvs_y``, ``_cb``, ``_cr`` and ``psnr_hvs``),
bit-exact on CPU and GPU."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from fusedsim.families.psnr_hvs.ops import psnr_hvs_plane
from fusedsim.families.psnr_hvs.twin import BLOCK, MAX_BIT_DEPTH, combine_planes, to_db
from fusedsim.families.vmaf.chroma import chroma_layout, libvmaf_chroma_size
from fusedsim.families.vmaf.inputs import check_bit_depth, frame_pair

__all__ = ["BIT_DEPTHS", "OUTPUTS", "psnr_hvs", "psnr_hvs_feature"]

BIT_DEPTHS = tuple(range(8, MAX_BIT_DEPTH + 1))
OUTPUTS = ("psnr_hvs_y", "psnr_hvs_cb", "psnr_hvs_cr", "psnr_hvs")
_PLANES = ("y", "cb", "cr")

Frames = torch.Tensor | np.ndarray


def psnr_hvs(ref: Sequence[Frames], dist: Sequence[Frames], bit_depth: int = 8) -> dict[str, torch.Tensor]:
    """libvmaf's PSNR-HVS per frame, bit-identical to libvmaf 3.2.0 (``--feature psnr_hvs``).

    Args:
        ref, dist: the planes ``(y, cb, cr)``, each an integer ``(H, W)`` or ``(N, H, W)`` torch tensor or numpy
            array; chroma 4:2:0, 4:2:2 or 4:4:4, of ceil or floor size. Chroma is read as libvmaf's picture
            holds it: ``floor(W/2)`` columns (and ``floor(H/2)`` rows for 4:2:0), so the last column or row of a
            ceil-size plane of an odd-size frame is not read. Every plane must be at least 8x8 there (16x16 luma
            for 4:2:0).
        bit_depth: 8 to 12 (libvmaf's psnr_hvs refuses more).

    Returns:
        ``{"psnr_hvs_y", "psnr_hvs_cb", "psnr_hvs_cr", "psnr_hvs"}`` -> float64 CPU tensors ``(N,)`` (``()`` for
        ``(H, W)`` planes); identical planes give ``inf`` (libvmaf's JSON prints ``null``).

    CUDA tensors run the Triton kernel, CPU tensors the numba kernel (the twin where numba is missing): the same
    bits. The dB conversion runs on the host with the C library's ``log10``, as in libvmaf.
    """
    bd = check_bit_depth(bit_depth, BIT_DEPTHS, "psnr_hvs", "libvmaf's psnr_hvs takes at most 12 bits")
    if not isinstance(ref, (list, tuple)) or not isinstance(dist, (list, tuple)) or len(ref) != 3 or len(dist) != 3:
        raise ValueError("ref and dist must each be three planes (y, cb, cr): psnr_hvs reads luma and chroma")
    squeeze = getattr(ref[0], "ndim", None) == 2
    pairs = [frame_pair(r, d, bd, (f"ref[{p}]", f"dist[{p}]")) for p, r, d in zip(_PLANES, ref, dist)]
    luma = tuple(pairs[0][0].shape[1:])
    layout = chroma_layout(luma, tuple(pairs[1][0].shape[1:]), "ref[cb]")
    if tuple(pairs[2][0].shape[1:]) != tuple(pairs[1][0].shape[1:]):
        raise ValueError(f"ref[cr] is {tuple(pairs[2][0].shape[1:])} but ref[cb] is {tuple(pairs[1][0].shape[1:])}")
    hc, wc = libvmaf_chroma_size(luma, layout)
    rets = []
    for k, (r, d, _) in enumerate(pairs):
        if r.shape[0] != pairs[0][0].shape[0]:
            raise ValueError(f"ref[{_PLANES[k]}] has {r.shape[0]} frames but the luma plane has {pairs[0][0].shape[0]}")
        if k:
            r, d = r[:, :hc, :wc], d[:, :hc, :wc]
        h, w = r.shape[1:]
        if h < BLOCK or w < BLOCK:
            raise ValueError(f"ref[{_PLANES[k]}] is {h}x{w} (HxW) as libvmaf reads it; psnr_hvs needs every plane "
                             f"at least {BLOCK}x{BLOCK} (its 8x8 DCT blocks), i.e. luma of at least "
                             f"{BLOCK << (layout != '444')} for {layout[0]}:{layout[1]}:{layout[2]} chroma")
        rets.append(psnr_hvs_plane(r, d, bd, k).detach().cpu().tolist())
    columns = [[to_db(x) for x in values] for values in rets]
    columns.append([to_db(combine_planes(y, cb, cr)) for y, cb, cr in zip(*rets)])
    out = {name: torch.tensor(values, dtype=torch.float64) for name, values in zip(OUTPUTS, columns)}
    return {name: v[0] for name, v in out.items()} if squeeze else out


def psnr_hvs_feature(ref: Sequence[torch.Tensor], dist: Sequence[torch.Tensor], bit_depth: int,
                     ) -> dict[str, torch.Tensor]:
    """``vmaf:psnr_hvs``: the planes ``(y, u, v)`` of a frame batch in, libvmaf's columns out."""
    return psnr_hvs(list(ref), list(dist), bit_depth)

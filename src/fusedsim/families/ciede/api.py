"""Public ``ciede``: libvmaf's feature ``ciede`` (``ciede2000``) on CPU and GPU."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from fusedsim.families.ciede.ops import ciede_de_sum
from fusedsim.families.ciede.twin import BIT_DEPTHS, ciede_score, libvmaf_chroma_full
from fusedsim.families.vmaf.chroma import chroma_layout, libvmaf_chroma_size
from fusedsim.families.vmaf.inputs import check_bit_depth, frame_pair

__all__ = ["ciede", "ciede_feature"]

_PLANES = ("y", "cb", "cr")

Frames = torch.Tensor | np.ndarray


def _full_size(c: torch.Tensor, layout: str, h: int, w: int) -> torch.Tensor:
    """Chroma at luma size as libvmaf's ciede reads it; 4:2:2 from libvmaf's floor-width plane."""
    if layout == "422":
        c = c[:, :, : libvmaf_chroma_size((h, w), layout)[1]]
    return libvmaf_chroma_full(c, h, w)


def ciede(ref: Sequence[Frames], dist: Sequence[Frames], bit_depth: int = 8) -> dict[str, torch.Tensor]:
    """libvmaf's CIEDE2000 score per frame (``--feature ciede``): ``45 - 20 log10(mean dE00)``.

    Args:
        ref, dist: the planes ``(y, cb, cr)``, each an integer ``(H, W)`` or ``(N, H, W)`` torch tensor or numpy
            array; chroma 4:2:0 (ceil size), 4:2:2 or 4:4:4. Chroma is brought to luma size as libvmaf does
            (:func:`~fusedsim.families.ciede.twin.libvmaf_chroma_full`; its 4:2:2 reading is libvmaf's, not a
            co-sited upsampling). On odd-size 4:2:0 frames libvmaf reads past its floor-size chroma planes (its
            value there varies between runs); here the last row and column read the ceil-size planes' samples.
        bit_depth: 8, 10, 12 or 16.

    Returns:
        ``{"ciede2000": float64 CPU tensor (N,)}`` (``()`` for ``(H, W)`` planes); identical frames give ``inf``
        (libvmaf's JSON prints ``null``).

    CPU tensors run the numba kernel, which calls the C library's ``pow``, ``powf``, ``atan2``, ``sin``, ``cos``
    and ``exp`` as libvmaf does; CUDA tensors run the Triton kernel (CUDA's versions of them; ``powf`` as the
    rounded double ``pow``): its float32 per-pixel values may differ from libvmaf's in rare last bits.
    """
    bd = check_bit_depth(bit_depth, BIT_DEPTHS, "ciede", "libvmaf's ciede takes 8, 10, 12 or 16 bits")
    if not isinstance(ref, (list, tuple)) or not isinstance(dist, (list, tuple)) or len(ref) != 3 or len(dist) != 3:
        raise ValueError("ref and dist must each be three planes (y, cb, cr): ciede reads luma and chroma")
    squeeze = getattr(ref[0], "ndim", None) == 2
    pairs = [frame_pair(r, d, bd, (f"ref[{p}]", f"dist[{p}]")) for p, r, d in zip(_PLANES, ref, dist)]
    n, h, w = pairs[0][0].shape
    layout = chroma_layout((h, w), tuple(pairs[1][0].shape[1:]), "ref[cb]")
    if tuple(pairs[2][0].shape[1:]) != tuple(pairs[1][0].shape[1:]):
        raise ValueError(f"ref[cr] is {tuple(pairs[2][0].shape[1:])} but ref[cb] is {tuple(pairs[1][0].shape[1:])}")
    if layout == "420" and tuple(pairs[1][0].shape[1:]) != (-(-h // 2), -(-w // 2)):
        raise ValueError(f"ref[cb] is {tuple(pairs[1][0].shape[1:])} (HxW): ciede needs ceil-size 4:2:0 chroma "
                         f"({-(-h // 2)}x{-(-w // 2)}) for a {h}x{w} frame")
    planes = []
    for k, (r, d, _) in enumerate(pairs):
        if r.shape[0] != n:
            raise ValueError(f"ref[{_PLANES[k]}] has {r.shape[0]} frames but the luma plane has {n}")
        planes.append((r, d) if k == 0 else (_full_size(r, layout, h, w), _full_size(d, layout, h, w)))
    sums = ciede_de_sum(*(p[0] for p in planes), *(p[1] for p in planes), bd).detach().cpu().tolist()
    out = torch.tensor([ciede_score(s, h * w) for s in sums], dtype=torch.float64)
    return {"ciede2000": out[0] if squeeze else out}


def ciede_feature(ref: Sequence[torch.Tensor], dist: Sequence[torch.Tensor], bit_depth: int,
                  ) -> dict[str, torch.Tensor]:
    """``vmaf:ciede``: the planes ``(y, u, v)`` of a frame batch in, libvmaf's ``ciede2000`` out."""
    return ciede(list(ref), list(dist), bit_depth)

"""Chroma planes as libvmaf's pictures hold them: the layout of a Y'CbCr frame from its plane sizes, and
libvmaf's chroma size (``w >> ss_hor`` by ``h >> ss_ver``: floor, where raw files store ceil-size chroma)."""

from __future__ import annotations

__all__ = ["SUBSAMPLING", "chroma_layout", "libvmaf_chroma_size"]

#: (horizontal, vertical) subsampling shifts of each layout.
SUBSAMPLING = {"420": (1, 1), "422": (1, 0), "444": (0, 0)}


def chroma_layout(luma: tuple[int, int], chroma: tuple[int, int], what: str = "chroma") -> str:
    """``"420"``, ``"422"`` or ``"444"`` for a luma plane ``(h, w)`` and chroma planes ``(hc, wc)`` of ceil or
    floor size; ValueError naming ``what`` for any other pair of sizes."""
    h, w = luma
    hc, wc = chroma
    for name, (sh, sv) in SUBSAMPLING.items():
        if wc in (w >> sh, -(-w >> sh)) and hc in (h >> sv, -(-h >> sv)):
            return name
    raise ValueError(f"{what} planes are {hc}x{wc} (HxW) for a {h}x{w} luma plane: not 4:2:0, 4:2:2 or 4:4:4")


def libvmaf_chroma_size(luma: tuple[int, int], layout: str) -> tuple[int, int]:
    """The chroma ``(h, w)`` of libvmaf's picture: ``(h >> ss_ver, w >> ss_hor)``."""
    sh, sv = SUBSAMPLING[layout]
    return luma[0] >> sv, luma[1] >> sh

"""libvmaf's PSNR-HVS in Triton: the twin's bits (:mod:`fusedsim.families.psnr_hvs.twin`).

Two launches per plane: the block kernel (rendered by :mod:`.kernel_source`; one lane per 8x8 block, every
float32 step in libvmaf's order, ``enable_fp_fusion=False``, IEEE ``div_rn``, the double ``sqrt`` (PTX has only its correctly rounded form)) writes each block's 64
error terms in libvmaf's order, and :func:`~.sequential_sum32_kernel.sequential_sum32` adds them in one float32
running sum per frame, bit for bit. The two final float32 divisions run on the host (numpy, IEEE).
"""

from __future__ import annotations

import numpy as np
import torch
import triton

from fusedsim.core.backend import triton_interpreting
from fusedsim.core.codegen import jit_from_source
from fusedsim.core.launch import on_tensors_device
from fusedsim.families.psnr_hvs.kernel_source import render_block_kernel
from fusedsim.families.psnr_hvs.ops import psnr_hvs_plane
from fusedsim.families.psnr_hvs.sequential_sum32_kernel import sequential_sum32
from fusedsim.families.psnr_hvs.twin import VAR_SCALE_16, VAR_SCALE_64, block_grid, csf_and_mask

__all__ = ["psnr_hvs_plane_fwd", "psnr_hvs_terms"]

# Integer arguments unspecialised: one compilation for every shape. Each lane gathers its own 8x8 block, so
# divisibility hints buy nothing, and one crop's stride specialisation kept Triton 3.6's make_ttgir busy > 35 s.
_BLOCK_KERNEL = jit_from_source("_psnr_hvs_blocks", render_block_kernel("_psnr_hvs_blocks"),
                                do_not_specialize=("rs0", "rs1", "rs2", "ds0", "ds1", "ds2", "NB", "BX", "L"))
_TABLES: dict[tuple[torch.device, int], tuple[torch.Tensor, torch.Tensor]] = {}


def _tables(device: torch.device, plane: int) -> tuple[torch.Tensor, torch.Tensor]:
    key = (device, plane)
    if key not in _TABLES:
        csf, mask = csf_and_mask(plane)
        _TABLES[key] = (torch.from_numpy(csf.reshape(64)).to(device), torch.from_numpy(mask.reshape(64)).to(device))
    return _TABLES[key]


def _kernel_input(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """A view the kernel can load: uint16 is read through int16 and masked back to 16 bits."""
    if x.dtype == torch.uint16:
        return x.view(torch.int16), True
    if x.dtype in (torch.uint8, torch.int16, torch.int32):
        return x, False
    return x.to(torch.int32), False


@on_tensors_device
def psnr_hvs_terms(ref: torch.Tensor, dist: torch.Tensor, plane: int, block: int | None = None) -> torch.Tensor:
    """Every block's 64 error terms in libvmaf's order: ``(N, blocks * 64)`` float32 on the inputs' device."""
    n, h, w = ref.shape
    by, bx = block_grid(h, w)
    nb = by * bx
    out = torch.empty(n, nb * 64, dtype=torch.float32, device=ref.device)
    if nb == 0 or n == 0:
        return out
    if ref.dtype != dist.dtype:
        ref, dist = ref.to(torch.int32), dist.to(torch.int32)
    x, mask16 = _kernel_input(ref)
    y, _ = _kernel_input(dist)
    csf, mask = _tables(ref.device, plane)
    blk = block or (triton.next_power_of_2(nb) if triton_interpreting() else 128)
    _BLOCK_KERNEL[(triton.cdiv(nb, blk), n)](
        x, y, csf, mask, out, *x.stride(), *y.stride(), nb, bx, nb * 64, float(VAR_SCALE_64), float(VAR_SCALE_16),
        MASK16=mask16, BLK=blk, num_warps=4, enable_fp_fusion=False)
    return out


@psnr_hvs_plane.triton_launcher
def psnr_hvs_plane_fwd(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, plane: int) -> torch.Tensor:
    """libvmaf's PSNR-HVS error per frame of one plane ``(N, h, w)`` on its device: ``(N,)`` float64 (the twin's
    contract; inputs checked by the public API)."""
    n, h, w = ref.shape
    by, bx = block_grid(h, w)
    ret = sequential_sum32(psnr_hvs_terms(ref, dist, plane)).cpu().numpy()
    peak = (1 << bit_depth) - 1
    ret = ret / np.float32(64 * by * bx) / np.float32(peak * peak)
    return torch.from_numpy(ret.astype(np.float64)).to(ref.device)

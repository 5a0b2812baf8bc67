"""ColorVideoVDP's band of a (reference, test) pair on the GPU, one kernel: both sides of a band at once.

    cvvdp_pair_band(ref_g, ref_g_next, test_g, test_g_next (N, 3, ...), rho, scale)
        -> (N, 6, h, w): min(|T'|, |R'|) (0-2), |T' - R'| (3-5)

The one-shot metric needs the reference's contrast and CSF sensitivity of a band only to form the test side of
the same band, so this kernel computes them in registers (as ``cvvdp_ref_band`` does) and goes straight on to
``cvvdp_test_band``'s output: the reference's (N, 6, h, w) contrast and sensitivity are never written, which
saves their memory (the largest buffers of the pipeline) and one write and read of them. The arithmetic is
those two kernels' own (the same jitted helpers), so the output equals ``cvvdp_test_band`` fed by
``cvvdp_ref_band``. Twin: ``cvvdp_pair_band_ref`` in the op catalog. Forward only. One program = one row × a
block of columns of one image pair.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.cvvdp.band_kernel import (
    contrast,
    levels,
    masker_and_diff,
    sensitivities,
    sensitivity_table,
    store_six,
)
from fusedsim.families.cvvdp.pyramid_kernel import block_for
from fusedsim.families.cvvdp.twin import CH_GAIN
from fusedsim.families.cvvdp.ops import cvvdp_pair_band

__all__ = ["cvvdp_pair_band_fwd"]

_LN10 = math.log(10.0)


@triton.jit
def _pair_band_kernel(RG, RGN, TG, TGN, LUT, OUT, w, hn, wn, rgsn, rgsc, rnsn, rnsc, tgsn, tgsc, tnsn, tnsc, HW,
                      LOGL0, LOGL_SPAN, CORR, NL: tl.constexpr, G1: tl.constexpr, SCALE: tl.constexpr,
                      LN10: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(1)
    n = tl.program_id(2).to(tl.int64)
    j = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = j < w
    r0, r1, r2, bkg = contrast(RG, RGN, n, i, j, w, hn, wn, ok, rgsn, rgsc, rnsn, rnsc, SCALE)
    s0, s1, s2 = sensitivities(LUT, bkg, ok, LOGL0, LOGL_SPAN, CORR, NL, LN10)
    t0, t1, t2, _ = contrast(TG, TGN, n, i, j, w, hn, wn, ok, tgsn, tgsc, tnsn, tnsc, SCALE)
    m0, a0 = masker_and_diff(t0, r0, s0, 1.0)
    m1, a1 = masker_and_diff(t1, r1, s1, G1)
    m2, a2 = masker_and_diff(t2, r2, s2, 1.0)
    out = OUT + n * 6 * HW + i.to(tl.int64) * w + j
    store_six(out, HW, m0, m1, m2, a0, a1, a2, ok)


@cached(maxsize=128)
def _launcher(ref_geometry: tuple, test_strides: tuple, rho: float, scale: float, device: torch.device
              ) -> tuple[Launcher, torch.Tensor, tuple]:
    n, h, w, hn, wn, *ref_strides = ref_geometry
    lut, log_l0, log_span, corr, nl = sensitivity_table(rho, device)
    block, warps = block_for(w)
    launch = Launcher(_pair_band_kernel, (triton.cdiv(w, block), h, n), num_warps=warps)
    return launch, lut, (w, hn, wn, *ref_strides, *test_strides, h * w, log_l0, log_span, corr, nl, CH_GAIN[1],
                         float(scale), _LN10, block)


@cvvdp_pair_band.triton_launcher
def cvvdp_pair_band_fwd(ref_g: torch.Tensor, ref_g_next: torch.Tensor, test_g: torch.Tensor,
                        test_g_next: torch.Tensor, rho: float, scale: float) -> torch.Tensor:
    """min(|T'|, |R'|) and |T' - R'| (N, 6, h, w) of one non-baseband band of a pair of images, float32."""
    ref_g, ref_g_next, ref_geometry = levels(ref_g, ref_g_next)
    test_g, test_g_next, test_geometry = levels(test_g, test_g_next)
    if test_geometry[:5] != ref_geometry[:5]:
        raise ValueError(f"cvvdp_pair_band: the test levels must have the reference's shapes {tuple(ref_g.shape)} "
                         f"and {tuple(ref_g_next.shape)}; got {tuple(test_g.shape)} and {tuple(test_g_next.shape)}")
    launch, lut, tail = _launcher(ref_geometry, test_geometry[5:], float(rho), float(scale), ref_g.device)
    n, h, w = ref_geometry[:3]
    out = torch.empty((n, 6, h, w), dtype=torch.float32, device=ref_g.device)
    launch(ref_g, ref_g_next, test_g, test_g_next, lut, out, *tail)
    return out

"""Hardware approximations for Triton kernels whose tolerance allows them: ``fast_log2`` is PTX's
``lg2.approx.ftz.f32`` (absolute error about 2^-22 near 1, relative 2^-22 elsewhere; one special-function
instruction) where ``tl.log``/``tl.log2`` call libdevice's accurate ``logf``/``log2f`` (a dozen
instructions and branches each). Powers built as ``exp2(e * fast_log2(x))`` are then a few float32 ulps from
``torch.pow``, as ``tl.exp`` (``ex2.approx``) already makes them.

Off NVIDIA GPUs (Triton's CPU interpreter, ROCm) ``fast_log2`` is ``tl.log2``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.backend import triton_interpreting

__all__ = ["fast_log2"]

if triton_interpreting() or getattr(torch.version, "hip", None):

    @triton.jit
    def fast_log2(x):
        """log2 of float32 ``x`` (tl.log2 here: no PTX)."""
        return tl.log2(x)

else:

    @triton.jit
    def fast_log2(x):
        """log2 of float32 ``x`` by ``lg2.approx.ftz.f32`` (denormals read as 0: log2 gives -inf)."""
        return tl.inline_asm_elementwise("lg2.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                         is_pure=True, pack=1)

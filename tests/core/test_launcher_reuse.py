"""A :class:`fusedsim.core.launch.Launcher` reuses the kernel it compiled on its first call, which Triton specialised
on that call's integer arguments (a value of 1 and multiples of 16 become constants). A launcher cached by less
than every such argument gives wrong numbers on the GPU for the call that comes second. These calls come in an
order that used to do that: the second one differs from the first only in an argument the cache key left out.

GPU only: Triton's interpreter binds every launch afresh.
"""

from __future__ import annotations

import pytest
import torch

from fusedsim.families.iwssim.twin import corrected_eig_levels_ref, pyr_reduce_ref

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def _grams(levels: int, n: int, k: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    y = torch.randn(levels, n, k, 2 * k, generator=gen, dtype=torch.float64)
    return y @ y.mT / (2 * k)


def test_eig_launchers_are_not_shared_across_batch_sizes():
    from fusedsim.families.iwssim.eig_kernel import iwssim_eig_levels_fwd

    # same number of programs (4), first with N = 1 (which Triton makes a constant), then with N = 2
    for levels, n in ((4, 1), (2, 2)):
        grams = _grams(levels, n, 6, seed=levels)
        sizes = [6] * levels
        got = iwssim_eig_levels_fwd(grams.cuda(), sizes).cpu()
        # the kernel and eigh agree to rounding on these well-conditioned matrices (catalog tolerance: 2e-8)
        torch.testing.assert_close(got, corrected_eig_levels_ref(grams, sizes), atol=2e-8, rtol=2e-8)


def test_pyramid_launchers_are_not_shared_across_strides():
    from fusedsim.families.iwssim.pyramid_kernel import iwssim_reduce

    gen = torch.Generator().manual_seed(3)
    base = torch.rand(1, 2, 40, 64, generator=gen, dtype=torch.float64)
    # the same shape, contiguous (W stride 1, a constant to Triton), then every other column of a wider image
    wide = torch.rand(1, 2, 40, 128, generator=gen, dtype=torch.float64)
    for x in (base.cuda(), wide.cuda()[..., ::2]):  # sliced on the GPU: a copy there would be contiguous again
        got = iwssim_reduce(x).cpu()
        assert torch.equal(got, pyr_reduce_ref(x.cpu())), "bit-identical to the twin (catalog tolerance None)"


def test_binom_launchers_are_not_shared_across_input_widths():
    from fusedsim.families.iwssim.binom_kernel import iwssim_binom
    from fusedsim.families.iwssim.twin import binom_filter_ref

    gen = torch.Generator().manual_seed(4)
    # every 2nd output along W: widths 64 and 63 give the same 32 outputs (the key used to stop at the output)
    for width in (64, 63):
        x = torch.rand(1, 2, 24, width, generator=gen, dtype=torch.float64)
        got = iwssim_binom(x.cuda(), -1, 2).cpu()
        assert torch.equal(got, binom_filter_ref(x, -1, 2)), "bit-identical to the twin (catalog tolerance None)"

"""zensim's compiled CPU steps against their float32 twins: the colour transform gives the same bits; the per-scale
sums the same per-pixel values and maxima, with float64 row sums taken left to right (the twin lets PyTorch sum a
row: ~1e-16 relative apart)."""

from __future__ import annotations

import pytest
import torch

from fusedsim.families.zensim.cpu import linear_to_positive_xyb_numba, zensim_scale_sums_numba
from fusedsim.families.zensim.f32_twin import linear_to_positive_xyb_f32_ref, zensim_scale_sums_ref


def test_colour_transform_bit_identical_to_the_twin():
    gen = torch.Generator().manual_seed(7)
    # ordinary, tiny (small cube-root exponents), zero and above-1 linear values
    x = torch.cat([torch.rand(1, 3, 40, 50, generator=gen), torch.rand(1, 3, 40, 50, generator=gen) * 1e-4,
                   torch.zeros(1, 3, 40, 50), torch.rand(1, 3, 40, 50, generator=gen) * 3])
    assert torch.equal(linear_to_positive_xyb_numba(x), linear_to_positive_xyb_f32_ref(x))
    assert torch.equal(linear_to_positive_xyb_numba(x[:, :, 3:, ::2]), linear_to_positive_xyb_f32_ref(x[:, :, 3:, ::2]))


# one strip, several strips with a short last one, a reference batch of 1, a plane smaller than the blur window
@pytest.mark.parametrize("shape,ref_batch", [((2, 3, 20, 33), None), ((1, 3, 100, 77), None), ((2, 1, 40, 130), 1),
                                             ((1, 1, 7, 9), None)])
def test_scale_sums_equal_the_twin(shape, ref_batch):
    gen = torch.Generator().manual_seed(sum(shape))
    dst = torch.rand(shape, generator=gen)
    src = torch.rand((ref_batch or shape[0], *shape[1:]), generator=gen)
    src[..., :3, :4] = 0.5  # flat patches: the SSIM term's rounding residues matter there
    dst[..., :3, :4] = 0.5
    got, want = zensim_scale_sums_numba(src, dst), zensim_scale_sums_ref(src, dst)
    assert torch.equal(got[..., 17:], want[..., 17:])  # the float32 maxima
    torch.testing.assert_close(got, want, rtol=1e-14, atol=0.0)

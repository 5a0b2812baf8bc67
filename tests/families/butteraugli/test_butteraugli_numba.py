"""Butteraugli's compiled CPU filters against their twins: the Malta line sums and the blur on long axes give the
same bits (the twin's shifted sums); on axes of up to 1024 samples the twin multiplies by a dense matrix (BLAS's
summation order), so there the two agree to float64 rounding (the metric: metrics/test_cpu_paths.py)."""

from __future__ import annotations

import pytest
import torch

from fusedsim.families.butteraugli.cpu import butteraugli_blur_numba, malta_lines_numba
from fusedsim.families.butteraugli.filters_twin import (
    MALTA_HF_LINES,
    MALTA_LF_LINES,
    butteraugli_blur_ref,
    malta_lines_ref,
)

SIGMAS = [1.2, 1.56416327805, 2.7, 3.22489901262, 7.15593339443]  # 5 taps mirrored; longer renormalised


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("sigma", SIGMAS)
def test_blur_on_long_axes_is_bit_identical(sigma, dtype):
    x = torch.rand(1, 2, 1030, 1027, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(dtype)
    assert torch.equal(butteraugli_blur_numba(x, sigma), butteraugli_blur_ref(x, sigma))


@pytest.mark.parametrize("sigma", SIGMAS)
@pytest.mark.parametrize("shape", [(2, 3, 13, 17), (1, 1, 1, 3), (1, 1, 5, 2), (1, 2, 40, 9)])
def test_blur_on_short_axes_agrees_to_rounding(shape, sigma):
    x = torch.rand(shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    torch.testing.assert_close(butteraugli_blur_numba(x, sigma), butteraugli_blur_ref(x, sigma), rtol=1e-14,
                               atol=1e-15)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_malta_line_sums_are_bit_identical(dtype):
    d = torch.randn(2, 37, 45, generator=torch.Generator().manual_seed(3), dtype=torch.float64).to(dtype)
    for lines in (MALTA_HF_LINES, MALTA_LF_LINES):
        assert torch.equal(malta_lines_numba(d, lines), malta_lines_ref(d, lines))
        assert torch.equal(malta_lines_numba(d[:, 3:, ::2], lines), malta_lines_ref(d[:, 3:, ::2], lines))


def test_malta_line_sums_across_column_blocks_are_bit_identical():
    """Rows wider than one pass of the compiled sums (1024 columns): the blocks join without a seam."""
    d = torch.randn(1, 9, 1100, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    for lines in (MALTA_HF_LINES, MALTA_LF_LINES):
        assert torch.equal(malta_lines_numba(d, lines), malta_lines_ref(d, lines))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_malta_differences_are_bit_identical(dtype):
    """Both signs of lum0 and lum1 on both sides of the band [0.55|lum0|, 1.05|lum0|], and its edges."""
    from fusedsim.families.butteraugli.cpu import _diffs
    from fusedsim.families.butteraugli.filters_twin import malta_diffs_ref

    gen = torch.Generator().manual_seed(8)
    lum0 = torch.randn(2, 31, 40, generator=gen, dtype=torch.float64)
    lum1 = lum0 * (torch.rand(lum0.shape, generator=gen, dtype=torch.float64) * 2.4 - 0.6)
    lum1[0, 0, :4] = lum0[0, 0, :4] * 0.55
    lum1[0, 1, :4] = lum0[0, 1, :4] * 1.05
    lum0[1, 2, :3] = 0.0
    lum0, lum1 = lum0.to(dtype), lum1.to(dtype)
    for weights in ((1.0, 2.0, 3.0, 4.0), (1.1, 0.7, 1.0, 0.5)):
        assert torch.equal(_diffs(lum0, lum1, *weights), malta_diffs_ref(lum0, lum1, *weights))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fuzzy_erosion_is_bit_identical(dtype):
    """Ties, zeros, borders (the infinite padding), negative values (2x sorts before x) and NaN (sorted last)."""
    from fusedsim.families.butteraugli.cpu import fuzzy_erosion_numba
    from fusedsim.families.butteraugli.filters_twin import fuzzy_erosion_ref

    x = torch.rand(2, 23, 19, generator=torch.Generator().manual_seed(9), dtype=torch.float64) ** 3
    x[..., ::4, ::3] = 0.0
    x[0, 5, 6], x[1, 0, 0], x[1, 10, 10] = float("nan"), float("nan"), -0.5
    x = x.to(dtype)
    got, want = fuzzy_erosion_numba(x), fuzzy_erosion_ref(x)
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num())
    assert got[1, 10, 10] < 0 and not got[0, 5, 6].isnan()  # a NaN pixel's own candidates sort after its neighbours

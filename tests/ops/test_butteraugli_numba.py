"""Butteraugli's compiled CPU filters against their twins: the Malta line sums and the blur on long axes give the
same bits (the twin's shifted sums); on axes of up to 1024 samples the twin multiplies by a dense matrix (BLAS's
summation order), so there the two agree to float64 rounding (the metric: metrics/test_cpu_paths.py)."""

from __future__ import annotations

import pytest
import torch

from fusedsim.cpu.butteraugli_numba import butteraugli_blur_numba, malta_lines_numba
from fusedsim.reference.butteraugli_filters_ref import (
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

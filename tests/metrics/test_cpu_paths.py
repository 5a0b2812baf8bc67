"""The CPU path of a metric under ``auto`` (its ops' compiled CPU implementations) against the forced twins."""

from __future__ import annotations

import pytest
import torch

import fusedsim
from fusedsim.core.backend import use_backend


# DSSIM's compiled steps repeat the twin's arithmetic exactly; SSIMULACRA2's too, but it pools each map by row sums
# as the map is made where the twin takes PyTorch means of the stored maps; Butteraugli's blur sums like the twin's
# shifted sums, which the twin replaces by a dense matrix on axes of up to 1024 samples, and zensim sums each row
# left to right where the twin lets PyTorch sum it (float64 rounding apart, ~1e-16)
@pytest.mark.parametrize("name,rtol", [("ssimulacra2", 1e-12), ("dssim", 0.0), ("butteraugli", 1e-12),
                                       ("zensim", 1e-12)])
def test_metric_on_the_cpu_agrees_with_its_twin(name, rtol):
    gen = torch.Generator().manual_seed(4)
    ref = torch.randint(0, 256, (2, 3, 60, 70), generator=gen, dtype=torch.uint8)
    dist = (ref.to(torch.int16) + torch.randint(-20, 21, ref.shape, generator=gen)).clamp(0, 255).to(torch.uint8)
    metric = getattr(fusedsim, name)
    with use_backend("auto"):
        fast = metric(ref, dist)
    with use_backend("reference"):
        twin = metric(ref, dist)
    for got, want in zip(*((r,) if isinstance(r, torch.Tensor) else r for r in (fast, twin))):
        torch.testing.assert_close(got, want, rtol=rtol, atol=1e-14 if rtol else 0.0)


def test_butteraugli_cpu_decodes_uint8_codes_as_the_twin():
    """The compiled path looks codes up in the twin's decoding of the 256 codes; the twin decodes ``codes / 255``
    with PyTorch's vector pow (every value here: 768 of them, a whole number of vectors)."""
    from fusedsim.families.butteraugli.api import _cpu_filters, _linear
    from fusedsim.families.butteraugli.twin import TWIN_FILTERS

    codes = torch.arange(256, dtype=torch.uint8).repeat(3).reshape(1, 3, 16, 16)
    image = codes.to(torch.float64) / 255.0
    assert torch.equal(_linear(image, codes, _cpu_filters()), _linear(image, codes, TWIN_FILTERS))


def test_iw_ssim_on_the_cpu_agrees_with_its_twin():
    """IW-SSIM's windowed moments and information weights run compiled on the CPU: the same products, each window's
    taps summed in order where the twin's conv2d sums them its own way (float64 rounding apart)."""
    gen = torch.Generator().manual_seed(5)
    ref = torch.randint(0, 256, (1, 3, 180, 190), generator=gen, dtype=torch.uint8)
    dist = (ref.to(torch.int16) + torch.randint(-25, 26, ref.shape, generator=gen)).clamp(0, 255).to(torch.uint8)
    with use_backend("auto"):
        fast = fusedsim.iw_ssim(ref, dist)
    with use_backend("reference"):
        twin = fusedsim.iw_ssim(ref, dist)
    torch.testing.assert_close(fast, twin, rtol=1e-12, atol=1e-14)
    assert 0.0 < float(twin) < 1.0


def test_iw_ssim_cpu_gram_is_the_same_for_any_thread_count():
    """The compiled Gram matrix adds its rows' sums in row order, so its bits do not depend on how many threads
    summed the rows (a reference's prepared state must not change with the machine's core count)."""
    import numba

    from fusedsim.families.iwssim.cpu import iwssim_gram_numba

    gen = torch.Generator().manual_seed(6)
    band = 40.0 * torch.randn(2, 1, 61, 47, generator=gen, dtype=torch.float64)
    parent = 40.0 * torch.randn(2, 1, 61, 47, generator=gen, dtype=torch.float64)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = iwssim_gram_numba(band, parent, True)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = iwssim_gram_numba(band, parent, True)
    finally:
        numba.set_num_threads(before)
    assert torch.equal(one, many)
    assert torch.equal(one, one.transpose(1, 2))

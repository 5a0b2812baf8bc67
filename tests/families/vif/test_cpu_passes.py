"""The generated module of unrolled VIF filter passes is what its generator renders, and each pass computes the
twin's filtered rows (the specification: :func:`~fusedsim.families.vif.twin.reflect101_index` and ``FILTERS``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fusedsim.families.vif import cpu_passes
from fusedsim.families.vif.cpu_passes_source import render
from fusedsim.families.vif.twin import FILTERS


def test_generated_module_is_current():
    text = Path(cpu_passes.__file__).read_text()
    assert text == render(), ("cpu_passes.py differs from its generator: run "
                              "`python -m fusedsim.families.vif.cpu_passes_source > cpu_passes.py`")


def _reflect(i: int, n: int) -> int:
    return -i if i < 0 else (2 * n - 2 - i if i >= n else i)


@pytest.mark.parametrize("taps", FILTERS, ids=lambda t: f"{len(t)}taps")
@pytest.mark.parametrize("row", [0, 3, 20])
def test_vertical_pass_is_the_filter_sum(taps, row):
    """Every output of the vertical pass, against the filter sum written out in numpy (int64, exact)."""
    rng = np.random.default_rng(len(taps) + row)
    h, w = 21, 37
    x = rng.integers(0, 1024, (h, w)).astype(np.uint16)
    y = rng.integers(0, 1024, (h, w)).astype(np.uint16)
    f = np.array(taps, np.int64)
    rows = [_reflect(row - len(taps) // 2 + k, h) for k in range(len(taps))]
    xs, ys = x[rows].astype(np.int64), y[rows].astype(np.int64)
    shift_mu, shift_sq = 10, 4
    expected = [(f @ xs + (1 << 9)) >> 10, (f @ ys + (1 << 9)) >> 10, (f @ (xs * xs) + 8) >> 4,
                (f @ (ys * ys) + 8) >> 4, (f @ (xs * ys) + 8) >> 4]
    out = [np.zeros(w, np.int64) for _ in range(5)]
    getattr(cpu_passes, f"vertical_{len(taps)}")(x, y, row, *out, shift_mu, shift_sq)
    for got, want in zip(out, expected):
        np.testing.assert_array_equal(got, want)
    if len(taps) < 17:  # the next scale's single-image pass
        one = np.zeros(w, np.int64)
        getattr(cpu_passes, f"vertical_one_{len(taps)}")(x, row, one, shift_mu)
        np.testing.assert_array_equal(one, expected[0])


@pytest.mark.parametrize("taps", FILTERS, ids=lambda t: f"{len(t)}taps")
def test_horizontal_passes_are_the_filter_sum(taps):
    rng = np.random.default_rng(len(taps))
    w = 29
    v = rng.integers(0, 2**32, w + len(taps) - 1).astype(np.int64)  # squares' rows reach 2**32
    f = np.array(taps, np.int64)
    want = np.array([f @ v[j:j + len(taps)] for j in range(w)])
    out = np.zeros(w, np.int64)
    getattr(cpu_passes, f"horizontal_{len(taps)}")(v, out)
    np.testing.assert_array_equal(out, want)
    if len(taps) < 17:  # even columns, round-shifted, wrapped by a uint16 output as libvmaf's store
        even = np.zeros(w // 2, np.uint16)
        getattr(cpu_passes, f"horizontal_even_{len(taps)}")(v, even, 16)
        np.testing.assert_array_equal(even, ((want[0:2 * (w // 2):2] + 32768) >> 16).astype(np.uint16))


@pytest.mark.parametrize("row", [0, 9])
def test_eight_bit_vertical_pass_on_32_bit_lanes_is_the_filter_sum(row):
    """Scale 0 of 8-bit frames: every sum on 32-bit lanes. All-255 rows give the largest sums (255**2 * 2**16,
    just below 2**32); the means' rows are int32, the squares' uint32, as the CPU kernel allocates them."""
    taps = FILTERS[0]
    rng = np.random.default_rng(row)
    h, w = 19, 33
    x = rng.integers(0, 256, (h, w)).astype(np.uint8)
    y = rng.integers(0, 256, (h, w)).astype(np.uint8)
    x[:, :8] = 255
    y[:, :8] = 255
    f = np.array(taps, np.int64)
    rows = [_reflect(row - len(taps) // 2 + k, h) for k in range(len(taps))]
    xs, ys = x[rows].astype(np.int64), y[rows].astype(np.int64)
    expected = [(f @ xs + 128) >> 8, (f @ ys + 128) >> 8, f @ (xs * xs), f @ (ys * ys), f @ (xs * ys)]
    assert max(int(e.max()) for e in expected) > 2**31  # the squares' sums use the 32nd bit
    out = [np.zeros(w, np.int32), np.zeros(w, np.int32)] + [np.zeros(w, np.uint32) for _ in range(3)]
    cpu_passes.vertical_narrow_17(x, y, row, *out, 8, 0)
    for got, want in zip(out, expected):
        np.testing.assert_array_equal(got.astype(np.int64), want)


@pytest.mark.parametrize("taps", FILTERS, ids=lambda t: f"{len(t)}taps")
def test_horizontal_mean_passes_are_the_filter_sum(taps):
    """Rows of means (16-bit values, taps summing to 2**16): sums up to just below 2**32 in uint32 rows."""
    rng = np.random.default_rng(len(taps))
    w = 29
    v = rng.integers(0, 2**16, w + len(taps) - 1).astype(np.uint32)
    v[:len(taps)] = 2**16 - 1
    f = np.array(taps, np.int64)
    want = np.array([f @ v[j:j + len(taps)].astype(np.int64) for j in range(w)])
    assert want.max() > 2**31
    out = np.zeros(w, np.uint32)
    getattr(cpu_passes, f"horizontal_mean_{len(taps)}")(v, out)
    np.testing.assert_array_equal(out.astype(np.int64), want)

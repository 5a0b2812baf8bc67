"""The exact sequential double sum kernel against ``s = 0.0; for v in row: s += v`` (``==``, sign of zero too).

Inputs are chosen to break shortcuts: ties at every binade, sign changes and cancellation to zero, runs of zeros,
powers of two over 60 binades, subnormals, huge values with overflow, NaN and infinities. Small chunk and block
sizes put many chunk boundaries and block steps into each row (more chunks than one vector step of phase 2 holds);
the two-phase path (vector and one-chunk-per-step scans) and the walk-only path run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fusedsim.vmaf.sequential_sum_kernel import sequential_sum_fwd
from fusedsim.vmaf.sequential_sum_twin import sequential_sum_ref


def _python_sum(row):
    s = 0.0
    for v in row:
        s += v
    return s


def _cases():
    rng = np.random.default_rng(0)
    n = 3000
    yield "positive", rng.random(n) * 65536
    yield "ssim-like", np.concatenate([rng.random(n // 2) * 26244, rng.random(n // 2) * 65536])
    yield "dyadic-ties", np.round(rng.random(n) * 8) / 8 * 1000
    yield "constant", np.full(n, 65536.0)
    yield "signs", rng.choice([0.5, 1.0, 0.25, 2.0**-40, 3.0], size=800) * rng.choice([1, -1], size=800)
    yield "powers-of-two", 2.0 ** rng.integers(-30, 30, size=n) * rng.choice([1, -1], size=n)
    yield "random-walk", rng.random(500) * 2 - 1
    yield "cancel-to-zero", np.concatenate([[1.0, -1.0] * 50, [-0.0, 0.0, -0.0], rng.random(100)])
    yield "zeros-then-data", np.concatenate([np.zeros(700), [-0.0, 2.5], rng.random(500)])
    yield "all-negative-zero", np.array([-0.0] * 300)
    yield "subnormal", np.array([5e-324, 1e-310, 3.0, -3.0] * 40)
    yield "overflow", np.array([1e308, 1e308, -1e308, 5.0] * 40)
    x = rng.random(n)
    x[1200] = np.inf
    yield "inf", x
    x = rng.random(n)
    x[700], x[2100] = np.inf, -np.inf
    yield "inf-minus-inf", x
    x = rng.random(n)
    x[1500] = np.nan
    yield "nan", x
    yield "short", rng.random(5)


CASES = list(_cases())


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


@pytest.mark.parametrize("name, row", CASES, ids=[c[0] for c in CASES])
def test_twin_is_the_python_loop(name, row):
    x = torch.from_numpy(np.stack([row, row[::-1].copy()]))
    got = sequential_sum_ref(x).tolist()
    assert all(_same(g, _python_sum(r)) for g, r in zip(got, (row, row[::-1])))


@pytest.mark.parametrize("name, row", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("mode", ["vector", "chunkwise", "walk"])
def test_kernel_equals_python_loop(name, row, mode, kernel_device):
    x = torch.from_numpy(np.stack([row, row[::-1].copy()])).to(kernel_device)
    got = sequential_sum_fwd(x, use_summary=mode != "walk", vector_scan=mode == "vector", chunk=128,
                             block=64).cpu().tolist()
    want = [_python_sum(row), _python_sum(row[::-1])]
    assert all(_same(g, w) for g, w in zip(got, want)), (got, want)


def test_default_sizes_and_strided_rows(kernel_device):
    rng = np.random.default_rng(1)
    rows = rng.random((3, 70000)) * 65536
    x = torch.from_numpy(rows).to(kernel_device)
    want = [_python_sum(r) for r in rows[:, ::1]]
    assert sequential_sum_fwd(x).cpu().tolist() == want
    assert sequential_sum_fwd(x, vector_scan=False).cpu().tolist() == want
    # every other row of a taller matrix (row stride 2 * L)
    tall = torch.from_numpy(np.repeat(rows, 2, axis=0)).to(kernel_device)[::2]
    assert sequential_sum_fwd(tall).cpu().tolist() == want


def test_empty_and_bad_input(kernel_device):
    assert sequential_sum_fwd(torch.zeros(2, 0, dtype=torch.float64, device=kernel_device)).tolist() == [0.0, 0.0]
    with pytest.raises(TypeError, match="float64"):
        sequential_sum_fwd(torch.zeros(2, 3, device=kernel_device))
    with pytest.raises(ValueError, match=r"\(N, L\)"):
        sequential_sum_fwd(torch.zeros(3, dtype=torch.float64, device=kernel_device))

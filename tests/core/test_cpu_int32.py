"""The numba int32 intrinsics compute what C's ``int32_t`` arithmetic does: numpy's int32 arrays (which wrap the
same way) are the oracle, on edge values and random ones, with operands of other integer types converted first."""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from fusedsim.core.cpu.int32 import abs32, add32, lshr32, mul32, shl32, shr32, sub32, to16  # noqa: E402

EDGES = np.array([0, 1, -1, 2, -2, 32767, -32768, 65535, 2**30, -(2**30), 2**31 - 1, -(2**31)], dtype=np.int64)


@numba.njit
def _apply(a, b, shift):
    n = a.shape[0]
    out = np.empty((8, n), np.int64)
    for j in range(n):
        out[0, j] = add32(a[j], b[j])
        out[1, j] = sub32(a[j], b[j])
        out[2, j] = mul32(a[j], b[j])
        out[3, j] = shr32(a[j], shift[j])
        out[4, j] = lshr32(a[j], shift[j])
        out[5, j] = shl32(a[j], shift[j])
        out[6, j] = abs32(a[j])
        out[7, j] = to16(a[j])
    return out


def _operands() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    a = np.concatenate([np.repeat(EDGES, EDGES.size), rng.integers(-(2**31), 2**31, 4000)])
    b = np.concatenate([np.tile(EDGES, EDGES.size), rng.integers(-(2**31), 2**31, 4000)])
    shift = rng.integers(0, 32, a.size)
    return a, b, shift


def test_int32_arithmetic_wraps_as_c():
    a, b, shift = _operands()
    got = _apply(a, b, shift)
    a32, b32 = a.astype(np.int32), b.astype(np.int32)
    with np.errstate(over="ignore"):
        want = [a32 + b32, a32 - b32, a32 * b32, a32 >> shift.astype(np.int32),
                (a32.view(np.uint32) >> shift.astype(np.uint32)).view(np.int32), a32 << shift.astype(np.int32),
                np.abs(a32), a32.astype(np.int16)]
    for k, (row, expected) in enumerate(zip(got, want)):
        assert np.array_equal(row, expected.astype(np.int64)), k


@numba.njit
def _narrow_operands(x16, u16, u32):
    n = x16.shape[0]
    out = np.empty((3, n), np.int64)
    for j in range(n):
        out[0, j] = add32(x16[j], 0)  # int16: sign-extended
        out[1, j] = add32(u16[j], 0)  # uint16: zero-extended
        out[2, j] = add32(u32[j], 0)  # uint32: its 32 bits
    return out


def test_narrower_and_unsigned_operands_convert_as_c():
    x16 = np.array([-32768, -1, 0, 32767], np.int16)
    u16 = np.array([0, 1, 32768, 65535], np.uint16)
    u32 = np.array([0, 2**31 - 1, 2**31, 2**32 - 1], np.uint32)
    got = _narrow_operands(x16, u16, u32)
    assert got[0].tolist() == [-32768, -1, 0, 32767]
    assert got[1].tolist() == [0, 1, 32768, 65535]
    assert got[2].tolist() == [0, 2**31 - 1, -(2**31), -1]

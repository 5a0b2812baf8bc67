"""What the video kernels compile to on a CUDA target (sm_90, compiled without a GPU): the properties their speed
rests on, which the interpreter cannot show. Their values are tested against the twins in
``tests/core/test_registry.py``. In a program of BLOCK = 256 columns and 4 warps each thread holds 2 columns."""

from __future__ import annotations

import re

import pytest

from _offline_compile import compiled_asm

COLUMNS_PER_THREAD = 2
TAPS = 13


def _count(ptx: str, pattern: str) -> int:
    return len(re.findall(pattern, ptx))


@pytest.fixture(scope="module")
def blur_taps() -> list[float]:
    from fusedsim.families.cvvdp.video_band_kernel import _taps

    return list(_taps())


def test_vertical_blur_loads_each_input_row_once_and_forms_no_product_by_zero(blur_taps):
    # 8 output rows a program take 8 + 12 input rows: 20 loads a column, no loaded weights; each output row has its
    # 13 products and no more (a shared (rows, columns) accumulator would form 20 a row, 7 of them by zero)
    sig = {"X": "*fp32", "OUT": "*fp32", "h": "i32", "w": "i32", "sn": "i32", "sc": "i32", "HW": "i32"}
    ptx = compiled_asm("fusedsim.families.cvvdp.video_band_kernel:_vblur_kernel", sig,
                       {"T": blur_taps, "C": 4, "NT": TAPS, "BLOCK": 256}, "ptx", num_warps=4)
    assert _count(ptx, r"ld\.global") == (8 + TAPS - 1) * COLUMNS_PER_THREAD
    assert _count(ptx, r"fma\.rn\.f32") == 8 * TAPS * COLUMNS_PER_THREAD


def test_temporal_codes_read_each_window_frame_once_per_program():
    # 4 output frames at 30 fps (9 taps) read 4 + 8 window frames of 3 code planes once each; an output frame at a
    # time read 9 frames for each of the 4 outputs (36 instead of 12)
    sig = {"X": "*u8", "LUM": "*fp32", "TAB": "*fp32", "OUT": "*fp32", "HW": "i32", "frames": "i32", "sn": "i32",
           "ss": "i32", "sc": "i32", **{f"M{r}{c}": "fp32" for r in range(3) for c in range(3)}}
    ptx = compiled_asm("fusedsim.families.cvvdp.temporal_kernel:_temporal_codes_kernel", sig,
                       {"NT": 9, "FRAMES": 4, "BLOCK": 256}, "ptx", num_warps=4)
    assert _count(ptx, r"ld\.global(?:\.nc)?\.b8") == (4 + 9 - 1) * 3 * COLUMNS_PER_THREAD

"""The rows-per-program model (``ops/waves.py``): its schedule against a program-by-program simulation, its
occupancy arithmetic against CUDA's allocation rules, and its choices against kernel times measured on an H100."""

from __future__ import annotations

import heapq
import random

import pytest

from fusedsim.core.waves import _EXACT_WAVES, makespan, resident_programs, segment_rows


def _simulated(total_rows: int, rows: int, strips: int, planes: int, slots: int, halo: int) -> int:
    """Greedy list scheduling one program at a time, in launch order (strips fastest, then segments, planes)."""
    segments = -(-total_rows // rows)
    lengths = [min(rows, total_rows - s * rows) + halo for _ in range(planes) for s in range(segments)
               for _ in range(strips)]
    free = [0] * slots
    end = 0
    for length in lengths:
        start = heapq.heappop(free)
        end = max(end, start + length)
        heapq.heappush(free, start + length)
    return end


def test_makespan_equals_program_by_program_scheduling():
    rng = random.Random(0)
    checked = 0
    while checked < 300:
        total, rows = rng.randint(1, 400), rng.randint(1, 128)
        strips, planes, slots, halo = rng.randint(1, 9), rng.randint(1, 7), rng.randint(1, 60), rng.randint(0, 20)
        programs = strips * -(-total // rows) * planes
        if programs > _EXACT_WAVES * slots:
            continue
        assert makespan(total, rows, strips, planes, slots, halo) == _simulated(total, rows, strips, planes, slots,
                                                                                halo), (total, rows, strips, planes,
                                                                                        slots, halo)
        checked += 1


def test_many_waves_are_estimated_within_one_program():
    """Past the exact range the estimate counts whole waves of full programs: never more than one program's
    length away from the schedule."""
    rng = random.Random(1)
    for _ in range(100):
        total, rows = rng.randint(200, 2000), rng.randint(8, 64)
        strips, planes, slots, halo = rng.randint(4, 16), rng.randint(4, 12), rng.randint(2, 12), 10
        if strips * -(-total // rows) * planes <= _EXACT_WAVES * slots:
            continue
        exact = _simulated(total, rows, strips, planes, slots, halo)
        assert abs(makespan(total, rows, strips, planes, slots, halo) - exact) <= rows + halo


@pytest.mark.parametrize(("registers", "warps", "programs"), [
    (120, 4, 4),  # the saving forward's cap: 15360 registers a program, 4 fit 65536
    (72, 4, 7),  # the saved-maps backward's cap
    (158, 4, 3),  # rounded to 160 a thread (256 a warp): 20480 a program
    (32, 4, 16),  # then 2048 threads an SM bound it
    (16, 1, 32),  # and 32 programs an SM
    (255, 8, 1),
])
def test_resident_programs_follow_cuda_allocation(registers, warps, programs):
    assert resident_programs(registers, warps) == programs


# Kernel times of 14 row counts (32 .. 270) on an H100 (132 SMs), K = 11, 128-column strips, Triton 3.6
# (benchmarks/results/tune-ssim rows sweep, benchmarks/NOTES.md "Rows per program by makespan"): the row count
# measured fastest, for the forward (4 programs an SM) and the saved-maps backward (7).
@pytest.mark.parametrize(("shape", "programs_per_sm", "fastest"), [
    ((5, 5, 1080, 1920), 4, 155),  # 682 us; 128 rows: 714
    ((5, 5, 1080, 1920), 7, 155),  # 586 us; 128 rows: 611
    ((1, 3, 1080, 1920), 4, 96),  # 88 us; 64 rows: 106
    ((1, 3, 1080, 1920), 7, 54),  # 81.5 us; 64 rows: 84
    ((1, 3, 800, 800), 4, 32),
    ((1, 3, 800, 800), 7, 32),
])
def test_choices_match_the_measured_fastest(shape, programs_per_sm, fastest):
    n, c, h, w = shape
    assert segment_rows(h, -(-w // 128), n * c, programs_per_sm * 132, 10) == fastest


def test_segment_rows_bounds():
    assert segment_rows(20, 3, 1, 100, 10) == 20  # no more rows than the image
    assert 32 <= segment_rows(5000, 1, 1, 1, 10) <= 512  # one slot: long segments, within the bounds
    assert segment_rows(5000, 1, 1, 1, 10, max_rows=128) <= 128
    assert segment_rows(300, 2, 2, 0, 10) == 300  # no slots known: one segment

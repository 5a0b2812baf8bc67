"""Rows per program of the streaming-window kernels, chosen by an estimate of the grid's makespan.

A program of the SSIM kernels streams one segment of output rows of one column strip, plus the window's halo
rows, which every segment re-reads. Long segments cost less halo; but the grid then has fewer programs, and its
last wave may leave most resident slots idle (one 1080-row RGB image in 64-row segments is 1.4 waves of the
saving forward on a 132-SM GPU; 96-row segments make it one). :func:`segment_rows` picks the segment length that
minimises the estimated time of the whole grid: programs are dispatched in launch order (column strips fastest,
then segments, then planes) to the first free of ``slots`` resident programs, each taking its rows plus the halo
(greedy list scheduling; the last segment of a plane is shorter). Against kernel times of ten row counts at seven
shapes on an H100, its choice was the fastest or within 3% of it (``benchmarks/NOTES.md``, "Rows per program by
makespan")."""

from __future__ import annotations

import heapq

from fusedsim.core.state import cached

# Past this many waves the schedule is estimated by whole waves of full programs (exact scheduling would cost
# host time for a tail that is a small part of the kernel)
_EXACT_WAVES = 16
REGISTERS_PER_SM, THREADS_PER_SM, BLOCKS_PER_SM = 65536, 2048, 32


def resident_programs(registers: int, warps: int) -> int:
    """Programs of ``warps`` warps at ``registers`` per thread that fit one NVIDIA multiprocessor (registers are
    allocated per warp in units of 256)."""
    per_warp = -(-registers * 32 // 256) * 256
    return max(1, min(REGISTERS_PER_SM // (per_warp * warps), THREADS_PER_SM // (32 * warps), BLOCKS_PER_SM))


def makespan(total_rows: int, rows: int, strips: int, planes: int, slots: int, halo: int) -> int:
    """Estimated time, in streamed rows, of a grid of ``strips`` column strips x ceil(total_rows / rows) segments
    x ``planes`` whose programs each stream their segment's rows plus ``halo``, on ``slots`` resident programs."""
    segments = -(-total_rows // rows)
    full, last = rows + halo, total_rows - (segments - 1) * rows + halo
    programs = strips * segments * planes
    if programs <= slots:
        return full if segments > 1 else last
    if programs > _EXACT_WAVES * slots:  # whole waves of the work, in full programs
        work = strips * planes * ((segments - 1) * full + last)
        return -(-work // (slots * full)) * full
    block = strips * segments  # one plane's programs; its last ``strips`` are the short ones

    def short_before(index: int) -> int:
        return (index // block) * strips + max(0, index % block - (segments - 1) * strips)

    free = {0: slots}  # time -> programs that become free then
    times = [0]
    started = end = 0
    while started < programs:
        t = heapq.heappop(times)
        n = min(free.pop(t), programs - started)
        short = short_before(started + n) - short_before(started)
        for length, count in ((full, n - short), (last, short)):
            if count:
                done = t + length
                end = max(end, done)
                if done not in free:
                    free[done] = 0
                    heapq.heappush(times, done)
                free[done] += count
        started += n
    return end


@cached(maxsize=1024)
def segment_rows(total_rows: int, strips: int, planes: int, slots: int, halo: int, min_rows: int = 32,
                 max_rows: int = 512) -> int:
    """Output rows per program (``min_rows`` .. ``max_rows``, or all rows when fewer) minimising
    :func:`makespan`; among equal estimates the longest segments (the least halo work). Candidates: every even
    split of the rows and every multiple of 8 (a short last segment can fit a grid into one wave)."""
    if total_rows <= min_rows or slots <= 0:
        return max(1, total_rows)
    top = min(total_rows, max_rows)
    candidates = {-(-total_rows // s) for s in range(1, -(-total_rows // min_rows) + 1)}
    candidates |= set(range(-(-min_rows // 8) * 8, top + 1, 8))
    best, best_time = top, None
    for rows in sorted((r for r in candidates if min_rows <= r <= top), reverse=True):
        segments = -(-total_rows // rows)
        work = strips * planes * (total_rows + segments * halo)
        if best_time is not None and max(rows + halo if segments > 1 else total_rows + halo,
                                         -(-work // slots)) >= best_time:
            continue  # its lower bound (the longest program, or the work spread over every slot) cannot win
        t = makespan(total_rows, rows, strips, planes, slots, halo)
        if best_time is None or t < best_time:
            best, best_time = rows, t
    return best


__all__ = ["makespan", "resident_programs", "segment_rows"]

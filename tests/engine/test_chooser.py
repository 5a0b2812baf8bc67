"""The chooser is a pure function of (bench cache, task, context): decisions on synthetic caches."""

from __future__ import annotations

import pytest

from fusedsim.engine.bench_cache import BenchCache, Measurement
from fusedsim.engine.chooser import Task, choose

MiB = 1 << 20


def _cache(cold_cuda: float = 2.0) -> BenchCache:
    rows = []
    for side in (256, 1024):
        n = side * side * 3
        rows += [
            Measurement("ssim", "cpu full", side, side, 3, seconds=n * 50e-9, peak_bytes=n * 56),
            Measurement("ssim", "cuda full", side, side, 3, seconds=2e-4 + n * 0.5e-9, peak_bytes=n * 40),
            Measurement("ssim", "cuda strip 256", side, side, 3, seconds=3e-4 + n * 0.7e-9,
                        peak_bytes=256 * side * 3 * 40),
        ]
    return BenchCache(identity={"gpu": "G", "driver": "1"}, created=0.0, measurements=rows,
                      cold_seconds={"cpu": 0.0, "cuda": cold_cuda})


def test_batch_ranks_by_warm_time():
    choice = choose(_cache(), Task("ssim", 512, 512), "batch")
    assert choice.backend == "cuda full"
    assert [c.backend for c in choice.candidates] == ["cuda full", "cuda strip 256", "cpu full"]
    assert all(c.feasible for c in choice.candidates)


def test_one_shot_small_job_runs_on_the_cpu_large_on_the_gpu():
    # 256^2 RGB on the CPU: ~10 ms, far below the GPU's 2 s cold start
    assert choose(_cache(), Task("ssim", 256, 256), "one-shot").backend == "cpu full"
    # 8000^2 RGB: the CPU needs ~9.6 s, the GPU 2 s cold + ~0.1 s
    big = choose(_cache(), Task("ssim", 8000, 8000), "one-shot")
    assert big.backend == "cuda full"
    cpu = next(c for c in big.candidates if c.backend == "cpu full")
    assert cpu.seconds == pytest.approx(8000 * 8000 * 3 * 50e-9)  # extrapolated at the measured rate


def test_budget_makes_full_infeasible_and_strips_win():
    task = Task("ssim", 8000, 8000, budgets={"cuda": 1024 * MiB, "cpu": 512 * MiB})
    choice = choose(_cache(), task, "batch")
    assert choice.backend == "cuda strip 256"
    full = next(c for c in choice.candidates if c.backend == "cuda full")
    assert not full.feasible and "budget" in full.why
    strip = next(c for c in choice.candidates if c.backend == "cuda strip 256")
    assert strip.peak_bytes == 256 * 8000 * 3 * 40  # a strip's memory follows the width, not the area


def test_nothing_measured_or_nothing_fits():
    empty = choose(_cache(), Task("psnr", 64, 64), "batch")
    assert empty.backend is None and empty.candidates == () and "fusedsim bench" in empty.reason
    assert choose(None, Task("ssim", 64, 64), "batch").backend is None
    tight = choose(_cache(), Task("ssim", 8000, 8000, budgets={"cuda": 1, "cpu": 1}), "batch")
    assert tight.backend is None and len(tight.candidates) == 3 and "budget" in tight.reason


def test_interpolates_between_measured_sizes():
    cache = _cache()
    side = 640
    n = side * side * 3
    cpu = next(c for c in choose(cache, Task("ssim", side, side), "batch").candidates if c.backend == "cpu full")
    assert cpu.seconds == pytest.approx(n * 50e-9)  # linear in the values between the two points


def test_bad_context():
    with pytest.raises(ValueError, match="context must be one of one-shot, batch"):
        choose(_cache(), Task("ssim", 64, 64), "warm")


def test_scorer_starts_the_ladder_at_the_choice_of_a_fresh_cache():
    import time

    from engine_pairs import image_pair

    from fusedsim.engine import Scorer
    from fusedsim.engine.bench_cache import save_bench_cache
    from fusedsim.engine.machine import machine_identity

    ref, dist = image_pair(100, 120)
    assert Scorer(["ssim"], device="cpu", context="batch").score(ref, dist).backend == "cpu full"  # no cache yet
    n = 100 * 120 * 3
    save_bench_cache(BenchCache(machine_identity(), time.time(), cold_seconds={"cpu": 0.0}, measurements=[
        Measurement("ssim", "cpu full", 100, 120, 3, seconds=n * 90e-9, peak_bytes=n * 90),
        Measurement("ssim", "cpu strip 16", 100, 120, 3, seconds=n * 60e-9, peak_bytes=26 * 360 * 90),
        Measurement("ssim", "cuda full", 100, 120, 3, seconds=n * 1e-9, peak_bytes=n * 40),  # not on this device
    ]))
    scorer = Scorer(["ssim"], device="cpu", context="batch")
    result = scorer.score(ref, dist)
    assert result.backend == "cpu strip 16"
    assert [c.backend for c in scorer.choices["ssim"].candidates] == ["cpu strip 16", "cpu full"]
    assert Scorer(["ssim"], device="cpu").score(ref, dist).backend == "cpu full"  # no context: the fixed ladder
    assert Scorer(["ssim"], device="cpu", memory="full", context="batch").score(ref, dist).backend == "cpu full"
    with pytest.raises(ValueError, match="context must be one of one-shot, batch or None"):
        Scorer(["ssim"], context="later")

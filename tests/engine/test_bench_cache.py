"""The bench cache: round trip, staleness (a week, a GPU or driver change), corrupt files, and `fusedsim bench`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from fusedsim.engine.bench_cache import (
    MAX_AGE_S,
    BenchCache,
    Measurement,
    load_bench_cache,
    save_bench_cache,
    staleness,
)
from fusedsim.engine.chooser import Task, choose
from fusedsim.engine.machine import cache_path, machine_identity

IDENT = {"gpu": "NVIDIA H200", "driver": "12080 (cuda 12.8)", "cpu": "x86", "cpu_count": 16}


def _cache(created: float) -> BenchCache:
    return BenchCache(identity=dict(IDENT), created=created, cold_seconds={"cuda": 1.5},
                      measurements=[Measurement("ssim", "cuda full", 64, 64, 3, 1e-4, 100_000)])


def test_round_trip_and_fresh():
    now = time.time()
    save_bench_cache(_cache(now))
    loaded = load_bench_cache(IDENT, now=now + 3600)
    assert loaded is not None and loaded.measurements == _cache(now).measurements
    assert loaded.cold_seconds == {"cuda": 1.5}


def test_stale_after_a_week_or_a_gpu_or_driver_change():
    cache = _cache(1000.0)
    assert staleness(cache, IDENT, 1000.0 + MAX_AGE_S - 1) is None
    assert "days ago" in staleness(cache, IDENT, 1000.0 + MAX_AGE_S + 1)
    assert "gpu changed" in staleness(cache, {**IDENT, "gpu": "NVIDIA B200"}, 1000.0)
    assert "driver changed" in staleness(cache, {**IDENT, "driver": "13000"}, 1000.0)
    save_bench_cache(cache)
    assert load_bench_cache(IDENT, now=1000.0 + MAX_AGE_S + 1) is None
    # another GPU or driver is another machine key: its cache file is not this one
    assert cache_path("bench", IDENT) != cache_path("bench", {**IDENT, "driver": "13000"})


def test_corrupt_or_foreign_files_read_as_no_cache():
    path = cache_path("bench", IDENT)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    assert load_bench_cache(IDENT, now=0.0) is None
    path.write_text(json.dumps({"version": 99}))
    assert load_bench_cache(IDENT, now=0.0) is None


def test_bench_command_fills_the_cache_the_chooser_reads(capsys):
    from fusedsim.cli.main import main

    # ms-ssim: 161 px at least, and a 140-row body is one strip of a 161-row image (the rest is under its halo)
    assert main(["bench", "--metric", "psnr,ssim,ms-ssim", "--sizes", "24,48", "--strip-rows", "16", "--repeats", "1",
                 "--device", "cpu", "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["skipped"] == [f"ms-ssim at {s}px: below its minimum size 161" for s in (24, 48)]
    assert Path(payload["path"]).parent == Path(os.environ["FUSEDSIM_CACHE_DIR"])
    cache = load_bench_cache(machine_identity())
    assert cache is not None
    got = {(m.metric, m.backend, m.height) for m in cache.measurements}
    assert got == {(m, b, s) for m in ("psnr", "ssim") for s in (24, 48) for b in ("cpu full", "cpu strip 16")}
    assert all(m.seconds > 0 and m.peak_bytes >= 0 for m in cache.measurements)
    choice = choose(cache, Task("ssim", 1000, 1000), "batch")
    assert choice.backend in ("cpu full", "cpu strip 16") and len(choice.candidates) == 2

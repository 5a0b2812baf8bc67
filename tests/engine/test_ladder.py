"""The OOM ladder: injected out-of-memory errors move a metric down the ladder, are recorded per machine, and the
recorded step is skipped next time for pairs at least as large."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from engine_pairs import image_pair

from fusedsim.engine import Scorer
from fusedsim.engine.ladder import InjectedOOM, Step, is_oom, set_fault_hook


def _oom_on(metric: str, backend: str):
    calls = []

    def hook(m: str, b: str) -> None:
        calls.append((m, b))
        if m == metric and b.startswith(backend):
            raise InjectedOOM(f"injected: {m} on {b}")

    return hook, calls


def _records() -> dict:
    folder = Path(os.environ["FUSEDSIM_CACHE_DIR"])
    (path,) = folder.glob("ladder-*.json")
    return json.loads(path.read_text())["failures"]


def test_cpu_full_oom_falls_back_to_strips_and_is_recorded():
    ref, dist = image_pair()
    expected = Scorer(["ssim", "psnr"], device="cpu", memory="full").score(ref, dist).values
    hook, calls = _oom_on("ssim", "cpu full")
    set_fault_hook(hook)
    result = Scorer(["ssim", "psnr"], device="cpu", memory="auto").score(ref, dist)
    assert result.backends["ssim"].startswith("cpu strip") and result.backends["psnr"] == "cpu full"
    assert result.values["ssim"] == pytest.approx(expected["ssim"], abs=1e-6)
    assert len(result.downgrades) == 1 and "ssim: cpu full ran out of memory (injected" in result.downgrades[0]
    assert calls[:2] == [("ssim", "cpu full"), ("ssim", result.backends["ssim"])]
    (entry,) = _records()["ssim|cpu full"]["c3"]
    assert (entry["height"], entry["width"]) == (200, 300) and "injected" in entry["reason"]

    # the same machine does not try the failing step again for pairs this large, but does for smaller ones
    set_fault_hook(None)
    again = Scorer(["ssim"], device="cpu").score(ref, dist)
    assert again.backends["ssim"].startswith("cpu strip")
    assert again.downgrades == ["ssim: skipped cpu full: out of memory before on this machine at 300x200"]
    small_ref, small_dist = image_pair(100, 120)
    small = Scorer(["ssim"], device="cpu").score(small_ref, small_dist)
    assert small.backend == "cpu full" and small.downgrades == []


def test_other_errors_are_not_downgrades():
    def hook(metric: str, backend: str) -> None:
        raise ValueError("a bug, not memory")

    set_fault_hook(hook)
    ref, dist = image_pair(40, 40)
    with pytest.raises(ValueError, match="a bug, not memory"):
        Scorer(["ssim"], device="cpu").score(ref, dist)
    assert not list(Path(os.environ["FUSEDSIM_CACHE_DIR"]).glob("ladder-*.json"))


def test_oom_on_the_last_step_is_raised():
    set_fault_hook(_oom_on("ssim", "cpu")[0])  # cpu full, then cpu strip: both fail
    ref, dist = image_pair(40, 40)
    with pytest.raises(MemoryError, match="injected: ssim on cpu strip"):
        Scorer(["ssim"], device="cpu").score(ref, dist)


def test_low_ram_cap_makes_auto_choose_strips(monkeypatch):
    from fusedsim.engine import memory

    monkeypatch.setattr(memory, "process_rss", lambda: 500_000)  # what the process holds already
    monkeypatch.setenv("FUSEDSIM_RAM_CAP_BYTES", "1000000")  # ~1 MB: a 300x200 RGB SSIM needs ~16 MB in full
    ref, dist = image_pair()
    result = Scorer(["ssim", "psnr"], device="cpu").score(ref, dist)
    # budget 80% of (cap - resident): ssim 0.4 MB / (90 B * 900 values per row) - 10 halo rows < 16, the smallest
    # strip; psnr 0.4 MB / (16 B * 900) = 27 rows
    assert result.backends == {"ssim": "cpu strip 16", "psnr": "cpu strip 27"} and result.downgrades == []
    monkeypatch.setenv("FUSEDSIM_RAM_CAP_BYTES", str(500_000 + 900 * 90 * 50))  # 80%: 40 - 10 halo rows of SSIM
    result = Scorer(["ssim", "psnr"], device="cpu").score(ref, dist)
    assert result.backends == {"ssim": "cpu strip 30", "psnr": "cpu full"}  # psnr: 2.9 MB in full
    monkeypatch.setenv("FUSEDSIM_RAM_CAP_BYTES", "lots")
    with pytest.raises(ValueError, match="FUSEDSIM_RAM_CAP_BYTES must be a number of bytes"):
        Scorer(["ssim"], device="cpu").score(ref, dist)


def test_gpu_ladder_order_and_vram_cap(monkeypatch):
    """The ladder of a GPU scorer (planned only: no GPU is needed to list the steps)."""
    ref, _ = image_pair()
    scorer = Scorer(["ssim", "butteraugli"], device="cpu", memory="auto")
    scorer.device = torch.device("cuda", 0)
    from fusedsim.engine import memory

    monkeypatch.setattr(memory, "process_rss", lambda: 500_000)  # the cap is on the whole process: pin its size
    monkeypatch.setenv("FUSEDSIM_VRAM_CAP_BYTES", str(1 << 30))
    monkeypatch.setenv("FUSEDSIM_RAM_CAP_BYTES", str(1 << 30))
    ssim_spec, no_strips = scorer.specs
    steps = [s.backend for s in scorer.steps(ssim_spec, ref)]
    assert [s.rpartition(" ")[0] if "strip" in s else s for s in steps] == [
        "cuda full", "cuda strip", "cpu full", "cpu strip"]
    assert [s.backend for s in scorer.steps(no_strips, ref)] == ["cuda full", "cpu full"]
    monkeypatch.setenv("FUSEDSIM_VRAM_CAP_BYTES", "100000")  # 100 kB: full does not fit, strips start the ladder
    assert [s.backend.rpartition(" ")[0] for s in scorer.steps(ssim_spec, ref)][:1] == ["cuda strip"]


def test_is_oom_recognises_allocator_errors():
    assert is_oom(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert is_oom(RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"))
    assert is_oom(MemoryError())
    assert not is_oom(RuntimeError("shape mismatch")) and not is_oom(ValueError("out of memory"))
    assert Step("cuda:0", "strip", 512).backend == "cuda strip 512" and Step("cpu", "full").backend == "cpu full"

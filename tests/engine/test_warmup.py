"""``fusedsim warmup`` (issue 36): one process per metric runs what ``fusedsim batch`` runs; on a GPU, a batch run
after it compiles nothing more (Triton's cache gains no entry)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from fusedsim.cli.main import main
from fusedsim.engine.warmup import warm_metric, warmup


def test_warmup_reports_each_metric_and_its_error():
    # in the processes it starts (spawned: the parent never touches CUDA); a 4x4 pair is too small for SSIM's
    # 11-pixel window, which comes back as that metric's error while PSNR is ready
    psnr, ssim = warmup(["psnr", "ssim"], "cpu", 4, 4, jobs=1)
    assert (psnr.metric, psnr.device, psnr.error) == ("psnr", "cpu", "")
    assert ssim.metric == "ssim" and "at least 11 px" in ssim.error and psnr.seconds > 0


def test_warm_metric_runs_groups_like_the_batch(monkeypatch):
    from fusedsim.engine import scorer

    monkeypatch.setattr(scorer, "GROUP_DEVICES", ("cpu",))  # the CPU scores groups as a GPU would
    calls = []
    real = scorer.Scorer.submit_group

    def recording(self, pairs):
        calls.append((len(pairs), pairs[0][0] is pairs[-1][0]))
        return real(self, pairs)

    monkeypatch.setattr(scorer.Scorer, "submit_group", recording)
    result = warm_metric("ssimulacra2", "cpu", 16, 16)
    assert result.error == ""
    assert calls == [(8, True), (8, False)]  # a group against one reference, and one of own references


def test_bad_options(capsys):
    with pytest.raises(SystemExit):
        main(["warmup", "--size", "0x5"])
    assert "--size must be S or WxH" in capsys.readouterr().err
    assert main(["warmup", "--jobs", "0"]) == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_batch_after_warmup_compiles_nothing(tmp_path):
    cache = tmp_path / "triton"
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache)}
    env.pop("TRITON_INTERPRET", None)
    metrics = "ssim,ssimulacra2,butteraugli"
    size = 256
    subprocess.run([sys.executable, "-m", "fusedsim", "warmup", "--metric", metrics, "--size", str(size)],
                   env=env, check=True, timeout=900)
    before = {p for p in cache.rglob("*") if p.is_file()}
    assert before, "warmup wrote no kernel to TRITON_CACHE_DIR"
    rng = np.random.default_rng(0)
    rows = []
    for i in range(10):
        a = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
        Image.fromarray(a).save(tmp_path / f"r{i}.png")
        Image.fromarray(np.clip(a.astype(int) + 9, 0, 255).astype(np.uint8)).save(tmp_path / f"d{i}.png")
        rows += [(f"r{i}.png", f"d{i}.png")] + ([(f"r{i}.png", f"d{i - 1}.png")] if i else [])
    with open(tmp_path / "pairs.csv", "w", newline="") as f:
        csv.writer(f).writerows([("ref", "dist"), *rows])
    subprocess.run([sys.executable, "-m", "fusedsim", "batch", str(tmp_path / "pairs.csv"), "-o",
                    str(tmp_path / "out.csv"), "--metric", metrics, "--quiet"], env=env, check=True, timeout=900)
    added = {p for p in cache.rglob("*") if p.is_file()} - before
    assert not added, f"the batch compiled kernels warmup did not: {sorted(Path(p).name for p in added)[:10]}"


def test_perceptual_metrics_warm_in_three_processes_others_in_one():
    from fusedsim.engine.warmup import PHASES, metric_phases

    assert metric_phases("ssimulacra2", "cuda") == PHASES  # one pair, a shared-reference group, an own-reference group
    assert metric_phases("ssimulacra2", "cpu") == ("one",)  # the CPU scores pair by pair
    assert metric_phases("psnr", "cuda") == ("one",)  # image metrics are never grouped


def test_auto_warms_groups_only_where_a_gpu_scores_them(monkeypatch):
    from fusedsim.engine.warmup import PHASES, metric_phases

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert metric_phases("ssimulacra2", "auto") == ("one",)  # no process started for calls the CPU never makes
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert metric_phases("ssimulacra2", "auto") == PHASES


def test_a_cache_folder_that_refuses_markers_costs_only_the_hint(monkeypatch, tmp_path):
    from fusedsim.engine.warmup import cold_metrics, leave_markers

    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(blocker))
    leave_markers("psnr", 16, 16, None, ["one"])  # no error
    assert cold_metrics(["psnr"], "cuda", 16, 16) == ["psnr"]
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "ok"))
    leave_markers("psnr", 16, 16, None, ["one"])
    assert cold_metrics(["psnr"], "cuda", 16, 16) == []


def test_warm_metric_runs_only_its_phase(monkeypatch):
    from fusedsim.engine import scorer

    monkeypatch.setattr(scorer, "GROUP_DEVICES", ("cpu",))
    calls = []
    real = scorer.Scorer.submit_group
    monkeypatch.setattr(scorer.Scorer, "submit_group",
                        lambda self, pairs: calls.append((len(pairs), pairs[0][0] is pairs[-1][0])) or real(self, pairs))
    assert warm_metric("ssimulacra2", "cpu", 16, 16, phase="own").error == ""
    assert calls == [(8, False)]
    with pytest.raises(ValueError, match="phase must be one of one, shared, own"):
        warm_metric("ssimulacra2", "cpu", 16, 16, phase="all")


def test_markers_name_metric_size_params_and_phase(monkeypatch, tmp_path):
    from fusedsim.engine.warmup import cold_metrics, marker_path

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    base = marker_path("ssimulacra2", "cuda", 1080, 1920)
    assert base.parent == tmp_path / "fusedsim-warm"
    others = {marker_path("ssimulacra2", "cuda", 1920, 1080), marker_path("ssimulacra2", "cpu", 1080, 1920),
              marker_path("ssimulacra2", "cuda", 1080, 1920, phase="own"), marker_path("dssim", "cuda", 1080, 1920),
              marker_path("ssimulacra2", "cuda:1", 1080, 1920, {"x": 1})}
    assert base not in others and len(others) == 5
    assert marker_path("ssimulacra2", "cuda:1", 1080, 1920) == base  # the device type, not its index
    assert cold_metrics(["ssimulacra2", "psnr"], "cuda", 1080, 1920) == ["ssimulacra2", "psnr"]
    marker_path("psnr", "cuda", 1080, 1920, phase="one").parent.mkdir(parents=True)
    marker_path("psnr", "cuda", 1080, 1920, phase="one").touch()
    for phase in ("one", "shared"):
        marker_path("ssimulacra2", "cuda", 1080, 1920, phase=phase).touch()
    assert cold_metrics(["ssimulacra2", "psnr"], "cuda", 1080, 1920) == ["ssimulacra2"]  # its "own" phase is missing
    marker_path("ssimulacra2", "cuda", 1080, 1920, phase="own").touch()
    assert cold_metrics(["ssimulacra2", "psnr"], "cuda", 1080, 1920) == []


def test_batch_warms_what_a_fresh_cache_lacks_before_scoring(monkeypatch, tmp_path):
    import argparse

    from fusedsim.cli import batch
    from fusedsim.cli.pair_table import read_pairs
    from fusedsim.engine import warmup as warmup_module

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    Image.fromarray(np.zeros((24, 40, 3), dtype=np.uint8)).save(tmp_path / "r.png")
    (tmp_path / "pairs.csv").write_text("ref,dist\nr.png,r.png\n")
    table = read_pairs(tmp_path / "pairs.csv")
    args = argparse.Namespace(warmup="auto", device="auto", engine="local", address=None, quiet=True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert batch.cold_warmup_plan(args, table, ["dssim", "psnr"], {}) == (["dssim", "psnr"], 24, 40)
    for changed in ({"warmup": "never"}, {"device": "cpu"}, {"engine": "ray", "address": "10.0.0.1:6379"}):
        assert batch.cold_warmup_plan(argparse.Namespace(**{**vars(args), **changed}), table, ["psnr"], {}) is None
    asked = []
    monkeypatch.setattr(warmup_module, "warmup", lambda metrics, device, h, w, jobs=None, params=None: asked.append(
        (metrics, device, h, w, jobs)) or [warmup_module.WarmupResult(m, 0.1, device) for m in metrics])
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (3 << 30, 80 << 30))
    batch._warm_cold_kernels(args, table, ["dssim", "psnr"], {})
    assert asked == [(["dssim", "psnr"], "cuda", 24, 40, warmup_module.gpu_jobs(["dssim", "psnr"], 24, 40, 3 << 30))]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert batch.cold_warmup_plan(args, table, ["psnr"], {}) is None


def test_warmup_processes_fit_the_gpus_free_memory():
    from fusedsim.engine.batch_pairs import GROUP
    from fusedsim.engine.warmup import PROCESS_OVERHEAD_BYTES, gpu_jobs
    from fusedsim.metrics.registry import get_metric

    one = GROUP * get_metric("cvvdp").working_set_bytes(1080, 1920, 3) + PROCESS_OVERHEAD_BYTES
    assert one > GROUP * get_metric("psnr").working_set_bytes(1080, 1920, 3) + PROCESS_OVERHEAD_BYTES
    assert gpu_jobs(["psnr", "cvvdp"], 1080, 1920, 5 * one + 1) == 5  # the largest working set sizes every process
    assert gpu_jobs(["psnr", "cvvdp"], 1080, 1920, one - 1) == 1  # never none

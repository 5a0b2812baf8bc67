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

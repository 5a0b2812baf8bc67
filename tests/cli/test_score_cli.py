"""``fusedsim score``: the bundled example, JSON output, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from fusedsim.cli.main import main
from fusedsim.cli.score import example_pair


def test_example_json_matches_pytorch_msssim(capsys):
    pytorch_msssim = pytest.importorskip("pytorch_msssim")
    assert main(["score", "--example", "--metric", "ssim", "--metric", "psnr", "--format", "json",
                 "--device", "cpu"]) == 0
    payload = json.loads(capsys.readouterr().out)
    ref, dist = example_pair()
    x = torch.from_numpy(np.asarray(Image.open(ref).convert("RGB"), dtype=np.float32)).permute(2, 0, 1)[None]
    y = torch.from_numpy(np.asarray(Image.open(dist).convert("RGB"), dtype=np.float32)).permute(2, 0, 1)[None]
    expected = pytorch_msssim.ssim(x.double(), y.double(), data_range=255).item()
    # the CLI computes in float32; with 0..255 values sigma² = E[x²] - mu² loses ~1e-5 relative to cancellation
    assert payload["metrics"]["ssim"] == pytest.approx(expected, abs=2e-5)
    mse = ((x.double() - y.double()) ** 2).mean().item()
    assert payload["metrics"]["psnr"] == pytest.approx(10 * np.log10(255**2 / mse), abs=1e-4)


def test_module_entry_point_plain_output():
    out = subprocess.run([sys.executable, "-m", "fusedsim", "score", "--example", "--device", "cpu"],
                         capture_output=True, text=True, check=True).stdout
    name, value = out.strip().split(": ")
    assert name == "ssim" and 0.3 < float(value) < 1.0


def test_size_mismatch_and_missing_file(tmp_path, capsys):
    ref, _ = example_pair()
    small = tmp_path / "small.png"
    Image.new("RGB", (20, 20)).save(small)
    assert main(["score", str(ref), str(small)]) == 2
    assert "images differ in size" in capsys.readouterr().err
    assert main(["score", str(ref), str(tmp_path / "missing.png")]) == 2
    assert "not found" in capsys.readouterr().err
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image")
    assert main(["score", str(ref), str(broken)]) == 2
    assert "cannot read image" in capsys.readouterr().err

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


# ------------------------------------------------------------------------------------------- bit depth, modes
def _score_json(capsys, *argv) -> dict:
    assert main(["score", *map(str, argv), "--format", "json", "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    return json.loads(text)


def test_16bit_png_pair_is_scored_at_full_precision(tmp_path, capsys):
    pytorch_msssim = pytest.importorskip("pytorch_msssim")
    rng = np.random.default_rng(7)
    # every sample is above 255, so clamping to 8 bits would make the two different images identical
    a = (20000 + rng.integers(0, 30000, size=(48, 40))).astype(np.uint16)
    b = (a.astype(np.int64) + rng.integers(-8000, 8001, size=a.shape)).astype(np.uint16)
    Image.fromarray(a).save(tmp_path / "a.png")
    Image.fromarray(b).save(tmp_path / "b.png")
    payload = _score_json(capsys, tmp_path / "a.png", tmp_path / "b.png", "--metric", "ssim", "--metric", "psnr")
    assert payload["data_range"] == 65535
    x = torch.from_numpy(a.astype(np.float64))[None, None]
    y = torch.from_numpy(b.astype(np.float64))[None, None]
    expected = pytorch_msssim.ssim(x, y, data_range=65535).item()
    assert payload["metrics"]["ssim"] == pytest.approx(expected, abs=2e-5) and expected < 0.9
    mse = ((x - y) ** 2).mean().item()
    assert payload["metrics"]["psnr"] == pytest.approx(10 * np.log10(65535**2 / mse), abs=1e-3)


def test_grey_pair_uses_one_channel(tmp_path, capsys):
    pytorch_msssim = pytest.importorskip("pytorch_msssim")
    rng = np.random.default_rng(8)
    a = rng.integers(0, 256, size=(32, 30)).astype(np.uint8)
    b = np.clip(a.astype(np.int64) + rng.integers(-40, 41, size=a.shape), 0, 255).astype(np.uint8)
    Image.fromarray(a).save(tmp_path / "a.png")
    Image.fromarray(b).save(tmp_path / "b.png")
    payload = _score_json(capsys, tmp_path / "a.png", tmp_path / "b.png")
    x, y = (torch.from_numpy(v.astype(np.float64))[None, None] for v in (a, b))
    assert payload["data_range"] == 255
    assert payload["metrics"]["ssim"] == pytest.approx(pytorch_msssim.ssim(x, y, data_range=255).item(), abs=2e-5)


@pytest.mark.parametrize("dist_array, match", [
    (np.zeros((20, 20), np.uint16), r"REF .*ref.png is 8-bit but DIST .*dist.png is 16-bit"),
    (np.zeros((20, 20, 3), np.uint8), r"REF .*ref.png is grey but DIST .*dist.png is RGB"),
])
def test_pairs_of_different_depth_or_channels_are_refused(tmp_path, capsys, dist_array, match):
    Image.fromarray(np.zeros((20, 20), np.uint8)).save(tmp_path / "ref.png")
    Image.fromarray(dist_array).save(tmp_path / "dist.png")
    assert main(["score", str(tmp_path / "ref.png"), str(tmp_path / "dist.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fusedsim score: error: ")
    assert __import__("re").search(match, err), err


def test_transparent_input_is_refused_naming_dist(tmp_path, capsys):
    ref, _ = example_pair()
    rgba = np.asarray(Image.open(ref).convert("RGBA")).copy()
    rgba[0, 0, 3] = 0
    Image.fromarray(rgba).save(tmp_path / "t.png")
    assert main(["score", str(ref), str(tmp_path / "t.png")]) == 2
    assert "DIST" in (err := capsys.readouterr().err) and "transparent" in err and "flatten" in err


# ------------------------------------------------------------------------------------------------ JSON, errors
def test_json_is_valid_with_null_for_infinite_psnr(capsys):
    ref, _ = example_pair()
    assert main(["score", str(ref), str(ref), "--metric", "psnr", "--metric", "ssim", "--format", "json",
                 "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    payload = json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))
    assert payload["metrics"]["psnr"] is None and payload["metrics"]["ssim"] == pytest.approx(1.0, abs=1e-6)
    assert "inf" not in text.lower()
    json.dumps(payload, allow_nan=False)


def test_plain_output_prints_inf_for_identical_images(capsys):
    ref, _ = example_pair()
    assert main(["score", str(ref), str(ref), "--metric", "psnr", "--device", "cpu"]) == 0
    assert capsys.readouterr().out == "psnr: inf\n"


def test_too_small_for_ms_ssim_names_ref_dist_and_size(tmp_path, capsys):
    for name in ("a.png", "b.png"):
        Image.new("RGB", (100, 80)).save(tmp_path / name)
    assert main(["score", str(tmp_path / "a.png"), str(tmp_path / "b.png"), "--metric", "ms-ssim"]) == 2
    err = capsys.readouterr().err
    assert "REF and DIST are 100×80 but ms-ssim needs at least 161 px per side" in err
    assert " X" not in err and "X:" not in err


def test_metric_choices_and_aliases_come_from_the_registry(capsys):
    payload = _score_json(capsys, "--example", "--metric", "MSSSIM", "--metric", "ms_ssim")
    assert list(payload["metrics"]) == ["ms-ssim"]
    with pytest.raises(SystemExit) as exc:
        main(["score", "--example", "--metric", "vmaf:ssim"])
    assert exc.value.code == 2
    assert "unknown image metric 'vmaf:ssim'; choose from ssim, ms-ssim, psnr" in capsys.readouterr().err


def test_bad_device_is_a_usage_error_with_one_message(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["score", "--example", "--device", "gpu"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "device must be auto, cpu or cuda[:N]; got 'gpu'" in err and "privateuseone" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_cuda_without_gpu(capsys):
    assert main(["score", "--example", "--device", "cuda:0"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err

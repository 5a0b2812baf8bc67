"""``fusedsim sweep``: rows per reference, codec and quality, sizes as Pillow encodes them, the curves PNG."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
import torch
from _pair_images import H, W, expected_psnr, write_images
from PIL import Image

import fusedsim
from fusedsim.cli.main import main
from fusedsim.cli.sweep import CODECS, available_codecs, parse_qualities


def test_jpeg_sweep_rows_and_plot(tmp_path, capsys):
    write_images(tmp_path, refs=2, dists=0)
    out, plot = tmp_path / "sweep.tsv", tmp_path / "curves.png"
    assert main(["sweep", str(tmp_path / "r0.png"), str(tmp_path / "r1.png"), "--codec", "jpeg", "--quality",
                 "30:90:30", "--metric", "ssim,psnr", "-o", str(out), "--plot", str(plot), "--device", "cpu"]) == 0
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert list(rows[0]) == ["ref", "codec", "quality", "bytes", "bpp", "ssim", "psnr", "backend"]
    assert [(r["ref"].rsplit("/", 1)[-1], r["quality"]) for r in rows] == [
        (f"r{i}.png", str(q)) for i in range(2) for q in (30, 60, 90)]
    for r in rows:
        image = Image.open(r["ref"]).convert("RGB")
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=int(r["quality"]))  # the same encoder, independently
        assert int(r["bytes"]) == buffer.tell()
        assert float(r["bpp"]) == int(r["bytes"]) * 8 / (W * H)
        decoded = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"), dtype=np.float32)
        y = torch.from_numpy(decoded).permute(2, 0, 1)[None]
        x = torch.from_numpy(np.asarray(image, dtype=np.float32)).permute(2, 0, 1)[None]
        assert float(r["ssim"]) == float(fusedsim.ssim(x, y, data_range=255))
        Image.fromarray(decoded.astype(np.uint8)).save(tmp_path / "dec.png")
        # float32 accumulation against numpy's float64 (as in the batch tests)
        assert float(r["psnr"]) == pytest.approx(expected_psnr(tmp_path / r["ref"], tmp_path / "dec.png"), abs=1e-4)
    ssim_by_q = [float(r["ssim"]) for r in rows[:3]]
    assert ssim_by_q == sorted(ssim_by_q)  # higher quality, closer to the reference
    with Image.open(plot) as img:
        assert img.format == "PNG" and img.size == (1000, 360)  # two panels of 5 x 3.6 inches at 100 dpi


def test_unavailable_codec_and_bad_quality(tmp_path, capsys):
    write_images(tmp_path, refs=1, dists=0)
    missing = [c for c in CODECS if c not in available_codecs()]
    if missing:
        assert main(["sweep", str(tmp_path / "r0.png"), "--codec", missing[0], "-o", str(tmp_path / "s.tsv")]) == 2
        assert "cannot write it on this machine" in capsys.readouterr().err
        assert not (tmp_path / "s.tsv").exists()
    with pytest.raises(SystemExit):
        main(["sweep", str(tmp_path / "r0.png"), "--codec", "gif"])
    assert "unknown codec" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sweep", str(tmp_path / "r0.png"), "--codec", "jpeg", "--quality", "90:10:5"])
    assert parse_qualities("10:95:5") == list(range(10, 96, 5)) and parse_qualities("50,75") == [50, 75]


def test_webp_to_stdout(tmp_path, capsys):
    if "webp" not in available_codecs():
        pytest.skip("this Pillow cannot write WebP")
    write_images(tmp_path, refs=1, dists=0)
    assert main(["sweep", str(tmp_path / "r0.png"), "--codec", "webp", "--quality", "50", "--device", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].split("\t")[1:3] == ["webp", "50"]

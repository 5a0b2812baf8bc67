"""``sweep --codec jpeg2000``: the quality reaches OpenJPEG's rate control (a fixed quality of Q dB PSNR, 100
lossless), so lower qualities give fewer bytes and lower scores instead of the same lossless file every time."""

from __future__ import annotations

import csv
import io

import pytest
from _pair_images import write_images
from PIL import Image

from fusedsim.cli.main import main
from fusedsim.cli.sweep import available_codecs

pytestmark = pytest.mark.skipif("jpeg2000" not in available_codecs(), reason="Pillow writes no JPEG 2000 here")


def test_quality_controls_the_rate(tmp_path):
    write_images(tmp_path, refs=1, dists=0)
    out = tmp_path / "rd.tsv"
    assert main(["sweep", str(tmp_path / "r0.png"), "--codec", "jpeg2000", "--quality", "20,30,40,100",
                 "--metric", "ssim,psnr", "-o", str(out), "--device", "cpu", "--quiet"]) == 0
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [int(r["quality"]) for r in rows] == [20, 30, 40, 100]
    sizes = [int(r["bytes"]) for r in rows]
    ssim = [float(r["ssim"]) for r in rows]
    psnr = [float(r["psnr"]) for r in rows]
    assert sizes == sorted(sizes) and len(set(sizes)) == 4
    assert ssim[0] < ssim[1] < ssim[2] < 1.0 == ssim[3]  # lossless at 100
    assert psnr[0] < psnr[1] < psnr[2] and psnr[3] == float("inf")
    # the encoding is Pillow's with OpenJPEG's fixed-quality target of Q dB (ImageMagick's mapping)
    image = Image.open(tmp_path / "r0.png").convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG2000", quality_mode="dB", quality_layers=[30.0])
    assert sizes[1] == buffer.tell()


def test_quality_zero_is_refused(tmp_path, capsys):
    write_images(tmp_path, refs=1, dists=0)
    assert main(["sweep", str(tmp_path / "r0.png"), "--codec", "jpeg2000", "--quality", "0,50",
                 "-o", str(tmp_path / "rd.tsv"), "--device", "cpu"]) == 2
    assert "--quality 0: jpeg2000's quality is a PSNR target in dB" in capsys.readouterr().err
    assert not (tmp_path / "rd.tsv").exists()

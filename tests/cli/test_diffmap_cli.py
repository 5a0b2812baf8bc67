"""``fusedsim diffmap``: the SSIM and Butteraugli maps, the figure's size, metrics without a map refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _pair_images import H, W, expected_ssim, load, write_images
from PIL import Image

from fusedsim.cli.diffmap import MAPS, figure_size
from fusedsim.cli.main import main
from fusedsim.io.images import read_image


def test_ssim_map_png(tmp_path, capsys):
    write_images(tmp_path, refs=1, dists=1)
    out = tmp_path / "map.png"
    assert main(["diffmap", str(tmp_path / "r0.png"), str(tmp_path / "d00.png"), "-o", str(out), "--width", "900",
                 "--device", "cpu"]) == 0
    with Image.open(out) as img:
        assert img.format == "PNG" and img.size == figure_size(900, W, H)
        assert img.size[0] == 900 and 200 < img.size[1] < 400  # three 64x48 panels side by side
        pixels = np.asarray(img.convert("RGB")).reshape(-1, 3)
        assert len(np.unique(pixels, axis=0)) > 50  # images and a heat map, not a blank canvas
    assert "ssim map" in capsys.readouterr().out


def test_ssim_map_is_the_ssim_map_aligned_with_the_image(tmp_path):
    write_images(tmp_path, refs=1, dists=1)
    ref, dist = read_image(tmp_path / "r0.png"), read_image(tmp_path / "d00.png")
    values = MAPS["ssim"].compute(ref, dist, torch.device("cpu"))
    assert values.shape == (H, W)
    assert np.isnan(values[:5]).all() and np.isnan(values[:, -5:]).all()  # no 11x11 window centred there
    inner = values[5:-5, 5:-5]
    assert np.isfinite(inner).all()
    # the mean of the map is the SSIM value (the channel mean of equal-size maps)
    assert inner.mean() == pytest.approx(expected_ssim(tmp_path / "r0.png", tmp_path / "d00.png"), abs=1e-6)


def test_butteraugli_map_max_is_the_max_norm(tmp_path):
    write_images(tmp_path, refs=1, dists=1)
    import fusedsim

    ref, dist = read_image(tmp_path / "r0.png"), read_image(tmp_path / "d00.png")
    values = MAPS["butteraugli"].compute(ref, dist, torch.device("cpu"))
    expected = fusedsim.butteraugli(load(tmp_path / "r0.png") / 255, load(tmp_path / "d00.png") / 255)
    assert values.shape == (H, W) and values.max() == pytest.approx(float(expected.max_norm), rel=1e-6)


def test_cvvdp_map_png(tmp_path):
    write_images(tmp_path, refs=1, dists=1)
    from fusedsim.families.cvvdp.api import cvvdp

    ref, dist = read_image(tmp_path / "r0.png"), read_image(tmp_path / "d00.png")
    values = MAPS["cvvdp"].compute(ref, dist, torch.device("cpu"))
    x, y = load(tmp_path / "r0.png") / 255, load(tmp_path / "d00.png") / 255
    assert np.array_equal(values, cvvdp(x, y, return_map=True).diff_map[0, 0].double().numpy())
    assert main(["diffmap", str(tmp_path / "r0.png"), str(tmp_path / "d00.png"), "--metric", "colorvideovdp", "-o",
                 str(tmp_path / "c.png"), "--width", "600", "--device", "cpu"]) == 0
    with Image.open(tmp_path / "c.png") as img:
        assert img.size == figure_size(600, W, H)


def test_metric_without_map_refused(tmp_path, capsys):
    write_images(tmp_path, refs=1, dists=1)
    with pytest.raises(SystemExit):
        main(["diffmap", str(tmp_path / "r0.png"), str(tmp_path / "d00.png"), "--metric", "psnr", "-o",
              str(tmp_path / "m.png")])
    err = capsys.readouterr().err
    assert "'psnr' has no per-pixel map" in err and "ssim, butteraugli, cvvdp" in err
    assert main(["diffmap", str(tmp_path / "r0.png"), str(tmp_path / "nope.png"), "-o", str(tmp_path / "m.png")]) == 2
    Image.new("RGB", (8, 8)).save(tmp_path / "tiny.png")
    assert main(["diffmap", str(tmp_path / "tiny.png"), str(tmp_path / "tiny.png"), "-o", str(tmp_path / "m.png"),
                 "--device", "cpu"]) == 2
    assert "needs at least 11 px" in capsys.readouterr().err
    assert not (tmp_path / "m.png").exists()

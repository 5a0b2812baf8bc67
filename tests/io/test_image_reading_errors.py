"""Reading images that cannot be scored fails with one clear ValueError naming the file, never a traceback or a
silent wrong value (issue 38): decompression bombs, non-regular files, permission errors, 16-bit RGB PPM,
animated or multi-page images."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from PIL import Image, features

from fusedsim.io.images import MAX_PIXELS_ENV, read_image


def _rgb(h: int = 8, w: int = 10, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def test_decompression_bomb_names_file_and_limit(tmp_path, monkeypatch):
    path = tmp_path / "bomb.png"
    Image.fromarray(_rgb(64, 64)).save(path)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 4096 pixels > 2x the limit: Pillow raises
    with pytest.raises(ValueError) as info:
        read_image(path, "REF")
    text = str(info.value)
    assert str(path) in text and "1000" in text and MAX_PIXELS_ENV in text


def test_image_over_the_limit_but_under_twice_is_refused_too(tmp_path, monkeypatch):
    path = tmp_path / "big.png"
    Image.fromarray(_rgb(40, 40)).save(path)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 1600 pixels: Pillow only warns
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="pixel"):
            read_image(path, "REF")


def test_pixel_limit_can_be_raised_from_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "big.png"
    Image.fromarray(_rgb(64, 64)).save(path)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    monkeypatch.setenv(MAX_PIXELS_ENV, "5000")
    assert read_image(path).pixels.shape == (1, 3, 64, 64)
    monkeypatch.setenv(MAX_PIXELS_ENV, "0")  # 0: no limit
    assert read_image(path).pixels.shape == (1, 3, 64, 64)


def test_directory_is_named_as_a_directory(tmp_path):
    with pytest.raises(ValueError, match="directory") as info:
        read_image(tmp_path, "REF")
    assert "not found" not in str(info.value) and str(tmp_path) in str(info.value)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_is_named_and_not_opened(tmp_path):
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="FIFO") as info:  # opening it would block: it must not be opened
        read_image(fifo, "DIST")
    assert "not found" not in str(info.value)


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="no /dev/null")
def test_dev_null_is_a_device_not_an_image():
    with pytest.raises(ValueError, match="device") as info:
        read_image("/dev/null", "REF")
    assert "not found" not in str(info.value) and "/dev/null" in str(info.value)


def test_missing_file_is_still_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_image(tmp_path / "nope.png")


def test_unreadable_file_says_permission_denied(tmp_path, monkeypatch):
    path = tmp_path / "secret.png"
    Image.fromarray(_rgb()).save(path)

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(Image, "open", denied)  # the tests may run as root, where chmod does not deny
    with pytest.raises(ValueError, match="permission denied") as info:
        read_image(path, "REF")
    assert str(path) in str(info.value)


def test_unreadable_parent_folder_says_permission_denied(tmp_path, monkeypatch):
    path = tmp_path / "locked" / "a.png"
    real_stat = os.stat

    def stat(p, *args, **kwargs):
        if str(p) == str(path):
            raise PermissionError(13, "Permission denied", str(p))
        return real_stat(p, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    with pytest.raises(ValueError, match="permission denied") as info:
        read_image(path, "REF")
    assert str(path) in str(info.value) and "not found" not in str(info.value)


def _ppm16(path, array: np.ndarray, magic: bytes = b"P6", maxval: int = 65535) -> None:
    h, w = array.shape[:2]
    path.write_bytes(magic + f"\n{w} {h}\n{maxval}\n".encode() + array.astype(">u2").tobytes())


@pytest.mark.parametrize("maxval", [65535, 1023, 256])
def test_16bit_rgb_ppm_is_refused_not_scored_at_8_bits(tmp_path, maxval):
    path = tmp_path / "c16.ppm"
    _ppm16(path, np.random.default_rng(1).integers(0, maxval + 1, size=(4, 5, 3)), maxval=maxval)
    with pytest.raises(ValueError, match="16-bit") as info:
        read_image(path, "REF")
    assert str(path) in str(info.value)


def test_8bit_ppm_and_16bit_pgm_still_read(tmp_path):
    Image.fromarray(_rgb()).save(tmp_path / "c8.ppm")
    assert read_image(tmp_path / "c8.ppm").describe() == "8-bit RGB"
    grey = np.random.default_rng(2).integers(0, 65536, size=(4, 5))
    _ppm16(tmp_path / "g16.pgm", grey, magic=b"P5")
    image = read_image(tmp_path / "g16.pgm")
    assert image.describe() == "16-bit grey" and np.array_equal(image.pixels[0, 0].numpy(), grey)


def _frames() -> list[Image.Image]:
    return [Image.fromarray(_rgb(seed=i)) for i in range(3)]


@pytest.mark.parametrize("suffix, kwargs", [
    (".gif", {}), (".tif", {}), (".png", {}),
    pytest.param(".webp", {"lossless": True},
                 marks=pytest.mark.skipif(not features.check("webp"), reason="no WebP in Pillow")),
])
def test_animated_or_multi_page_image_is_refused(tmp_path, suffix, kwargs):
    path = tmp_path / f"anim{suffix}"
    first, *rest = _frames()
    first.save(path, save_all=True, append_images=rest, **kwargs)
    with pytest.raises(ValueError, match="frames|pages") as info:
        read_image(path, "DIST")
    assert str(path) in str(info.value)


@pytest.mark.parametrize("suffix", [".gif", ".tif", ".webp"])
def test_single_frame_images_still_read(tmp_path, suffix):
    if suffix == ".webp" and not features.check("webp"):
        pytest.skip("no WebP in Pillow")
    path = tmp_path / f"one{suffix}"
    Image.fromarray(_rgb()).save(path, **({"lossless": True} if suffix == ".webp" else {}))
    assert read_image(path).pixels.shape == (1, 3, 8, 10)

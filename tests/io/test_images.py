"""Reading image files: full 16-bit precision, grey/RGB/alpha/palette rules, clear refusals, pair checks."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
import torch
from PIL import Image

from fusedsim.io.images import check_image_pair, read_image, read_image_interleaved


def png_bytes(array: np.ndarray, color_type: int) -> bytes:
    """A minimal 16-bit PNG (Pillow cannot write 16-bit RGB or grey+alpha): big-endian samples, filter 0."""
    h, w = array.shape[:2]

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + array[i].astype(">u2").tobytes() for i in range(h))
    header = struct.pack(">IIBBBBB", w, h, 16, color_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def test_16bit_grey_png_keeps_every_bit(tmp_path):
    values = np.random.default_rng(0).integers(0, 65536, size=(9, 13)).astype(np.uint16)
    values[0, 0], values[0, 1] = 0, 65535
    Image.fromarray(values).save(tmp_path / "g16.png")
    image = read_image(tmp_path / "g16.png", "REF")
    assert (image.bit_depth, image.channels, image.data_range) == (16, "grey", 65535)
    assert image.pixels.shape == (1, 1, 9, 13) and image.pixels.dtype == torch.float32  # exact in float32
    assert np.array_equal(image.pixels[0, 0].numpy(), values.astype(np.float32))


@pytest.mark.parametrize("color_type, shape, what", [(2, (4, 5, 3), "RGB"), (4, (4, 5, 2), "LA")])
def test_16bit_colour_or_alpha_png_is_refused(tmp_path, color_type, shape, what):
    path = tmp_path / "c16.png"
    path.write_bytes(png_bytes(np.full(shape, 40000, np.uint16), color_type))
    with pytest.raises(ValueError, match=rf"DIST .*c16.png stores 16-bit {what} samples.*8 bits"):
        read_image(path, "DIST")


def test_8bit_rgb_and_grey(tmp_path):
    rgb = np.random.default_rng(1).integers(0, 256, size=(6, 7, 3)).astype(np.uint8)
    Image.fromarray(rgb).save(tmp_path / "rgb.png")
    Image.fromarray(rgb[..., 0]).save(tmp_path / "grey.png")
    Image.fromarray(rgb[..., 0] > 127).save(tmp_path / "bilevel.png")
    image = read_image(tmp_path / "rgb.png")
    assert (image.bit_depth, image.channels) == (8, "RGB")
    assert image.pixels.dtype == torch.uint8  # kept as decoded: a quarter of float32's memory
    assert np.array_equal(image.pixels[0].permute(1, 2, 0).numpy(), rgb)
    grey = read_image(tmp_path / "grey.png")
    assert grey.channels == "grey" and grey.pixels.shape == (1, 1, 6, 7)
    assert np.array_equal(grey.pixels[0, 0].numpy(), rgb[..., 0].astype(np.float32))
    bilevel = read_image(tmp_path / "bilevel.png")
    assert bilevel.channels == "grey" and set(np.unique(bilevel.pixels.numpy())) <= {0.0, 255.0}


def test_opaque_alpha_is_dropped_and_transparency_refused(tmp_path):
    rgba = np.random.default_rng(2).integers(0, 256, size=(5, 5, 4)).astype(np.uint8)
    rgba[..., 3] = 255
    Image.fromarray(rgba).save(tmp_path / "opaque.png")
    image = read_image(tmp_path / "opaque.png")
    assert image.channels == "RGB" and np.array_equal(image.pixels[0].permute(1, 2, 0).numpy(), rgba[..., :3])
    rgba[2, 3, 3] = 254
    Image.fromarray(rgba).save(tmp_path / "clear.png")
    with pytest.raises(ValueError, match="REF .*clear.png has transparent pixels.*flatten"):
        read_image(tmp_path / "clear.png", "REF")
    la = np.stack([rgba[..., 0], rgba[..., 3]], axis=-1)
    Image.fromarray(la, mode="LA").save(tmp_path / "la.png")
    with pytest.raises(ValueError, match="transparent"):
        read_image(tmp_path / "la.png")
    la[..., 1] = 255
    Image.fromarray(la, mode="LA").save(tmp_path / "la_opaque.png")
    assert read_image(tmp_path / "la_opaque.png").channels == "grey"


def test_palette_images_are_read_as_rgb(tmp_path):
    rgb = np.random.default_rng(3).integers(0, 256, size=(8, 8, 3)).astype(np.uint8)
    Image.fromarray(rgb).quantize(16).save(tmp_path / "p.png")
    with Image.open(tmp_path / "p.png") as img:
        assert img.mode == "P"
        expected = np.asarray(img.convert("RGB"), dtype=np.float32)
    image = read_image(tmp_path / "p.png")
    assert image.channels == "RGB" and np.array_equal(image.pixels[0].permute(1, 2, 0).numpy(), expected)
    paletted = Image.fromarray(rgb).quantize(16)
    paletted.info["transparency"] = int(np.asarray(paletted)[0, 0])
    paletted.save(tmp_path / "pt.png", transparency=int(np.asarray(paletted)[0, 0]))
    with pytest.raises(ValueError, match="transparent"):
        read_image(tmp_path / "pt.png")


def test_unsupported_modes_are_refused(tmp_path):
    Image.fromarray(np.zeros((4, 4), np.float32)).save(tmp_path / "f.tif")
    with pytest.raises(ValueError, match="mode 'F', which is not supported"):
        read_image(tmp_path / "f.tif")
    Image.new("CMYK", (4, 4)).save(tmp_path / "cmyk.jpg")
    with pytest.raises(ValueError, match="mode 'CMYK'"):
        read_image(tmp_path / "cmyk.jpg")
    Image.fromarray(np.full((4, 4), 70000, np.int32)).save(tmp_path / "i32.tif")
    with pytest.raises(ValueError, match="outside 0..65535"):
        read_image(tmp_path / "i32.tif")


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="REF: image file not found"):
        read_image(tmp_path / "none.png", "REF")
    (tmp_path / "bad.png").write_bytes(b"not an image")
    with pytest.raises(ValueError, match="DIST: cannot read image"):
        read_image(tmp_path / "bad.png", "DIST")


def test_pair_rules_name_ref_and_dist(tmp_path):
    grey8 = np.zeros((6, 8), np.uint8)
    Image.fromarray(grey8).save(tmp_path / "g8.png")
    Image.fromarray(grey8.astype(np.uint16)).save(tmp_path / "g16.png")
    Image.fromarray(np.zeros((6, 8, 3), np.uint8)).save(tmp_path / "rgb.png")
    Image.fromarray(np.zeros((6, 9), np.uint8)).save(tmp_path / "wide.png")
    g8, g16, rgb, wide = (read_image(tmp_path / n) for n in ("g8.png", "g16.png", "rgb.png", "wide.png"))
    check_image_pair(g8, g8)
    with pytest.raises(ValueError, match=r"REF .*g8.png is 8-bit but DIST .*g16.png is 16-bit"):
        check_image_pair(g8, g16)
    with pytest.raises(ValueError, match=r"REF .*g8.png is grey but DIST .*rgb.png is RGB"):
        check_image_pair(g8, rgb)
    with pytest.raises(ValueError, match=r"images differ in size: REF .* is 8×6 but DIST .*wide.png is 9×6"):
        check_image_pair(g8, wide)


def test_interleaved_reader_gives_the_same_pixels_without_reordering_them(tmp_path):
    rng = np.random.default_rng(7)
    rgb = rng.integers(0, 256, size=(6, 7, 3)).astype(np.uint8)
    Image.fromarray(rgb).save(tmp_path / "rgb.png")
    Image.fromarray(rgb[..., 1]).save(tmp_path / "grey.png")
    Image.fromarray(rng.integers(0, 65536, size=(6, 7)).astype(np.uint16)).save(tmp_path / "g16.png")
    for name in ("rgb.png", "grey.png", "g16.png"):
        planar, interleaved = read_image(tmp_path / name), read_image_interleaved(tmp_path / name)
        assert torch.equal(planar.pixels, interleaved.pixels) and planar.pixels.dtype == interleaved.pixels.dtype
        assert (planar.bit_depth, planar.channels) == (interleaved.bit_depth, interleaved.channels)
        assert planar.pixels.is_contiguous()
    colour = read_image_interleaved(tmp_path / "rgb.png").pixels
    assert not colour.is_contiguous() and colour.permute(0, 2, 3, 1).is_contiguous()  # the file's own order


def test_read_image_pixels_are_writable(tmp_path):
    """Pillow hands out read-only buffers; one grey plane needs no reordering, so read_image copies it."""
    Image.fromarray(np.full((3, 4), 9, np.uint8)).save(tmp_path / "grey.png")
    pixels = read_image(tmp_path / "grey.png").pixels
    assert pixels.numpy().flags.writeable
    pixels.add_(1)
    assert int(pixels.max()) == 10

"""Image files to tensors (Pillow), at the file's own precision, with the rules that make a pair comparable.

Reading rules (:func:`read_image`):

* 8-bit greyscale (``L``, and bilevel ``1`` as 0/255) -> one channel, data range 255.
* 16-bit greyscale (PNG/TIFF ``I;16``; ``I`` with values in 0..65535) -> one channel, data range 65535.
* 8-bit RGB -> three channels, data range 255. Palette images are converted to RGB (their transparency, if
  any, follows the alpha rule).
* Alpha (``RGBA``, ``LA``, palette transparency): dropped when every pixel is fully opaque; any transparent pixel
  is an error (the result would depend on a background colour: flatten the image first).
* Refused with a clear error: RGB or alpha images stored with 16 bits per sample (Pillow reads them only
  reduced to 8 bits), floating-point images (``F``), 32-bit integer images beyond 0..65535, CMYK and other
  colour spaces (convert them to RGB with a colour-managed tool first).

A pair (:func:`check_image_pair`) must have the same size, the same channels (both grey or both RGB) and the same
bit depth; the data range of the comparison is the images' (255 or 65535).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image, UnidentifiedImageError

if TYPE_CHECKING:
    import torch

__all__ = ["ImageData", "check_image_pair", "read_image", "read_image_interleaved"]

_GREY16_MODES = ("I;16", "I;16L", "I;16B", "I;16N")
_CONVERT_TO_RGB = ("P", "PA", "RGBX", "YCbCr")  # lossless or defined conversions


@dataclass(frozen=True)
class ImageData:
    """An image read by :func:`read_image`: ``pixels`` is ``(1, C, H, W)`` holding 0..data_range, uint8 for 8-bit
    files and float32 (exact) for 16-bit ones."""

    path: Path
    pixels: torch.Tensor
    bit_depth: int  # 8 or 16
    channels: str  # "grey" or "RGB"

    @property
    def data_range(self) -> int:
        return (1 << self.bit_depth) - 1

    @property
    def width(self) -> int:
        return int(self.pixels.shape[-1])

    @property
    def height(self) -> int:
        return int(self.pixels.shape[-2])

    def describe(self) -> str:
        """E.g. ``"16-bit grey"`` or ``"8-bit RGB"``."""
        return f"{self.bit_depth}-bit {self.channels}"


def _rawmodes(img: Image.Image) -> list[str]:
    """How the file stores its samples (e.g. ``RGB;16B``), read from the decoder tiles before loading."""
    modes = []
    for tile in getattr(img, "tile", None) or ():
        args = tile[3] if len(tile) > 3 else None
        raw = args[0] if isinstance(args, tuple) and args else args
        if isinstance(raw, str):
            modes.append(raw)
    return modes


def _drop_opaque_alpha(img: Image.Image, target: str, name: str, path: Path) -> Image.Image:
    """``img`` (with an alpha channel) as ``target`` mode, if every pixel is fully opaque."""
    alpha = np.asarray(img.getchannel("A"))
    if alpha.size and int(alpha.min()) < 255:
        raise ValueError(f"{name} {path} has transparent pixels (alpha below 255); the score would depend on a "
                         "background colour: flatten it onto a background first (e.g. with Pillow: "
                         "Image.alpha_composite(Image.new('RGBA', im.size, 'white'), im).convert('RGB'))")
    return img.convert(target)


def _to_array(img: Image.Image, name: str, path: Path) -> tuple[np.ndarray, int, str]:
    """The samples as ``(H, W)`` or ``(H, W, 3)``, the bit depth and ``"grey"``/``"RGB"``, by the module's rules."""
    mode = img.mode
    wide = [raw for raw in _rawmodes(img) if ";16" in raw]
    if wide and not mode.startswith("I"):
        raise ValueError(f"{name} {path} stores 16-bit {wide[0].partition(';')[0]} samples, which Pillow reads only "
                         "reduced to 8 bits, so they cannot be compared at full precision: save the image as 16-bit "
                         "greyscale or 8-bit RGB")
    img.load()
    if mode in _GREY16_MODES:
        return np.asarray(img).astype(np.uint16), 16, "grey"
    if mode == "I":
        array = np.asarray(img)
        if array.size and (int(array.min()) < 0 or int(array.max()) > 65535):
            raise ValueError(f"{name} {path} holds 32-bit integer samples outside 0..65535; only 8- and 16-bit "
                             "images are supported")
        return array.astype(np.uint16), 16, "grey"
    if mode in ("1", "L"):
        return np.asarray(img.convert("L")), 8, "grey"
    if mode == "LA":
        return np.asarray(_drop_opaque_alpha(img, "L", name, path)), 8, "grey"
    if mode in _CONVERT_TO_RGB:
        img = img.convert("RGBA" if mode in ("P", "PA") else "RGB")
        mode = img.mode
    if mode == "RGBA":
        img = _drop_opaque_alpha(img, "RGB", name, path)
    elif mode != "RGB":
        raise ValueError(f"{name} {path} has Pillow mode {mode!r}, which is not supported: convert it to 8-bit RGB, "
                         "8-bit greyscale or 16-bit greyscale first")
    return np.asarray(img), 8, "RGB"


def read_image(path: str | Path, name: str = "image") -> ImageData:
    """Read an image file at its own precision (see the module rules); ``name`` (e.g. ``"REF"``) heads errors.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for an unreadable or unsupported one.
    """
    array, bit_depth, channels = _read_samples(path, name)
    planes = np.ascontiguousarray(array.transpose(2, 0, 1))
    if not planes.flags.writeable:  # one grey plane is still Pillow's read-only buffer: the caller may write
        planes = planes.copy()
    return _image_data(path, planes, bit_depth, channels, (0, 1, 2))


def read_image_interleaved(path: str | Path, name: str = "image") -> ImageData:
    """:func:`read_image` without reordering the samples: ``pixels`` is the same ``(1, C, H, W)`` tensor, but a
    read-only view of the file's interleaved ``(H, W, C)`` samples (not contiguous for RGB; never write to it). The
    batch decoders use it: the reordering costs about a tenth of a 1024² PNG's decoding on the CPU and nothing on
    a GPU, where :func:`fusedsim.engine.inputs.to_device` makes the pixels contiguous."""
    array, bit_depth, channels = _read_samples(path, name)
    return _image_data(path, array, bit_depth, channels, (2, 0, 1))


def _read_samples(path: str | Path, name: str) -> tuple[np.ndarray, int, str]:
    """The file's samples as ``(H, W, C)``, its bit depth and ``"grey"``/``"RGB"``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{name}: image file not found: {path}")
    try:
        with Image.open(path) as img:
            array, bit_depth, channels = _to_array(img, name, path)
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"{name}: cannot read image {path}: {exc}") from exc
    return (array[:, :, None] if array.ndim == 2 else array), bit_depth, channels


def _image_data(path: str | Path, array: np.ndarray, bit_depth: int, channels: str,
                to_chw: tuple[int, int, int]) -> ImageData:
    import torch

    # 8-bit samples stay uint8 (a quarter of float32's memory and host-to-device traffic: the engine converts
    # strip by strip); 16-bit ones become float32, where they are exact (torch's uint16 has few kernels)
    if array.dtype != np.uint8:
        array = array.astype(np.float32)
    with warnings.catch_warnings():  # Pillow's arrays are read-only: the interleaved reader's pixels are not written
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        samples = torch.from_numpy(array)
    return ImageData(path=Path(path), pixels=samples.permute(*to_chw)[None], bit_depth=bit_depth, channels=channels)


def check_image_pair(ref: ImageData, dist: ImageData, names: tuple[str, str] = ("REF", "DIST")) -> None:
    """Raise ``ValueError`` unless both images have the same size, channels and bit depth."""
    a, b = names
    if (ref.width, ref.height) != (dist.width, dist.height):
        raise ValueError(f"images differ in size: {a} {ref.path} is {ref.width}×{ref.height} but {b} {dist.path} is "
                         f"{dist.width}×{dist.height}")
    if ref.channels != dist.channels:
        raise ValueError(f"{a} {ref.path} is {ref.channels} but {b} {dist.path} is {dist.channels}; both must be "
                         "greyscale or both RGB (convert one of them first)")
    if ref.bit_depth != dist.bit_depth:
        raise ValueError(f"{a} {ref.path} is {ref.bit_depth}-bit but {b} {dist.path} is {dist.bit_depth}-bit; both "
                         "must have the same bit depth (their data ranges differ)")

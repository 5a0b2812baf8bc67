"""Image files to tensors (Pillow), at the file's own precision, with the rules that make a pair comparable.

Reading rules (:func:`read_image`):

* 8-bit greyscale (``L``, and bilevel ``1`` as 0/255) -> one channel, data range 255.
* 16-bit greyscale (PNG/TIFF ``I;16``; ``I`` with values in 0..65535) -> one channel, data range 65535.
* 8-bit RGB -> three channels, data range 255. Palette images are converted to RGB (their transparency, if
  any, follows the alpha rule).
* Alpha (``RGBA``, ``LA``, palette transparency): dropped when every pixel is fully opaque; any transparent pixel
  is an error (the result would depend on a background colour: flatten the image first).
* Refused with a clear error: RGB or alpha images stored with 16 bits per sample (Pillow reads them only
  reduced to 8 bits; for PPM the header's maxval above 255 says so), floating-point images (``F``), 32-bit integer
  images beyond 0..65535, CMYK and other colour spaces (convert them to RGB with a colour-managed tool first),
  animated and multi-page images (GIF, WebP, APNG, TIFF: which frame is meant is the user's choice, not frame 1;
  an MPO's first image is its primary picture and is read), images over the pixel limit (Pillow's
  ``Image.MAX_IMAGE_PIXELS``, a decompression-bomb guard; ``FUSEDSIM_MAX_IMAGE_PIXELS=N`` raises it, 0 lifts it),
  and paths that are not regular files (directories, FIFOs, devices) or cannot be read (permission denied).
* A path may be a URI (``s3://``, ``gs://``, ``hdfs://``, ``file://``): the bytes come through pyarrow's or
  fsspec's file systems (:mod:`fusedsim.io.remote`).

A pair (:func:`check_image_pair`) must have the same size, the same channels (both grey or both RGB) and the same
bit depth; the data range of the comparison is the images' (255 or 65535).
"""

from __future__ import annotations

import io
import os
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from fusedsim.io.remote import is_uri, read_bytes

if TYPE_CHECKING:
    import torch

__all__ = ["MAX_PIXELS_ENV", "ImageData", "check_image_pair", "read_image", "read_image_interleaved"]

#: environment variable that sets the pixel limit of an image (0: none); default Pillow's ``MAX_IMAGE_PIXELS``
MAX_PIXELS_ENV = "FUSEDSIM_MAX_IMAGE_PIXELS"

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


def _wide_ppm(img: Image.Image) -> bool:
    """Whether a PPM stores two bytes per sample (header maxval above 255): Pillow opens a 16-bit RGB PPM as mode
    ``RGB`` with the samples scaled to 8 bits, and its tiles carry ``(rawmode, maxval)`` rather than a ``;16``
    raw mode, so the maxval is the only trace of the file's precision."""
    if img.format != "PPM" or img.mode.startswith("I"):
        return False
    for tile in getattr(img, "tile", None) or ():
        args = tile[3] if len(tile) > 3 else None
        if isinstance(args, tuple) and len(args) > 1 and isinstance(args[1], int) and args[1] > 255:
            return True
    return False


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
    wide = [raw for raw in _rawmodes(img) if ";16" in raw] or (["RGB;16"] if _wide_ppm(img) else [])
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


_NOT_REGULAR = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _check_regular_file(path: Path, name: str) -> None:
    """Raise unless ``path`` is a readable regular file: a directory, FIFO or ``/dev/null`` is not "not found" (it
    exists), a FIFO must never be opened (the read would block until a writer comes), and an unreadable parent
    folder must read as permission denied, not as a missing file (``Path.is_file`` says False to both)."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"{name}: image file not found: {path}") from None
    except PermissionError:
        raise ValueError(f"{name}: permission denied: cannot read {path} (check the permissions of the file and "
                         "of its folders)") from None
    except OSError as exc:
        raise ValueError(f"{name}: cannot read image {path}: {exc.strerror or exc}") from None
    for test, what in _NOT_REGULAR:
        if test(mode):
            raise ValueError(f"{name}: {path} is {what}, not an image file")


def _pixel_limit() -> int | None:
    """The most pixels an image may have: ``FUSEDSIM_MAX_IMAGE_PIXELS`` (0: no limit), else Pillow's
    ``Image.MAX_IMAGE_PIXELS`` (its decompression-bomb guard). A limit from the environment is also given to
    Pillow, whose own guard (an error above twice its limit) would otherwise refuse what the user allowed; every
    thread sets the same value, so the race is harmless."""
    text = os.environ.get(MAX_PIXELS_ENV, "").strip()
    if not text:
        return Image.MAX_IMAGE_PIXELS
    try:
        limit = int(float(text))
    except ValueError:
        raise ValueError(f"{MAX_PIXELS_ENV} must be a number of pixels (0: no limit); got {text!r}") from None
    Image.MAX_IMAGE_PIXELS = limit if limit > 0 else None
    return Image.MAX_IMAGE_PIXELS


def _too_large(path: Path, name: str, pixels: int | None, limit: int | None) -> ValueError:
    size = f" ({pixels} pixels)" if pixels else ""
    return ValueError(f"{name}: image {path} is larger{size} than the pixel limit of {limit} pixels, Pillow's guard "
                      f"against decompression bombs; if the file is trusted, raise the limit with "
                      f"{MAX_PIXELS_ENV}=N (0 lifts it)")


def _check_still_image(img: Image.Image, name: str, path: Path) -> None:
    """Refuse animated and multi-page images: scoring frame 1 without a word is a silent wrong value for a user
    who meant another frame or all of them. MPO files (camera JPEGs with a depth map or gain map after the
    picture) are read: their first image is the primary one by the format's definition."""
    if not getattr(img, "is_animated", False) or img.format == "MPO":
        return
    kind = "pages" if img.format == "TIFF" else "frames"
    raise ValueError(f"{name}: {path} is a {img.format} image with {getattr(img, 'n_frames', 'several')} {kind}; only "
                     f"still images are scored: save the {kind[:-1]} to compare as its own file (e.g. with Pillow: "
                     "im.seek(i); im.save('frame.png'))")


def _read_samples(path: str | Path, name: str) -> tuple[np.ndarray, int, str]:
    """The file's samples as ``(H, W, C)``, its bit depth and ``"grey"``/``"RGB"``; ``path`` may be a URI
    (``s3://...``: :mod:`fusedsim.io.remote`)."""
    source: Any
    if is_uri(path):
        try:
            source = io.BytesIO(read_bytes(str(path), name))
        except FileNotFoundError:
            raise FileNotFoundError(f"{name}: image file not found: {path}") from None
    else:
        path = source = Path(path)
        _check_regular_file(path, name)
    limit = _pixel_limit()
    try:
        with Image.open(source) as img:
            pixels = img.width * img.height
            if limit is not None and pixels > limit:
                raise _too_large(path, name, pixels, limit)
            _check_still_image(img, name, path)
            array, bit_depth, channels = _to_array(img, name, path)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):  # the warning when made an error
        raise _too_large(path, name, None, Image.MAX_IMAGE_PIXELS) from None
    except PermissionError:
        raise ValueError(f"{name}: permission denied: cannot read {path}") from None
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

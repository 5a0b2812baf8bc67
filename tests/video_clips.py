"""Tiny fixture clips made at test time with PyAV (FFmpeg's encoders as PyAV's wheel bundles them).

Content is the bundled example photo (a crop of scikit-image's chelsea.png, CC0) panned a few pixels per frame,
so lossy encoders and the metrics see natural detail. Clips are written from exact Y'CbCr planes (``encode_planes``)
when a test compares decoded samples with the source, or from RGB through FFmpeg's own conversion otherwise.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pytest

av = pytest.importorskip("av", reason="PyAV is in the dev extra: pip install -e '.[dev]'")


def encoder_available(name: str) -> bool:
    try:
        av.codec.Codec(name, "w")
    except Exception:  # noqa: BLE001 - PyAV raises several kinds for an unknown codec
        return False
    return True


def photo_frames(n: int, width: int = 128, height: int = 96, step: int = 3) -> list[np.ndarray]:
    """``n`` RGB uint8 frames ``(height, width, 3)``: the example photo panned ``step`` pixels per frame."""
    from PIL import Image

    path = resources.files("fusedsim") / "data" / "example_ref.png"
    img = np.asarray(Image.open(str(path)).convert("RGB"))
    return [np.ascontiguousarray(img[10:10 + height, 10 + i * step:10 + i * step + width]) for i in range(n)]


def photo_planes(n: int, pix_fmt: str, width: int = 128, height: int = 96) -> list[list[np.ndarray]]:
    """The photo frames as Y'CbCr planes of ``pix_fmt`` (FFmpeg's conversion; BT.601 limited range)."""
    out = []
    for rgb in photo_frames(n, width, height):
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format=pix_fmt)
        out.append([_plane(p, 1 if frame.format.components[0].bits <= 8 else 2) for p in frame.planes])
    return out


def _plane(plane, itemsize: int) -> np.ndarray:
    dtype = np.dtype(np.uint8) if itemsize == 1 else np.dtype("<u2")
    rows = np.frombuffer(plane, dtype=dtype).reshape(plane.height, plane.line_size // itemsize)
    return np.ascontiguousarray(rows[:, :plane.width]).astype(dtype.newbyteorder("="))


def _open_stream(path: Path, codec: str, pix_fmt: str, width: int, height: int, rate: int, options, colorspace,
                 color_range):
    container = av.open(str(path), "w")
    stream = container.add_stream(codec, rate=rate)
    stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
    stream.options = dict(options or {})
    if colorspace is not None:
        stream.codec_context.colorspace = colorspace
    if color_range is not None:
        stream.codec_context.color_range = color_range
    return container, stream


def _write(container, stream, frames, colorspace, color_range, pts=None) -> None:
    for i, frame in enumerate(frames):
        frame.pts = i if pts is None else pts[i]
        if colorspace is not None:
            frame.colorspace = colorspace
        if color_range is not None:
            frame.color_range = color_range
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
    container.close()


def encode_planes(path: Path, codec: str, pix_fmt: str, planes: list[list[np.ndarray]], *, rate: int = 25,
                  options: dict | None = None, colorspace: int | None = None, color_range: int | None = None,
                  pts: list[int] | None = None) -> Path:
    """Encode frames given as exact planes (``[[y, u, v], ...]``) with ``codec``; ``pts`` in units of 1/``rate``
    s (default 0, 1, 2, ...)."""
    height, width = planes[0][0].shape
    container, stream = _open_stream(path, codec, pix_fmt, width, height, rate, options, colorspace, color_range)
    frames = []
    for y, u, v in planes:
        frame = av.VideoFrame(width, height, pix_fmt)
        for dst, src in zip(frame.planes, (y, u, v)):
            itemsize = src.dtype.itemsize
            padded = np.zeros((dst.height, dst.line_size // itemsize), dtype=src.dtype.newbyteorder("<"))
            padded[:, :src.shape[1]] = src
            dst.update(padded.tobytes())
        frames.append(frame)
    _write(container, stream, frames, colorspace, color_range, pts)
    return path


def encode_rgb(path: Path, codec: str, pix_fmt: str, frames_rgb: list[np.ndarray], *, rate: int = 25,
               options: dict | None = None) -> Path:
    """Encode RGB frames (converted by FFmpeg to ``pix_fmt``)."""
    height, width = frames_rgb[0].shape[:2]
    container, stream = _open_stream(path, codec, pix_fmt, width, height, rate, options, None, None)
    frames = [av.VideoFrame.from_ndarray(f, format="rgb24").reformat(format=pix_fmt) for f in frames_rgb]
    _write(container, stream, frames, None, None)
    return path


def write_y4m(path: Path, planes: list[list[np.ndarray]], bit_depth: int, chroma: str = "420",
              rate: str = "25:1") -> Path:
    """A Y4M file of the planes (``C420jpeg`` / ``C420p10`` ... tags)."""
    height, width = planes[0][0].shape
    tag = ("420jpeg" if chroma == "420" else chroma) if bit_depth == 8 else f"{chroma}p{bit_depth}"
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{width} H{height} F{rate} Ip A1:1 C{tag}\n".encode())
        for frame in planes:
            f.write(b"FRAME\n")
            for p in frame:
                f.write(p.astype(p.dtype.newbyteorder("<")).tobytes())
    return path

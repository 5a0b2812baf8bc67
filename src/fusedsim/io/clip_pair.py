"""Two clips opened side by side: aligned frame pairs as tensors on a device (:func:`open_pair`).

A clip is a compressed file (decoded by PyAV on the CPU or by NVDEC on the GPU: :mod:`.compressed`,
:mod:`.nvcodec`, :mod:`.nvdec`), a Y4M file or raw YUV (the fast readers of :mod:`.video`). Which frames are compared is a
:class:`~fusedsim.io.frame_selection.FramePlan`; both clips are decoded ahead on their own threads while the
previous batch is used. Frames are cropped, the distorted one scaled when asked (never otherwise), and stacked
into :class:`PairBatch` es of integer planes on the device; :meth:`PairBatch.rgb` converts them to R'G'B'.

Refused with the reason: different frame sizes (after cropping) without ``scale``, different frame rates without
``ignore_fps``, a crop that splits a subsampled chroma sample. Reported in :attr:`ClipPair.notes`, not hidden:
a variable frame rate, timestamp gaps (missing frames), frames of one clip without a partner.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from fusedsim.io.compressed import CompressedReader, is_compressed, open_compressed
from fusedsim.io.frame_selection import FramePlan, plan_frames
from fusedsim.io.staged_batches import StagingRing, stacked_batches, upload
from fusedsim.io.video import VideoFormat, VideoReader, open_video
from fusedsim.io.yuv_rgb import Colour, rgb_float, rgb_uint8

__all__ = ["DECODERS", "SCALERS", "ClipPair", "ClipSide", "Crop", "FramePlanes", "PairBatch", "open_pair"]

DECODERS = ("auto", "cpu", "nvdec")
#: scalers for ``scale=``: torch.nn.functional.interpolate modes (align_corners=False; antialias when shrinking)
SCALERS = ("bicubic", "bilinear")
_PLANES = ("y", "u", "v")
_AHEAD = 2  # batches decoded ahead of the one in use, per clip


@dataclass(frozen=True)
class Crop:
    """Samples removed from each edge of a frame (luma samples)."""

    left: int = 0
    top: int = 0
    right: int = 0
    bottom: int = 0

    @classmethod
    def parse(cls, value: Any, name: str) -> Crop:
        """None, a :class:`Crop`, ``(left, top, right, bottom)`` or ``"left,top,right,bottom"``."""
        if value is None:
            return cls()
        if isinstance(value, Crop):
            return value
        parts = value.split(",") if isinstance(value, str) else list(value)
        try:
            numbers = [int(p) for p in parts]
        except (TypeError, ValueError):
            numbers = []
        if len(numbers) != 4 or min(numbers) < 0:
            raise ValueError(f"{name} must be four non-negative integers left,top,right,bottom; got {value!r}")
        return cls(*numbers)

    def apply_to(self, fmt: VideoFormat, name: str) -> tuple[int, int]:
        """The cropped (width, height); ValueError naming ``name`` when nothing is left or a chroma sample would
        be split (4:2:0 needs even amounts, 4:2:2 even left/right)."""
        w = fmt.width - self.left - self.right
        h = fmt.height - self.top - self.bottom
        if w <= 0 or h <= 0:
            raise ValueError(f"{name} {self.left},{self.top},{self.right},{self.bottom} leaves nothing of a "
                             f"{fmt.width}x{fmt.height} frame")
        odd_x = fmt.chroma != "444" and (self.left % 2 or self.right % 2)
        odd_y = fmt.chroma == "420" and (self.top % 2 or self.bottom % 2)
        if odd_x or odd_y:
            raise ValueError(f"{name} {self.left},{self.top},{self.right},{self.bottom}: {fmt.pix_fmt} needs even "
                             f"amounts {'on every edge' if fmt.chroma == '420' else 'left and right'} (a chroma "
                             "sample covers two luma samples)")
        return w, h

    def planes(self, fmt: VideoFormat) -> tuple[tuple[slice, slice], tuple[slice, slice]]:
        """(rows, columns) slices of the luma and of the chroma planes."""
        sx = 1 if fmt.chroma == "444" else 2
        sy = 2 if fmt.chroma == "420" else 1
        luma = (slice(self.top, fmt.height - self.bottom), slice(self.left, fmt.width - self.right))
        chroma = (slice(self.top // sy, fmt.chroma_height - self.bottom // sy),
                  slice(self.left // sx, fmt.chroma_width - self.right // sx))
        return luma, chroma


@dataclass(frozen=True)
class ClipSide:
    """One clip as compared: ``path``, ``kind`` (``compressed``, ``y4m``, ``raw``), ``fmt`` (as decoded), ``fps``,
    ``frame_count``, ``colour`` (its conversion to RGB), ``decoder`` (``cpu``, ``nvdec``, ``file``),
    ``size`` (width, height after cropping) and ``notes``."""

    path: Path
    kind: str
    fmt: VideoFormat
    fps: Fraction | None
    frame_count: int
    colour: Colour
    decoder: str
    size: tuple[int, int]
    notes: tuple[str, ...]


@dataclass
class FramePlanes:
    """Integer planes of ``n`` frames on one device: ``y`` ``(n, H, W)``, ``u``/``v`` ``(n, Hc, Wc)`` (None when
    only luma was asked for), uint8 or uint16 codes of ``bit_depth`` bits."""

    y: torch.Tensor
    u: torch.Tensor | None
    v: torch.Tensor | None
    bit_depth: int

    @property
    def n(self) -> int:
        return int(self.y.shape[0])


@dataclass
class PairBatch:
    """Aligned frames of both clips: ``ref_index``/``dist_index`` (clip frame numbers) and their planes."""

    ref_index: list[int]
    dist_index: list[int]
    ref: FramePlanes
    dist: FramePlanes
    ref_colour: Colour
    dist_colour: Colour

    @property
    def n(self) -> int:
        return len(self.ref_index)

    def rgb(self, side: str, form: str = "float") -> torch.Tensor:
        """``side`` (``"ref"``/``"dist"``) as R'G'B' ``(n, 3, H, W)``: ``form`` ``"float"`` (float32 in [0, 1])
        or ``"uint8"`` (8-bit codes), by :mod:`fusedsim.io.yuv_rgb` with the clip's colour."""
        planes, colour = (self.ref, self.ref_colour) if side == "ref" else (self.dist, self.dist_colour)
        if planes.u is None or planes.v is None:
            raise ValueError("rgb() needs the chroma planes: open the pair with planes=('y', 'u', 'v')")
        convert = rgb_uint8 if form == "uint8" else rgb_float
        return convert(planes.y, planes.u, planes.v, planes.bit_depth, colour)


class _Source:
    """One clip's decoding: frames (index, y, u, v) in order, numpy on the host or CUDA tensors (NVDEC)."""

    def __init__(self, path: str | os.PathLike, role: str, decoder: str, device: torch.device, threads: int,
                 raw: dict[str, Any], colour: Colour | None) -> None:
        self.role = role
        self.reader: CompressedReader | VideoReader
        if is_compressed(path):
            self.reader = open_compressed(path, threads=threads)
            info = self.reader.info
            self.kind, self.colour, notes = "compressed", colour or info.colour, info.notes
            self.decoder, self.backend = _pick_decoder(decoder, device, self.reader)
        else:
            if decoder == "nvdec":
                raise ValueError(f"decoder='nvdec': {path} is Y4M or raw YUV, which has nothing to decode")
            self.reader = open_video(path, **raw)
            if not self.reader.seekable:
                raise ValueError(f"{path}: comparing clips needs regular files (the frame counts up front), not a "
                                 "pipe")
            self.kind, self.colour, notes, self.decoder = self.reader.kind, colour or Colour(), (), "file"
            self.backend = "file"
        self.notes = tuple(f"{role} {path}: {n}" for n in notes)
        self.device = device

    @property
    def fmt(self) -> VideoFormat:
        return self.reader.fmt

    def frames(self, planes: Sequence[str], limit: int) -> Iterator[tuple[int, Any, Any, Any]]:
        if isinstance(self.reader, CompressedReader):
            if self.decoder == "nvdec":
                if self.backend == "pynvvideocodec":
                    from fusedsim.io.nvcodec import nvcodec_frames as frames
                else:
                    from fusedsim.io.nvdec import nvdec_frames as frames

                for f in frames(self.reader, planes, device=self.device, limit=limit):
                    yield f.index, f.y, f.u, f.v
            else:
                for f in self.reader.frames(planes, limit=limit, copy=False):
                    yield f.index, f.y, f.u, f.v
            return
        chroma = any(p in planes for p in ("u", "v"))
        for batch in self.reader.batches(8, limit=limit):
            for i in range(batch.n):
                yield (batch.first_index + i, batch.y[i], batch.u[i] if chroma else None,
                       batch.v[i] if chroma else None)

    def close(self) -> None:
        self.reader.close()


def _pick_decoder(decoder: str, device: torch.device, reader: CompressedReader) -> tuple[str, str]:
    """(``cpu``, ``pyav``) or (``nvdec``, its backend: ``pynvvideocodec`` when installed and able to take the clip,
    else FFmpeg's CUDA hwaccel ``ffmpeg``); ValueError naming why when NVDEC is asked for and cannot take the clip.
    ``auto`` is the CPU: on an H200 machine's 16 cores PyAV decoded 1080p H.264 at ~2,000 frames/s, one NVDEC
    session at ~500 (benchmarks/README.md, compressed video)."""
    if decoder in ("cpu", "auto"):
        return "cpu", "pyav"
    from fusedsim.io.nvcodec import nvcodec_available, nvcodec_refusal
    from fusedsim.io.nvdec import nvdec_available, nvdec_refusal

    if device.type != "cuda":
        raise ValueError(f"decoder='nvdec' decodes into GPU memory; device is {device}")
    if nvcodec_available():
        refusal = nvcodec_refusal(reader, device)
        if refusal is None:
            return "nvdec", "pynvvideocodec"
    elif nvdec_available():
        refusal = nvdec_refusal(reader, device)
        if refusal is None:
            return "nvdec", "ffmpeg"
    else:
        raise ValueError("decoder='nvdec' needs a CUDA GPU and PyNvVideoCodec (pip install 'fusedsim[nvdec]') or "
                         "PyAV (16+) with FFmpeg's CUDA hwaccel")
    raise ValueError(f"decoder='nvdec': NVDEC cannot decode {reader.path} ({refusal}); use decoder='cpu'")


def _selected(source: _Source, indices: list[int], planes: Sequence[str], crop: Crop) -> Iterator[tuple]:
    """The frames of ``indices`` (increasing; repeats allowed) of ``source``, cropped; ValueError when the clip
    ends early."""
    luma, chroma = crop.planes(source.fmt)
    k = 0
    for index, y, u, v in source.frames(planes, indices[-1] + 1):
        while k < len(indices) and indices[k] == index:
            yield (y[luma], None if u is None else u[chroma], None if v is None else v[chroma])
            k += 1
        if k == len(indices):
            return
    raise ValueError(f"{source.role} {source.reader.path} ended before frame {indices[k]}")


def _read_ahead(items: Iterator[Any], depth: int) -> Iterator[Any]:
    """``items`` produced by a background thread, at most ``depth`` ahead (decoding overlaps the consumer)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def work() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(done)
        except BaseException as exc:  # re-raised in the consumer, with the file's name
            q.put(exc)

    thread = threading.Thread(target=work, name="fusedsim-decode", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while thread.is_alive():
            try:
                q.get(timeout=0.1)
            except queue.Empty:
                pass
        close = getattr(items, "close", None)
        if close is not None:
            close()


def _scale(plane: torch.Tensor | None, size: tuple[int, int], mode: str, bit_depth: int) -> torch.Tensor | None:
    """``plane`` ``(n, h, w)`` resized to ``size`` (h, w), rounded back to codes of ``bit_depth`` bits."""
    if plane is None or tuple(plane.shape[-2:]) == size:
        return plane
    shrink = size[0] < plane.shape[-2] or size[1] < plane.shape[-1]
    out = F.interpolate(plane[:, None].float(), size=size, mode=mode, align_corners=False, antialias=shrink)[:, 0]
    return torch.floor(out + 0.5).clamp_(0, (1 << bit_depth) - 1).to(plane.dtype)


class ClipPair:
    """Two opened clips and the frame pairs to compare (:func:`open_pair`). ``ref``/``dist``: :class:`ClipSide`;
    ``plan``: the :class:`~fusedsim.io.frame_selection.FramePlan`; ``notes``: what a comparison must report.
    Iterate for one :class:`PairBatch` per frame pair, or call :meth:`batches`. Close it (or use ``with``)."""

    def __init__(self, ref: _Source, dist: _Source, plan: FramePlan, sizes: tuple[tuple[int, int], ...],
                 crops: tuple[Crop, Crop], scale: str | None, planes: tuple[str, ...], device: torch.device,
                 notes: tuple[str, ...]) -> None:
        self._sources = (ref, dist)
        self.plan, self.device, self.planes, self.notes = plan, device, planes, notes
        self._crops, self._scale = crops, scale
        self.ref, self.dist = (
            ClipSide(s.reader.path, s.kind, s.fmt, s.reader.fps, int(s.reader.frame_count), s.colour, s.decoder,
                     size, s.notes) for s, size in zip(self._sources, sizes))

    def __len__(self) -> int:
        return len(self.plan.pairs)

    def __enter__(self) -> ClipPair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for s in self._sources:
            s.close()

    def __iter__(self) -> Iterator[PairBatch]:
        return self.batches(1)

    def batches(self, batch_frames: int = 8) -> Iterator[PairBatch]:
        """The frame pairs in order, ``batch_frames`` at a time (the last batch may be shorter)."""
        if isinstance(batch_frames, bool) or not isinstance(batch_frames, int) or batch_frames < 1:
            raise ValueError(f"batch_frames must be a positive integer; got {batch_frames!r}")
        pairs = self.plan.pairs
        chunks = [pairs[lo:lo + batch_frames] for lo in range(0, len(pairs), batch_frames)]
        sizes = [len(c) for c in chunks]
        # each clip is decoded and stacked on its own thread, two batches ahead, into page-locked slots when the
        # frames go from the host to a GPU (a slot is refilled once its copy has finished)
        rings = [StagingRing(_AHEAD + 2) if self.device.type == "cuda" else None for _ in self._sources]
        sides = [_read_ahead(stacked_batches(_selected(src, indices, self.planes, crop), sizes, ring), _AHEAD)
                 for src, indices, crop, ring in zip(self._sources, (self.plan.ref_indices, self.plan.dist_indices),
                                                     self._crops, rings)]
        try:
            for chunk in chunks:
                ref, dist = (upload(next(side), self.device, ring) for side, ring in zip(sides, rings))
                yield self._batch(chunk, ref, dist)
        finally:
            for ring in rings:
                if ring is not None:
                    ring.close()  # a decoding thread waiting for a slot stops
            for side in sides:
                side.close()

    def _batch(self, chunk: Sequence[tuple[int, int]], refs: tuple, dists: tuple) -> PairBatch:
        ref_fmt, dist_fmt = self.ref.fmt, self.dist.fmt
        ref = FramePlanes(*refs, ref_fmt.bit_depth)
        dist = FramePlanes(*dists, dist_fmt.bit_depth)
        if self._scale is not None:  # same chroma layout (checked on opening): chroma goes to the ref's chroma size
            size = tuple(ref.y.shape[-2:])
            chroma = tuple(ref.u.shape[-2:]) if ref.u is not None else size
            dist = FramePlanes(_scale(dist.y, size, self._scale, dist.bit_depth),
                               _scale(dist.u, chroma, self._scale, dist.bit_depth),
                               _scale(dist.v, chroma, self._scale, dist.bit_depth), dist.bit_depth)
        return PairBatch([r for r, _ in chunk], [d for _, d in chunk], ref, dist, self.ref.colour, self.dist.colour)


def open_pair(ref: str | os.PathLike, dist: str | os.PathLike, *, device: torch.device | str = "auto",
              decoder: str = "auto", planes: Sequence[str] = _PLANES, start: int = 0, end: int | None = None,
              every: int = 1, frames: int | None = None, encoded_offset: int = 0, frame_skip_ref: int = 0,
              frame_skip_dist: int = 0, crop: Any = None, crop_ref: Any = None, crop_dist: Any = None,
              scale: str | None = None, ignore_fps: bool = False, threads: int = 0,
              ref_colour: Colour | None = None, dist_colour: Colour | None = None, width: int | None = None,
              height: int | None = None, pix_fmt: str | None = None) -> ClipPair:
    """Open two clips for a frame-by-frame comparison on ``device``.

    Args:
        ref, dist: compressed video (mp4, mkv, webm, ... : PyAV), Y4M, or raw YUV (with ``width``, ``height``,
            ``pix_fmt``).
        device: where the planes go (``auto``: the GPU when there is one).
        decoder: ``auto`` (the CPU: faster than NVDEC through FFmpeg's hwaccel where measured), ``cpu`` (PyAV
            with FFmpeg's threads) or ``nvdec`` (an error naming the reason when NVDEC cannot take the clip).
        planes: ``("y",)`` for luma only (VMAF), else all three.
        start, end, every, frames, encoded_offset, frame_skip_ref, frame_skip_dist: which frames
            (:mod:`fusedsim.io.frame_selection`).
        crop: ``(left, top, right, bottom)`` removed from both clips; ``crop_ref`` / ``crop_dist`` per clip (they
            replace ``crop`` for that clip).
        scale: ``None`` (different sizes are an error) or a scaler of :data:`SCALERS`: the distorted clip's
            planes (after cropping) are resized to the reference's size with ``torch.nn.functional.interpolate``
            (``align_corners=False``, antialiased when shrinking) and rounded back to integer codes.
        ignore_fps: compare clips whose frame rates differ (frame by frame, by index).
        threads: decoder threads per clip (0: FFmpeg picks from the cores).
        ref_colour, dist_colour: override the colour conversion read from the streams' tags.
    """
    from fusedsim.core.device import resolve_device

    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {', '.join(DECODERS)}; got {decoder!r}")
    if scale is not None and scale not in SCALERS:
        raise ValueError(f"scale must be None or one of {', '.join(SCALERS)}; got {scale!r}")
    planes = tuple(planes)
    if not planes or any(p not in _PLANES for p in planes) or "y" not in planes:
        raise ValueError(f"planes must be ('y',) or ('y', 'u', 'v'); got {planes!r}")
    if planes != ("y",):
        planes = _PLANES
    dev = resolve_device(device)
    raw = {"width": width, "height": height, "pix_fmt": pix_fmt}
    ref_src = _Source(ref, "reference", decoder, dev, threads, raw, ref_colour)
    try:
        dist_src = _Source(dist, "distorted", decoder, dev, threads, raw, dist_colour)
    except BaseException:
        ref_src.close()
        raise
    try:
        crops = (Crop.parse(crop_ref if crop_ref is not None else crop, "crop_ref" if crop_ref is not None else "crop"),
                 Crop.parse(crop_dist if crop_dist is not None else crop,
                            "crop_dist" if crop_dist is not None else "crop"))
        sizes = (crops[0].apply_to(ref_src.fmt, "crop_ref" if crop_ref is not None else "crop"),
                 crops[1].apply_to(dist_src.fmt, "crop_dist" if crop_dist is not None else "crop"))
        _check_compatible(ref_src, dist_src, sizes, scale, ignore_fps)
        plan = plan_frames(int(ref_src.reader.frame_count), int(dist_src.reader.frame_count), start=start, end=end,
                           every=every, encoded_offset=encoded_offset, frame_skip_ref=frame_skip_ref,
                           frame_skip_dist=frame_skip_dist, frames=frames)
        notes = (*ref_src.notes, *dist_src.notes, *plan.notes)
        return ClipPair(ref_src, dist_src, plan, sizes, crops, scale, planes, dev, notes)
    except BaseException:
        ref_src.close()
        dist_src.close()
        raise


def _check_compatible(ref: _Source, dist: _Source, sizes: tuple[tuple[int, int], ...], scale: str | None,
                      ignore_fps: bool) -> None:
    (rw, rh), (dw, dh) = sizes
    if (rw, rh) != (dw, dh) and scale is None:
        raise ValueError(f"reference {ref.reader.path} is {rw}x{rh} but distorted {dist.reader.path} is {dw}x{dh} "
                         f"(after cropping); pass scale= (fusedsim video --scale) {' or '.join(SCALERS)} to resize "
                         "the distorted clip to the reference's size")
    if (rw, rh) != (dw, dh) and ref.fmt.chroma != dist.fmt.chroma:
        raise ValueError(f"scale: the clips' chroma layouts differ ({ref.fmt.pix_fmt}, {dist.fmt.pix_fmt}); only "
                         "clips of one layout are resized")
    rf, df = ref.reader.fps, dist.reader.fps
    if rf and df and Fraction(rf) != Fraction(df) and not ignore_fps:
        raise ValueError(f"reference {ref.reader.path} runs at {float(rf):g} frames/s but distorted "
                         f"{dist.reader.path} at {float(df):g}; frames would not correspond in time (pass "
                         "ignore_fps=True, fusedsim video --ignore-fps, to compare them by index anyway)")

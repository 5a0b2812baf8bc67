"""Compressed video (mp4, mkv, webm, mov, ivf, elementary H.264/HEVC/AV1 streams...) decoded on the CPU by PyAV.

PyAV bundles FFmpeg: :func:`open_compressed` probes the file (codec, size, pixel format, frame rate, colour tags)
and counts its frames by demuxing the packets without decoding them, which also gives every frame's timestamp:
a variable frame rate and gaps in the timestamps (missing frames) are reported in :attr:`ClipInfo.notes`.
:meth:`CompressedReader.frames` decodes with FFmpeg's frame and slice threads and yields each frame's planes at
their native bit depth (``uint8``, or ``uint16`` holding 9..16-bit codes); only luma is copied out when only luma
is asked for. :meth:`CompressedReader.batches` gives :class:`~fusedsim.io.video.FrameBatch` es, the interface of
the Y4M/YUV readers, so ``fusedsim vmaf`` takes these files as they are.

Planar Y'CbCr 4:2:0, 4:2:2 and 4:4:4 at 8, 10, 12 and 16 bits are read (``yuvj*`` formats are full-range
variants); anything else (greyscale, RGB-coded streams, packed formats) is refused naming the format.
``pip install 'fusedsim[video]'`` installs PyAV.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from fusedsim.io.video import FrameBatch, VideoFormat
from fusedsim.io.yuv_rgb import Colour

__all__ = ["COMPRESSED_SUFFIXES", "ClipInfo", "CompressedReader", "DecodedFrame", "has_compressed_magic", "import_av",
           "is_compressed", "open_compressed"]

#: file name endings read as compressed video whatever their first bytes are
COMPRESSED_SUFFIXES = (".mp4", ".m4v", ".mov", ".mkv", ".webm", ".ivf", ".avi", ".ts", ".m2ts", ".mts", ".mpg",
                       ".mpeg", ".flv", ".wmv", ".3gp", ".ogv", ".h264", ".264", ".avc", ".h265", ".265", ".hevc",
                       ".obu", ".av1", ".nut")
_MAGICS = ((4, b"ftyp"), (0, b"\x1a\x45\xdf\xa3"), (0, b"DKIF"), (0, b"RIFF"), (0, b"FLV"), (0, b"nut/"))

# FFmpeg's AVColorSpace / AVColorRange / AVChromaLocation numbers
_MATRIX_TAGS = {1: "bt709", 4: "fcc", 5: "bt601", 6: "bt601", 7: "smpte240m", 9: "bt2020"}
_MATRIX_REFUSED = {0: "RGB (GBR planes)", 8: "YCgCo", 10: "BT.2020 constant luminance", 11: "SMPTE 2085",
                   12: "chromaticity-derived NCL", 13: "chromaticity-derived CL", 14: "ICtCp"}
_SITING_TAGS = {1: "left", 2: "center", 3: "topleft", 4: "top", 5: "bottomleft", 6: "bottom"}
#: chroma siting FFmpeg's decoders give frames whose stream does not say (MPEG-2, H.264, HEVC and MPEG-4 Part 2
#: put it left); the others leave it unspecified, which FFmpeg's swscale converts as centred (measured against its
#: conversion: tests/io/test_yuv_rgb.py)
_DECODER_SITING = {"h264": "left", "hevc": "left", "mpeg4": "left", "mpeg2video": "left", "vvc": "left"}


def import_av() -> Any:
    """PyAV, or an ImportError that says how to install it."""
    try:
        import av
    except ImportError as exc:
        raise ImportError("reading compressed video (mp4, mkv, webm, ...) needs PyAV: pip install 'fusedsim[video]'"
                          ) from exc
    return av


def is_compressed(path: str | os.PathLike) -> bool:
    """Whether ``path`` is read as compressed video: a known container or stream suffix, or (regular files only:
    a pipe is never read here) the first bytes of MP4/MOV, Matroska/WebM, IVF, AVI, FLV or NUT. Y4M
    (``YUV4MPEG2``) and raw YUV are not; ``-`` is not."""
    if str(path) == "-":
        return False
    p = Path(path)
    if p.suffix.lower() in COMPRESSED_SUFFIXES:
        return True
    try:
        if not stat.S_ISREG(os.stat(p).st_mode):
            return False
        with open(p, "rb") as f:
            head = f.read(12)
    except OSError:
        return False
    return has_compressed_magic(head)


def has_compressed_magic(head: bytes) -> bool:
    """Whether the first bytes ``head`` spell a container signature (MP4/MOV, Matroska/WebM, IVF, AVI, FLV, NUT)."""
    return any(head[at:at + len(magic)] == magic for at, magic in _MAGICS)


@dataclass(frozen=True)
class ClipInfo:
    """What probing a clip found: ``fmt`` (size and sample layout), ``pix_fmt`` (the decoder's), ``codec``,
    ``container``, ``fps`` (the stream's average frame rate when its timestamps agree, else their median rate; None
    when unknown), ``frame_count`` (packets of the video stream), ``timestamps`` (each frame's presentation time in
    seconds, in presentation order), ``colour`` (how its samples map to RGB, from its
    tags or FFmpeg's defaults), ``colour_tagged`` (which of matrix/range/siting were tagged), ``notes`` (a
    variable frame rate, timestamp gaps: what a comparison should report), ``pts`` (the timestamps in the stream's
    time base, presentation order), ``keyframes`` and ``keyframe_packets`` (each keyframe's frame index and its
    packet's index in decoding order; the three are empty when the packets lack distinct timestamps)."""

    path: Path
    fmt: VideoFormat
    pix_fmt: str
    codec: str
    container: str
    fps: Fraction | None
    frame_count: int
    timestamps: tuple[float, ...]
    colour: Colour
    colour_tagged: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())
    pts: tuple[int, ...] = field(default=())
    keyframes: tuple[int, ...] = field(default=())
    keyframe_packets: tuple[int, ...] = field(default=())

    @property
    def variable_frame_rate(self) -> bool:
        return any(n.startswith("variable frame rate") for n in self.notes)


@dataclass
class DecodedFrame:
    """One decoded frame: ``index`` in presentation order, ``time`` in seconds (None without a timestamp) and its
    planes ``y`` ``(H, W)``, ``u``/``v`` ``(Hc, Wc)`` (None when not asked for), numpy, native bit depth."""

    index: int
    time: float | None
    y: np.ndarray
    u: np.ndarray | None
    v: np.ndarray | None


def _layout(pix_fmt: str, path: Path) -> tuple[str, int, bool]:
    """(chroma, bit depth, full range by format) of a decoder's pixel format, or ValueError naming it."""
    name = pix_fmt
    full = name.startswith("yuvj")
    if full:
        name = "yuv" + name[4:]
    for chroma in ("420", "422", "444"):
        prefix = f"yuv{chroma}p"
        if name == prefix:
            return chroma, 8, full
        if name.startswith(prefix) and name.endswith("le") and name[len(prefix):-2].isdigit():
            return chroma, int(name[len(prefix):-2]), full
    raise ValueError(f"{path}: the decoder outputs pixel format {pix_fmt!r}; only planar Y'CbCr 4:2:0, 4:2:2 and "
                     "4:4:4 (yuv420p, yuv422p10le, ...) can be compared")


def _colour(cc: Any, full_by_format: bool, path: Path, codec: str) -> tuple[Colour, tuple[str, ...]]:
    tagged = []
    matrix_tag = int(cc.colorspace or 2)
    if matrix_tag in _MATRIX_REFUSED:
        raise ValueError(f"{path}: its colour matrix is {_MATRIX_REFUSED[matrix_tag]}, which cannot be converted "
                         "to RGB here (supported: BT.601, BT.709, BT.2020 NCL, SMPTE 240M, FCC)")
    matrix = _MATRIX_TAGS.get(matrix_tag)
    if matrix is None:
        matrix = "bt601"  # FFmpeg's swscale default for untagged streams
    else:
        tagged.append("matrix")
    range_tag = int(cc.color_range or 0)
    if full_by_format or range_tag == 2:
        rng = "full"
        tagged.append("range")
    else:
        rng = "limited"
        if range_tag == 1:
            tagged.append("range")
    siting_tag = int(getattr(cc, "chroma_sample_location", 0) or 0)  # PyAV exposes it after 18.1
    siting = _SITING_TAGS.get(siting_tag) or _DECODER_SITING.get(codec, "center")
    if siting_tag in _SITING_TAGS:
        tagged.append("siting")
    return Colour(matrix=matrix, range=rng, siting=siting), tuple(tagged)


def _frame_rate(times: list[float], declared: Fraction | None) -> Fraction | None:
    """The clip's frame rate: the stream's declared average when its timestamps agree with it (within 1%), else
    the rate of its median frame duration (some containers declare their time base's rate instead)."""
    finite = np.asarray([t for t in times if np.isfinite(t)], dtype=np.float64)
    if finite.size < 2:
        return declared
    step = float(np.median(np.diff(finite)))
    if step <= 0:
        return declared
    if declared and abs(float(declared) * step - 1.0) < 0.01:
        return declared
    return Fraction(1.0 / step).limit_denominator(1001)


def _timing_notes(times: list[float]) -> tuple[str, ...]:
    """A variable frame rate (frame durations that differ by more than a tenth of the median) and gaps (a step of
    more than 1.5 median durations: frames missing from the stream), in words."""
    steps = np.diff(np.asarray(times, dtype=np.float64))
    if steps.size < 2 or not np.all(np.isfinite(steps)):
        return ()
    nominal = float(np.median(steps))
    if nominal <= 0:
        return ()
    notes = []
    gaps = np.nonzero(steps > 1.5 * nominal)[0]
    if gaps.size:
        missing = int(np.sum(np.round(steps[gaps] / nominal) - 1))
        where = ", ".join(f"after frame {int(i)} ({times[i]:.3f} s)" for i in gaps[:5])
        notes.append(f"timestamp gaps: about {missing} frame(s) missing, {where}{' ...' if gaps.size > 5 else ''}")
    regular = steps[steps <= 1.5 * nominal]
    if regular.size and (regular.max() - regular.min()) > 0.1 * nominal:
        notes.append(f"variable frame rate: frame durations from {regular.min() * 1e3:.2f} to "
                     f"{regular.max() * 1e3:.2f} ms (frames are compared by index, not by time)")
    return tuple(notes)


def _probe(av: Any, path: Path) -> ClipInfo:
    try:
        container = av.open(str(path), metadata_errors="ignore")
    except av.error.FFmpegError as exc:
        raise ValueError(f"{path}: not a video file FFmpeg can read ({exc})") from None
    with container:
        if not container.streams.video:
            kinds = sorted({s.type for s in container.streams}) or ["no streams"]
            raise ValueError(f"{path}: has no video stream (found: {', '.join(kinds)})")
        stream = container.streams.video[0]
        cc = stream.codec_context
        if cc.codec is None or not cc.codec.name:
            raise ValueError(f"{path}: no decoder for its video codec")
        if not stream.width or not stream.height or stream.format is None:
            raise ValueError(f"{path}: the video stream's size or pixel format is unknown (a corrupt or truncated "
                             "header)")
        chroma, bit_depth, full = _layout(stream.format.name, path)
        fmt = VideoFormat(width=stream.width, height=stream.height, bit_depth=bit_depth, chroma=chroma)
        colour, tagged = _colour(cc, full, path, cc.codec.name)
        fps = Fraction(stream.average_rate) if stream.average_rate else None
        times, stamps, keys = [], [], []
        try:
            for packet in container.demux(stream):
                if packet.size == 0:
                    continue  # the flush packet
                pts = packet.pts if packet.pts is not None else packet.dts
                times.append(float(pts * packet.time_base) if pts is not None else float("nan"))
                stamps.append(pts)
                keys.append(bool(packet.is_keyframe) and _starts_afresh(cc.codec.name, bytes(packet)))
        except av.error.FFmpegError as exc:
            raise ValueError(f"{path}: the stream is corrupt after {len(times)} packets ({exc})") from None
        if not times:
            raise ValueError(f"{path}: its video stream holds no frames (an empty, truncated or corrupt file)")
        times.sort()
        pts, keyframes, keyframe_packets = _keyframes(stamps, keys)
        fps = _frame_rate(times, fps)
        _check_complete(container, stream, times, fps, path)
        return ClipInfo(path=path, fmt=fmt, pix_fmt=stream.format.name, codec=cc.codec.name,
                        container=container.format.name, fps=fps, frame_count=len(times),
                        timestamps=tuple(times), colour=colour, colour_tagged=tagged, notes=_timing_notes(times),
                        pts=pts, keyframes=keyframes, keyframe_packets=keyframe_packets)


def _nal_types(data: bytes, hevc: bool) -> Iterator[int]:
    """The NAL unit types in an H.264/HEVC packet: Annex B (start codes) or length-prefixed (4-byte sizes, as MP4
    and Matroska store them)."""
    shift, mask = (1, 0x3F) if hevc else (0, 0x1F)
    if data[:3] == b"\x00\x00\x01" or data[:4] == b"\x00\x00\x00\x01":
        at = data.find(b"\x00\x00\x01")
        while at >= 0 and at + 3 < len(data):
            yield (data[at + 3] >> shift) & mask
            at = data.find(b"\x00\x00\x01", at + 3)
        return
    at = 0
    while at + 4 < len(data):
        size = int.from_bytes(data[at:at + 4], "big")
        yield (data[at + 4] >> shift) & mask
        at += 4 + size


def _starts_afresh(codec: str, data: bytes) -> bool:
    """Whether a keyframe packet begins a stream of its own: an IDR picture (H.264 NAL type 5, HEVC 19/20), or a
    VP9/AV1 key frame (which resets every reference). Other keyframes (H.264 recovery points, HEVC CRA, other
    codecs) are not places where NVDEC can start decoding."""
    if codec == "h264":
        return any(t == 5 for t in _nal_types(data, hevc=False))
    if codec == "hevc":
        return any(t in (19, 20) for t in _nal_types(data, hevc=True))
    return codec in ("vp9", "libvpx-vp9", "av1", "libdav1d", "libaom-av1")


def _keyframes(stamps: list[int | None], keys: list[bool]) -> tuple[tuple[int, ...], ...]:
    """From each packet's timestamp and keyframe flag (decoding order): the timestamps in presentation order, and
    the frame index and packet index of each keyframe where decoding can start afresh (``keys``: IDR pictures and
    VP9/AV1 key frames, :func:`_starts_afresh`): the first packet, and every such keyframe that no later packet
    is shown before (leading pictures reference the GOP before). All empty when timestamps are missing or
    repeat."""
    if any(s is None for s in stamps) or len(set(stamps)) != len(stamps):
        return (), (), ()
    order = sorted(range(len(stamps)), key=lambda i: stamps[i])
    frame_of = {packet: frame for frame, packet in enumerate(order)}
    later_min = [0] * len(stamps)  # the smallest timestamp after each packet, in decoding order
    smallest = float("inf")
    for i in range(len(stamps) - 1, -1, -1):
        later_min[i] = smallest
        smallest = min(smallest, stamps[i])
    packets = [i for i, key in enumerate(keys) if i == 0 or (key and later_min[i] > stamps[i])]
    return (tuple(stamps[i] for i in order), tuple(frame_of[i] for i in packets), tuple(packets))


def _check_complete(container: Any, stream: Any, times: list[float], fps: Fraction | None, path: Path) -> None:
    """A file cut short keeps its header's duration: frames ending more than 1.5 frame durations before it mean
    packets are missing at the end (the container's duration is used only when the file has no other stream)."""
    if stream.duration and stream.time_base:
        declared = float(stream.duration * stream.time_base)
    elif container.duration and len(container.streams) == 1:
        declared = container.duration / 1e6
    else:
        return
    frame = float(1 / fps) if fps else 0.0
    start = float(stream.start_time * stream.time_base) if stream.start_time is not None and stream.time_base else 0.0
    end = times[-1] - start + frame
    if frame and declared - end > 1.5 * frame:
        raise ValueError(f"{path}: truncated: its header says {declared:.3f} s (about {round(declared / frame)} "
                         f"frames) but its video packets end after {len(times)} frames ({end:.3f} s)")


class CompressedReader:
    """An opened compressed clip (:func:`open_compressed`): ``info`` (:class:`ClipInfo`), and the attributes of
    :class:`~fusedsim.io.video.VideoReader` that the clip pipelines read (``path``, ``fmt``, ``fps``,
    ``frame_count``, ``kind`` ``"compressed"``, ``seekable`` False: frames stream in decoding order)."""

    kind = "compressed"
    seekable = False

    def __init__(self, info: ClipInfo, threads: int = 0) -> None:
        self.info = info
        self.path = info.path
        self.fmt = info.fmt
        self.fps = info.fps
        self.threads = threads
        self.planes: tuple[str, ...] = ("y", "u", "v")  # what batches() copies out (luma only: ("y",))

    @property
    def frame_count(self) -> int:
        return self.info.frame_count

    def __enter__(self) -> CompressedReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Nothing stays open between :meth:`frames` calls."""

    def __repr__(self) -> str:
        return f"CompressedReader({str(self.path)!r}, {self.info.codec}, {self.fmt.describe()})"

    def frames(self, planes: Sequence[str] = ("y", "u", "v"), *, limit: int | None = None,
               copy: bool = True) -> Iterator[DecodedFrame]:
        """Decode the clip from its first frame, in presentation order; ``planes`` names what is copied out
        (``("y",)``: luma only). ``copy=False`` yields views of the decoder's buffers (row strides kept) instead of
        contiguous copies, for a consumer that copies each frame before asking for the next one. Corrupt data
        raises ValueError naming the file and the frame."""
        av = import_av()
        want_chroma = any(p in planes for p in ("u", "v"))
        dtype = np.uint8 if self.fmt.bit_depth == 8 else np.dtype("<u2")
        container = av.open(str(self.path), metadata_errors="ignore")
        index = 0
        try:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"  # frame and slice threads
            stream.codec_context.thread_count = self.threads
            for frame in _decode(av, container, stream, self.path):
                if limit is not None and index >= limit:
                    return
                if frame.is_corrupt:
                    raise ValueError(f"{self.path}: frame {index} is corrupt (the decoder reported damaged data)")
                self._check_frame(frame, index)
                y = _plane(frame.planes[0], dtype, copy)
                u = _plane(frame.planes[1], dtype, copy) if want_chroma else None
                v = _plane(frame.planes[2], dtype, copy) if want_chroma else None
                time = float(frame.time) if frame.time is not None else None
                yield DecodedFrame(index, time, y, u, v)
                index += 1
        finally:
            container.close()
        if limit is None and index < self.info.frame_count:
            raise ValueError(f"{self.path}: decoded {index} frames but the stream holds {self.info.frame_count} "
                             "(truncated or corrupt data)")

    def _check_frame(self, frame: Any, index: int) -> None:
        if (frame.width, frame.height, frame.format.name) != (self.fmt.width, self.fmt.height, self.info.pix_fmt):
            raise ValueError(f"{self.path}: frame {index} is {frame.width}x{frame.height} {frame.format.name}, "
                             f"the stream started as {self.fmt.width}x{self.fmt.height} {self.info.pix_fmt}; a "
                             "clip that changes size or format mid-stream is not supported")

    def batches(self, n_frames: int = 16, *, limit: int | None = None) -> Iterator[FrameBatch]:
        """The clip as :class:`~fusedsim.io.video.FrameBatch` es of ``n_frames`` frames (the last may be shorter),
        the Y4M reader's interface. Chroma is copied only when :attr:`planes` names it (else ``u``/``v`` are
        empty ``(n, 0, 0)`` arrays)."""
        buffer: list[DecodedFrame] = []
        first = 0
        for frame in self.frames(self.planes, limit=limit):
            buffer.append(frame)
            if len(buffer) == n_frames:
                yield self._batch(buffer, first)
                first += len(buffer)
                buffer = []
        if buffer:
            yield self._batch(buffer, first)

    def _batch(self, frames: list[DecodedFrame], first: int) -> FrameBatch:
        y = np.stack([f.y for f in frames])
        if frames[0].u is not None:
            u = np.stack([f.u for f in frames])
            v = np.stack([f.v for f in frames])
        else:
            u = v = np.empty((len(frames), 0, 0), dtype=y.dtype)
        return FrameBatch(y=y, u=u, v=v, bit_depth=self.fmt.bit_depth, first_index=first, fmt=self.fmt)


def _decode(av: Any, container: Any, stream: Any, path: Path) -> Iterator[Any]:
    """The stream's frames, FFmpeg's errors as ValueError naming the file."""
    try:
        yield from container.decode(stream)
    except av.error.FFmpegError as exc:
        raise ValueError(f"{path}: decoding failed ({exc}): the file is corrupt or truncated") from None


def _plane(plane: Any, dtype: np.dtype, copy: bool = True) -> np.ndarray:
    """A plane's samples ``(height, width)`` without its row padding: a contiguous copy, or with ``copy=False`` a
    strided view of the frame's buffer."""
    itemsize = np.dtype(dtype).itemsize
    rows = np.frombuffer(plane, dtype=dtype).reshape(plane.height, plane.line_size // itemsize)[:, :plane.width]
    return np.ascontiguousarray(rows) if copy else rows


def open_compressed(path: str | os.PathLike, *, threads: int = 0) -> CompressedReader:
    """Probe ``path`` and return its reader; ``threads`` decoder threads (0: FFmpeg picks, from the cores).

    Errors (ValueError naming the file): not a file FFmpeg reads, no video stream (an audio-only file), no
    decoder, a pixel format that is not planar Y'CbCr, a stream without frames, corrupt packets.
    """
    av = import_av()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"video file not found: {path}")
    if path.is_dir():
        raise ValueError(f"{path}: is a directory, not a video file")
    return CompressedReader(_probe(av, path), threads=threads)

"""Video input: YUV4MPEG2 (``.y4m``) and raw planar YUV, streamed from disk in chunks of frames.

Supported layouts are planar Y'CbCr 4:2:0, 4:2:2 and 4:4:4 at 8, 10, 12 and 16 bits per sample (the bit depths
libvmaf accepts). Samples above 8 bits are stored as little-endian 16-bit words on disk and returned as native
``uint16``; 8-bit samples are returned as ``uint8``. Subsampled chroma planes have ``ceil(w/2)`` columns (and
``ceil(h/2)`` rows for 4:2:0), as ffmpeg writes them.

* **Y4M** is recognised by its ``YUV4MPEG2 `` magic. The stream header gives width, height and layout (``C`` tag:
  ``420jpeg``, ``420paldv``, ``420mpeg2``, ``420``, ``422``, ``444``, ``420p10`` ... ``444p16``; without a ``C`` tag
  the ffmpeg/mjpegtools extension ``XYSCSS=...`` is used, and without either the Y4M default ``420jpeg``). Every
  frame starts with a ``FRAME`` line, which may carry parameters (they are skipped). Greyscale streams
  (``Cmono``) are refused: every metric here expects three planes.
* **Raw YUV** has no header, so width, height and pixel format (``yuv420p``, ``yuv422p10le``, ...) must be given.
  Its frame count follows from the file size, which must be a whole number of frames.

Frames are read in batches (:meth:`VideoReader.batches`) into freshly allocated arrays, so memory use depends on the
batch size, never on the length of the clip. Regular files can be iterated any number of times; pipes
(``/dev/stdin``, ``<(ffmpeg ...)``, or the path ``-`` for standard input) stream once and have no frame count
up front.
"""

from __future__ import annotations

import io
import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

__all__ = [
    "SUPPORTED_BIT_DEPTHS",
    "SUPPORTED_PIX_FMTS",
    "SUPPORTED_Y4M_COLORSPACES",
    "FrameBatch",
    "VideoFormat",
    "VideoReader",
    "open_pair",
    "open_video",
]

Y4M_MAGIC = b"YUV4MPEG2 "
SUPPORTED_BIT_DEPTHS = (8, 10, 12, 16)
_CHROMAS = ("420", "422", "444")


def _pix_fmt_name(chroma: str, bit_depth: int) -> str:
    return f"yuv{chroma}p" if bit_depth == 8 else f"yuv{chroma}p{bit_depth}le"


#: ffmpeg-style pixel format names accepted for raw YUV.
SUPPORTED_PIX_FMTS: tuple[str, ...] = tuple(_pix_fmt_name(c, b) for b in SUPPORTED_BIT_DEPTHS for c in _CHROMAS)

# Y4M ``C`` tag (lower case) -> (chroma, bit depth). The 4:2:0 siting variants differ only in chroma position,
# which does not change the sample layout.
_Y4M_COLORSPACES: dict[str, tuple[str, int]] = {
    "420jpeg": ("420", 8),
    "420paldv": ("420", 8),
    "420mpeg2": ("420", 8),
    **{c: (c, 8) for c in _CHROMAS},
    **{f"{c}p{b}": (c, b) for b in SUPPORTED_BIT_DEPTHS[1:] for c in _CHROMAS},
}
#: Y4M colour-space tags (``C...``) that can be read.
SUPPORTED_Y4M_COLORSPACES: tuple[str, ...] = tuple(_Y4M_COLORSPACES)

_MAX_HEADER_BYTES = 4096  # a Y4M stream header longer than this is not a Y4M header
_MAX_FRAME_HEADER_BYTES = 1024


@dataclass(frozen=True)
class VideoFormat:
    """Geometry and sample layout of a planar Y'CbCr clip."""

    width: int
    height: int
    bit_depth: int
    chroma: str  # "420" | "422" | "444"

    def __post_init__(self) -> None:
        for name in ("width", "height"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f"{name} must be a positive integer; got {value!r}")
        if self.bit_depth not in SUPPORTED_BIT_DEPTHS:
            raise ValueError(
                f"bit_depth must be one of {', '.join(map(str, SUPPORTED_BIT_DEPTHS))}; got {self.bit_depth!r}"
            )
        if self.chroma not in _CHROMAS:
            raise ValueError(f"chroma must be one of {', '.join(_CHROMAS)}; got {self.chroma!r}")

    @property
    def chroma_width(self) -> int:
        return self.width if self.chroma == "444" else (self.width + 1) // 2

    @property
    def chroma_height(self) -> int:
        return (self.height + 1) // 2 if self.chroma == "420" else self.height

    @property
    def bytes_per_sample(self) -> int:
        return 1 if self.bit_depth == 8 else 2

    @property
    def dtype(self) -> np.dtype:
        """Dtype of the decoded planes: ``uint8`` for 8-bit, native ``uint16`` otherwise."""
        return np.dtype(np.uint8 if self.bit_depth == 8 else np.uint16)

    @property
    def luma_bytes(self) -> int:
        return self.width * self.height * self.bytes_per_sample

    @property
    def chroma_bytes(self) -> int:
        """Bytes of one chroma plane."""
        return self.chroma_width * self.chroma_height * self.bytes_per_sample

    @property
    def frame_bytes(self) -> int:
        """Bytes of one frame's samples (Y, Cb, Cr), without any Y4M frame header."""
        return self.luma_bytes + 2 * self.chroma_bytes

    @property
    def pix_fmt(self) -> str:
        """ffmpeg name of this layout, e.g. ``yuv420p`` or ``yuv422p10le``."""
        return _pix_fmt_name(self.chroma, self.bit_depth)

    def describe(self) -> str:
        return f"{self.width}x{self.height} {self.pix_fmt}"

    @classmethod
    def from_pix_fmt(cls, width: int, height: int, pix_fmt: str) -> VideoFormat:
        """Format from an ffmpeg pixel-format name (``yuv420p``, ``yuv444p12le``, ... see ``SUPPORTED_PIX_FMTS``)."""
        if not isinstance(pix_fmt, str):
            raise TypeError(f"pix_fmt must be a string; got {type(pix_fmt).__name__}")
        name = pix_fmt.strip().lower()
        for bit_depth in SUPPORTED_BIT_DEPTHS:
            for chroma in _CHROMAS:
                if name == _pix_fmt_name(chroma, bit_depth):
                    return cls(width=width, height=height, bit_depth=bit_depth, chroma=chroma)
        raise ValueError(f"unsupported pix_fmt {pix_fmt!r}; supported: {', '.join(SUPPORTED_PIX_FMTS)}")


@dataclass
class FrameBatch:
    """Consecutive frames of a clip: planes ``y`` (n, H, W), ``u`` and ``v`` (n, Hc, Wc).

    Samples are integer codes, ``uint8`` for 8-bit clips and native ``uint16`` otherwise; each array is
    C-contiguous. ``first_index`` is the clip frame number of ``y[0]``.
    """

    y: np.ndarray
    u: np.ndarray
    v: np.ndarray
    bit_depth: int
    first_index: int
    fmt: VideoFormat

    @property
    def n(self) -> int:
        return int(self.y.shape[0])

    def __len__(self) -> int:
        return self.n


class _Source:
    """A binary stream with exact reads; ``prefix`` holds bytes already consumed while sniffing the magic."""

    def __init__(self, f, pos: int, prefix: bytes = b"") -> None:
        self.f = f
        self.prefix = prefix
        self.pos = pos  # offset in the file of the next byte, for error messages

    def readinto_exact(self, buf: memoryview) -> int:
        """Fill ``buf``; fewer bytes than ``len(buf)`` are returned only at the end of the stream."""
        filled = 0
        if self.prefix:
            k = min(len(self.prefix), len(buf))
            buf[:k] = self.prefix[:k]
            self.prefix = self.prefix[k:]
            filled = k
        while filled < len(buf):
            got = self.f.readinto(buf[filled:])
            if not got:
                break
            filled += got
        self.pos += filled
        return filled

    def readline(self, limit: int) -> bytes:
        """A line of at most ``limit`` bytes, including its ``\\n`` when found (Y4M only: never has a prefix)."""
        assert not self.prefix, "a sniffed prefix exists only for raw YUV, which has no lines"
        line = self.f.readline(limit)
        self.pos += len(line)
        return line


def _parse_colorspace(tag: str, path: Path, what: str) -> tuple[str, int]:
    key = tag.lower()
    if key in _Y4M_COLORSPACES:
        return _Y4M_COLORSPACES[key]
    if key.startswith("mono"):
        raise ValueError(
            f"{path}: Y4M {what} {tag!r} is greyscale; only Y'CbCr clips with three planes are supported "
            f"({', '.join(SUPPORTED_Y4M_COLORSPACES)})"
        )
    raise ValueError(f"{path}: unsupported Y4M {what} {tag!r}; supported: {', '.join(SUPPORTED_Y4M_COLORSPACES)}")


def _parse_positive_int(token: str, name: str, path: Path) -> int:
    try:
        value = int(token[1:])
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{path}: bad Y4M header: {name} must be a positive integer, got {token!r}")
    return value


def _parse_y4m_header(line: bytes, path: Path) -> tuple[VideoFormat, Fraction | None, str]:
    """Parse the stream header line (with its magic and trailing newline)."""
    try:
        text = line[len(Y4M_MAGIC) : -1].decode("ascii")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: bad Y4M header: not ASCII text: {line[:80]!r}") from None
    width = height = None
    fps: Fraction | None = None
    interlace = "p"
    colorspace: tuple[str, int] | None = None
    xyscss: tuple[str, int] | None = None
    for token in text.split():
        key = token[0]
        if key == "W":
            width = _parse_positive_int(token, "width (W)", path)
        elif key == "H":
            height = _parse_positive_int(token, "height (H)", path)
        elif key == "F":
            num, sep, den = token[1:].partition(":")
            try:
                fps = Fraction(int(num), int(den)) if sep and int(den) and int(num) else None
            except ValueError:
                fps = None  # the frame rate is informational only
        elif key == "I":
            interlace = token[1:]
        elif key == "C":
            colorspace = _parse_colorspace(token[1:], path, "colour space")
        elif token.upper().startswith("XYSCSS="):
            xyscss = _parse_colorspace(token[len("XYSCSS=") :], path, "XYSCSS tag")
        # A (aspect), other X extensions and unknown tags do not affect the sample layout.
    missing = [name for name, value in (("W (width)", width), ("H (height)", height)) if value is None]
    if missing:
        raise ValueError(f"{path}: bad Y4M header: missing {' and '.join(missing)}: {line[:200]!r}")
    if colorspace is not None and xyscss is not None and colorspace != xyscss:
        raise ValueError(
            f"{path}: bad Y4M header: the C tag ({_pix_fmt_name(*colorspace)}) and the XYSCSS tag "
            f"({_pix_fmt_name(*xyscss)}) disagree"
        )
    chroma, bit_depth = colorspace or xyscss or _Y4M_COLORSPACES["420jpeg"]
    return VideoFormat(width=width, height=height, bit_depth=bit_depth, chroma=chroma), fps, interlace


def _is_frame_header(line: bytes) -> bool:
    return line.startswith(b"FRAME") and line.endswith(b"\n") and (len(line) == 6 or line[5:6] in (b" ", b"\t"))


class VideoReader:
    """An opened clip. Use :func:`open_video` to create one; close it (or use ``with``) when done.

    Attributes: ``path``, ``kind`` (``"y4m"`` or ``"raw"``), ``fmt`` (:class:`VideoFormat`), ``fps`` (Y4M frame
    rate as a :class:`~fractions.Fraction`, or None), ``seekable`` (False for pipes, which stream once).
    """

    def __init__(self, path: Path, file, kind: str, fmt: VideoFormat, data_offset: int, seekable: bool,
                 prefix: bytes = b"", fps: Fraction | None = None, interlace: str = "p") -> None:
        self.path = path
        self.kind = kind
        self.fmt = fmt
        self.fps = fps
        self.interlace = interlace
        self.seekable = seekable
        self._file = file
        self._data_offset = data_offset  # where the first frame (or its FRAME line) starts
        self._prefix = prefix  # non-seekable raw input: bytes read while sniffing the magic
        self._consumed = False
        self._frame_count: int | None = None
        self._counted = False
        self._offsets: np.ndarray | None = None  # byte offset of each frame's samples (seekable files)

    # -- context manager -------------------------------------------------------------------------------------
    def __enter__(self) -> VideoReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._file is not None:
            if self._file is not _stdin_buffer():
                self._file.close()
            self._file = None

    def __repr__(self) -> str:
        return f"VideoReader({str(self.path)!r}, kind={self.kind!r}, fmt={self.fmt.describe()})"

    # -- frame count -----------------------------------------------------------------------------------------
    @property
    def frame_count(self) -> int | None:
        """Number of frames; None for pipes. Raises ValueError naming the frame if the file ends inside a frame."""
        if not self._counted:
            self._frame_count = self._count_frames()
            self._counted = True
        return self._frame_count

    def frame_offsets(self) -> np.ndarray:
        """Byte offset in the file of each frame's samples (after its ``FRAME`` line), int64 ``(frame_count,)``.

        Only for regular files (``seekable``); it lets readers fetch any plane of any frame with one positioned
        read (:mod:`fusedsim.io.frame_stream`).
        """
        if not self.seekable:
            raise ValueError(f"{self.path}: a pipe has no frame offsets; it can only be streamed")
        self.frame_count  # noqa: B018 - walks and validates the file once
        assert self._offsets is not None
        return self._offsets

    def _count_frames(self) -> int | None:
        if not self.seekable:
            return None
        size = os.stat(self.path).st_size
        fb = self.fmt.frame_bytes
        if self.kind == "raw":
            n_full, rest = divmod(size, fb)
            if rest:
                raise ValueError(
                    f"{self.path}: file size {size} bytes is not a whole number of {self.fmt.describe()} frames: "
                    f"frame {n_full} is truncated, expected {fb} bytes but only {rest} remain "
                    f"(check width, height and pix_fmt)"
                )
            self._offsets = np.arange(n_full, dtype=np.int64) * fb
            return n_full
        # Y4M: walk the FRAME lines without reading the samples.
        offsets = []
        with open(self.path, "rb") as f:
            pos, index = self._data_offset, 0
            while pos < size:
                f.seek(pos)
                line = f.readline(_MAX_FRAME_HEADER_BYTES)
                self._check_frame_header(index, pos, line)
                pos += len(line)
                if pos + fb > size:
                    raise self._truncated(index, fb, size - pos)
                offsets.append(pos)
                pos += fb
                index += 1
        self._offsets = np.asarray(offsets, dtype=np.int64)
        return index

    def _check_frame_header(self, index: int, offset: int, line: bytes) -> None:
        """Raise unless ``line`` (read at byte ``offset``) is a complete ``FRAME`` line."""
        if _is_frame_header(line):
            return
        at_eof = not line.endswith(b"\n") and len(line) < _MAX_FRAME_HEADER_BYTES
        if at_eof and (b"FRAME".startswith(line) or line.startswith(b"FRAME")):
            raise self._truncated(index, self.fmt.frame_bytes, 0)
        raise ValueError(
            f"{self.path}: frame {index}: expected a 'FRAME' header at byte offset {offset}, found {line[:40]!r}"
        )

    def _truncated(self, index: int, expected: int, got: int) -> ValueError:
        return ValueError(
            f"{self.path}: frame {index} is truncated: expected {expected} bytes of {self.fmt.describe()} samples, "
            f"got {got}"
        )

    # -- reading ---------------------------------------------------------------------------------------------
    def _open_source(self) -> tuple[_Source, bool]:
        """A stream positioned at the first frame, and whether this call owns (must close) it."""
        if self.seekable:
            f = open(self.path, "rb")
            f.seek(self._data_offset)
            return _Source(f, self._data_offset), True
        if self._consumed:
            raise ValueError(f"{self.path}: a pipe can be read only once")
        if self._file is None:
            raise ValueError(f"{self.path}: the reader is closed")
        self._consumed = True
        return _Source(self._file, self._data_offset, self._prefix), False

    def batches(self, n_frames: int = 16, *, limit: int | None = None) -> Iterator[FrameBatch]:
        """Yield the clip as :class:`FrameBatch` es of ``n_frames`` frames (the last one may be shorter).

        At most ``limit`` frames are read when it is given. Each batch has its own arrays; only one batch is held
        by the reader at a time. Regular files restart from the first frame on every call.
        """
        if isinstance(n_frames, bool) or not isinstance(n_frames, (int, np.integer)) or n_frames < 1:
            raise ValueError(f"n_frames must be a positive integer; got {n_frames!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 0):
            raise ValueError(f"limit must be a non-negative integer or None; got {limit!r}")
        if self._file is None:
            raise ValueError(f"{self.path}: the reader is closed")
        return self._batches(int(n_frames), None if limit is None else int(limit))

    def __iter__(self) -> Iterator[FrameBatch]:
        return self.batches()

    def _batches(self, n_frames: int, limit: int | None) -> Iterator[FrameBatch]:
        source, owned = self._open_source()
        try:
            index = 0
            known = self.frame_count if self.seekable else None
            while limit is None or index < limit:
                want = n_frames
                if limit is not None:
                    want = min(want, limit - index)
                if known is not None:
                    want = min(want, known - index)
                if want <= 0:
                    break
                batch = self._read_batch(source, index, want)
                if batch is None:
                    break
                index += batch.n
                short = batch.n < want
                yield batch
                del batch  # let the consumer free it before the next one is allocated
                if short:
                    break
        finally:
            if owned:
                source.f.close()

    def _read_batch(self, source: _Source, first: int, n: int) -> FrameBatch | None:
        fmt = self.fmt
        y = np.empty((n, fmt.height, fmt.width), dtype=fmt.dtype)
        u = np.empty((n, fmt.chroma_height, fmt.chroma_width), dtype=fmt.dtype)
        v = np.empty_like(u)
        got_frames = n
        for i in range(n):
            index = first + i
            if self.kind == "y4m":
                offset = source.pos
                line = source.readline(_MAX_FRAME_HEADER_BYTES)
                if not line:
                    got_frames = i
                    break
                self._check_frame_header(index, offset, line)
            got = 0
            for plane in (y[i], u[i], v[i]):
                buf = memoryview(plane.reshape(-1).view(np.uint8))
                k = source.readinto_exact(buf)
                got += k
                if k < len(buf):
                    break
            if got == 0 and self.kind == "raw":
                got_frames = i
                break
            if got < fmt.frame_bytes:
                raise self._truncated(index, fmt.frame_bytes, got)
        if got_frames == 0:
            return None
        if got_frames < n:
            y, u, v = y[:got_frames], u[:got_frames], v[:got_frames]
        if fmt.bytes_per_sample == 2 and sys.byteorder == "big":  # pragma: no cover - little-endian hosts
            for plane in (y, u, v):
                plane.byteswap(inplace=True)
        return FrameBatch(y=y, u=u, v=v, bit_depth=fmt.bit_depth, first_index=first, fmt=fmt)

    def read_all(self, *, limit: int | None = None) -> FrameBatch:
        """The whole clip (or its first ``limit`` frames) as one batch; for short clips and tests."""
        parts = list(self.batches(64, limit=limit))
        fmt = self.fmt
        if not parts:
            empty_y = np.empty((0, fmt.height, fmt.width), dtype=fmt.dtype)
            empty_c = np.empty((0, fmt.chroma_height, fmt.chroma_width), dtype=fmt.dtype)
            return FrameBatch(empty_y, empty_c, empty_c.copy(), fmt.bit_depth, 0, fmt)
        return FrameBatch(
            y=np.concatenate([p.y for p in parts]),
            u=np.concatenate([p.u for p in parts]),
            v=np.concatenate([p.v for p in parts]),
            bit_depth=fmt.bit_depth,
            first_index=0,
            fmt=fmt,
        )


def _stdin_buffer():
    return sys.stdin.buffer


def open_video(path: str | os.PathLike, *, width: int | None = None, height: int | None = None,
               pix_fmt: str | None = None) -> VideoReader:
    """Open a Y4M or raw YUV clip for streaming.

    A file starting with ``YUV4MPEG2 `` is read as Y4M; ``width``, ``height`` and ``pix_fmt`` are then optional,
    and when given they must agree with the header. Anything else is raw planar YUV and needs all three. ``path``
    ``-`` reads standard input.
    """
    is_stdin = str(path) == "-"
    path = Path(path)
    if is_stdin:
        f = _stdin_buffer()
    else:
        if not path.exists():
            raise FileNotFoundError(f"video file not found: {path}")
        if path.is_dir():
            raise ValueError(f"{path}: is a directory, not a video file")
        try:
            f = open(path, "rb")
        except OSError as exc:
            raise ValueError(f"cannot open video {path}: {exc.strerror or exc}") from exc
    try:
        return _open(path, f, is_stdin, width, height, pix_fmt)
    except BaseException:
        if not is_stdin:
            f.close()
        raise


def _open(path: Path, f, is_stdin: bool, width, height, pix_fmt) -> VideoReader:
    try:
        seekable = not is_stdin and stat.S_ISREG(os.fstat(f.fileno()).st_mode)
    except (OSError, io.UnsupportedOperation):
        seekable = False
    magic = b""
    while len(magic) < len(Y4M_MAGIC):  # read() on a pipe may return early
        chunk = f.read(len(Y4M_MAGIC) - len(magic))
        if not chunk:
            break
        magic += chunk
    if magic == Y4M_MAGIC:
        rest = f.readline(_MAX_HEADER_BYTES)
        line = magic + rest
        if not line.endswith(b"\n"):
            what = "is truncated" if len(rest) < _MAX_HEADER_BYTES else f"is longer than {_MAX_HEADER_BYTES} bytes"
            raise ValueError(f"{path}: bad Y4M header: the header line {what}: {line[:80]!r}")
        fmt, fps, interlace = _parse_y4m_header(line, path)
        _check_agrees(path, fmt, width, height, pix_fmt)
        return VideoReader(path, f, "y4m", fmt, len(line), seekable, fps=fps, interlace=interlace)

    if magic[:4] == b"YUV4" or path.suffix.lower() == ".y4m":
        raise ValueError(
            f"{path}: bad Y4M header: a Y4M file must start with {Y4M_MAGIC!r}, found {magic!r}"
        )
    missing = [name for name, value in (("width", width), ("height", height), ("pix_fmt", pix_fmt)) if value is None]
    if missing:
        raise ValueError(
            f"{path}: raw YUV input needs width, height and pix_fmt (missing: {', '.join(missing)}); "
            f"Y4M files are recognised by their {Y4M_MAGIC.decode().strip()} header"
        )
    fmt = VideoFormat.from_pix_fmt(width, height, pix_fmt)
    if seekable:
        f.seek(0)
        reader = VideoReader(path, f, "raw", fmt, 0, True)
        reader.frame_count  # noqa: B018 - validate the file size now
        return reader
    return VideoReader(path, f, "raw", fmt, 0, False, prefix=magic)


def _check_agrees(path: Path, fmt: VideoFormat, width, height, pix_fmt) -> None:
    problems = []
    if width is not None and width != fmt.width:
        problems.append(f"width {width} (header W{fmt.width})")
    if height is not None and height != fmt.height:
        problems.append(f"height {height} (header H{fmt.height})")
    if pix_fmt is not None:
        given = VideoFormat.from_pix_fmt(fmt.width, fmt.height, pix_fmt)
        if (given.chroma, given.bit_depth) != (fmt.chroma, fmt.bit_depth):
            problems.append(f"pix_fmt {pix_fmt} (header says {fmt.pix_fmt})")
    if problems:
        raise ValueError(f"{path}: the given {', '.join(problems)} disagree with the Y4M header")


def open_pair(ref: str | os.PathLike, dist: str | os.PathLike, **options):
    """Two clips (compressed, Y4M or raw YUV) as aligned frame pairs on a device: see
    :func:`fusedsim.io.clip_pair.open_pair` for the options (imported on use: it needs torch, and PyAV for
    compressed files)."""
    from fusedsim.io.clip_pair import open_pair as open_clip_pair

    return open_clip_pair(ref, dist, **options)

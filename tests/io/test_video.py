"""Y4M and raw YUV input: layouts, headers, bad input and bounded-memory streaming."""

from __future__ import annotations

import io
import os
import resource
import sys
import threading
import tracemalloc

import numpy as np
import pytest

from fusedsim.io.video import (
    SUPPORTED_PIX_FMTS,
    SUPPORTED_Y4M_COLORSPACES,
    FrameBatch,
    VideoFormat,
    open_video,
)

# fixture clips that ship as both .y4m and .yuv (same samples)
Y4M_FIXTURES = [
    ("c333x217_8b_ref", "yuv420p", 5),
    ("c333x217_8b_mixed", "yuv420p", 5),
    ("e333x217_10b_ref", "yuv420p10le", 3),
    ("e333x217_10b_mixed", "yuv420p10le", 3),
]


def random_planes(fmt: VideoFormat, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    hi = (1 << fmt.bit_depth) - 1
    y = rng.integers(0, hi, size=(n, fmt.height, fmt.width), endpoint=True).astype(fmt.dtype)
    u = rng.integers(0, hi, size=(n, fmt.chroma_height, fmt.chroma_width), endpoint=True).astype(fmt.dtype)
    v = rng.integers(0, hi, size=(n, fmt.chroma_height, fmt.chroma_width), endpoint=True).astype(fmt.dtype)
    return y, u, v


def frame_bytes(planes, i: int) -> bytes:
    return b"".join(p[i].astype(p.dtype.newbyteorder("<"), copy=False).tobytes() for p in planes)


def write_raw(path, planes) -> None:
    with open(path, "wb") as f:
        for i in range(planes[0].shape[0]):
            f.write(frame_bytes(planes, i))


def write_y4m(path, fmt: VideoFormat, planes, *, colorspace: str | None = "auto", extra: str = "",
              frame_header: bytes = b"FRAME\n") -> None:
    if colorspace == "auto":
        colorspace = fmt.chroma if fmt.bit_depth == 8 else f"{fmt.chroma}p{fmt.bit_depth}"
        if colorspace == "420":
            colorspace = "420jpeg"
    header = f"YUV4MPEG2 W{fmt.width} H{fmt.height} F30000:1001 Ip A1:1"
    if colorspace is not None:
        header += f" C{colorspace}"
    header += extra
    with open(path, "wb") as f:
        f.write(header.encode() + b"\n")
        for i in range(planes[0].shape[0]):
            f.write(frame_header)
            f.write(frame_bytes(planes, i))


# ---------------------------------------------------------------------------------------------------------------
# formats


def test_video_format_odd_sizes_and_bytes():
    fmt = VideoFormat(333, 217, 8, "420")
    assert (fmt.chroma_width, fmt.chroma_height) == (167, 109)
    assert fmt.frame_bytes == 333 * 217 + 2 * 167 * 109 == 543335 // 5
    fmt = VideoFormat(333, 217, 10, "422")
    assert (fmt.chroma_width, fmt.chroma_height) == (167, 217)
    assert fmt.bytes_per_sample == 2 and fmt.frame_bytes == 2 * (333 * 217 + 2 * 167 * 217)
    fmt = VideoFormat(7, 5, 16, "444")
    assert (fmt.chroma_width, fmt.chroma_height) == (7, 5)
    assert fmt.pix_fmt == "yuv444p16le" and fmt.dtype == np.uint16
    assert VideoFormat(1, 1, 8, "420").frame_bytes == 3


@pytest.mark.parametrize("pix_fmt", SUPPORTED_PIX_FMTS)
def test_from_pix_fmt_round_trip(pix_fmt):
    fmt = VideoFormat.from_pix_fmt(9, 5, pix_fmt)
    assert fmt.pix_fmt == pix_fmt
    assert fmt.bit_depth == (8 if pix_fmt.endswith("p") else int(pix_fmt[7:9]))


@pytest.mark.parametrize("pix_fmt", ["yuv411p", "rgb24", "yuv420p10be", "nv12", "yuv420p9le", "gray"])
def test_unknown_pix_fmt_lists_supported(pix_fmt):
    with pytest.raises(ValueError, match="unsupported pix_fmt") as err:
        VideoFormat.from_pix_fmt(8, 8, pix_fmt)
    for name in SUPPORTED_PIX_FMTS:
        assert name in str(err.value)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(width=0, height=4, bit_depth=8, chroma="420"), "width"),
        (dict(width=4, height=-1, bit_depth=8, chroma="420"), "height"),
        (dict(width=4, height=4, bit_depth=9, chroma="420"), "bit_depth"),
        (dict(width=4, height=4, bit_depth=8, chroma="411"), "chroma"),
    ],
)
def test_video_format_rejects_bad_fields(kwargs, match):
    with pytest.raises(ValueError, match=match):
        VideoFormat(**kwargs)


# ---------------------------------------------------------------------------------------------------------------
# fixture clips: Y4M and raw YUV hold the same samples


@pytest.mark.parametrize("name, pix_fmt, n", Y4M_FIXTURES)
def test_fixture_y4m_equals_raw(refdata, name, pix_fmt, n):
    clips = refdata / "vmaf" / "clips"
    with open_video(clips / f"{name}.y4m") as y4m, open_video(
        clips / f"{name}.yuv", width=333, height=217, pix_fmt=pix_fmt
    ) as raw:
        assert y4m.kind == "y4m" and raw.kind == "raw"
        assert y4m.fmt == raw.fmt == VideoFormat.from_pix_fmt(333, 217, pix_fmt)
        assert y4m.frame_count == raw.frame_count == n
        for a, b in zip(y4m.batches(2), raw.batches(2), strict=True):
            assert a.first_index == b.first_index
            for plane in "yuv":
                pa, pb = getattr(a, plane), getattr(b, plane)
                assert pa.dtype == pb.dtype == (np.uint8 if pix_fmt == "yuv420p" else np.uint16)
                assert np.array_equal(pa, pb)
        assert y4m.read_all().y.shape == (n, 217, 333)
        assert y4m.read_all().u.shape == (n, 109, 167)


def test_fixture_sample_values(refdata):
    """First luma samples decode as little-endian words of the file."""
    path = refdata / "vmaf" / "clips" / "e333x217_10b_ref.yuv"
    raw = np.fromfile(path, dtype="<u2", count=333 * 217).reshape(217, 333)
    with open_video(path, width=333, height=217, pix_fmt="yuv420p10le") as clip:
        first = next(clip.batches(1))
    assert first.y.dtype == np.uint16 and first.y.dtype.isnative
    assert np.array_equal(first.y[0], raw)
    assert first.y.max() < 1024


# ---------------------------------------------------------------------------------------------------------------
# synthetic layouts


@pytest.mark.parametrize("pix_fmt", SUPPORTED_PIX_FMTS)
@pytest.mark.parametrize("size", [(7, 5), (1, 1), (16, 10)])
def test_synthetic_y4m_and_raw_round_trip(tmp_path, pix_fmt, size):
    fmt = VideoFormat.from_pix_fmt(*size, pix_fmt)
    planes = random_planes(fmt, 5, seed=hash((pix_fmt, size)) % 1000)
    write_raw(tmp_path / "clip.yuv", planes)
    write_y4m(tmp_path / "clip.y4m", fmt, planes)
    with open_video(tmp_path / "clip.y4m") as y4m, open_video(tmp_path / "clip.yuv", width=size[0],
                                                               height=size[1], pix_fmt=pix_fmt) as raw:
        assert y4m.fmt == raw.fmt == fmt
        assert y4m.frame_count == raw.frame_count == 5
        for clip in (y4m, raw):
            batches = list(clip.batches(2))
            assert [b.n for b in batches] == [2, 2, 1]
            assert [b.first_index for b in batches] == [0, 2, 4]
            for got, want in zip((np.concatenate([getattr(b, p) for b in batches]) for p in "yuv"), planes):
                assert got.dtype == fmt.dtype and got.flags.c_contiguous
                assert np.array_equal(got, want)
            assert all(b.bit_depth == fmt.bit_depth and b.fmt == fmt for b in batches)


@pytest.mark.parametrize("tag", SUPPORTED_Y4M_COLORSPACES)
def test_y4m_colorspace_tags(tmp_path, tag):
    chroma = tag[:3]
    bit_depth = int(tag[4:]) if tag[3:4] == "p" and tag[4:].isdigit() else 8
    fmt = VideoFormat(5, 3, bit_depth, chroma)
    planes = random_planes(fmt, 2)
    write_y4m(tmp_path / "c.y4m", fmt, planes, colorspace=tag)
    with open_video(tmp_path / "c.y4m") as clip:
        assert clip.fmt == fmt
        assert np.array_equal(clip.read_all().v, planes[2])


def test_y4m_default_colorspace_is_420jpeg(tmp_path):
    fmt = VideoFormat(5, 3, 8, "420")
    planes = random_planes(fmt, 1)
    write_y4m(tmp_path / "c.y4m", fmt, planes, colorspace=None)
    with open_video(tmp_path / "c.y4m") as clip:
        assert clip.fmt == fmt and clip.frame_count == 1


@pytest.mark.parametrize("c_tag, xyscss, expect", [
    (None, "420P10", ("420", 10)),
    (None, "444P16", ("444", 16)),
    (None, "422", ("422", 8)),
    (None, "420MPEG2", ("420", 8)),
    ("420p10", "420P10", ("420", 10)),  # what ffmpeg writes
    ("420jpeg", "420JPEG", ("420", 8)),
])
def test_y4m_xyscss_extension(tmp_path, c_tag, xyscss, expect):
    fmt = VideoFormat(6, 4, expect[1], expect[0])
    planes = random_planes(fmt, 2)
    write_y4m(tmp_path / "c.y4m", fmt, planes, colorspace=c_tag, extra=f" XYSCSS={xyscss} XCOLORRANGE=LIMITED")
    with open_video(tmp_path / "c.y4m") as clip:
        assert (clip.fmt.chroma, clip.fmt.bit_depth) == expect
        assert np.array_equal(clip.read_all().y, planes[0])


def test_y4m_c_and_xyscss_disagree(tmp_path):
    fmt = VideoFormat(6, 4, 8, "420")
    write_y4m(tmp_path / "c.y4m", fmt, random_planes(fmt, 1), extra=" XYSCSS=420P10")
    with pytest.raises(ValueError, match="disagree"):
        open_video(tmp_path / "c.y4m")


def test_y4m_frame_headers_with_parameters(tmp_path):
    fmt = VideoFormat(5, 3, 10, "422")
    planes = random_planes(fmt, 3)
    write_y4m(tmp_path / "c.y4m", fmt, planes, frame_header=b"FRAME Itp1 XFOO=bar\n")
    with open_video(tmp_path / "c.y4m") as clip:
        assert clip.frame_count == 3
        got = clip.read_all()
    assert all(np.array_equal(getattr(got, p), want) for p, want in zip("yuv", planes))


def test_y4m_header_fields(tmp_path):
    fmt = VideoFormat(4, 2, 8, "444")
    write_y4m(tmp_path / "c.y4m", fmt, random_planes(fmt, 1))
    with open_video(tmp_path / "c.y4m", width=4, height=2, pix_fmt="yuv444p") as clip:
        assert clip.fps == pytest.approx(30000 / 1001)
        assert clip.interlace == "p"
        assert "4x2 yuv444p" in repr(clip)


def test_iterating_twice_rereads(tmp_path):
    fmt = VideoFormat(8, 6, 12, "420")
    planes = random_planes(fmt, 7)
    write_y4m(tmp_path / "c.y4m", fmt, planes)
    with open_video(tmp_path / "c.y4m") as clip:
        first = [b.y.copy() for b in clip.batches(3)]
        second = [b.y.copy() for b in clip]
        assert len(first) == 3 and len(second) == 1
        assert np.array_equal(np.concatenate(first), np.concatenate(second))
        assert [b.n for b in clip.batches(3, limit=4)] == [3, 1]
        assert [b.n for b in clip.batches(3, limit=0)] == []
        assert [b.n for b in clip.batches(100, limit=50)] == [7]


def test_batch_arguments_are_checked(tmp_path):
    fmt = VideoFormat(4, 4, 8, "420")
    write_raw(tmp_path / "c.yuv", random_planes(fmt, 2))
    with open_video(tmp_path / "c.yuv", width=4, height=4, pix_fmt="yuv420p") as clip:
        for bad in (0, -1, 1.5, True):
            with pytest.raises(ValueError, match="n_frames"):
                clip.batches(bad)
        with pytest.raises(ValueError, match="limit"):
            clip.batches(2, limit=-1)
    with pytest.raises(ValueError, match="closed"):
        clip.batches(1)


def test_framebatch_n():
    fmt = VideoFormat(4, 2, 8, "420")
    y, u, v = random_planes(fmt, 3)
    batch = FrameBatch(y, u, v, 8, 6, fmt)
    assert batch.n == len(batch) == 3


def test_empty_raw_and_y4m(tmp_path):
    (tmp_path / "e.yuv").write_bytes(b"")
    with open_video(tmp_path / "e.yuv", width=4, height=4, pix_fmt="yuv420p") as clip:
        assert clip.frame_count == 0 and list(clip.batches(4)) == []
        assert clip.read_all().n == 0
    (tmp_path / "e.y4m").write_bytes(b"YUV4MPEG2 W4 H4 C420\n")
    with open_video(tmp_path / "e.y4m") as clip:
        assert clip.frame_count == 0 and list(clip.batches(4)) == []


# ---------------------------------------------------------------------------------------------------------------
# pipes and standard input


def test_y4m_from_pipe_streams_once(tmp_path):
    fmt = VideoFormat(9, 7, 10, "420")
    planes = random_planes(fmt, 6)
    write_y4m(tmp_path / "c.y4m", fmt, planes)
    data = (tmp_path / "c.y4m").read_bytes()
    r, w = os.pipe()

    def feed():
        with os.fdopen(w, "wb") as f:
            for k in range(0, len(data), 37):  # small writes: reads must not assume whole frames arrive at once
                f.write(data[k : k + 37])
                f.flush()

    thread = threading.Thread(target=feed)
    thread.start()
    try:
        with open_video(f"/dev/fd/{r}") as clip:
            assert clip.fmt == fmt and not clip.seekable and clip.frame_count is None
            got = np.concatenate([b.y for b in clip.batches(4)])
            with pytest.raises(ValueError, match="only once"):
                clip.batches(4).__next__()
    finally:
        thread.join()
        os.close(r)
    assert np.array_equal(got, planes[0])


def test_raw_from_stdin(monkeypatch):
    fmt = VideoFormat(5, 5, 8, "444")
    planes = random_planes(fmt, 3)
    payload = b"".join(frame_bytes(planes, i) for i in range(3))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload)))
    with open_video("-", width=5, height=5, pix_fmt="yuv444p") as clip:
        assert clip.frame_count is None
        batches = list(clip.batches(2))
    assert [b.n for b in batches] == [2, 1]
    assert np.array_equal(np.concatenate([b.u for b in batches]), planes[1])


def test_truncated_pipe_names_frame(monkeypatch):
    fmt = VideoFormat(4, 4, 16, "420")
    planes = random_planes(fmt, 2)
    payload = b"".join(frame_bytes(planes, i) for i in range(2))[:-5]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload)))
    with open_video("-", width=4, height=4, pix_fmt="yuv420p16le") as clip:
        with pytest.raises(ValueError, match=rf"frame 1 is truncated: expected {fmt.frame_bytes} bytes"):
            list(clip.batches(1))


# ---------------------------------------------------------------------------------------------------------------
# bad input


def test_truncated_raw_names_frame_and_bytes(tmp_path):
    fmt = VideoFormat(6, 4, 10, "420")
    write_raw(tmp_path / "c.yuv", random_planes(fmt, 3))
    with open(tmp_path / "c.yuv", "r+b") as f:
        f.truncate(2 * fmt.frame_bytes + 10)
    with pytest.raises(ValueError) as err:
        open_video(tmp_path / "c.yuv", width=6, height=4, pix_fmt="yuv420p10le")
    msg = str(err.value)
    assert "c.yuv" in msg and "frame 2 is truncated" in msg
    assert f"expected {fmt.frame_bytes} bytes" in msg and "only 10 remain" in msg


def test_raw_wrong_size(refdata):
    path = refdata / "vmaf" / "clips" / "c333x217_8b_ref.yuv"
    with pytest.raises(ValueError, match=r"not a whole number of 332x217 yuv420p frames.*check width, height"):
        open_video(path, width=332, height=217, pix_fmt="yuv420p")
    with pytest.raises(ValueError, match=r"frame 2 is truncated, expected 217334 bytes but only 108667 remain"):
        open_video(path, width=333, height=217, pix_fmt="yuv420p10le")


@pytest.mark.parametrize("tail", [10, 3, 0])
def test_truncated_y4m_names_frame_and_bytes(tmp_path, tail):
    fmt = VideoFormat(7, 5, 8, "422")
    write_y4m(tmp_path / "c.y4m", fmt, random_planes(fmt, 3))
    size = (tmp_path / "c.y4m").stat().st_size
    # cut inside the last frame's samples (tail=10), inside its FRAME line (3) or right after it (0)
    cut = {10: size - fmt.frame_bytes + 10, 3: size - fmt.frame_bytes - 6 + 3, 0: size - fmt.frame_bytes}[tail]
    with open(tmp_path / "c.y4m", "r+b") as f:
        f.truncate(cut)
    expected = rf"frame 2 is truncated: expected {fmt.frame_bytes} bytes"
    with open_video(tmp_path / "c.y4m") as clip:
        with pytest.raises(ValueError, match=expected):
            clip.frame_count  # noqa: B018
        with pytest.raises(ValueError, match=expected):
            list(clip.batches(1))


def test_truncated_y4m_from_pipe(monkeypatch, tmp_path):
    fmt = VideoFormat(7, 5, 8, "420")
    write_y4m(tmp_path / "c.y4m", fmt, random_planes(fmt, 2))
    data = (tmp_path / "c.y4m").read_bytes()[:-7]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    with open_video("-") as clip:
        with pytest.raises(ValueError, match=rf"frame 1 is truncated: expected {fmt.frame_bytes} bytes"):
            list(clip.batches(1))


def test_bad_frame_header(tmp_path, monkeypatch):
    fmt = VideoFormat(4, 4, 8, "420")
    write_y4m(tmp_path / "c.y4m", fmt, random_planes(fmt, 3))
    data = bytearray((tmp_path / "c.y4m").read_bytes())
    second = data.index(b"FRAME", data.index(b"FRAME") + 1)
    data[second : second + 5] = b"FRAMX"
    (tmp_path / "c.y4m").write_bytes(bytes(data))
    expected = rf"frame 1: expected a 'FRAME' header at byte offset {second}, found b'FRAMX\\n"
    with open_video(tmp_path / "c.y4m") as clip:
        with pytest.raises(ValueError, match=expected):
            clip.frame_count  # noqa: B018
    with open_video(tmp_path / "c.y4m") as clip:
        with pytest.raises(ValueError, match=expected):
            list(clip.batches(1))
    # a pipe is not scanned ahead: the error comes while reading, after the good frame
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(bytes(data))))
    with open_video("-") as clip:
        batches = clip.batches(1)
        assert next(batches).n == 1
        with pytest.raises(ValueError, match=expected):
            next(batches)


@pytest.mark.parametrize(
    "content, match",
    [
        (b"YUV4MPEG2 H4 C420\nFRAME\n", r"missing W \(width\)"),
        (b"YUV4MPEG2 C420\n", r"missing W \(width\) and H \(height\)"),
        (b"YUV4MPEG2 Wabc H4\n", "width .* must be a positive integer, got 'Wabc'"),
        (b"YUV4MPEG2 W4 H0\n", "height .* must be a positive integer"),
        (b"YUV4MPEG2 W4 H4 C420", "header line is truncated"),
        (b"YUV4MPEG2 W4 H4 " + b"X" * 5000, "longer than"),
        (b"YUV4MPEG2 W4 H4 C411\n", "unsupported Y4M colour space '411'; supported: 420jpeg"),
        (b"YUV4MPEG2 W4 H4 C420p9\n", "unsupported Y4M colour space '420p9'"),
        (b"YUV4MPEG2 W4 H4 C444alpha\n", "unsupported Y4M colour space '444alpha'"),
        (b"YUV4MPEG2 W4 H4 Cmono\n", "greyscale"),
        (b"YUV4MPEG2 W4 H4 XYSCSS=MONO\n", "greyscale"),
        (b"YUV4MPEG2 W4 H4 \xff\n", "not ASCII"),
        (b"YUV4MPEG W4 H4\n", "must start with b'YUV4MPEG2 '"),
        (b"\x00" * 100, "must start with b'YUV4MPEG2 '"),  # .y4m name without the magic
    ],
)
def test_bad_y4m_header(tmp_path, content, match):
    (tmp_path / "bad.y4m").write_bytes(content)
    with pytest.raises(ValueError, match=match) as err:
        open_video(tmp_path / "bad.y4m")
    assert "bad.y4m" in str(err.value)


@pytest.mark.parametrize(
    "kwargs, missing",
    [
        (dict(height=4, pix_fmt="yuv420p"), "width"),
        (dict(width=4, pix_fmt="yuv420p"), "height"),
        (dict(width=4, height=4), "pix_fmt"),
        (dict(), "width, height, pix_fmt"),
    ],
)
def test_raw_needs_geometry(tmp_path, kwargs, missing):
    (tmp_path / "c.yuv").write_bytes(b"\x10" * 48)
    with pytest.raises(ValueError, match=rf"raw YUV input needs width, height and pix_fmt \(missing: {missing}\)"):
        open_video(tmp_path / "c.yuv", **kwargs)


def test_raw_unknown_pix_fmt(tmp_path):
    (tmp_path / "c.yuv").write_bytes(b"\x10" * 48)
    with pytest.raises(ValueError, match="unsupported pix_fmt 'yuv420p10be'; supported: yuv420p, yuv422p"):
        open_video(tmp_path / "c.yuv", width=4, height=4, pix_fmt="yuv420p10be")


def test_y4m_arguments_must_agree_with_header(tmp_path):
    fmt = VideoFormat(6, 4, 10, "420")
    write_y4m(tmp_path / "c.y4m", fmt, random_planes(fmt, 1))
    with open_video(tmp_path / "c.y4m", width=6, height=4, pix_fmt="yuv420p10le") as clip:
        assert clip.fmt == fmt
    with pytest.raises(ValueError, match=r"width 8 \(header W6\).*disagree with the Y4M header"):
        open_video(tmp_path / "c.y4m", width=8)
    with pytest.raises(ValueError, match=r"pix_fmt yuv420p \(header says yuv420p10le\)"):
        open_video(tmp_path / "c.y4m", pix_fmt="yuv420p")


def test_missing_and_unreadable_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.y4m"):
        open_video(tmp_path / "nope.y4m")
    with pytest.raises(ValueError, match="is a directory"):
        open_video(tmp_path, width=4, height=4, pix_fmt="yuv420p")


# ---------------------------------------------------------------------------------------------------------------
# streaming: memory does not grow with the clip


def _sparse_clip(path, fmt: VideoFormat, n: int, y4m: bool) -> None:
    """A long clip without writing its samples: a sparse file (zeros) with headers where Y4M needs them."""
    with open(path, "wb") as f:
        if not y4m:
            f.truncate(n * fmt.frame_bytes)
            return
        header = f"YUV4MPEG2 W{fmt.width} H{fmt.height} F25:1 Ip C420jpeg\n".encode()
        f.write(header)
        for i in range(n):
            f.seek(len(header) + i * (6 + fmt.frame_bytes))
            f.write(b"FRAME\n")
        f.truncate(len(header) + n * (6 + fmt.frame_bytes))


@pytest.mark.parametrize("y4m", [False, True], ids=["raw", "y4m"])
def test_streaming_memory_stays_flat(tmp_path, y4m):
    fmt = VideoFormat(1920, 1080, 8, "420")
    n, per_batch = 120, 4  # ~373 MB of video, ~12 MB per batch
    path = tmp_path / ("long.y4m" if y4m else "long.yuv")
    _sparse_clip(path, fmt, n, y4m)
    batch_bytes = per_batch * fmt.frame_bytes
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    tracemalloc.start()
    try:
        with open_video(path, width=1920, height=1080, pix_fmt="yuv420p") as clip:
            assert clip.frame_count == n
            seen = 0
            for batch in clip.batches(per_batch):
                assert batch.first_index == seen
                seen += batch.n
                del batch
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss_before
    assert seen == n
    assert n * fmt.frame_bytes > 300e6
    assert peak < 1.5 * batch_bytes, f"peak traced memory {peak / 1e6:.1f} MB for {batch_bytes / 1e6:.1f} MB batches"
    assert rss_growth < 100e6, f"peak RSS grew by {rss_growth / 1e6:.0f} MB"

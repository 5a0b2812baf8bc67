"""Compressed clips decoded by PyAV: lossless encodes give back their source planes (and equal the Y4M of the
same planes), lossy codecs decode, and bad inputs are refused naming the file."""

from __future__ import annotations

import numpy as np
import pytest

from video_clips import encode_planes, encode_rgb, encoder_available, photo_frames, photo_planes, write_y4m

from fusedsim.io.compressed import is_compressed, open_compressed
from fusedsim.io.video import open_video

LOSSLESS = [
    ("ffv1", "yuv420p", {}, 8),
    ("ffv1", "yuv422p10le", {}, 10),
    ("ffv1", "yuv444p12le", {}, 12),
    ("libx264", "yuv420p", {"qp": "0"}, 8),
    ("libx264", "yuv420p10le", {"qp": "0"}, 10),
]


@pytest.mark.parametrize("codec,pix_fmt,options,bit_depth", LOSSLESS)
def test_lossless_decode_equals_source_and_y4m(tmp_path, codec, pix_fmt, options, bit_depth):
    if not encoder_available(codec):
        pytest.skip(f"PyAV's FFmpeg has no {codec} encoder")
    planes = photo_planes(4, pix_fmt)
    clip = encode_planes(tmp_path / "clip.mkv", codec, pix_fmt, planes, options=options)
    chroma = pix_fmt[3:6]
    y4m = write_y4m(tmp_path / "clip.y4m", planes, bit_depth, chroma)
    reader = open_compressed(clip)
    assert reader.frame_count == 4 and reader.fmt.bit_depth == bit_depth and reader.fmt.chroma == chroma
    decoded = list(reader.frames())
    assert [f.index for f in decoded] == [0, 1, 2, 3]
    for frame, source in zip(decoded, planes):
        for got, want in zip((frame.y, frame.u, frame.v), source):
            assert got.dtype == (np.uint8 if bit_depth == 8 else np.uint16)
            np.testing.assert_array_equal(got, want)
    with open_video(y4m) as y4m_reader:
        whole = y4m_reader.read_all()
    batches = list(reader.batches(3))
    assert [b.n for b in batches] == [3, 1]
    for name in ("y", "u", "v"):
        np.testing.assert_array_equal(np.concatenate([getattr(b, name) for b in batches]), getattr(whole, name))


@pytest.mark.parametrize("codec,pix_fmt", [("libvpx-vp9", "yuv420p"), ("libsvtav1", "yuv420p"),
                                           ("libsvtav1", "yuv420p10le"), ("libx265", "yuv420p")])
def test_lossy_codecs_decode(tmp_path, codec, pix_fmt):
    if not encoder_available(codec):
        pytest.skip(f"PyAV's FFmpeg has no {codec} encoder")
    suffix = ".webm" if "vp9" in codec else ".mkv"
    options = {"x265-params": "log-level=error:frame-threads=1:pools=none"} if codec == "libx265" else {}
    clip = encode_rgb(tmp_path / f"clip{suffix}", codec, pix_fmt, photo_frames(5), options=options)
    reader = open_compressed(clip)
    frames = list(reader.frames(("y",)))
    assert len(frames) == 5 == reader.frame_count
    assert frames[0].y.shape == (96, 128) and frames[0].u is None
    assert reader.fmt.bit_depth == (10 if "10" in pix_fmt else 8)
    source_luma = photo_planes(1, pix_fmt)[0][0].astype(np.float64)
    # a lossy encode of the photo stays near it (mean error of a few codes, 10-bit: x4)
    assert np.abs(frames[0].y.astype(np.float64) - source_luma).mean() < 12 * (4 if "10" in pix_fmt else 1)


def test_timestamp_gaps_are_reported(tmp_path):
    planes = photo_planes(5, "yuv420p")
    clip = encode_planes(tmp_path / "gaps.mkv", "ffv1", "yuv420p", planes, pts=[0, 1, 2, 5, 6])
    notes = open_compressed(clip).info.notes
    assert any("about 2 frame(s) missing" in n and "after frame 2" in n for n in notes), notes


def test_variable_frame_rate_is_reported(tmp_path):
    planes = photo_planes(6, "yuv420p")
    # time base 1/100 s: durations 40, 40, 20, 40, 40 ms (the stream's declared rate is its time base's, 100)
    clip = encode_planes(tmp_path / "vfr.mkv", "ffv1", "yuv420p", planes, rate=100, pts=[0, 4, 8, 10, 14, 18])
    info = open_compressed(clip).info
    assert info.fps == 25 and info.variable_frame_rate
    assert info.notes == ("variable frame rate: frame durations from 20.00 to 40.00 ms (frames are compared by "
                          "index, not by time)",)


def test_detection_by_suffix_and_signature(tmp_path):
    assert is_compressed(tmp_path / "x.webm") and is_compressed(tmp_path / "x.MP4")
    raw = tmp_path / "x.yuv"
    raw.write_bytes(bytes(64))
    assert not is_compressed(raw)
    mkv_named_raw = tmp_path / "y.yuv"
    mkv_named_raw.write_bytes(b"\x1a\x45\xdf\xa3" + bytes(60))
    assert is_compressed(mkv_named_raw)
    assert not is_compressed("-")


def test_corrupt_file_is_named(tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00\x00\x00\x18ftypisom" + bytes(300))
    with pytest.raises(ValueError, match="bad.mp4"):
        open_compressed(bad)


def test_audio_only_file_is_refused(tmp_path):
    import av

    path = tmp_path / "audio.mka"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), dtype=np.int16), format="s16", layout="mono")
        frame.sample_rate = 8000
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    with pytest.raises(ValueError, match=r"audio\.mka: has no video stream \(found: audio\)"):
        open_compressed(path)


def test_truncated_stream_is_named(tmp_path):
    clip = encode_planes(tmp_path / "full.mkv", "ffv1", "yuv420p", photo_planes(5, "yuv420p"))
    data = clip.read_bytes()
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(data[:len(data) * 2 // 3])
    with pytest.raises(ValueError, match=r"cut\.mkv: truncated: its header says 0\.200 s .* after 3 frames"):
        open_compressed(cut)


def test_unsupported_pixel_format_is_named(tmp_path):
    import av

    path = tmp_path / "grey.mkv"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "gray"
        frame = av.VideoFrame.from_ndarray(np.zeros((32, 32), dtype=np.uint8), format="gray")
        for packet in [*stream.encode(frame), *stream.encode()]:
            container.mux(packet)
    with pytest.raises(ValueError, match=r"grey\.mkv: .*'gray'.*planar Y'CbCr"):
        open_compressed(path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.mp4"):
        open_compressed(tmp_path / "nope.mp4")
    folder = tmp_path / "dir.mkv"
    folder.mkdir()
    with pytest.raises(ValueError, match="is a directory"):
        open_compressed(folder)

"""NVDEC through PyNvVideoCodec: the run plan and keyframe index (everywhere), and on a GPU with the package, frames
``==`` PyAV's software decode of the same clip, one session or several (clips cut into runs at their keyframes,
open GOPs included), or a refusal naming the reason."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from video_clips import encode_rgb, encoder_available, photo_frames

from fusedsim.io import nvcodec
from fusedsim.io.compressed import _keyframes, _starts_afresh, open_compressed
from fusedsim.io.nvcodec import _chunks, nvcodec_available, nvcodec_frames, nvcodec_refusal, plan_runs
from fusedsim.io.video import open_pair

needs_nvcodec = pytest.mark.skipif(not nvcodec_available(), reason="needs a CUDA GPU and PyNvVideoCodec")


def test_runs_start_at_keyframes_and_cover_the_clip():
    assert plan_runs([0, 12, 30], 40) == [(0, 12), (12, 30), (30, 40)]
    assert plan_runs([30, 0, 12, 12], 31) == [(0, 12), (12, 30), (30, 31)]  # unsorted, repeated
    with pytest.raises(ValueError, match="does not start with a keyframe"):
        plan_runs([3, 10], 20)


def test_short_runs_are_merged_and_cut_at_the_limit():
    runs = [(0, 1), (1, 2), (2, 3), (3, 50), (50, 60)]
    assert _chunks(runs, 60, 3) == [(0, 3), (3, 50), (50, 60)]
    assert _chunks(runs, 10, 3) == [(0, 3), (3, 10)]  # frames past the limit are not decoded
    assert _chunks(runs, 60, 100) == [(0, 60)]


def test_keyframe_index_in_presentation_order():
    # decoding order of a closed-GOP IBBP stream: I0 P3 B1 B2 P6 B4 B5 I7 P9 B8 (timestamps in frames)
    stamps = [0, 3, 1, 2, 6, 4, 5, 7, 9, 8]
    keys = [True, False, False, False, False, False, False, True, False, False]
    pts, frames, packets = _keyframes(stamps, keys)
    assert pts == tuple(range(10))
    assert frames == (0, 7) and packets == (0, 7)
    # an open GOP: the keyframe I6 is followed in decoding order by B4 B5, shown before it: not a start
    assert _keyframes([0, 3, 1, 2, 6, 4, 5, 9, 7, 8], [True, False, False, False, True, False, False, False, False,
                                                       False])[1:] == ((0,), (0,))
    assert _keyframes([0, None, 2], [True, False, False]) == ((), (), ())  # a missing timestamp: no index
    assert _keyframes([0, 1, 1], [True, False, False]) == ((), (), ())  # repeated timestamps: no index


def test_only_idr_pictures_and_key_frames_start_a_run():
    def avcc(*nals):  # 4-byte big-endian sizes, as MP4 stores NAL units
        return b"".join(len(n).to_bytes(4, "big") + n for n in nals)

    sei, idr, slice_ = b"\x06\x05\x10", b"\x65\x88\x84", b"\x41\x9a\x02"  # H.264 NAL types 6, 5, 1
    assert _starts_afresh("h264", avcc(sei, idr)) and not _starts_afresh("h264", avcc(sei, slice_))
    assert _starts_afresh("h264", b"\x00\x00\x00\x01" + sei + b"\x00\x00\x01" + idr)  # Annex B
    assert not _starts_afresh("h264", b"\x00\x00\x00\x01" + slice_)
    # HEVC: IDR_W_RADL (19) starts afresh, CRA (21) does not
    assert _starts_afresh("hevc", avcc(b"\x26\x01\xaf")) and not _starts_afresh("hevc", avcc(b"\x2a\x01\xaf"))
    assert _starts_afresh("vp9", b"\x82") and not _starts_afresh("mpeg2video", b"\x00\x00\x01\xb3")


def test_probe_records_the_keyframes_of_a_clip(tmp_path):
    clip = encode_rgb(tmp_path / "k.mp4", "libx264", "yuv420p", photo_frames(20, 64, 48),
                      options={"g": "8", "keyint_min": "8", "sc_threshold": "0", "bf": "2"})
    info = open_compressed(clip).info
    assert info.keyframes[0] == 0 and len(info.keyframes) >= 3
    assert len(info.pts) == info.frame_count == 20 and list(info.pts) == sorted(info.pts)
    assert all(info.keyframes[i] < info.keyframes[i + 1] for i in range(len(info.keyframes) - 1))


def test_sessions_and_queue_must_be_positive_integers(tmp_path):
    clip = encode_rgb(tmp_path / "c.mp4", "libx264", "yuv420p", photo_frames(2, 64, 48))
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="sessions must be a positive integer"):
            next(nvcodec_frames(open_compressed(clip), sessions=bad))
        with pytest.raises(ValueError, match="queue_frames must be a positive integer"):
            next(nvcodec_frames(open_compressed(clip), queue_frames=bad))


@pytest.mark.skipif(nvcodec_available(), reason="checks the refusal without PyNvVideoCodec or a GPU")
def test_refusal_names_the_missing_package(tmp_path):
    clip = encode_rgb(tmp_path / "c.mp4", "libx264", "yuv420p", photo_frames(2, 64, 48))
    assert "PyNvVideoCodec" in nvcodec_refusal(open_compressed(clip))


def _equal_to_cpu(clip, **kw):
    reader = open_compressed(clip)
    cpu = list(reader.frames())
    gpu = list(nvcodec_frames(reader, device="cuda", **kw))
    assert [g.index for g in gpu] == [c.index for c in cpu] == list(range(reader.frame_count))
    for c, g in zip(cpu, gpu):
        assert g.y.device.type == "cuda"
        for name in ("y", "u", "v"):
            np.testing.assert_array_equal(getattr(g, name).cpu().numpy(), getattr(c, name),
                                          err_msg=f"frame {c.index} {name}")
    return gpu


# what Hopper's NVDEC decodes (H.264 8-bit, HEVC 8/10-bit, VP9 8-bit 4:2:0; not AV1)
CLIPS = [
    ("libx264", "yuv420p", ".mp4", {}),
    ("libx265", "yuv420p", ".mp4", {"x265-params": "log-level=error:frame-threads=1:pools=none"}),
    ("libx265", "yuv420p10le", ".mkv", {"x265-params": "log-level=error:frame-threads=1:pools=none"}),
    ("libvpx-vp9", "yuv420p", ".webm", {}),
]


@needs_nvcodec
@pytest.mark.parametrize("codec,pix_fmt,suffix,options", CLIPS)
def test_frames_equal_cpu_frames(tmp_path, codec, pix_fmt, suffix, options):
    if not encoder_available(codec):
        pytest.skip(f"PyAV's FFmpeg has no {codec} encoder")
    # 256x176: above HEVC's smallest NVDEC size (144x144 on Hopper), so the 10-bit clip is decoded, not refused
    clip = encode_rgb(tmp_path / f"clip{suffix}", codec, pix_fmt, photo_frames(6, 256, 176), options=options)
    reason = nvcodec_refusal(open_compressed(clip))
    if reason is not None:
        pytest.skip(f"this GPU's NVDEC refuses {codec} {pix_fmt}: {reason}")
    _equal_to_cpu(clip, sessions=1)


@needs_nvcodec
@pytest.mark.parametrize("gop", ["closed", "open"])
@pytest.mark.parametrize("sessions", [2, 3])
def test_several_sessions_give_the_clip_in_order(tmp_path, monkeypatch, gop, sessions):
    # keyframes every 6 frames with B-frames; x264's open GOP starts runs at non-IDR keyframes whose leading
    # B-frames reference the run before
    params = "keyint=6:min-keyint=6:scenecut=0:bframes=2" + (":open-gop=1" if gop == "open" else "")
    clip = encode_rgb(tmp_path / f"{gop}.mp4", "libx264", "yuv420p", photo_frames(40, 192, 128),
                      options={"x264-params": params})
    # an open GOP's keyframes are recovery points, not IDR pictures: decoding cannot start there, one run
    keyframes = open_compressed(clip).info.keyframes
    assert len(keyframes) >= 5 if gop == "closed" else keyframes == (0,)
    monkeypatch.setattr(nvcodec, "MIN_RUN_FRAMES", 1)  # every keyframe starts a run
    _equal_to_cpu(clip, sessions=sessions, queue_frames=4)
    gpu = list(nvcodec_frames(open_compressed(clip), device="cuda", sessions=sessions, limit=17))
    assert [g.index for g in gpu] == list(range(17))


@needs_nvcodec
def test_several_sessions_on_a_closed_gop_hevc_clip(tmp_path, monkeypatch):
    if not encoder_available("libx265"):
        pytest.skip("PyAV's FFmpeg has no libx265 encoder")
    params = "log-level=error:frame-threads=1:pools=none:keyint=8:min-keyint=8:scenecut=0:open-gop=0"
    clip = encode_rgb(tmp_path / "h.mkv", "libx265", "yuv420p", photo_frames(40, 256, 176),
                      options={"x265-params": params})
    assert len(open_compressed(clip).info.keyframes) >= 4
    monkeypatch.setattr(nvcodec, "MIN_RUN_FRAMES", 1)
    _equal_to_cpu(clip, sessions=3, queue_frames=4)


@needs_nvcodec
def test_pair_uses_pynvvideocodec_for_nvdec(tmp_path):
    clip = encode_rgb(tmp_path / "c.mp4", "libx264", "yuv420p", photo_frames(5, 192, 128))
    with open_pair(clip, clip, device="cuda", decoder="nvdec") as pair:
        assert pair.ref.decoder == "nvdec"
        batch = next(iter(pair.batches(5)))
    with open_pair(clip, clip, device="cuda", decoder="cpu") as pair:
        cpu = next(iter(pair.batches(5)))
    assert torch.equal(batch.ref.y.cpu(), cpu.ref.y.cpu()) and torch.equal(batch.dist.v.cpu(), cpu.dist.v.cpu())


@needs_nvcodec
def test_a_codec_the_gpu_lacks_is_refused_with_the_reason(tmp_path):
    if not encoder_available("libsvtav1"):
        pytest.skip("PyAV's FFmpeg has no AV1 encoder")
    clip = encode_rgb(tmp_path / "a.mkv", "libsvtav1", "yuv420p", photo_frames(3, 192, 128))
    reason = nvcodec_refusal(open_compressed(clip))
    if reason is None:
        _equal_to_cpu(clip, sessions=1)  # this GPU decodes AV1: then its frames must equal the CPU's
    else:
        with pytest.raises(ValueError, match="NVDEC cannot decode .*a.mkv"):
            open_pair(clip, clip, device="cuda", decoder="nvdec")

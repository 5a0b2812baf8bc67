"""NVDEC (FFmpeg's CUDA hwaccel in PyAV) decodes a fixture clip to the same samples as the CPU decoder (``==``) or
refuses it with an error naming the file: never other pixels. ``decoder="auto"`` is the CPU (faster where measured).
Skipped without CUDA or without the hwaccel."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from video_clips import encode_rgb, encoder_available, photo_frames

from fusedsim.io.compressed import open_compressed
from fusedsim.io.nvdec import nvdec_available, nvdec_frames
from fusedsim.io.video import open_pair

pytestmark = pytest.mark.skipif(not nvdec_available(), reason="needs a CUDA GPU and PyAV with FFmpeg's CUDA hwaccel")

# what NVDEC decodes on current NVIDIA GPUs and PyAV exports (4:2:0: H.264 8-bit, HEVC, VP9 and AV1 8/10-bit)
CLIPS = [
    ("libx264", "yuv420p", ".mp4"),
    ("libx265", "yuv420p", ".mp4"),
    ("libx265", "yuv420p10le", ".mkv"),
    ("libvpx-vp9", "yuv420p", ".webm"),
    ("libsvtav1", "yuv420p", ".mkv"),
    ("libsvtav1", "yuv420p10le", ".mkv"),
]


@pytest.mark.parametrize("codec,pix_fmt,suffix", CLIPS)
def test_nvdec_frames_equal_cpu_frames(tmp_path, codec, pix_fmt, suffix):
    if not encoder_available(codec):
        pytest.skip(f"PyAV's FFmpeg has no {codec} encoder")
    options = {"x265-params": "log-level=error:frame-threads=1:pools=none"} if codec == "libx265" else {}
    clip = encode_rgb(tmp_path / f"clip{suffix}", codec, pix_fmt, photo_frames(6, 192, 128), options=options)
    reader = open_compressed(clip)
    cpu = list(reader.frames())
    try:
        gpu = list(nvdec_frames(reader, device="cuda"))
    except ValueError as exc:  # seen on an H200 machine for some streams: EPERM from avcodec_send_packet()
        assert str(clip) in str(exc) and "NVDEC" in str(exc)
        pytest.skip(f"NVDEC refused {codec} {pix_fmt} here, with a clear error: {exc}")
    assert len(gpu) == len(cpu) == 6
    for c, g in zip(cpu, gpu):
        assert g.y.device.type == "cuda" and g.index == c.index
        for name in ("y", "u", "v"):
            np.testing.assert_array_equal(getattr(g, name).cpu().numpy(), getattr(c, name), err_msg=name)


def test_nvdec_refuses_what_it_cannot_decode(tmp_path):
    # 4:4:4: NVDEC's output for it is not exported by PyAV (and H.264 4:4:4 is not decoded by NVDEC at all)
    clip = encode_rgb(tmp_path / "c444.mkv", "libx264", "yuv444p", photo_frames(2, 192, 128))
    with pytest.raises(ValueError, match="decoder='nvdec': NVDEC cannot decode .*c444.mkv"):
        open_pair(clip, clip, device="cuda", decoder="nvdec")


def test_auto_decoder_is_the_cpu_on_a_gpu(tmp_path):
    clip = encode_rgb(tmp_path / "c.mp4", "libx264", "yuv420p", photo_frames(3, 192, 128))
    with open_pair(clip, clip, device="cuda") as pair:
        assert pair.ref.decoder == pair.dist.decoder == "cpu"
        batch = next(iter(pair.batches(3)))
    assert batch.ref.y.device.type == "cuda" and torch.equal(batch.ref.y, batch.dist.y)

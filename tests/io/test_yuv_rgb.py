"""Y'CbCr -> R'G'B' (fusedsim.io.yuv_rgb) against FFmpeg's own conversion (PyAV's ``to_ndarray``), on photo clips
tagged with each matrix and range, at 8, 10 and 12 bits and 4:2:0, 4:2:2 and 4:4:4.

Tolerance: FFmpeg's swscale converts through fixed-point coefficients and, for its float output (``gbrpf32le``),
an intermediate of about 8 bits (its error is spread evenly over one 8-bit step: mean 0.4/255 at every bit
depth, measured on these clips), so the float results agree within 1/255 (measured max 0.87/255 over the
parameters below). The 8-bit ``rgb24`` path of swscale replicates chroma (no interpolation): compared with
``upsampling="nearest"``, codes agree within 3 (its fixed-point rounding runs about one code low; measured max 3).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from video_clips import encode_planes, encoder_available, photo_planes

from fusedsim.io.compressed import open_compressed
from fusedsim.io.yuv_rgb import Colour, rgb_float, rgb_uint8, upsample_chroma

# (pix_fmt, codec, FFmpeg colorspace tag, range tag): 1 BT.709, 5 BT.601 (BT470BG), 9 BT.2020 NCL; 1 limited, 2 full
CASES = [
    ("yuv420p", "libx264", None, None),
    ("yuv420p", "libx264", 1, 1),
    ("yuv420p", "libx264", 9, 2),
    ("yuv420p10le", "libx264", 1, 1),
    ("yuv420p10le", "libx264", 9, 1),
    ("yuv444p", "libx264", 1, 2),
    ("yuv422p10le", "libx264", 5, 1),
    ("yuv420p12le", "libx265", 9, 2),
    ("yuv444p12le", "libx265", 1, 1),
]


def _tensor(plane: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(plane.astype(np.int32))[None]


def _ffmpeg_rgb(path, fmt: str) -> torch.Tensor:
    import av

    with av.open(str(path)) as container:
        frame = next(container.decode(video=0))
        out = frame.to_ndarray(format=fmt)
    t = torch.from_numpy(np.ascontiguousarray(out))
    return t.permute(2, 0, 1) if t.shape[-1] == 3 else t


@pytest.mark.parametrize("pix_fmt,codec,colorspace,color_range", CASES)
def test_float_rgb_matches_ffmpeg(tmp_path, pix_fmt, codec, colorspace, color_range):
    if not encoder_available(codec):
        pytest.skip(f"PyAV's FFmpeg has no {codec} encoder")
    # x265 with its frame threads muxed packets with bad timestamps now and then: one thread, no pool
    x265 = {"x265-params": "lossless=1:log-level=error:frame-threads=1:pools=none"}
    options = {"qp": "0"} if codec == "libx264" else x265
    clip = encode_planes(tmp_path / "c.mkv", codec, pix_fmt, photo_planes(1, pix_fmt), options=options,
                         colorspace=colorspace, color_range=color_range)
    reader = open_compressed(clip)
    expected_matrix = {None: "bt601", 1: "bt709", 5: "bt601", 9: "bt2020"}[colorspace]
    assert reader.info.colour.matrix == expected_matrix
    assert reader.info.colour.range == ("full" if color_range == 2 else "limited")
    frame = next(reader.frames())
    ours = rgb_float(_tensor(frame.y), _tensor(frame.u), _tensor(frame.v), reader.fmt.bit_depth,
                     reader.info.colour)[0]
    theirs = _ffmpeg_rgb(clip, "gbrpf32le").float().clamp(0, 1)
    assert float((ours - theirs).abs().max()) * 255 <= 1.0


def test_uint8_nearest_matches_ffmpeg_rgb24(tmp_path):
    clip = encode_planes(tmp_path / "c.mkv", "ffv1", "yuv420p", photo_planes(1, "yuv420p"))
    reader = open_compressed(clip)
    frame = next(reader.frames())
    colour = Colour(upsampling="nearest")
    ours = rgb_uint8(_tensor(frame.y), _tensor(frame.u), _tensor(frame.v), 8, colour)[0].int()
    theirs = _ffmpeg_rgb(clip, "rgb24").int()
    assert int((ours - theirs).abs().max()) <= 3


def test_known_colours():
    # limited-range BT.709 codes of black, white and pure red (Y 63, Cb 102, Cr 240 is R'G'B' (1, 0, 0))
    y = torch.tensor([[[16, 235, 63]]])
    u = torch.tensor([[[128, 128, 102]]])
    v = torch.tensor([[[128, 128, 240]]])
    rgb = rgb_float(y, u, v, 8, Colour(matrix="bt709"))[0, :, 0]
    torch.testing.assert_close(rgb[:, 0], torch.zeros(3), atol=1e-6, rtol=0)
    torch.testing.assert_close(rgb[:, 1], torch.ones(3), atol=1e-6, rtol=0)
    torch.testing.assert_close(rgb[:, 2], torch.tensor([1.0, 0.0, 0.0]), atol=3e-3, rtol=0)
    # the same grey at 10 bits: codes scaled by 4
    grey10 = rgb_float(torch.tensor([[[4 * 126]]]), torch.tensor([[[512]]]), torch.tensor([[[512]]]), 10)
    grey8 = rgb_float(torch.tensor([[[126]]]), torch.tensor([[[128]]]), torch.tensor([[[128]]]), 8)
    torch.testing.assert_close(grey10, grey8)


def test_chroma_siting():
    plane = torch.tensor([[[0.0, 4.0]]])  # one row, two chroma samples -> four luma columns, rows doubled
    left = upsample_chroma(plane, 2, 4, "left")[0, 0]
    center = upsample_chroma(plane, 2, 4, "center")[0, 0]
    nearest = upsample_chroma(plane, 2, 4, "left", "nearest")[0, 0]
    assert left.tolist() == [0.0, 2.0, 4.0, 4.0]  # co-sited: samples at luma columns 0 and 2
    assert center.tolist() == [0.0, 1.0, 3.0, 4.0]  # centred: at 0.5 and 2.5
    assert nearest.tolist() == [0.0, 0.0, 4.0, 4.0]


def test_bad_arguments():
    with pytest.raises(ValueError, match="matrix must be one of"):
        Colour(matrix="bt470")
    y = torch.zeros(1, 4, 4, dtype=torch.uint8)
    with pytest.raises(ValueError, match="u and v must have one shape"):
        rgb_float(y, torch.zeros(1, 2, 2), torch.zeros(1, 2, 3), 8)

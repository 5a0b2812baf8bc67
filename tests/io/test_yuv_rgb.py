"""Y'CbCr -> R'G'B' (fusedsim.io.yuv_rgb) against FFmpeg's own conversion (PyAV's ``to_ndarray``): photo frames
tagged with each matrix and range at 8, 10, 12 and 16 bits in 4:2:0, 4:2:2 and 4:4:4, and decoded clips whose
colour comes from their stream tags and their decoder's chroma siting.

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

from video_clips import encode_planes, encode_rgb, encoder_available, photo_frames, photo_planes

from fusedsim.io.compressed import open_compressed
from fusedsim.io.yuv_rgb import Colour, rgb_float, rgb_uint8, upsample_chroma

# (pix_fmt, FFmpeg colorspace tag, range tag, matrix, range): 1 BT.709, 5 BT.601 (BT470BG), 7 SMPTE 240M,
# 9 BT.2020 NCL; range 1 limited, 2 full
FRAMES = [
    ("yuv420p", 1, 1, "bt709", "limited"),
    ("yuv420p", 9, 2, "bt2020", "full"),
    ("yuv444p", 5, 1, "bt601", "limited"),
    ("yuv420p10le", 1, 2, "bt709", "full"),
    ("yuv422p10le", 5, 1, "bt601", "limited"),
    ("yuv420p12le", 9, 2, "bt2020", "full"),
    ("yuv422p12le", 7, 1, "smpte240m", "limited"),
    ("yuv444p12le", 1, 1, "bt709", "limited"),
    ("yuv420p16le", 1, 1, "bt709", "limited"),
]
# x264 clips carry their tags in the stream: (pix_fmt, colorspace tag, range tag)
TAGGED = [("yuv420p", None, None), ("yuv420p", 1, 1), ("yuv420p", 9, 2), ("yuv420p10le", 1, 1),
          ("yuv444p", 1, 2), ("yuv422p10le", 5, 1)]


def _tensor(plane: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(plane.astype(np.int32))[None]


def _ffmpeg_rgb(frame, fmt: str) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(frame.to_ndarray(format=fmt)))
    return t.permute(2, 0, 1) if t.shape[-1] == 3 else t


def _frame(planes: list[np.ndarray], pix_fmt: str):
    """A PyAV frame holding ``planes`` (its chroma siting unspecified: FFmpeg's swscale then centres it)."""
    import av

    height, width = planes[0].shape
    frame = av.VideoFrame(width, height, pix_fmt)
    for dst, src in zip(frame.planes, planes):
        padded = np.zeros((dst.height, dst.line_size // src.dtype.itemsize), dtype=src.dtype.newbyteorder("<"))
        padded[:, :src.shape[1]] = src
        dst.update(padded.tobytes())
    return frame


@pytest.mark.parametrize("pix_fmt,colorspace,color_range,matrix,rng", FRAMES)
def test_float_rgb_matches_ffmpeg(pix_fmt, colorspace, color_range, matrix, rng):
    planes = photo_planes(1, pix_fmt)[0]
    frame = _frame(planes, pix_fmt)
    frame.colorspace, frame.color_range = colorspace, color_range
    bit_depth = 8 if planes[0].dtype == np.uint8 else int(pix_fmt[7:9])
    ours = rgb_float(*map(_tensor, planes), bit_depth, Colour(matrix=matrix, range=rng, siting="center"))[0]
    theirs = _ffmpeg_rgb(frame, "gbrpf32le").float().clamp(0, 1)
    assert float((ours - theirs).abs().max()) * 255 <= 1.0


@pytest.mark.parametrize("pix_fmt,colorspace,color_range", TAGGED)
def test_stream_tags_give_ffmpegs_conversion(tmp_path, pix_fmt, colorspace, color_range):
    if not encoder_available("libx264"):
        pytest.skip("PyAV's FFmpeg has no libx264 encoder")
    import av

    clip = encode_planes(tmp_path / "c.mkv", "libx264", pix_fmt, photo_planes(1, pix_fmt), options={"qp": "0"},
                         colorspace=colorspace, color_range=color_range)
    reader = open_compressed(clip)
    assert reader.info.colour.matrix == {None: "bt601", 1: "bt709", 5: "bt601", 9: "bt2020"}[colorspace]
    assert reader.info.colour.range == ("full" if color_range == 2 else "limited")
    assert reader.info.colour.siting == "left"  # FFmpeg's H.264 decoder's
    frame = next(reader.frames())
    ours = rgb_float(_tensor(frame.y), _tensor(frame.u), _tensor(frame.v), reader.fmt.bit_depth,
                     reader.info.colour)[0]
    with av.open(str(clip)) as container:
        theirs = _ffmpeg_rgb(next(container.decode(video=0)), "gbrpf32le").float().clamp(0, 1)
    assert float((ours - theirs).abs().max()) * 255 <= 1.0


@pytest.mark.parametrize("codec,suffix,siting", [("libvpx-vp9", ".webm", "center"), ("libsvtav1", ".mkv", "center"),
                                                 ("mpeg4", ".avi", "left")])
def test_decoder_default_siting_is_ffmpegs(tmp_path, codec, suffix, siting):
    if not encoder_available(codec):
        pytest.skip(f"PyAV's FFmpeg has no {codec} encoder")
    import av

    clip = encode_rgb(tmp_path / f"c{suffix}", codec, "yuv420p", photo_frames(1))
    reader = open_compressed(clip)
    assert reader.info.colour.siting == siting
    frame = next(reader.frames())
    ours = rgb_float(_tensor(frame.y), _tensor(frame.u), _tensor(frame.v), 8, reader.info.colour)[0]
    with av.open(str(clip)) as container:
        theirs = _ffmpeg_rgb(next(container.decode(video=0)), "gbrpf32le").float().clamp(0, 1)
    assert float((ours - theirs).abs().max()) * 255 <= 1.0


def test_uint8_nearest_matches_ffmpeg_rgb24(tmp_path):
    clip = encode_planes(tmp_path / "c.mkv", "ffv1", "yuv420p", photo_planes(1, "yuv420p"))
    reader = open_compressed(clip)
    frame = next(reader.frames())
    colour = Colour(upsampling="nearest")
    ours = rgb_uint8(_tensor(frame.y), _tensor(frame.u), _tensor(frame.v), 8, colour)[0].int()
    import av

    with av.open(str(clip)) as container:
        theirs = _ffmpeg_rgb(next(container.decode(video=0)), "rgb24").int()
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

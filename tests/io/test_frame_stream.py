"""Positioned plane reads (the GPU streaming path's reader) against the sequential reader, and the streamed path."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from test_video import random_planes, write_raw, write_y4m

from fusedsim.io.frame_stream import (
    PLANES,
    plane_groups,
    plane_layout,
    read_planes,
    row_bytes,
    split_planes,
    stream_pair_to_device,
)
from fusedsim.io.video import VideoFormat, open_video


def _read_with_offsets(reader, planes):
    fmt = reader.fmt
    layout = plane_layout(fmt, planes)
    n = reader.frame_count
    rows = np.zeros((n, row_bytes(layout, fmt.bytes_per_sample)), dtype=np.uint8)
    fd = os.open(reader.path, os.O_RDONLY)
    try:
        groups = plane_groups(layout, fmt.bytes_per_sample)
        read_planes(fd, reader.frame_offsets(), groups, rows, 0, 1, n, str(reader.path))  # frames 1..n-1
        read_planes(fd, reader.frame_offsets(), groups, rows, 0, 0, 1, str(reader.path))  # then frame 0
    finally:
        os.close(fd)
    return {PLANES[i]: v for i, v in split_planes(rows, layout, fmt.bytes_per_sample, fmt.dtype).items()}


@pytest.mark.parametrize("pix_fmt", ["yuv420p", "yuv422p10le", "yuv444p12le"])
@pytest.mark.parametrize("planes", [("y",), ("u", "v"), ("y", "v"), ("y", "u", "v")])
def test_positioned_reads_equal_the_sequential_reader(tmp_path, pix_fmt, planes):
    fmt = VideoFormat.from_pix_fmt(13, 7, pix_fmt)
    clip = random_planes(fmt, 4, seed=3)
    # FRAME lines with parameters of different lengths: offsets come from the walk, not from arithmetic
    write_y4m(tmp_path / "c.y4m", fmt, clip, frame_header=b"FRAME\n")
    with open(tmp_path / "c.y4m", "r+b") as f:
        data = f.read()
    data = data.replace(b"FRAME\n", b"FRAME Ixyz\n", 1)
    (tmp_path / "c.y4m").write_bytes(data)
    write_raw(tmp_path / "c.yuv", clip)
    for path, kwargs in ((tmp_path / "c.y4m", {}), (tmp_path / "c.yuv", dict(width=13, height=7, pix_fmt=pix_fmt))):
        with open_video(path, **kwargs) as reader:
            got = _read_with_offsets(reader, planes)
            expected = reader.read_all()
        assert set(got) == set(planes)
        for name in planes:
            np.testing.assert_array_equal(got[name], getattr(expected, name), err_msg=f"{path.name} {name}")


def test_frame_offsets_need_a_regular_file(tmp_path):
    fmt = VideoFormat.from_pix_fmt(4, 4, "yuv420p")
    write_y4m(tmp_path / "c.y4m", fmt, random_planes(fmt, 1, seed=0))
    with open(tmp_path / "c.y4m", "rb") as f, pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.stdin", type("S", (), {"buffer": f})())
        with open_video("-") as reader, pytest.raises(ValueError, match="pipe has no frame offsets"):
            reader.frame_offsets()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("pix_fmt, batch", [("yuv420p", 3), ("yuv420p10le", 2), ("yuv444p", 7)])
def test_streamed_batches_equal_the_files(tmp_path, pix_fmt, batch):
    fmt = VideoFormat.from_pix_fmt(37, 19, pix_fmt)
    ref_planes, dist_planes = random_planes(fmt, 7, seed=1), random_planes(fmt, 7, seed=2)
    write_y4m(tmp_path / "r.y4m", fmt, ref_planes)
    write_y4m(tmp_path / "d.y4m", fmt, dist_planes)
    with open_video(tmp_path / "r.y4m") as ref, open_video(tmp_path / "d.y4m") as dist:
        seen = 0
        for frames in stream_pair_to_device(ref, dist, ("y", "v"), device=torch.device("cuda"), batch_frames=batch,
                                            frames=6, threads=3):
            assert frames.first == seen and frames.ref[1] is None and frames.dist[1] is None
            for i in (0, 2):
                for got, planes in ((frames.ref[i], ref_planes), (frames.dist[i], dist_planes)):
                    want = planes[i][frames.first:frames.first + frames.n]
                    np.testing.assert_array_equal(got.cpu().numpy().astype(want.dtype), want)
            seen += frames.n
        assert seen == 6

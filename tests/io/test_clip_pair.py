"""Clip pairs: FFVship's and libvmaf's frame selection, sizes, frame rates, crops and scaling, Y4M and compressed
clips side by side."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from video_clips import encode_planes, photo_planes, write_y4m

from fusedsim.io.frame_selection import plan_frames
from fusedsim.io.video import open_pair


def test_ffvship_documented_examples():
    # FFVship's doc (Line-fr/Vship doc/FFVship.md, "encoded-offset"): 5-frame clips, --start 0 --end 5
    plan = plan_frames(5, 5, start=0, end=5, encoded_offset=1)
    assert plan.ref_indices == [0, 1, 2, 3] and plan.dist_indices == [1, 2, 3, 4]
    plan = plan_frames(5, 5, start=0, end=5, encoded_offset=-1)
    assert plan.ref_indices == [1, 2, 3, 4] and plan.dist_indices == [0, 1, 2, 3]


def test_start_end_every_frames_and_skips():
    assert plan_frames(10, 10, start=2, end=9, every=3).pairs == ((2, 2), (5, 5), (8, 8))
    assert plan_frames(10, 10, every=4, frames=2).pairs == ((0, 0), (4, 4))
    # libvmaf's skips renumber the clips first; the offset applies after them
    assert plan_frames(10, 12, frame_skip_dist=2, frames=3).pairs == ((0, 2), (1, 3), (2, 4))
    assert plan_frames(10, 10, frame_skip_ref=1, encoded_offset=1, frames=2).pairs == ((1, 1), (2, 2))


def test_unpartnered_frames_are_reported():
    plan = plan_frames(10, 8)
    assert len(plan.pairs) == 8
    assert plan.notes == ("the last 2 frame(s) of the reference clip have no partner and are not compared",)
    assert plan_frames(10, 8, end=8).notes == ()


@pytest.mark.parametrize("kwargs,match", [
    ({"every": 0}, "every must be an integer >= 1"),
    ({"start": -1}, "start must be an integer >= 0"),
    ({"frames": 20}, "frames 20: only 10 frame pairs"),
    ({"encoded_offset": 10}, "no frames to compare"),
    ({"frame_skip_ref": 10}, "frame_skip_ref 10 skips every frame"),
])
def test_bad_selection(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plan_frames(10, 10, **kwargs)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    planes = photo_planes(6, "yuv420p")
    return {
        "planes": planes,
        "y4m": write_y4m(folder / "ref.y4m", planes, 8),
        "ffv1": encode_planes(folder / "ref.mkv", "ffv1", "yuv420p", planes),
        "fps30": encode_planes(folder / "fps30.mkv", "ffv1", "yuv420p", planes, rate=30),
        "small": encode_planes(folder / "small.mkv", "ffv1", "yuv420p", photo_planes(6, "yuv420p", 64, 48)),
    }


def test_compressed_against_y4m_aligned(clips):
    with open_pair(clips["y4m"], clips["ffv1"], device="cpu", encoded_offset=2, every=2) as pair:
        assert pair.ref.kind == "y4m" and pair.dist.kind == "compressed" and pair.dist.decoder == "cpu"
        batches = list(pair.batches(2))
    assert [b.ref_index for b in batches] == [[0, 2]] and [b.dist_index for b in batches] == [[2, 4]]
    batch = batches[0]
    for k, (r, d) in enumerate(zip(batch.ref_index, batch.dist_index)):
        np.testing.assert_array_equal(batch.ref.y[k].numpy(), clips["planes"][r][0])
        np.testing.assert_array_equal(batch.dist.u[k].numpy(), clips["planes"][d][1])
    assert batch.rgb("ref", "uint8").shape == (2, 3, 96, 128)


def test_luma_only_and_crop(clips):
    with open_pair(clips["ffv1"], clips["ffv1"], device="cpu", planes=("y",), crop=(2, 4, 6, 8), frames=1) as pair:
        batch = next(iter(pair))
    assert batch.ref.u is None and batch.ref.y.shape == (1, 84, 120)
    np.testing.assert_array_equal(batch.ref.y[0].numpy(), clips["planes"][0][0][4:-8, 2:-6])
    with pytest.raises(ValueError, match="crop 1,0,0,0: yuv420p needs even amounts"):
        open_pair(clips["ffv1"], clips["ffv1"], device="cpu", crop=(1, 0, 0, 0))


def test_sizes_and_frame_rates_refused_with_reason(clips):
    with pytest.raises(ValueError, match=r"is 128x96 but distorted .*small\.mkv is 64x48 .*scale="):
        open_pair(clips["ffv1"], clips["small"], device="cpu")
    with pytest.raises(ValueError, match=r"25 frames/s but distorted .*fps30\.mkv at 30.*ignore_fps=True"):
        open_pair(clips["ffv1"], clips["fps30"], device="cpu")
    with open_pair(clips["ffv1"], clips["fps30"], device="cpu", ignore_fps=True, frames=1) as pair:
        assert len(pair) == 1


def test_scale_resizes_the_distorted_clip_only(clips):
    with open_pair(clips["ffv1"], clips["small"], device="cpu", scale="bilinear", frames=1) as pair:
        batch = next(iter(pair))
    assert batch.dist.y.shape == (1, 96, 128) and batch.dist.u.shape == (1, 48, 64)
    assert batch.dist.y.dtype == torch.uint8
    np.testing.assert_array_equal(batch.ref.y[0].numpy(), clips["planes"][0][0])
    small = torch.from_numpy(photo_planes(1, "yuv420p", 64, 48)[0][0]).float()[None, None]
    want = torch.nn.functional.interpolate(small, size=(96, 128), mode="bilinear", align_corners=False)
    assert torch.equal(batch.dist.y[0], torch.floor(want[0, 0] + 0.5).to(torch.uint8))


def test_bad_options(clips):
    with pytest.raises(ValueError, match="decoder must be one of auto, cpu, nvdec"):
        open_pair(clips["ffv1"], clips["ffv1"], decoder="gpu")
    with pytest.raises(ValueError, match="scale must be None or one of bicubic, bilinear"):
        open_pair(clips["ffv1"], clips["ffv1"], scale="lanczos")
    with pytest.raises(ValueError, match="decoder='nvdec'"):
        open_pair(clips["ffv1"], clips["ffv1"], device="cpu", decoder="nvdec")


class _GpuLike:
    """A device that takes the GPU path's staging ring (the copies are faked: no CUDA here)."""

    type = "cuda"


def _staged_on_host(monkeypatch, give_back: bool):
    """The GPU path's staging (rings of ordinary memory), its uploads handing slots back only if ``give_back``."""
    import fusedsim.io.clip_pair as clip_pair
    from fusedsim.io.staged_batches import StagingRing

    rings = []

    def ring(slots):
        rings.append(StagingRing(slots, pin=False))
        return rings[-1]

    def upload(batch, device, ring):
        planes = tuple(None if p is None else p.clone() for p in batch.planes)
        if give_back and batch.slot >= 0:
            ring.give_back(batch.slot, None)
        return planes

    monkeypatch.setattr(clip_pair, "StagingRing", ring)
    monkeypatch.setattr(clip_pair, "upload", upload)
    return rings


def test_staged_path_yields_the_clips_frames(clips, monkeypatch):
    """The GPU path's batches (each clip stacked on its decoding thread into a ring of slots) hold the frames the
    CPU path reads, in order, with Y4M on one side and a compressed clip on the other."""
    _staged_on_host(monkeypatch, give_back=True)
    with open_pair(clips["y4m"], clips["ffv1"], device="cpu") as pair:
        pair.device = _GpuLike()
        batches = list(pair.batches(4))
    assert [b.ref_index for b in batches] == [[0, 1, 2, 3], [4, 5]]
    for batch in batches:
        for k, (r, d) in enumerate(zip(batch.ref_index, batch.dist_index)):
            np.testing.assert_array_equal(batch.ref.y[k].numpy(), clips["planes"][r][0])
            np.testing.assert_array_equal(batch.dist.v[k].numpy(), clips["planes"][d][2])


def test_staged_path_keeps_10_bit_samples(tmp_path, monkeypatch):
    _staged_on_host(monkeypatch, give_back=True)
    planes = photo_planes(3, "yuv420p10le")
    clip = encode_planes(tmp_path / "ten.mkv", "ffv1", "yuv420p10le", planes)
    with open_pair(clip, write_y4m(tmp_path / "ten.y4m", planes, 10), device="cpu") as pair:
        pair.device = _GpuLike()
        (batch,) = list(pair.batches(3))
    assert batch.ref.y.dtype == torch.uint16 and batch.ref.bit_depth == 10
    for k in range(3):
        np.testing.assert_array_equal(batch.ref.y[k].numpy(), planes[k][0])
        np.testing.assert_array_equal(batch.dist.u[k].numpy(), planes[k][1])


def test_stopping_early_releases_a_decoder_waiting_for_a_slot(clips, monkeypatch):
    """A consumer that stops while a decoding thread waits for a slot (none handed back) ends at once: closing the
    batches closes the rings, the waiting thread stops, nothing hangs."""
    import threading
    import time

    rings = _staged_on_host(monkeypatch, give_back=False)
    with open_pair(clips["ffv1"], clips["ffv1"], device="cpu") as pair:
        pair.device = _GpuLike()
        batches = pair.batches(1)  # 6 batches of one frame, 4 slots a clip: the decoders run out of slots
        next(batches)
        time.sleep(0.3)
        start = time.perf_counter()
        batches.close()
        assert time.perf_counter() - start < 5
    assert rings and all(r._closed for r in rings)
    assert not [t for t in threading.enumerate() if t.name == "fusedsim-decode"]

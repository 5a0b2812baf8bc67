"""ColorVideoVDP on video against pycvvdp 0.5.7: the JODs of ``cvvdp_video_fixtures.json`` (made by
``make_cvvdp_video_fixtures.py``: pycvvdp's ``predict(dist, ref, dim_order="BFCHW", frames_per_second=fps)`` on the CPU)
on synthetic clips and on crops of the shared VMAF clips (refdata ``vmaf-score/clips``), for standard_4k and
standard_fhd at 30 and 60 fps; the stream, the iterator and the block forms against the whole clip; the heat-map
video; one-frame clips; bad input; the GPU path against the CPU."""

from __future__ import annotations

import pytest
import torch

import fusedsim
from fusedsim.core.backend import use_backend
from fusedsim.families.cvvdp.video_twin import cvvdp_temporal_filters, cvvdp_temporal_length

from cvvdp_video_clips import load_fixtures, make_clip, sha256

# The goal. The CPU twin follows pycvvdp's float32 arithmetic step by step: |ΔJOD| <= 4.8e-7 on every
# fixture (most are equal); the bound leaves room for other convolution/BLAS back-ends' summation order.
JOD_TOL = 1e-4
FIXTURES = load_fixtures()["entries"]
CLIPS: dict = {}


def _clip(entry: dict, request) -> tuple[torch.Tensor, torch.Tensor]:
    key = (entry["clip"], entry["frames"], tuple(entry.get("size", entry.get("crop"))))
    if key not in CLIPS:
        refdata = request.getfixturevalue("refdata") if entry["clip"].startswith("vmaf:") else None
        CLIPS[key] = make_clip(entry, refdata)
    ref, dist = CLIPS[key]
    assert sha256(ref, dist) == entry["sha256"], "the clip is not the one the fixture was made from"
    return ref, dist


def test_fixtures_cover_the_goal():
    """Both display models, two frame rates, synthetic and VMAF clips; values named with their source."""
    doc = load_fixtures()
    assert "pycvvdp" in doc["source"] and "0.5.7" in doc["source"] and "predict" in doc["call"]
    assert {e["display"] for e in FIXTURES} == {"standard_4k", "standard_fhd"}
    assert {e["fps"] for e in FIXTURES} == {30, 60}
    assert {e["clip"].split(":")[0] for e in FIXTURES} == {"synthetic", "vmaf"}


@pytest.mark.parametrize("entry", FIXTURES, ids=[f"{e['clip']}-{e['display']}-{e['fps']}" for e in FIXTURES])
def test_clip_matches_pycvvdp(entry, request):
    ref, dist = _clip(entry, request)
    got = fusedsim.cvvdp(ref, dist, fps=entry["fps"], display=entry["display"])
    assert got.shape == (1,)
    assert abs(got.item() - entry["jod"]) <= JOD_TOL, (got.item(), entry["jod"])


def _synthetic(kind="noise"):
    entry = next(e for e in FIXTURES if e["clip"] == f"synthetic:{kind}" and e["display"] == "standard_4k"
                 and e["fps"] == 30)
    ref, dist = make_clip(entry, None)
    return ref, dist, entry["jod"]


def test_temporal_filters():
    """250 ms of taps; the sustained filters pass DC (sum 1), the transient one blocks it."""
    assert [cvvdp_temporal_length(f) for f in (24, 30, 60, 120)] == [7, 9, 17, 31]
    f = cvvdp_temporal_filters(60).double()
    torch.testing.assert_close(f[:3].sum(-1), torch.ones(3, dtype=torch.float64), atol=1e-6, rtol=0)
    assert abs(f[3].sum().item()) < 1e-5 and f.shape == (4, 17)


def test_blocks_iterators_and_stream_equal_the_whole_clip():
    ref, dist, expected = _synthetic()
    whole = fusedsim.cvvdp(ref, dist, fps=30)
    assert abs(whole.item() - expected) <= JOD_TOL
    blocks = fusedsim.cvvdp(ref, dist, fps=30, frames_per_block=3)
    frames = fusedsim.cvvdp(iter(ref[0]), iter(dist[0]), fps=30)
    chunks = fusedsim.cvvdp(list(ref[0].split(4)), list(dist[0].split(4)), fps=30)
    for got in (blocks, frames, chunks):
        torch.testing.assert_close(got, whole, atol=2e-6, rtol=0)  # float32 sums of other batch sizes


def test_batch_of_clips_equals_each_clip():
    ref_a, dist_a, jod_a = _synthetic("noise")
    ref_b, dist_b, jod_b = _synthetic("flicker")
    got = fusedsim.cvvdp(torch.cat([ref_a, ref_b]), torch.cat([dist_a, dist_b]), fps=30)
    torch.testing.assert_close(got, torch.tensor([jod_a, jod_b]), atol=JOD_TOL, rtol=0)


def test_score_clip_entry_point():
    from fusedsim.families.cvvdp.video import score_clip

    ref, dist, expected = _synthetic("judder")
    assert abs(score_clip(iter(ref[0]), iter(dist[0]), fps=30) - expected) <= JOD_TOL


def test_heatmap_video_and_identity():
    ref, dist, _ = _synthetic()
    out = fusedsim.cvvdp(ref, dist, fps=30, return_map=True)
    assert out.diff_map.shape == (1, ref.shape[1], 1, *ref.shape[-2:])
    assert 0 < out.diff_map.mean() < 1 and out.jod.shape == (1,)
    same = fusedsim.cvvdp(ref, ref, fps=30, return_map=True)
    assert same.jod.item() == 10.0 and same.diff_map.abs().max().item() == 0.0


def test_one_frame_clip_is_a_still_image():
    ref, dist, _ = _synthetic()
    image = fusedsim.cvvdp(ref[:, 0], dist[:, 0])
    torch.testing.assert_close(fusedsim.cvvdp(ref[:, :1], dist[:, :1], fps=30), image, atol=0, rtol=0)
    torch.testing.assert_close(fusedsim.cvvdp(iter(ref[0, :1]), iter(dist[0, :1]), fps=30), image, atol=0, rtol=0)


def test_bad_video_input_is_refused():
    ref, dist, _ = _synthetic()
    with pytest.raises(ValueError, match="fps"):
        fusedsim.cvvdp(ref, dist)
    with pytest.raises(ValueError, match="fps is for video"):
        fusedsim.cvvdp(ref[0], dist[0], fps=30)
    with pytest.raises(ValueError, match="fps must be"):
        fusedsim.cvvdp(ref, dist, fps=0)
    with pytest.raises(ValueError, match="different numbers of frames"):
        fusedsim.cvvdp(iter(ref[0]), iter(dist[0, :-1]), fps=30)
    with pytest.raises(ValueError, match="same shape"):
        fusedsim.cvvdp(ref, dist[:, :, :, :-1], fps=30)
    with pytest.raises(ValueError, match="every push"):
        fusedsim.cvvdp([ref[0, :2], ref[0, 2:4, :, :-2]], [dist[0, :2], dist[0, 2:4, :, :-2]], fps=30)
    with pytest.raises(ValueError, match="frames_per_block"):
        fusedsim.cvvdp(ref, dist, fps=30, frames_per_block=0)
    with pytest.raises(TypeError, match="both be tensors"):
        fusedsim.cvvdp(ref, list(dist[0]), fps=30)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_path_equals_the_cpu_and_pycvvdp(request):
    """Triton display model and temporal filters, PyTorch bands on the GPU: float32 rounding from the CPU twin."""
    for entry in FIXTURES:
        if entry["clip"].startswith("vmaf:") or entry["fps"] != 60:
            continue
        ref, dist = _clip(entry, request)
        got = fusedsim.cvvdp(ref.cuda(), dist.cuda(), fps=entry["fps"], display=entry["display"])
        assert got.device.type == "cuda"
        assert abs(got.item() - entry["jod"]) <= JOD_TOL, (entry, got.item())
        maps_gpu = fusedsim.cvvdp(ref.cuda(), dist.cuda(), fps=60, return_map=True).diff_map.cpu()
        maps_cpu = fusedsim.cvvdp(ref, dist, fps=60, return_map=True).diff_map
        torch.testing.assert_close(maps_gpu, maps_cpu, atol=2e-5, rtol=0)


def test_stream_pushes_blocks_and_returns_their_maps():
    ref, dist, expected = _synthetic("flicker")
    stream = fusedsim.cvvdp_stream(fps=30, return_map=True)
    assert stream.push(ref[0, 0], dist[0, 0]) is None  # one frame could still be an image
    maps = stream.push(ref[0, 1:4], dist[0, 1:4])
    assert maps.shape == (1, 4, 1, *ref.shape[-2:])
    for t in range(4, ref.shape[1]):
        assert stream.push(ref[:, t:t + 1], dist[:, t:t + 1]).shape == (1, 1, 1, *ref.shape[-2:])
    assert stream.per_frame.shape[:3] == (1, ref.shape[1], 4)
    assert abs(stream.finish().item() - expected) <= JOD_TOL
    with pytest.raises(ValueError, match="fps"):
        fusedsim.cvvdp_stream(fps=-1)


def test_one_reference_scores_several_distorted_clips():
    """The video cached reference: ref (1, T, ...) against dist (K, T, ...) is the batch with the reference
    repeated, value for value (the CPU twin repeats it), and K separate calls up to float32 summation order."""
    ref, dist_a, _ = _synthetic("noise")
    _, dist_b, _ = _synthetic("flicker")
    dists = torch.cat([dist_a, dist_b])
    shared = fusedsim.cvvdp(ref, dists, fps=30)
    assert torch.equal(shared, fusedsim.cvvdp(ref.repeat(2, 1, 1, 1, 1), dists, fps=30))
    separate = torch.cat([fusedsim.cvvdp(ref, d, fps=30) for d in (dist_a, dist_b)])
    torch.testing.assert_close(shared, separate, atol=1e-6, rtol=0)  # float32 sums over a batch of other size
    maps = fusedsim.cvvdp(ref, dists, fps=30, return_map=True).diff_map
    assert maps.shape == (2, *dist_b.shape[1:2], 1, *dist_b.shape[-2:])
    torch.testing.assert_close(maps[1:], fusedsim.cvvdp(ref, dist_b, fps=30, return_map=True).diff_map, atol=1e-6,
                               rtol=0)
    one_frame = fusedsim.cvvdp(ref[:, :1], dists[:, :1], fps=30)  # a clip of one frame is a still image
    torch.testing.assert_close(one_frame, fusedsim.cvvdp(ref[0, :1].expand(2, -1, -1, -1), dists[:, 0]), atol=0,
                               rtol=0)


def test_shared_reference_through_the_fused_kernels_equals_the_repeated_reference(kernel_device):
    """The GPU path's shared reference (its levels made once, each clip's bands scored against them), on small
    frames (the interpreter without a GPU): bit-identical to the same kernels given the reference repeated."""
    import fusedsim.families.cvvdp.video as video

    gen = torch.Generator().manual_seed(3)
    ref = torch.rand(1, 4, 14, 12, generator=gen) * 50 + 1  # small: the interpreter runs each program in Python
    test = torch.cat([ref + torch.randn(1, 4, 14, 12, generator=gen), ref * 1.1])
    ref, test = ref.to(kernel_device), test.to(kernel_device)
    with use_backend("triton"):
        shared, shared_map = video._frame_quality_fused(test, ref, 30.0, return_map=True)
        repeated, repeated_map = video._frame_quality_fused(test, ref.repeat(2, 1, 1, 1), 30.0,
                                                                return_map=True)
    assert torch.equal(shared, repeated) and torch.equal(shared_map, repeated_map)


def test_mismatched_reference_clips_are_refused():
    ref, dist, _ = _synthetic("noise")
    with pytest.raises(ValueError, match="same shape"):
        fusedsim.cvvdp(torch.cat([ref, ref]), torch.cat([dist, dist, dist]), fps=30)

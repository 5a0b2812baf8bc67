"""libvmaf 3.2.0's integer motion (``fusedsim.motion``): the twin, the numba kernel, the Triton kernel and the stream.

Expected values come from ``refdata/vmaf-score/reference/<pair>.json`` (libvmaf's exact doubles), named at each
assertion as ``<pair> <run> <column>``:

- run ``default`` (vmaf_v0.6.1 options): ``VMAF_integer_feature_motion_sad_score``, ``integer_motion2``,
  ``integer_motion3``; run ``debug``: ``integer_motion``;
- ``vmaf_v1.runs``: ``v1_3d0h`` (``motion_max_val=18``: ``*_mmxv_18``), ``v1feat_modelopts_debug`` (the same with
  ``debug``), ``v1_hfr_3d0h`` (five-frame window and moving average: ``*_mffw_mmxv_18_mma``), ``v1feat_motion``.

The Triton kernel is compared with the twin (``==``) on crops and random frames, through the interpreter when there
is no GPU. The stream is compared with the whole clip for several batch sizes, and the one- to three-frame clips with
the rules of libvmaf's ``flush`` (``integer_motion.c``).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch

from fusedsim.families.motion.api import integer_motion
from fusedsim.families.motion.cpu import motion_sad_numba
from fusedsim.families.motion.kernel import integer_motion_sad_fwd, motion_sad_fwd
from fusedsim.families.motion.ops import integer_motion_sad
from fusedsim.families.motion.stream import MotionStream, concat_columns
from fusedsim.families.motion.twin import (
    MotionOptions,
    frame_score,
    integer_motion_sad_ref,
    motion_columns_ref,
    motion_sad_ref,
)

from score_fixtures import load_score_pairs

PAIRS = ["f480x270_10b_mixed", "k256x144_12b_mixed", "prev_a576x324_8b_blur", "prev_a576x324_8b_jpeg",
         "prev_a576x324_8b_noise", "prev_a576x324_8b_shift", "prev_c333x217_8b_jpeg", "prev_c333x217_8b_mixed",
         "prev_d504x400_10b_blurnoise", "prev_d504x400_10b_jpeg8", "prev_e333x217_10b_mixed", "r576x324_8b_mixed"]
V1 = MotionOptions(max_val=18.0)
HFR = MotionOptions(max_val=18.0, five_frame_window=True, moving_average=True)
# (run, where, options, debug): the fixture runs that print motion columns
RUNS = [("default", "runs", MotionOptions(), False), ("debug", "runs", MotionOptions(), True),
        ("v1feat_motion", "vmaf_v1", MotionOptions(), False), ("v1_3d0h", "vmaf_v1", V1, False),
        ("v1feat_modelopts_debug", "vmaf_v1", V1, True), ("v1_hfr_3d0h", "vmaf_v1", HFR, False)]


@pytest.fixture(scope="module")
def pairs(refdata):
    found = {p.name: p for p in load_score_pairs(refdata)}
    assert sorted(found) == PAIRS
    return found


def _libvmaf(pair, where: str, run: str, name: str) -> list[float]:
    """Column ``name`` of ``run``, resolving the fixture's references to identical columns of the main run."""
    if where == "runs":
        return pair.metric(run, name)
    runs = pair.record["vmaf_v1"]["runs"]
    r = runs[run]
    if name in r["metrics"]:
        return r["metrics"][name]
    if name in r.get("columns_identical_to_v1_3d0h", ()):
        return runs["v1_3d0h"]["metrics"][name]
    return runs["v1_3d0h"]["metrics"][r["columns_equal_to_v1_3d0h_column"][name]]


def _runs_of(pair):
    v1 = pair.record["vmaf_v1"]["runs"]
    return [(run, where, opts, debug) for run, where, opts, debug in RUNS if where == "runs" or run in v1]


@functools.lru_cache(maxsize=None)
def _twin_raw(refdata: Path, name: str, lag: int) -> tuple[float, ...]:
    """The twin's pair scores of a fixture clip (frame i against frame i - lag), cached per reference clip."""
    pair = next(p for p in load_score_pairs(refdata) if p.name == name)
    ref = torch.from_numpy(pair.ref_y)
    return tuple(integer_motion_sad_ref(ref[:-lag], ref[lag:], pair.bit_depth).tolist())


def _same_reference(pairs, name):
    """The first pair with the same reference clip (motion reads only the reference)."""
    ref = pairs[name].record["reference"]
    return next(n for n in PAIRS if pairs[n].record["reference"] == ref)


def _check(got: dict, pair, run, where, opts, debug):
    names = opts.feature_names(debug)
    assert sorted(got) == sorted(names.values())
    for printed in names.values():
        if run == "debug" and printed != "integer_motion":
            continue  # the debug run's other columns are the default run's
        want = _libvmaf(pair, where, run, printed)
        got_col = got[printed]
        got_col = got_col.tolist() if isinstance(got_col, torch.Tensor) else list(got_col)
        assert got_col == want, f"{pair.name} {run} {printed}"


@pytest.mark.parametrize("name", PAIRS)
def test_twin_equals_libvmaf(pairs, refdata, name):
    pair = pairs[name]
    for run, where, opts, debug in _runs_of(pair):
        raw = (0.0,) * opts.lag + _twin_raw(refdata, _same_reference(pairs, name), opts.lag)
        sad = [frame_score(r, i, opts) for i, r in enumerate(raw)]
        cols = motion_columns_ref(sad, opts)
        if debug:
            cols["VMAF_integer_feature_motion_score"] = sad
        _check({opts.feature_names(debug)[k]: v for k, v in cols.items()}, pair, run, where, opts, debug)


@pytest.mark.parametrize("name", PAIRS)
def test_cpu_kernel_equals_libvmaf(pairs, name):
    pair = pairs[name]
    ref = torch.from_numpy(pair.ref_y)
    assert integer_motion_sad.backend_for(ref) == "cpu"  # the numba kernel, not the twin
    for run, where, opts, debug in _runs_of(pair):
        _check(integer_motion(ref, pair.bit_depth, options=opts, debug=debug), pair, run, where, opts, debug)


@pytest.mark.parametrize("name", ["r576x324_8b_mixed", "k256x144_12b_mixed", "prev_d504x400_10b_jpeg8"])
@pytest.mark.parametrize("batch", [1, 2, 5])
def test_stream_in_batches_equals_whole_clip(pairs, name, batch):
    pair = pairs[name]
    for opts in (MotionOptions(), HFR):
        whole = integer_motion(pair.ref_y, pair.bit_depth, options=opts, debug=True)
        stream = MotionStream(pair.bit_depth, options=opts, debug=True)
        chunks = []
        for s in range(0, pair.n, batch):
            chunks.append(stream.push(pair.ref_y[s:s + batch]))
            # frame i is finished once frame max(i + 1, lag) has arrived
            seen = min(pair.n, s + batch)
            assert stream.frames_done == (seen - 1 if seen > opts.lag else 0)
            assert stream._tail.shape[0] <= opts.lag and stream._sad.shape[0] <= opts.lag + batch + 1  # bounded
        chunks.append(stream.flush())
        assert stream.frames_done == pair.n
        got = concat_columns(chunks)
        for k in whole:
            assert torch.equal(got[k], whole[k]), (name, batch, opts, k)
    if name == "r576x324_8b_mixed":  # and against libvmaf (fixture r576x324_8b_mixed, run default)
        assert got[HFR.feature_names()["VMAF_integer_feature_motion2_score"]].tolist() == _libvmaf(
            pair, "vmaf_v1", "v1_hfr_3d0h", "integer_motion2_mffw_mmxv_18_mma")


def test_stream_keeps_a_copy_of_the_last_frame():
    frames = torch.randint(0, 256, (4, 9, 11), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    stream = MotionStream(8)
    stream.push(frames)
    assert stream._tail.shape == (1, 9, 11) and torch.equal(stream._tail[0], frames[-1])
    assert stream._tail.untyped_storage().data_ptr() != frames.untyped_storage().data_ptr()


def _clip(n, h, w, bits, seed):
    gen = torch.Generator().manual_seed(seed)
    top = (1 << bits) - 1
    base = torch.randint(0, top + 1, (1, h, w + 2 * n), generator=gen)
    frames = torch.cat([base[..., 2 * i:2 * i + w] for i in range(n)])  # a pan, plus noise
    return (frames + torch.randint(-3, 4, frames.shape, generator=gen) * (top // 255)).clamp(0, top)


def test_first_and_last_frame_rules():
    """libvmaf's ``flush`` (integer_motion.c; README 4.4): motion2 is 0 on frame 0 and the frame's own score on the
    last frame; motion3 of frame 0 is the clipped blend of frame 1's score, and 0 when there is no frame 1."""
    frames = _clip(3, 12, 17, 8, seed=2)
    s1, s2 = integer_motion_sad_ref(frames[:2], frames[1:], 8).tolist()
    assert s1 > 0 and s2 > 0 and s1 != s2
    one = integer_motion(frames[:1], 8, debug=True)
    assert {k: v.tolist() for k, v in one.items()} == {
        "VMAF_integer_feature_motion_sad_score": [0.0], "integer_motion2": [0.0], "integer_motion3": [0.0],
        "integer_motion": [0.0]}
    two = integer_motion(frames[:2], 8)
    assert two["VMAF_integer_feature_motion_sad_score"].tolist() == [0.0, s1]
    assert two["integer_motion2"].tolist() == [0.0, s1]
    assert two["integer_motion3"].tolist() == [s1, s1]
    three = integer_motion(frames, 8)
    assert three["integer_motion2"].tolist() == [0.0, min(s1, s2), s2]
    assert three["integer_motion3"].tolist() == [s1, min(s1, s2), s2]
    # five-frame window: frames 0 and 1 score 0; frame 2 (the last) its own score against frame 0
    s02 = integer_motion_sad_ref(frames[:1], frames[2:], 8).item()
    five = MotionOptions(five_frame_window=True, moving_average=True)
    hfr = {k.split("_mffw")[0]: v.tolist() for k, v in integer_motion(frames, 8, options=five).items()}
    assert hfr == {"VMAF_integer_feature_motion_sad_score": [0.0, 0.0, s02], "integer_motion2": [0.0, 0.0, s02],
                   "integer_motion3": [s02, s02, s02]}
    assert integer_motion(frames, 8, options=HFR)["integer_motion3_mffw_mmxv_18_mma"].tolist() == [
        min(s02, 18.0)] * 3
    hfr2 = integer_motion(frames[:2], 8, options=HFR)
    assert all(v.tolist() == [0.0, 0.0] for v in hfr2.values())
    # the stream's delay: nothing before frame 1, frame 0 with it, the last frame at flush
    stream = MotionStream(8)
    assert stream.push(frames[0])["integer_motion2"].numel() == 0
    assert stream.push(frames[1])["integer_motion3"].tolist() == [s1]
    assert stream.flush()["integer_motion2"].tolist() == [s1]
    assert stream.flush()["integer_motion2"].numel() == 0


def test_options_as_libvmaf_names_them():
    assert MotionOptions().suffix() == ""
    assert V1 == MotionOptions.from_libvmaf({"motion_max_val": 18.0}) and V1.suffix() == "_mmxv_18"
    # the options of the model file vmaf_v1.0.16_hfr_3d0h.json
    hfr = MotionOptions.from_libvmaf({"motion_max_val": 18.0, "motion_five_frame_window": True,
                                      "motion_moving_average": True})
    assert hfr == HFR and hfr.suffix() == "_mffw_mmxv_18_mma"
    assert MotionOptions.from_libvmaf({"mbf": 0.5, "force_0": True}).suffix() == "_mbf_0.5_force_0"


def test_blend_fps_weight_and_force_zero_follow_libvmaf_formulas():
    frames = _clip(6, 10, 13, 10, seed=4)
    raw = [0.0] + integer_motion_sad_ref(frames[:-1], frames[1:], 10).tolist()
    for opts in (MotionOptions(blend_factor=0.3, blend_offset=0.5, fps_weight=1.7, max_val=3.0),
                 MotionOptions(moving_average=True, fps_weight=0.2), MotionOptions(force_zero=True)):
        want = motion_columns_ref([frame_score(r, i, opts) for i, r in enumerate(raw)], opts)
        names = opts.feature_names()
        for batch in (1, 4):
            stream = MotionStream(10, options=opts)
            got = concat_columns([stream.push(frames[s:s + batch]) for s in range(0, 6, batch)] + [stream.flush()])
            assert {k: got[names[k]].tolist() for k in want} == want, (opts, batch)


def test_bit_depth_scaling_invariance(pairs):
    # libvmaf's v1_3d0h_10b runs read 8-bit clips as 10 bit (v << 2) and print the same motion (README 10.2)
    pair = pairs["prev_c333x217_8b_mixed"]
    eight = integer_motion(pair.ref_y, 8)
    ten = integer_motion(pair.ref_y.astype(np.uint16) << 2, 10)
    assert all(torch.equal(eight[k], ten[k]) for k in eight)


# ------------------------------------------------------------------------------------------------ kernels
def _crops(pairs):
    """Small crops of the fixture clips (odd offsets and sizes) at 8, 10 and 12 bit."""
    for name, (y, x, h, w) in [("r576x324_8b_mixed", (101, 203, 23, 37)), ("f480x270_10b_mixed", (7, 1, 19, 30)),
                               ("k256x144_12b_mixed", (60, 99, 21, 17))]:
        pair = pairs[name]
        yield name, pair.bit_depth, torch.from_numpy(pair.ref_y[:4, y:y + h, x:x + w].copy())


def test_kernel_equals_twin_on_fixture_crops(pairs, kernel_device):
    for name, bits, clip in _crops(pairs):
        want = integer_motion_sad_ref(clip[:-1], clip[1:], bits)
        got = integer_motion_sad_fwd(clip[:-1].to(kernel_device), clip[1:].to(kernel_device), bits).cpu()
        assert got.tolist() == want.tolist(), name
        assert motion_sad_numba(clip[:-1], clip[1:], bits).tolist() == motion_sad_ref(clip[:-1], clip[1:], bits).tolist()


@pytest.mark.parametrize("bits", [8, 10, 12, 16])
@pytest.mark.parametrize("shape", [(1, 3, 3), (2, 3, 7), (3, 5, 4), (2, 13, 19), (1, 40, 37)],
                         ids=lambda s: "x".join(map(str, s)))
def test_kernel_and_cpu_equal_twin_random(shape, bits, kernel_device):
    top = (1 << bits) - 1
    gen = torch.Generator().manual_seed(hash((shape, bits)) % 1000)
    cur = torch.randint(0, top + 1, shape, generator=gen)
    prev = torch.where(torch.rand(shape, generator=gen) < 0.5, top - cur, cur.roll(1, -1))  # large differences
    want = motion_sad_ref(prev, cur, bits)
    dtype = torch.uint8 if bits == 8 else torch.uint16
    p, c = prev.to(dtype), cur.to(dtype)
    assert motion_sad_fwd(p.to(kernel_device), c.to(kernel_device), bits).cpu().tolist() == want.tolist()
    for n_bands in (None, 1, 2):
        assert motion_sad_numba(p, c, bits, n_bands).tolist() == want.tolist(), n_bands


@pytest.mark.parametrize("bands, block_w, rows", [(8, 16, 4), (4, 32, 5), (16, 64, 1)])
def test_kernel_across_block_edges(bands, block_w, rows, kernel_device):
    # several column blocks and row bands per pair, bands of both pairs in one program (few programs: interpreter)
    clip = _clip(3, 21, 37, 10, seed=5)
    want = motion_sad_ref(clip[:-1], clip[1:], 10).tolist()
    got = motion_sad_fwd(clip[:-1].to(kernel_device), clip[1:].to(kernel_device), 10, bands=bands, block_w=block_w,
                         rows=rows)
    assert got.cpu().tolist() == want


def test_kernel_and_cpu_take_other_dtypes_and_strides(kernel_device):
    clip = _clip(3, 9, 14, 10, seed=6)
    want = motion_sad_ref(clip[:-1], clip[1:], 10).tolist()
    wide = torch.zeros(3, 9, 28, dtype=torch.int32)
    wide[..., ::2] = clip
    for prev, cur in [(clip[:-1].to(torch.int16), clip[1:].to(torch.int16)),
                      (wide[:-1, :, ::2], clip[1:].to(torch.int32)), (clip[:-1].to(torch.uint16), clip[1:])]:
        assert motion_sad_fwd(prev.to(kernel_device), cur.to(kernel_device), 10).cpu().tolist() == want
        assert motion_sad_numba(prev, cur, 10).tolist() == want


# ------------------------------------------------------------------------------------------------ errors
def test_bad_input_names_the_argument():
    frames = _clip(3, 8, 9, 8, seed=6).to(torch.uint8)
    with pytest.raises(ValueError, match="bit_depth"):
        MotionStream(9)
    with pytest.raises(TypeError, match="bit_depth"):
        integer_motion(frames, "8")
    with pytest.raises(TypeError, match="options"):
        MotionStream(8, options={"motion_max_val": 18.0})
    with pytest.raises(ValueError, match="max_val"):
        MotionOptions(max_val=-1.0)
    with pytest.raises(ValueError, match="unknown motion option"):
        MotionOptions.from_libvmaf({"motion_max": 18.0})
    stream = MotionStream(8)
    stream.push(frames)
    with pytest.raises(ValueError, match="frames must keep the size"):
        stream.push(frames[:, :, :8])
    with pytest.raises(TypeError, match="frames"):
        stream.push(frames.float())
    with pytest.raises(ValueError, match="frames holds the sample"):
        MotionStream(8).push(frames.to(torch.int16) + 200)
    with pytest.raises(ValueError, match="frames holds the sample"):
        integer_motion(frames.to(torch.int32) * 8, 10)
    with pytest.raises(ValueError, match="at least 3x3"):
        integer_motion(frames[:, :2], 8)
    stream.flush()
    with pytest.raises(RuntimeError, match="flushed"):
        stream.push(frames)

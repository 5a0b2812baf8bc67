"""cambi (libvmaf feature ``cambi``) against libvmaf 3.2.0's own per-frame values, with ``==`` on the doubles.

Expected values come from ``refdata/vmaf-score`` (README section 10.4; 12 pairs, 8/10/12 bit, even and odd sizes):
run ``extra`` and ``vmaf_v1`` run ``v1feat_cambi`` give ``cambi`` with default options; ``vmaf_v1`` run ``v1_3d0h``
gives ``cambi_hrs_1080_cmxv_17_vlt_0.06`` (the v1 model's options); ``v1_3d0h_10b`` (``..._encbd_8``) and
``v1_3d0h_10b_noenc`` the same options on 10-bit copies of the 8-bit pairs (``v << 2``), with and without
``enc_bitdepth=8``. Columns the fixture lists as equal to a ``v1_3d0h`` column are read from there. The numba
kernel is checked on every frame of every run, the PyTorch twin on full frames (one per pair and run: the one with
the largest banding), the Triton kernel on crops against the twin (through Triton's interpreter without a GPU) and
on every frame with a GPU.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fusedsim.core.backend import use_backend
from fusedsim.families.cambi.api import cambi
from fusedsim.families.cambi.settings import cambi_settings
from fusedsim.families.cambi.twin import cambi_scales_ref, quickselect_mean
from score_fixtures import load_score_pairs

PAIRS = ["f480x270_10b_mixed", "k256x144_12b_mixed", "prev_a576x324_8b_blur", "prev_a576x324_8b_jpeg",
         "prev_a576x324_8b_noise", "prev_a576x324_8b_shift", "prev_c333x217_8b_jpeg", "prev_c333x217_8b_mixed",
         "prev_d504x400_10b_blurnoise", "prev_d504x400_10b_jpeg8", "prev_e333x217_10b_mixed", "r576x324_8b_mixed"]
V1 = {"cambi_high_res_speedup": 1080, "cambi_vis_lum_threshold": 0.06, "cambi_max_val": 17.0}
V1_COLUMN = "cambi_hrs_1080_cmxv_17_vlt_0.06"


@pytest.fixture(scope="module")
def pairs(refdata):
    loaded = {p.name: p for p in load_score_pairs(refdata)}
    assert sorted(loaded) == PAIRS
    return loaded


def _v1_column(pair, run: str, name: str) -> list[float]:
    """A ``vmaf_v1`` run's column, or the ``v1_3d0h`` column the fixture lists as equal or identical to it."""
    v1 = pair.record["vmaf_v1"]["runs"]
    record = v1[run]
    if name in record["metrics"]:
        return record["metrics"][name]
    equal = record.get("columns_equal_to_v1_3d0h_column", {})
    if name in equal:
        return v1["v1_3d0h"]["metrics"][equal[name]]
    assert name in record.get("columns_identical_to_v1_3d0h", []), (pair.name, run, name)
    return v1["v1_3d0h"]["metrics"][name]


def _cases(pair) -> list[tuple[str, np.ndarray, int, dict, str, list[float]]]:
    """(run, distorted luma, bit depth, options, libvmaf's column name, its values) of every CAMBI run."""
    cases = [("extra", pair.dist_y, pair.bit_depth, {}, "cambi", pair.record["runs"]["extra"]["metrics"]["cambi"]),
             ("v1feat_cambi", pair.dist_y, pair.bit_depth, {}, "cambi", _v1_column(pair, "v1feat_cambi", "cambi"))]
    v1 = pair.record["vmaf_v1"]["runs"]
    if "v1_3d0h" in v1:
        cases.append(("v1_3d0h", pair.dist_y, pair.bit_depth, V1, V1_COLUMN, _v1_column(pair, "v1_3d0h", V1_COLUMN)))
    if "v1_3d0h_10b" in v1:
        ten = pair.dist_y.astype(np.uint16) << 2
        cases.append(("v1_3d0h_10b", ten, 10, {**V1, "enc_bitdepth": 8}, V1_COLUMN + "_encbd_8",
                      _v1_column(pair, "v1_3d0h_10b", V1_COLUMN + "_encbd_8")))
        cases.append(("v1_3d0h_10b_noenc", ten, 10, V1, V1_COLUMN, _v1_column(pair, "v1_3d0h_10b_noenc", V1_COLUMN)))
    return cases


def test_every_pair_has_its_cambi_runs(pairs):
    counts = {name: len(_cases(pair)) for name, pair in pairs.items()}
    assert counts["k256x144_12b_mixed"] == 2 and counts["r576x324_8b_mixed"] == 5
    assert sum(len(values) for pair in pairs.values() for *_, values in _cases(pair)) == 377


@pytest.mark.parametrize("pair_name", PAIRS)
def test_numba_kernel_equals_libvmaf(pairs, pair_name):
    """The public function on CPU tensors (the numba kernel), every frame of every run."""
    for run, frames, bits, options, column, expected in _cases(pairs[pair_name]):
        with use_backend("auto"):
            got = cambi(frames, bits, **options)
        assert list(got) == [column]
        assert got[column].dtype == torch.float64
        assert got[column].tolist() == expected, run


@pytest.mark.parametrize("pair_name", PAIRS)
def test_twin_equals_libvmaf(pairs, pair_name):
    """The PyTorch twin on full frames (its window walk is slow on the CPU): per pair one run, taking the pairs'
    runs in turn so that every kind of run is covered, on the frame libvmaf scores highest (the most banding)."""
    cases = _cases(pairs[pair_name])
    run, frames, bits, options, column, expected = cases[PAIRS.index(pair_name) % len(cases)]
    frame = int(np.argmax(expected))
    with use_backend("reference"):
        got = cambi(frames[frame], bits, **options)
    assert got[column].item() == expected[frame], (run, frame)


def _crop_scales(pair, frames, crop, bits, options, device):
    """The op's inputs for a crop of fixture frames under ``options``."""
    y = pair.dist_y[frames][(slice(None), *crop)]
    if bits != pair.bit_depth:
        y = y.astype(np.uint16) << (bits - pair.bit_depth)
    y = torch.from_numpy(np.ascontiguousarray(y).astype(np.int16 if bits > 8 else np.uint8))
    h, w = y.shape[-2:]
    settings, _ = cambi_settings(w, h, bits, **options)
    tvi = torch.tensor(settings.tvi, dtype=torch.int32)
    scalars = (bits, settings.anti_dither, settings.window, settings.vlt_luma, settings.mask_threshold,
               settings.topk, settings.high_res)
    return y, tvi, scalars


@pytest.mark.parametrize("pair_name,frames,crop,bits,options", [
    ("r576x324_8b_mixed", [6], (slice(150, 174), slice(0, 217)), 8, {}),
    ("r576x324_8b_mixed", [5], (slice(0, 20), slice(359, 576)), 10,
     {"enc_bitdepth": 8, "vis_lum_threshold": 0.06}),
    ("f480x270_10b_mixed", [6, 14], (slice(250, 270), slice(263, 480)), 10, {"max_log_contrast": 3}),
])
def test_triton_equals_twin_on_crops(pairs, pair_name, frames, crop, bits, options, kernel_device):
    """Crops of fixture frames (one side at libvmaf's 216 or more, odd sizes, touching the frame's edges)."""
    from fusedsim.families.cambi.kernel import cambi_scales_triton

    y, tvi, scalars = _crop_scales(pairs[pair_name], frames, crop, bits, options, kernel_device)
    twin = cambi_scales_ref(y, tvi, *scalars)
    assert twin.abs().sum() > 0  # the crop bands: the comparison is not of zeros
    got = cambi_scales_triton(y.to(kernel_device), tvi.to(kernel_device), *scalars)
    assert torch.equal(got.cpu(), twin)


@pytest.mark.parametrize("options", [{"window_size": 310}, {"window_size": 310, "max_log_contrast": 1,
                                                              "vis_lum_threshold": 0.06}])
def test_code_by_code_kernel_equals_twin_at_a_1080p_window(pairs, options, kernel_device):
    """The c-value kernel that counts windows code by code on the tensor cores (tiles of 32x32 centres at 1080p's
    window of 33): a fixture frame's left part (324x300, 8-bit) with ``window_size`` raised so that its window is
    33 too, 4 and 2 contrast steps; every scale's pooled value equals the twin's, which walks the window."""
    from fusedsim.families.cambi.kernel import cambi_scales_triton

    y, tvi, scalars = _crop_scales(pairs["r576x324_8b_mixed"], [6], (slice(0, 324), slice(0, 300)), 8, options,
                                   kernel_device)
    assert scalars[2] == 33  # the window
    twin = cambi_scales_ref(y, tvi, *scalars)
    assert (twin > 0).all()  # every scale bands: the comparison is not of zeros
    got = cambi_scales_triton(y.to(kernel_device), tvi.to(kernel_device), *scalars)
    assert torch.equal(got.cpu(), twin)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("pair_name", PAIRS)
def test_triton_equals_libvmaf_on_gpu(pairs, pair_name):
    for run, frames, bits, options, column, expected in _cases(pairs[pair_name]):
        host = frames if bits == 8 else frames.astype(np.int32)
        with use_backend("triton"):
            got = cambi(torch.from_numpy(host).to("cuda"), bits, **options)
        assert got[column].device.type == "cuda"
        assert got[column].cpu().tolist() == expected, run


def test_quickselect_replays_libvmafs_order():
    """Large enough, a double sum depends on its order: the replay sums in quickselect's order, not sorted."""
    values = np.array([1.0, 1.0, 2.0**53, 0.0], dtype=np.float32)
    k = 3
    # the pivot (values[3] = 0) leaves the order as it is: 1 + 1 + 2**53 is exact; summed largest first, the
    # two ones would each round away (2**53 + 1 is a tie, to even)
    expected = (2.0 + 2.0**53) / k
    assert quickselect_mean(values, k) == expected
    from fusedsim.families.cambi.cpu import quickselect_mean_numba

    assert quickselect_mean_numba(values.copy(), k) == expected


def test_full_reference_mode():
    """``full_ref``: the source's score and ``max(0, dist - source)``, unsuffixed as libvmaf appends them."""
    from fusedsim.families.cambi.ops import example_frames

    src = example_frames((2, 24, 216), 8, seed=3).to(torch.uint8)
    dist = (src // 2 * 2).to(torch.uint8)
    out = cambi(dist, 8, ref=src, full_ref=True, cambi_max_val=500.0)
    assert sorted(out) == ["cambi_cmxv_500", "cambi_full_reference", "cambi_source"]
    assert torch.equal(out["cambi_source"], cambi(src, 8, cambi_max_val=500.0)["cambi_cmxv_500"])
    assert torch.equal(out["cambi_full_reference"], (out["cambi_cmxv_500"] - out["cambi_source"]).clamp(min=0))


@pytest.mark.parametrize("options,error,match", [
    ({"window_sizes": 65}, TypeError, "unknown option.*window_sizes"),
    ({"window_size": 13}, ValueError, "window_size.*15, 127"),
    ({"window_size": 65.0}, TypeError, "window_size takes int"),
    ({"topk": 0.0}, ValueError, "topk"),
    ({"cambi_max_val": True}, TypeError, "cambi_max_val"),
    ({"eotf": "hlg"}, ValueError, "eotf.*bt1886, pq"),
    ({"enc_bitdepth": 5}, ValueError, "enc_bitdepth"),
    ({"heatmaps_path": "/tmp/h"}, ValueError, "heatmaps_path is not supported"),
    ({"full_ref": True}, ValueError, "needs ref"),
])
def test_bad_options_are_refused_by_name(options, error, match):
    frames = torch.zeros((1, 24, 216), dtype=torch.uint8)
    with pytest.raises(error, match=match):
        cambi(frames, 8, **options)


def test_sizes_libvmaf_refuses_or_cannot_define():
    with pytest.raises(ValueError, match="encode width or height of at least 216"):
        cambi(torch.zeros((1, 200, 215), dtype=torch.uint8), 8)
    with pytest.raises(ValueError, match="src_width x src_height 320x300 must not be larger"):
        cambi(torch.zeros((1, 200, 400), dtype=torch.uint8), 8, src_width=320, src_height=300)
    with pytest.raises(ValueError, match="too large for libvmaf's reciprocal table"):
        cambi(torch.zeros((1, 2160, 3840), dtype=torch.uint8), 8, window_size=127)
    with pytest.raises(ValueError, match="scale 1 is 1920x15, smaller than half the 41-pixel window"):
        cambi(torch.zeros((1, 30, 3840), dtype=torch.uint8), 8)
    with pytest.raises(ValueError, match="bit_depth"):
        cambi(torch.zeros((1, 24, 216), dtype=torch.int16), 11)


def test_encode_size_decimates_as_libvmaf():
    """A smaller encode size resamples by libvmaf's float32 nearest neighbour before scoring; a larger one is the
    input size (libvmaf does not upscale the encode)."""
    from fusedsim.families.cambi.settings import resize_indices

    # ratio 1.5: positions 0.25, 1.75, 3.25, ... rounded half up
    assert resize_indices(9, 6).tolist() == [0, 2, 3, 5, 6, 8]
    from fusedsim.families.cambi.ops import example_frames

    frames = example_frames((1, 200, 300), 8, seed=1).to(torch.uint8)
    same = cambi(frames, 8, enc_width=7680, enc_height=7680)
    assert torch.equal(same["cambi_ench_7680_encw_7680"], cambi(frames, 8)["cambi"])  # libvmaf's name order
    half = cambi(frames, 8, enc_width=225, enc_height=150)["cambi_ench_150_encw_225"]
    assert half.item() > 0
    rows, cols = resize_indices(200, 150), resize_indices(300, 225)
    assert torch.equal(half, cambi(np.ascontiguousarray(frames.numpy()[:, rows][:, :, cols]), 8)["cambi"])


def test_cli_command_lines_give_libvmaf_values(pairs, refdata, tmp_path):
    """``commands.txt``'s feature runs on r576x324_8b_mixed, through ``fusedsim vmaf`` on the CPU: ``-n --feature
    cambi`` (run v1feat_cambi) with the v1 options beside it, and a 10-bit copy with ``enc_bitdepth=8``."""
    import lzma

    from fusedsim.cli import main as cli_main

    pair = pairs["r576x324_8b_mixed"]
    clips = refdata / "vmaf-score" / "clips"
    geometry = ["-w", "576", "-h", "324", "-p", "420"]
    paths = {}
    for role in ("ref", "mixed"):
        raw = lzma.open(clips / f"r576x324_8b_{role}.yuv.xz").read()
        paths[role, 8] = tmp_path / f"{role}8.yuv"
        paths[role, 8].write_bytes(raw)
        paths[role, 10] = tmp_path / f"{role}10.yuv"
        paths[role, 10].write_bytes((np.frombuffer(raw, np.uint8).astype("<u2") << 2).tobytes())
    v1 = ":".join(f"{k}={v}" for k, v in V1.items())
    out = tmp_path / "out8.json"
    assert cli_main.main(["vmaf", "-r", str(paths["ref", 8]), "-d", str(paths["mixed", 8]), *geometry, "-b", "8",
                          "-n", "--feature", "cambi", "--feature", f"cambi={v1}", "--threads", "1", "-q", "--json",
                          "-o", str(out), "--device", "cpu"]) == 0
    frames = json.loads(out.read_text())["frames"]
    assert [f["metrics"]["cambi"] for f in frames] == _v1_column(pair, "v1feat_cambi", "cambi")
    assert [f["metrics"][V1_COLUMN] for f in frames] == _v1_column(pair, "v1_3d0h", V1_COLUMN)
    out = tmp_path / "out10.json"
    assert cli_main.main(["vmaf", "-r", str(paths["ref", 10]), "-d", str(paths["mixed", 10]), *geometry, "-b", "10",
                          "-n", "--feature", f"cambi={v1}:enc_bitdepth=8", "-q", "--json", "-o", str(out),
                          "--device", "cpu"]) == 0
    frames = json.loads(out.read_text())["frames"]
    column = V1_COLUMN + "_encbd_8"
    assert [f["metrics"][column] for f in frames] == _v1_column(pair, "v1_3d0h_10b", column)


def test_feature_option_errors_name_the_option():
    from fusedsim.families.vmaf.feature_requests import parse_feature_option

    request = parse_feature_option("cambi=enc_bitdepth=8:cambi_high_res_speedup=1080")
    assert request.suffix == "_hrs_1080_encbd_8"
    assert parse_feature_option("cambi=eotf=pq:cambi_topk=0.5").suffix == "_ctpk_0.5_eotf_pq"
    with pytest.raises(ValueError, match="'eotf' takes one of bt1886, pq"):
        parse_feature_option("cambi=eotf=srgb")
    with pytest.raises(ValueError, match="'window_size' must be in"):
        parse_feature_option("cambi=window_size=201")
    with pytest.raises(ValueError, match="'heatmaps_path' is not supported"):
        parse_feature_option("cambi=heatmaps_path=/tmp")


@pytest.mark.parametrize("kernel,signature,constexprs", [
    ("_codes_kernel", {"src": "*u8", "out": "*i16", "h": "i32", "w": "i32"},
     {"BIT_DEPTH": 8, "ANTI_DITHER": True, "BLOCK": 1024}),
    ("_codes_kernel", {"src": "*i16", "out": "*i16", "h": "i32", "w": "i32"},
     {"BIT_DEPTH": 12, "ANTI_DITHER": True, "BLOCK": 1024}),
    ("_flat_kernel", {"codes": "*i16", "out": "*i8", "h": "i32", "w": "i32"}, {"BLOCK": 1024}),
    ("_row_count_kernel", {"flat": "*i8", "out": "*i8", "h": "i32", "w": "i32", "out_w": "i32", "step": "i32"},
     {"BLOCK": 1024}),
    ("_mask_kernel", {"row_counts": "*i8", "out": "*i8", "h": "i32", "w": "i32", "out_h": "i32", "step": "i32",
                      "threshold": "i32"}, {"BLOCK": 1024}),
    ("_mode_kernel", {"src": "*i16", "src_h": "i32", "src_w": "i32", "step": "i32", "mask": "*i8", "mask_h": "i32",
                      "mask_w": "i32", "mask_shift": "i32", "tvi": "*i32", "codes": "*i16", "counted": "*i16",
                      "h": "i32", "w": "i32", "low": "i32"}, {"NUM_DIFFS": 4, "OUTSIDE": -30000, "BLOCK": 1024}),
    ("_c_value_kernel", {"counted": "*i16", "tvi": "*i32", "weights": "*i32", "lut": "*fp32", "c_out": "*fp32",
                         "sums": "*fp64", "nonzeros": "*i32", "smallest": "*fp32", "c_stride": "i32", "tile_stride": "i32", "h": "i32",
                         "w": "i32", "window": "i32", "vlt_luma": "i32", "tiles_w": "i32"},
     {"NUM_DIFFS": 4, "GROUPS": 1, "PACKED2": True, "OUTSIDE": -30000, "TILE_H": 8, "TILE_W": 64}),
    ("_c_value_kernel", {"counted": "*i16", "tvi": "*i32", "weights": "*i32", "lut": "*fp32", "c_out": "*fp32",
                         "sums": "*fp64", "nonzeros": "*i32", "smallest": "*fp32", "c_stride": "i32", "tile_stride": "i32", "h": "i32",
                         "w": "i32", "window": "i32", "vlt_luma": "i32", "tiles_w": "i32"},
     {"NUM_DIFFS": 8, "GROUPS": 8, "PACKED2": False, "OUTSIDE": -30000, "TILE_H": 8, "TILE_W": 64}),
    ("_c_value_bins_kernel", {"counted": "*i16", "tvi": "*i32", "weights": "*i32", "lut": "*fp32",
                              "c_out": "*fp32", "sums": "*fp64", "nonzeros": "*i32", "smallest": "*fp32",
                              "c_stride": "i32", "tile_stride": "i32", "h": "i32", "w": "i32",
                              "pad": "i32", "tile_h": "i32", "tile_w": "i32", "vlt_luma": "i32", "tiles_w": "i32"},
     {"NUM_DIFFS": 4, "OUTSIDE": -30000, "CENTRE_H": 32, "CENTRE_W": 32, "REGION_H": 64, "REGION_W": 64}),
])
def test_kernels_compile_for_sm90(kernel, signature, constexprs):
    """Compiled for an H100 (no GPU needed): the interpreter does not show what the compiler refuses. The c-value
    product is one float32 multiply (no FMA can contract it), the tile's c-value sum is taken in double, and the
    code-by-code kernel's window counts are int8 products with int32 accumulation."""
    from _offline_compile import compiled_asm

    ptx = compiled_asm(f"fusedsim.families.cambi.kernel:{kernel}", signature, constexprs, "ptx", num_warps=4)
    if kernel.startswith("_c_value"):
        assert "mul.rn.f32" in ptx or "mul.f32" in ptx
        assert "add.rn.f64" in ptx or "add.f64" in ptx
    if kernel == "_c_value_bins_kernel":  # the window counts are integer products on the tensor cores
        assert "wgmma.mma_async.sync.aligned" in ptx and ".s32.s8.s8" in ptx


@pytest.mark.parametrize("kernel,signature,constexprs", [
    ("_digit_counts_kernel", {"values": "*fp32", "c_stride": "i32", "info": "*i64", "items": "*i32",
                              "selecting": "*i8", "counts": "*i32", "prefixes": "*i32", "wanted": "*i32",
                              "rows": "i32"},
     {"SCALES": 5, "PASS": 3, "DIGITS": 16, "BLOCK": 1024, "BLOCKS": 15}),
    ("_sum_above_kernel", {"values": "*fp32", "c_stride": "i32", "info": "*i64", "items": "*i32",
                           "selecting": "*i8", "counts": "*i32", "prefixes": "*i32", "wanted": "*i32", "rows": "i32",
                           "kth": "*fp32", "selected_sum": "*fp64", "above": "*i32"},
     {"SCALES": 5, "PASSES": 8, "DIGITS": 16, "BLOCK": 1024, "BLOCKS": 15}),
    ("_decide_kernel", {"sums": "*fp64", "nonzeros": "*i32", "smallest": "*fp32", "tile_stride": "i32",
                        "info": "*i64", "total": "*fp64", "selecting": "*i8", "bound": "*fp64", "prefixes": "*i32",
                        "wanted": "*i32", "counts": "*i32", "selected_sum": "*fp64", "above": "*i32", "rows": "i32"},
     {"SCALES": 5, "DIGITS": 16, "PASSES": 8, "TILE_BLOCK": 1024}),
    ("_finish_kernel", {"info": "*i64", "total": "*fp64", "selecting": "*i8", "bound": "*fp64", "kth": "*fp32",
                        "selected_sum": "*fp64", "above": "*i32", "top": "*fp64", "replay": "*i8", "rows": "i32"},
     {"SCALES": 5, "BLOCK": 128}),
])
def test_pooling_kernels_compile_for_sm90(kernel, signature, constexprs):
    """The radix select's kernels compiled for an H100: per-row digit counts and sums added atomically (integers,
    and doubles, exact where the pooling uses them)."""
    from _offline_compile import compiled_asm

    ptx = compiled_asm(f"fusedsim.families.cambi.gpu_pooling:{kernel}", signature, constexprs, "ptx", num_warps=4)
    if kernel in ("_sum_above_kernel", "_digit_counts_kernel"):
        expected = {"_sum_above_kernel": ".add.f64", "_digit_counts_kernel": ".add.u32"}[kernel]
        assert f"atom.global.gpu.acq_rel{expected}" in ptx
    if kernel == "_decide_kernel":  # the tiles' sums in double
        assert "add.rn.f64" in ptx or "add.f64" in ptx


def _pool(per_scale: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """:func:`pool_top_k` of c-values ``(N, n_s)`` per scale, as the c-value kernels report them (one tile per row)."""
    from fusedsim.families.cambi.gpu_pooling import pool_top_k

    stats = (torch.cat([c.double().sum(dim=1, keepdim=True) for c in per_scale], dim=1),
             torch.cat([(c > 0).sum(dim=1, keepdim=True).int() for c in per_scale], dim=1),
             torch.cat([torch.where(c > 0, c, float("inf")).amin(dim=1, keepdim=True) for c in per_scale], dim=1))
    return pool_top_k(torch.cat(per_scale, dim=1).to(device), [c.shape[1] for c in per_scale], [1] * len(per_scale),
                      tuple(t.to(device) for t in stats), 0.6)


def test_gpu_pooling_takes_each_route(kernel_device):
    """The GPU path's pooling: every non-zero value selected (the sum of all), more non-zero values than selected
    (the radix select of the k-th largest, ties at it included), sums past the exact bound of their smallest value
    (libvmaf's quickselect order replayed on the host), and a sum past 2**29 that is still exact because its
    smallest selected value is 2**9 (a bound of 2**39)."""
    from fusedsim.families.cambi.gpu_pooling import exact_below
    from fusedsim.families.cambi.twin import pool_topk

    few = torch.tensor([[0.0, 0.5, 0.0, 0.0, 3.25, 0.0, 0.0, 0.0, 0.0, 0.0]])
    many = torch.tensor([[0.5, 0.75, 1.5, 2.0, 0.625, 7.0, 0.5, 0.0, 3.0, 1.0]])
    ties = torch.tensor([[1.5, 0.75, 1.5, 2.0, 1.5, 7.0, 1.5, 0.0, 1.5, 1.0]])
    big = torch.tensor([[2.0**28, 2.0**28, 0.75, 0.5, 3.0, 0.0, 0.0, 1.0, 0.0, 0.0]])
    big_many = torch.tensor([[2.0**28, 2.0**28, 0.75, 0.5, 3.0, 0.5, 0.5, 1.0, 0.5, 0.5]])
    coarse = torch.tensor([[2.0**29 + 512.0, 2.0**28, 512.0, 0.0, 1024.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    k = 6
    cases = [(few, 3.75 / k), (many, (7.0 + 3.0 + 2.0 + 1.5 + 1.0 + 0.75) / k),
             (ties, (7.0 + 2.0 + 4 * 1.5) / k), (big, quickselect_mean(big[0].numpy(), k)),
             (big_many, quickselect_mean(big_many[0].numpy(), k)), (coarse, (2.0**29 + 2.0**28 + 2048.0) / k)]
    got = _pool([c for c, _ in cases[:5]], kernel_device)
    for scale, (c, expected) in enumerate(cases[:5]):
        assert got[0, scale].item() == expected, scale
    assert torch.equal(got[0, 3:].cpu(), torch.cat([pool_topk(big, 0.6), pool_topk(big_many, 0.6)]))
    assert _pool([coarse, many], kernel_device)[0, 0].item() == cases[5][1]
    assert exact_below(torch.tensor([0.5, 0.75, 1.0, 512.0, float("inf")])).tolist() == [
        2.0**29, 2.0**29, 2.0**30, 2.0**39, float("inf")]


def test_gpu_pooling_selects_like_a_sort(kernel_device):
    """The radix select on many rows at once (values spread over exponents, repeated values, a row of one value,
    zeros): each row's top-k sum equals the sum of its k largest by a sort."""
    gen = torch.Generator().manual_seed(5)
    c = (torch.randint(1, 2**12, (3, 20000), generator=gen).float() / 8) * (torch.rand(3, 20000, generator=gen) > 0.2)
    c[1, ::3] = 3.5  # a third of the row at one value, the k-th largest among them
    c[2] = torch.where(c[2] > 0, 1.0, 0.0)  # every non-zero value equal: every lane's digit counter fills up
    short = c[:, :777]  # a second scale of another length, in the same buffer
    got = _pool([c, short], kernel_device)
    for scale, values in enumerate((c, short)):
        k = int(0.6 * values.shape[1])
        expected = torch.sort(values, dim=1, descending=True).values[:, :k].double().sum(dim=1) / k
        assert torch.equal(got[:, scale].cpu(), expected)


def test_samples_above_the_bit_depth_are_refused():
    frames = torch.full((1, 24, 216), 1023, dtype=torch.int16)
    assert cambi(frames, 10)["cambi"].tolist() == [0.0]
    frames[0, 3, 5] = 1024
    with pytest.raises(ValueError, match=r"dist holds the sample 1024, outside \[0, 1023\] for 10-bit"):
        cambi(frames, 10)
    frames[0, 3, 5] = -1
    with pytest.raises(ValueError, match=r"dist holds the sample 65535, outside \[0, 1023\]"):
        cambi(frames.view(torch.uint16), 10)  # uint16, as the video readers give
    wide = torch.full((1, 24, 216), 60000, dtype=torch.int32)
    assert cambi(wide.to(torch.uint16), 16)["cambi"].tolist() == cambi(wide, 16)["cambi"].tolist()


@pytest.mark.parametrize("size", [(96, 216), (95, 217)])
@pytest.mark.parametrize("content", ["noise", "bands", "mixed"])
def test_numba_runs_of_columns_equal_the_twin(content, size):
    """The numba kernel counts the window's histogram in runs of columns (a run of equal pixels adds its window
    profile at once; a column entering and leaving with one value is skipped): every scale's pooled value equals
    the twin's, which counts pixel by pixel as libvmaf does, on short runs (noise), long runs (one-code bands) and
    both, with the window reaching past both edges (a 216-column frame, window 65 scaled to it). With the
    high-resolution speed-up the numba kernel computes the spatial mask at even rows and columns only."""
    from fusedsim.families.cambi.cpu import cambi_scales_numba

    gen = torch.Generator().manual_seed(7)
    h, w = size  # odd sizes too: the speed-up's mask at even rows and columns meets both edges
    noise = torch.randint(0, 256, (2, h, w), generator=gen)
    bands = (torch.arange(w).view(1, 1, w) // 9 + torch.arange(h).view(1, h, 1) // 17).expand(2, h, w) + 100
    frames = {"noise": noise, "bands": bands,
              "mixed": torch.where(torch.rand((2, h, w), generator=gen) < 0.2, noise, bands)}[content]
    frames = frames.clamp(0, 255).to(torch.uint8)
    tvi = torch.tensor([178, 305, 432, 559])
    for window, high_res in ((33, False), (65, True)):
        args = (tvi, 8, True, window, 0, 21, 0.6, high_res)
        got = cambi_scales_numba(frames, *args)
        twin = cambi_scales_ref(frames, *args)
        assert torch.equal(got, twin), (content, window)


@pytest.mark.parametrize("size", [(96, 216), (95, 217)])
def test_triton_high_res_speed_up_equals_twin(size, kernel_device):
    """With the high-resolution speed-up the Triton path computes the spatial mask at even rows and columns only
    (where the decimated scales read it) and counts the v1 model's window of 17 code by code: every scale equals the
    twin's on banded frames with noise, odd sizes included (the mask's last even row and column meet the edges)."""
    from fusedsim.families.cambi.kernel import cambi_scales_triton

    gen = torch.Generator().manual_seed(11)
    h, w = size
    noise = torch.randint(0, 1024, (2, h, w), generator=gen)
    bands = (torch.arange(w).view(1, 1, w) // 9 + torch.arange(h).view(1, h, 1) // 17).expand(2, h, w) + 300
    frames = torch.where(torch.rand((2, h, w), generator=gen) < 0.1, noise, bands).to(torch.int16)
    args = (torch.tensor([178, 305, 432, 559]), 10, False, 17, 78, 21, 0.6, True)
    twin = cambi_scales_ref(frames, *args)
    assert (twin[:, :3] > 0).all()
    got = cambi_scales_triton(frames.to(kernel_device), args[0].to(kernel_device), *args[1:])
    assert torch.equal(got.cpu(), twin)


def test_numba_pooling_equals_libvmafs_quickselect():
    """The numba path's top-k mean without libvmaf's quickselect where any order gives the same double (all
    non-zero values; or the k-th largest from two histogram passes over the float32 bits), and with it past the
    exact bound: each equals the twin's replay of libvmaf's quickselect order."""
    pytest.importorskip("numba")
    from fusedsim.families.cambi.cpu import _top_k_mean

    gen = torch.Generator().manual_seed(3)
    n = 150_000  # above the size where the histograms take over from the quickselect
    spread = (torch.randint(1, 2**14, (n,), generator=gen).float() / 16) * (torch.rand(n, generator=gen) > 0.1)
    repeats = torch.where(torch.rand(n, generator=gen) > 0.3, 2.75, spread)  # the k-th largest among many equal values
    sparse = spread * (torch.rand(n, generator=gen) > 0.7)  # at most k non-zero: the sum of all
    past = spread.clone()
    past[:4] = 2.0**37  # a sum past the exact bound of its k-th largest value (about 2**38): libvmaf's order
    sparse_past = sparse.clone()
    sparse_past[:2] = 2.0**53  # at most k non-zero, their sum past the bound of the smallest (2**26): order matters
    zeros = torch.zeros(n)
    for values in (spread, repeats, sparse, past, sparse_past, zeros, spread[:5000]):
        c = values.numpy().astype(np.float32)
        k = int(0.6 * c.shape[0])
        assert _top_k_mean(c.copy(), k) == quickselect_mean(c, k)

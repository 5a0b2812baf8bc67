"""integer_vif (libvmaf feature ``vif``) against libvmaf 3.2.0's own per-frame values, with ``==`` on the doubles.

Expected values come from ``refdata/vmaf-score`` (12 pairs: 8/10/12 bit, even and odd sizes; see its README,
sections 4.2, 5 and 6): run ``default`` gives ``integer_vif_scale0..3`` (gain limit 100), run ``neg``
``integer_vif_scale0..3_egl_1`` (gain limit 1.0, model ``vmaf_v0.6.1neg``), run ``debug`` the num/den columns and
``integer_vif``. The PyTorch twin and the numba kernel are checked on every frame of every pair; the Triton kernel
(on the GPU when there is one, else through Triton's interpreter) on crops of them, against the twin.
"""

from __future__ import annotations


import numba
import numpy as np
import pytest
import torch

from fusedsim.core.backend import use_backend
from fusedsim.families.vif.api import integer_vif
from fusedsim.families.vif.twin import (
    integer_vif_accumulators_ref,
    integer_vif_ref,
    log2_table,
    vif_columns,
    vif_feature_suffix,
)
from score_fixtures import load_score_pairs

PAIRS = ["f480x270_10b_mixed", "k256x144_12b_mixed", "prev_a576x324_8b_blur", "prev_a576x324_8b_jpeg",
         "prev_a576x324_8b_noise", "prev_a576x324_8b_shift", "prev_c333x217_8b_jpeg", "prev_c333x217_8b_mixed",
         "prev_d504x400_10b_blurnoise", "prev_d504x400_10b_jpeg8", "prev_e333x217_10b_mixed", "r576x324_8b_mixed"]
RUNS = {"default": 100.0, "neg": 1.0}  # run -> libvmaf's vif_enhn_gain_limit in it
SCALES = [f"integer_vif_scale{s}" for s in range(4)]
DEBUG = ["integer_vif", "integer_vif_num", "integer_vif_den"] + [
    f"integer_vif_{q}_scale{s}" for s in range(4) for q in ("num", "den")]


@pytest.fixture(scope="module")
def pairs(refdata):
    loaded = {p.name: p for p in load_score_pairs(refdata)}
    assert sorted(loaded) == PAIRS
    return loaded


def _expected(pair, run: str, debug: bool) -> dict[str, list[float]]:
    """libvmaf's columns: the scale scores from ``run``; with ``debug``, the debug run's columns (gain limit 100)."""
    suffix = vif_feature_suffix(RUNS[run])
    out = {name + suffix: pair.metric(run, name + suffix) for name in SCALES}
    if debug:
        out.update({name: pair.metric("debug", name) for name in DEBUG})
    return out


def _check(got: dict[str, torch.Tensor], expected: dict[str, list[float]]) -> None:
    assert sorted(got) == sorted(expected)
    for name, values in expected.items():
        assert got[name].dtype == torch.float64
        assert got[name].cpu().tolist() == values, name


@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize("pair_name", PAIRS)
def test_twin_equals_libvmaf(pairs, pair_name, run):
    pair = pairs[pair_name]
    ref, dist = torch.from_numpy(pair.ref_y), torch.from_numpy(pair.dist_y)
    debug = run == "default"
    _check(vif_columns(integer_vif_ref(ref, dist, pair.bit_depth, RUNS[run]), RUNS[run], debug),
           _expected(pair, run, debug))


@pytest.mark.parametrize("pair_name", PAIRS)
def test_numba_kernel_equals_libvmaf(pairs, pair_name):
    """The public function on CPU tensors (the numba kernel), full frames, both gain limits and the debug columns."""
    pair = pairs[pair_name]
    for run, gain_limit in RUNS.items():
        debug = run == "default"
        with use_backend("auto"):
            _check(integer_vif(pair.ref_y, pair.dist_y, pair.bit_depth, gain_limit=gain_limit, debug=debug),
                   _expected(pair, run, debug))


@pytest.mark.parametrize("pair_name,frames,crop,gain_limit", [
    ("r576x324_8b_mixed", [0, 23], (slice(100, 141), slice(200, 253)), 100.0),
    ("f480x270_10b_mixed", [23], (slice(30, 64), slice(0, 47)), 1.0),
    ("k256x144_12b_mixed", [1], (slice(0, 33), slice(211, 256)), 1.0),
])
def test_triton_equals_twin_on_crops(pairs, pair_name, frames, crop, gain_limit, kernel_device):
    """Crops of fixture frames at each bit depth (odd sizes, touching the frame's edges), both gain limits."""
    from fusedsim.families.vif.kernel import integer_vif_accumulators_fwd

    pair = pairs[pair_name]
    ref = torch.from_numpy(np.ascontiguousarray(pair.ref_y[frames][(slice(None), *crop)]))
    dist = torch.from_numpy(np.ascontiguousarray(pair.dist_y[frames][(slice(None), *crop)]))
    twin = integer_vif_accumulators_ref(ref, dist, pair.bit_depth, gain_limit)
    got = integer_vif_accumulators_fwd(ref.to(kernel_device), dist.to(kernel_device), pair.bit_depth, gain_limit)
    assert torch.equal(got.cpu(), twin)


def test_triton_tiling_equals_twin(kernel_device):
    """Small blocks: several column strips, row bands and steps per band (both scratch slots), the GPU's layout."""
    from fusedsim.families.vif.kernel import integer_vif_accumulators_fwd
    from fusedsim.families.vif.ops import example_frames

    ref, dist = example_frames((1, 16, 21), 10, seed=5)
    twin = integer_vif_accumulators_ref(ref, dist, 10, 1.0)
    got = integer_vif_accumulators_fwd(ref.to(kernel_device, torch.int16), dist.to(kernel_device, torch.int16), 10,
                                       1.0, rows=4, block_w=32, band_rows=8)
    assert torch.equal(got.cpu(), twin)


@pytest.mark.parametrize("scale,bit_depth,sample", [(0, 8, "*u8")])
def test_kernel_compiles_for_sm90_with_ieee_doubles(scale, bit_depth, sample):
    """Compiled for an H100 (no GPU needed), the largest variant (8-bit scale 0: 17 taps, int32 sums, the next
    scale's filter): the doubles are IEEE divisions with no multiply-add contracted into an FMA, and the scratch
    barrier is there."""
    from _offline_compile import compiled_asm
    from fusedsim.families.vif.kernel import scale_constexprs

    signature = {"x_ptr": sample, "y_ptr": sample, "nx_ptr": "*i16", "ny_ptr": "*i16", "acc_ptr": "*i64",
                 "table_ptr": "*i32", "taps_ptr": "*i32", "consts_ptr": "*fp64", "scratch_ptr": "*i32"}
    signature.update(dict.fromkeys(["h", "w", "s_xn", "s_xh", "s_xw", "s_yn", "s_yh", "s_yw", "band_rows",
                                    "n_strips", "n_bands"], "i32"))
    constexprs = {k: f"tl.{v.name}" if k == "DT" else v for k, v in scale_constexprs(scale, bit_depth).items()}
    constexprs.update(MASK16=scale > 0, RB=2, CW=256)
    ptx = compiled_asm("fusedsim.families.vif.kernel:_vif_scale_kernel", signature, constexprs, "ptx",
                       num_warps=4, enable_fp_fusion=False, num_stages=1)
    assert "div.rn.f64" in ptx and "fma.rn.f64" not in ptx and "bar.sync" in ptx


def test_log2_table_matches_float32_log2_with_c_round():
    """libvmaf's ``round(log2f(i) * 2048)``: float32 log2 (numpy's), C round (half away from zero: floor(v + 0.5)
    for v > 0), against the twin's table, all 32769 entries; a double log2 would differ on 38 of them."""
    i = np.arange(32767, 65536)
    expected = np.floor(np.log2(i.astype(np.float32)).astype(np.float64) * 2048.0 + 0.5).astype(np.int64)
    table = log2_table().numpy()
    assert (table[32767:] == expected).all()
    assert table[32768] == 15 * 2048 and table[65535] == 16 * 2048
    double = np.floor(np.log2(i.astype(np.float64)) * 2048.0 + 0.5).astype(np.int64)
    assert (double != expected).sum() == 38


def test_numba_threads_and_bands_give_the_same_bits():
    from fusedsim.families.vif.cpu import integer_vif_numba_accumulators
    from fusedsim.families.vif.ops import example_frames

    ref, dist = example_frames((3, 70, 45), 8, seed=9)
    ref, dist = ref.to(torch.uint8), dist.to(torch.uint8)
    twin = integer_vif_accumulators_ref(ref, dist, 8, 100.0)
    before = numba.get_num_threads()
    try:
        for threads in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS), numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(threads)
            for r, d in ((ref, dist), (ref[:1], dist[:1])):  # one frame: row bands
                assert torch.equal(integer_vif_numba_accumulators(r, d, 8, 100.0), twin[: r.shape[0]]), threads
    finally:
        numba.set_num_threads(before)


def test_api_shapes_dtypes_and_names():
    from fusedsim.families.vif.ops import example_frames

    ref, dist = example_frames((2, 20, 26), 12, seed=3)
    base = integer_vif(ref.to(torch.int32), dist.to(torch.int32), 12)
    assert sorted(base) == SCALES and all(v.shape == (2,) for v in base.values())
    for dtype in (torch.int16, torch.uint16, torch.int64):
        out = integer_vif(ref.to(dtype), dist.to(dtype), 12)
        assert all(torch.equal(out[k], base[k]) for k in base), dtype
    one = integer_vif(ref[1].numpy().astype(np.uint16), dist[1].numpy().astype(np.uint16), 12, debug=True)
    assert all(v.shape == () for v in one.values()) and float(one["integer_vif_scale2"]) == float(base[SCALES[2]][1])
    assert sorted(integer_vif(ref, dist, 12, gain_limit=1.0)) == [f"{s}_egl_1" for s in SCALES]
    assert "integer_vif_num_scale3_egl_2.5" in integer_vif(ref, dist, 12, gain_limit=2.5, debug=True)
    with use_backend("reference"):
        twin = integer_vif(ref, dist, 12, gain_limit=7, debug=True)
    assert all(torch.equal(v, integer_vif(ref, dist, 12, gain_limit=7, debug=True)[k]) for k, v in twin.items())


@pytest.mark.parametrize("args,kwargs,error,match", [
    ((np.zeros((16, 16), np.uint8), np.zeros((16, 17), np.uint8), 8), {}, ValueError, "same shape"),
    ((np.zeros((15, 40), np.uint8),) * 2 + (8,), {}, ValueError, "at least 16x16"),
    ((np.zeros((2, 40, 15), np.uint8),) * 2 + (8,), {}, ValueError, "at least 16x16"),
    ((np.zeros((16, 16), np.uint8),) * 2 + (9,), {}, ValueError, "bit_depth=9"),
    ((np.zeros((16, 16), np.uint8),) * 2 + (10,), {}, TypeError, "cannot hold 10-bit"),
    ((np.zeros((16, 16), np.int16),) * 2 + (16,), {}, TypeError, "cannot hold 16-bit"),
    ((np.zeros((16, 16), np.float32),) * 2 + (8,), {}, TypeError, "integer samples"),
    ((np.zeros((16, 16), np.uint8),) * 2 + (8,), {"gain_limit": 0.5}, ValueError, "gain_limit"),
    ((np.zeros((16, 16), np.uint8),) * 2 + (8,), {"gain_limit": 101.0}, ValueError, "gain_limit"),
    ((np.zeros((16, 16), np.uint8),) * 2 + (8,), {"gain_limit": True}, TypeError, "gain_limit"),
    ((np.zeros((16, 16), np.uint8),) * 2 + (8,), {"debug": 1}, TypeError, "debug"),
])
def test_bad_input_is_refused(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        integer_vif(*args, **kwargs)


def test_flat_frames():
    """Zero variance everywhere: every pixel takes the non-log branch (num = den = count, VIF 1)."""
    flat = torch.full((1, 16, 16), 77, dtype=torch.uint8)
    out = integer_vif(flat, flat, 8, debug=True)
    assert [float(out[s]) for s in SCALES] == [1.0] * 4
    assert [float(out[f"integer_vif_den_scale{s}"]) for s in range(4)] == [256.0, 64.0, 16.0, 4.0]

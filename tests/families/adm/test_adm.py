"""libvmaf 3.2.0's integer ADM (``fusedsim.adm``): the twin, the numba kernel, the Triton kernel and the API.

Expected values come from ``refdata/vmaf-score/reference/<pair>.json`` (libvmaf's exact doubles), named at each
assertion as ``<pair> <run> <column>``:

- run ``default`` (vmaf_v0.6.1, ``adm_enhn_gain_limit`` 100): ``integer_adm2``, ``integer_aim``,
  ``integer_adm3``, ``integer_adm_scale0..3``;
- run ``neg`` (vmaf_v0.6.1neg, gain limit 1): the same columns with the suffix ``_egl_1``;
- run ``debug`` (default options, ``adm=debug=true``): ``integer_adm``, ``integer_adm_num``, ``integer_adm_den``,
  ``integer_adm_num_scale0..3``, ``integer_adm_den_scale0..3``.

Every comparison is exact (``==``). The twin and the numba kernel (through the public API) run on every frame of
every pair; the Triton kernel is compared with the twin on crops, through the interpreter when there is no GPU.
"""

from __future__ import annotations


import numpy as np
import pytest
import torch

from fusedsim.core.backend import use_backend
from fusedsim.families.adm.api import integer_adm
from fusedsim.families.adm.cpu import integer_adm_numba_sums
from fusedsim.families.adm.kernel import integer_adm_fwd
from fusedsim.families.adm.ops import integer_adm as integer_adm_op
from fusedsim.families.adm.twin import (
    MIN_SIZE,
    AdmOptions,
    adm_columns,
    column_names,
    integer_adm_ref,
    integer_adm_sums_ref,
    powf_third,
)

from score_fixtures import load_score_pairs

PAIRS = ["f480x270_10b_mixed", "k256x144_12b_mixed", "prev_a576x324_8b_blur", "prev_a576x324_8b_jpeg",
         "prev_a576x324_8b_noise", "prev_a576x324_8b_shift", "prev_c333x217_8b_jpeg", "prev_c333x217_8b_mixed",
         "prev_d504x400_10b_blurnoise", "prev_d504x400_10b_jpeg8", "prev_e333x217_10b_mixed", "r576x324_8b_mixed"]
RUNS = [("default", 100.0), ("neg", 1.0)]


@pytest.fixture(scope="module")
def pairs(refdata):
    found = {p.name: p for p in load_score_pairs(refdata)}
    assert sorted(found) == PAIRS
    return found


def _source_run(run: str, name: str) -> str:
    """The fixture run holding column ``name`` of ``run``: the debug columns were printed by run ``debug``."""
    base = name.removesuffix("_egl_1")
    if base in ("integer_adm", "integer_adm_num", "integer_adm_den") or "_num_scale" in base or "_den_scale" in base:
        assert run == "default"
        return "debug"
    return run


def _check(pair, run: str, columns: dict[str, torch.Tensor], frames: slice) -> None:
    for name, got in columns.items():
        source = _source_run(run, name)
        expected = np.asarray(pair.metric(source, name))[frames]
        assert np.array_equal(got.cpu().numpy(), expected), (
            f"{pair.name} {source} {name}: got {got.tolist()}, libvmaf {expected.tolist()}")


@pytest.mark.parametrize("pair_name", PAIRS)
def test_twin_matches_libvmaf(pairs, pair_name):
    pair = pairs[pair_name]
    frames = slice(None)
    ref = torch.from_numpy(pair.ref_y.astype(np.int32))
    dist = torch.from_numpy(pair.dist_y.astype(np.int32))
    for run, egl in RUNS:
        scales = integer_adm_ref(ref, dist, pair.bit_depth, egl)
        columns = adm_columns(scales, pair.height, pair.width, AdmOptions(egl), debug=run == "default")
        _check(pair, run, columns, frames)


@pytest.mark.parametrize("pair_name", PAIRS)
def test_numba_kernel_matches_libvmaf_on_every_frame(pairs, pair_name):
    pair = pairs[pair_name]
    assert integer_adm_op.backend_for(torch.from_numpy(pair.ref_y[:1])) == "cpu"
    for run, egl in RUNS:
        columns = integer_adm(pair.ref_y, pair.dist_y, pair.bit_depth, gain_limit=egl, debug=run == "default")
        _check(pair, run, columns, slice(None))


def test_numba_row_split_matches_frame_split(pairs):
    """Batches smaller than the thread count split each scale's rows (halo rows recomputed per chunk). One bit
    depth: the row split compiles its own parallel kernels."""
    pair = pairs["r576x324_8b_mixed"]
    ref, dist = torch.from_numpy(pair.ref_y[5:7]), torch.from_numpy(pair.dist_y[5:7])
    for egl in (100.0, 1.0):
        whole = integer_adm_numba_sums(ref, dist, 8, egl)
        for chunks in (3, 7):
            assert torch.equal(integer_adm_numba_sums(ref, dist, 8, egl, row_chunks=chunks), whole), (egl, chunks)


@pytest.mark.parametrize("pair_name,crop,frames,egl", [
    ("r576x324_8b_mixed", (100, 165, 200, 270), slice(0, 3), 100.0),  # identity, jpeg 90, blur 0.6
    ("f480x270_10b_mixed", (20, 57, 31, 64), slice(18, 20), 1.0),  # odd crop, 10-bit, gain limit 1
    ("k256x144_12b_mixed", (0, 40, 256 - 45, 256), slice(0, 2), 100.0),  # the right border, 12-bit
])
def test_triton_kernel_matches_twin(pairs, kernel_device, pair_name, crop, frames, egl):
    pair = pairs[pair_name]
    y0, y1, x0, x1 = crop
    dtype = torch.uint8 if pair.bit_depth == 8 else torch.int16
    ref = torch.from_numpy(pair.ref_y[frames, y0:y1, x0:x1].astype(np.int32)).to(dtype)
    dist = torch.from_numpy(pair.dist_y[frames, y0:y1, x0:x1].astype(np.int32)).to(dtype)
    want = integer_adm_ref(ref, dist, pair.bit_depth, egl)
    got = integer_adm_fwd(ref.to(kernel_device), dist.to(kernel_device), pair.bit_depth, egl)
    assert torch.equal(got.cpu(), want), pair_name


def test_numba_kernel_equals_twin_on_full_range_12_bit_content():
    # the CPU kernel adds scale 0's wavelet (and scale 1's vertical pass) in int32 lanes, proven to fit for samples
    # of at most 12 bits: checkerboards, stripes and 0/4095 blocks drive the band values to their extremes
    yy, xx = torch.meshgrid(torch.arange(72), torch.arange(80), indexing="ij")
    top = 4095
    frames = torch.stack([((yy + xx) % 2) * top, ((xx // 2) % 2) * top, ((yy // 3) % 2) * top,
                          ((yy // 8 + xx // 8) % 2) * top, torch.full_like(yy, top)]).to(torch.int32)
    dist = torch.stack([frames[1], frames[0], top - frames[2], frames[3] // 2, frames[4] * 0])
    for egl in (100.0, 1.0):
        want = integer_adm_sums_ref(frames, dist, 12, egl)
        assert torch.equal(integer_adm_numba_sums(frames, dist, 12, egl), want), egl
    # a near viewing geometry makes scale 0's CSF factors large (irf up to 6 160 269 for d): on random 12-bit
    # content the products with the band values pass 2**31, where only the steps whose kept bits lie below bit 32
    # may use int32 lanes (computing the d CSF's bits 17-32 there breaks this comparison)
    near = (0, 0.2, 120, 0.03125)
    gen = torch.Generator().manual_seed(0)
    ref, dis = (torch.randint(0, top + 1, (2, 64, 96), generator=gen, dtype=torch.int32) for _ in range(2))
    assert torch.equal(integer_adm_numba_sums(ref, dis, 12, 100.0, *near),
                       integer_adm_sums_ref(ref, dis, 12, 100.0, *near))


def test_triton_frame_groups_equal_one_launch(pairs, kernel_device):
    """Frames split into groups by ``max_buffer_bytes`` (here one frame each) give the one-group values."""
    pair = pairs["r576x324_8b_mixed"]
    ref = torch.from_numpy(pair.ref_y[0:3, 100:165, 200:270].copy()).to(kernel_device)
    dist = torch.from_numpy(pair.dist_y[0:3, 100:165, 200:270].copy()).to(kernel_device)
    whole = integer_adm_fwd(ref, dist, 8, 100.0)
    assert torch.equal(integer_adm_fwd(ref, dist, 8, 100.0, max_buffer_bytes=1), whole)
    assert torch.equal(whole.cpu(), integer_adm_ref(ref.cpu(), dist.cpu(), 8, 100.0))


def test_single_frames_and_dispatch():
    gen = torch.Generator().manual_seed(3)
    ref = torch.randint(0, 1024, (2, 41, 39), generator=gen, dtype=torch.int32)
    dist = (ref + torch.randint(-30, 31, ref.shape, generator=gen, dtype=torch.int32)).clamp(0, 1023)
    batch = integer_adm(ref, dist, 10, debug=True)
    one = integer_adm(ref[1].numpy().astype(np.uint16), dist[1].numpy().astype(np.uint16), 10, debug=True)
    with use_backend("reference"):
        twin = integer_adm(ref, dist, 10, debug=True)
    assert list(batch) == list(column_names(AdmOptions(), debug=True))
    for name in batch:
        assert one[name].shape == () and one[name].item() == batch[name][1].item(), name
        assert torch.equal(batch[name], twin[name]), name


def test_minimum_size_is_stated_once():
    import fusedsim.families.adm as package

    assert package.MIN_SIZE == MIN_SIZE == 33


def test_feature_names_follow_libvmaf():
    assert column_names()[:3] == ("integer_adm2", "integer_aim", "integer_adm3")
    assert column_names(AdmOptions(1.0))[0] == "integer_adm2_egl_1"
    assert column_names(AdmOptions(1.5), debug=True)[-1] == "integer_adm_den_scale3_egl_1.5"


def test_powf_third_is_glibc_powf():
    """glibc 2.36's ``powf(x, 1.0f / 3.0f)`` (libvmaf's cube roots), printed by C: denormals, extremes, and one of
    the inputs where glibc is not correctly rounded (the correctly rounded value would be 0x1.428aecp-9)."""
    x = [1.0, 8.0, 27.0, 1e-30, 3.5e12, 0.0, 1e-42, 123.456, 2.0 ** -149, 3.4e38, float.fromhex("0x1.0001ccp-26")]
    want = [1.0, 2.0, 3.0, 9.999993194620416e-11, 15182.94921875, 0.0, 1.0001747253486886e-14, 4.979328155517578,
            1.1190335437051406e-15, 6979538386944.0, float.fromhex("0x1.428aeep-9")]
    got = powf_third(torch.tensor(x, dtype=torch.float32))
    assert torch.equal(got, torch.tensor(want, dtype=torch.float32)), got.tolist()


@pytest.mark.parametrize("kwargs,error,match", [
    ({"ref": np.zeros((32, 40), np.uint8)}, ValueError, f"at least {MIN_SIZE}x{MIN_SIZE}"),
    ({"ref": np.zeros((40, 20), np.uint8)}, ValueError, "ref and dist are 40x20"),
    ({"bit_depth": 9}, ValueError, "bit_depth=9"),
    ({"bit_depth": 16}, ValueError, "bit_depth=16"),
    ({"gain_limit": 0.5}, ValueError, "enhn_gain_limit"),
    ({"ref": np.zeros((40, 40), np.float32)}, TypeError, "integer samples"),
    ({"dist": np.zeros((41, 40), np.uint8)}, ValueError, "same shape"),
    ({"dist": np.full((40, 40), 300, np.uint16)}, ValueError, "outside"),
    ({"debug": 1}, TypeError, "debug"),
])
def test_bad_inputs_are_refused(kwargs, error, match):
    args = {"ref": np.zeros((40, 40), np.uint8), "dist": np.zeros((40, 40), np.uint8), "bit_depth": 8}
    args.update(kwargs)
    if args["ref"].shape != args["dist"].shape and "dist" not in kwargs:
        args["dist"] = np.zeros(args["ref"].shape, np.uint8)
    extra = {k: args.pop(k) for k in ("gain_limit", "debug") if k in args}
    with pytest.raises(error, match=match):
        integer_adm(args["ref"], args["dist"], args["bit_depth"], **extra)


def test_op_kernels_refuse_small_frames():
    small = torch.zeros(1, 33, 32, dtype=torch.uint8)
    for fn in (integer_adm_ref, integer_adm_op.cpu_impl()):
        with pytest.raises(ValueError, match="33x32"):
            fn(small, small, 8, 100.0)

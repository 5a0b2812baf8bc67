"""libvmaf 3.2.0's SpEED chroma (``fusedsim.speed_chroma``): the API (numba residuals), the twin, the Triton kernel,
the feature registry path and the refusal of planes too small for SpEED.

Expected values: ``refdata/vmaf-score/reference/<pair>.json → vmaf_v1.runs``: ``v1feat_speed_chroma`` (default
options), ``v1_3d0h`` (the v1 options), ``v1_5d0h`` (prescale 0.6, bilinear) and ``v1_3d0h_2160`` (prescale 0.5);
``failed_runs`` lists the runs where libvmaf crashed because the chroma planes were too small. Every comparison is
``==`` (libvmaf's float32 eigen/QR order is reproduced).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fusedsim.core.backend import use_backend
from fusedsim.families.speed_chroma.api import speed_chroma
from fusedsim.families.speed_chroma.cpu import speed_residual_numba
from fusedsim.families.speed_chroma.kernel import speed_residual_fwd
from fusedsim.families.speed_chroma.ops import _examples
from fusedsim.families.speed_chroma.twin import (
    SpeedOptions,
    antialias_taps,
    local_mean_taps,
    speed_residual_ref,
    speed_scores_from_residuals,
)
from fusedsim.families.vmaf import features as registry
from fusedsim.families.vmaf.feature_requests import FeatureRequest
from fusedsim.families.vmaf.session import FeatureSession

from chroma_fixtures import chroma
from score_fixtures import load_score_pairs

V1 = dict(sigma_nn=0.19, nn_floor=0.1, weight_var_mode=5, max_val=45.0)
RUNS = {"v1feat_speed_chroma": SpeedOptions(), "v1_3d0h": SpeedOptions(**V1),
        "v1_5d0h": SpeedOptions(**V1, prescale=0.6, prescale_method="bilinear"),
        "v1_3d0h_2160": SpeedOptions(**V1, prescale=0.5, prescale_method="bilinear")}
LIBVMAF_OPTIONS = {"v1_3d0h": {"speed_sigma_nn": 0.19, "speed_nn_floor": 0.1, "speed_weight_var_mode": 5,
                               "speed_max_val": 45.0}}


@pytest.fixture(scope="module")
def pairs(refdata):
    return {p.name: p for p in load_score_pairs(refdata)}


def libvmaf_planes(refdata, pair):
    """The chroma planes at the size libvmaf reads them (w/2 x h/2)."""
    return [p[:, :pair.height // 2, :pair.width // 2] for p in chroma(refdata, pair)]


def v1_column(pair, run: str, name: str) -> np.ndarray:
    runs = pair.record["vmaf_v1"]["runs"]
    record = runs[run]
    if name in record["metrics"]:
        return np.asarray(record["metrics"][name])
    assert name in record["columns_identical_to_v1_3d0h"], (pair.name, run, name)
    return np.asarray(runs["v1_3d0h"]["metrics"][name])


@pytest.mark.parametrize("run", list(RUNS))
def test_api_matches_libvmaf_on_every_pair(refdata, pairs, run):
    checked = 0
    for pair in pairs.values():
        v1 = pair.record["vmaf_v1"]
        if run not in v1["runs"]:
            continue
        columns = speed_chroma(*libvmaf_planes(refdata, pair), pair.bit_depth, options=RUNS[run])
        for name, got in columns.items():
            want = v1_column(pair, run, name)
            assert np.array_equal(got.numpy(), want), f"{pair.name} {run} {name}"
        checked += 1
    assert checked == {"v1feat_speed_chroma": 11, "v1_3d0h": 11, "v1_5d0h": 2, "v1_3d0h_2160": 1}[run]


@pytest.mark.parametrize("pair_name,run", [("k256x144_12b_mixed", "v1feat_speed_chroma"),
                                           ("k256x144_12b_mixed", "v1_3d0h"),
                                           ("f480x270_10b_mixed", "v1_3d0h_2160")])
def test_planes_too_small_are_refused_where_libvmaf_crashes(refdata, pairs, pair_name, run):
    pair = pairs[pair_name]
    assert pair.record["vmaf_v1"]["failed_runs"][run]["signal"] == "SIGSEGV"
    need = {"v1feat_speed_chroma": 80, "v1_3d0h": 80, "v1_3d0h_2160": 159}[run]
    with pytest.raises(ValueError, match=f"speed_chroma needs chroma planes of at least {need}x{need}"):
        speed_chroma(*libvmaf_planes(refdata, pair), pair.bit_depth, options=RUNS[run])


def test_twin_matches_libvmaf(refdata, pairs):
    pair = pairs["prev_d504x400_10b_blurnoise"]
    with use_backend("reference"):
        columns = speed_chroma(*libvmaf_planes(refdata, pair), 10, options=RUNS["v1_3d0h"])
    for name, got in columns.items():
        assert np.array_equal(got.numpy(), v1_column(pair, "v1_3d0h", name)), name


def test_filters_are_libvmafs():
    # float32 taps libvmaf computes (refdata/vmaf-score/README.md section 10.5, checked against libvmaf.a)
    def bits(taps):
        return [f"{np.float32(t).view(np.uint32):08x}" for t in taps]

    assert bits(antialias_taps()) == ["3d9aedc6", "3dcaf6b8", "3df6259e", "3e0a2cd8", "3e0f9c33", "3e0a2cd8",
                                      "3df6259e", "3dcaf6b8", "3d9aedc6"]
    assert bits(local_mean_taps()) == ["3e2a5f21", "3f2ad06f", "3e2a5f21"]


@pytest.mark.parametrize("weight_var_mode", range(7))
def test_compiled_statistics_match_twin_in_every_mode(weight_var_mode):
    # libvmaf's fixtures cover modes 0 and 5 (the tests above); the other modes and the singular-matrix branches
    # (a constant plane: zero covariance) are held to the twin, whose float32/double order is libvmaf's
    gen = torch.Generator().manual_seed(90 + weight_var_mode)
    residuals = [torch.randn(3, 23, 31, generator=gen) * s for s in (1.0, 2.0, 0.5, 3.0)]
    residuals[0][1] = 0.0  # frame 1: ref_u singular, so u is 0 and uv is v's score
    residuals[1][2] = 0.0  # frame 2: ref_v and dis_v singular, so v compares the zero-variance planes
    residuals[3][2] = 0.0
    options = SpeedOptions(weight_var_mode=weight_var_mode, max_val=2.0)
    compiled = speed_scores_from_residuals(*residuals, options, compiled=True)
    twin = speed_scores_from_residuals(*residuals, options, compiled=False)
    assert torch.equal(compiled, twin)
    assert compiled[1, 0] == 0 and compiled[1, 2] == compiled[1, 1]


def test_statistics_from_given_covariances_equal_the_whole_estimation(kernel_device):
    # the GPU path computes the covariances on the device (the op speed_covariance) and the rest on the host: the
    # same scores as the twin's whole estimation, for residuals of several sizes and a singular plane
    from fusedsim.families.speed_chroma.gsm_cpu import speed_scores_many
    from fusedsim.families.speed_chroma.ops import speed_covariance

    gen = torch.Generator().manual_seed(91)
    residuals = torch.randn(3, 4, 17, 28, generator=gen) * torch.tensor([1.0, 2.0, 0.5, 3.0])[:, None, None]
    residuals[2, 1] = 0.0
    options = SpeedOptions(**V1)
    covariances = speed_covariance(residuals.reshape(12, 17, 28).to(kernel_device)).cpu().reshape(3, 4, 25, 25)
    got = speed_scores_many(residuals.numpy(), options.sigma_nn, options.nn_floor, options.weight_var_mode,
                            options.max_val, covariances.numpy())
    twin = speed_scores_from_residuals(*residuals.unbind(1), options, compiled=False)
    assert torch.equal(torch.from_numpy(got), twin)
    with pytest.raises(ValueError, match="covariances must be"):
        speed_scores_many(residuals.numpy(), 0.19, 0.1, 5, 45.0, covariances[:2].numpy())


@pytest.mark.parametrize("backend", ["reference", "auto", "triton"])
def test_covariance_op_refuses_bad_residuals(kernel_device, backend):
    from fusedsim.families.speed_chroma.ops import speed_covariance

    with use_backend(backend):
        with pytest.raises(ValueError, match="at least 5; got shape"):
            speed_covariance(torch.zeros(2, 4, 9, device=kernel_device))
        with pytest.raises(ValueError, match=r"must be \(N, H', W'\)"):
            speed_covariance(torch.zeros(9, 9, device=kernel_device))
        with pytest.raises(TypeError, match="float32"):
            speed_covariance(torch.zeros(1, 9, 9, dtype=torch.float64, device=kernel_device))


def test_compiled_qr_solve_equals_the_twins_full_products():
    # the numba solve skips the Householder products' exact-zero terms (rows and columns before step k); the
    # twin multiplies the full matrices in libvmaf's order: the same solutions, and bit-identical parameters,
    # on random, integer and zero-striped residuals (exact zeros everywhere in the products)
    from fusedsim.families.speed_chroma import gsm, gsm_cpu

    rng = np.random.default_rng(11)
    for trial in range(24):
        r = (rng.standard_normal((23, 41)) * rng.uniform(0.05, 50)).astype(np.float32)
        if trial % 3 == 1:
            r = np.round(r).astype(np.float32)
        if trial % 3 == 2:
            r[:, ::2] = 0
        th, tw = gsm.block_grid(*r.shape)
        cov = gsm_cpu._covariance(np.ascontiguousarray(r[:th, :tw]), th, tw)
        y = rng.standard_normal((25, 32)).astype(np.float32)
        x = np.zeros_like(y)
        want = gsm._solve(cov, y)
        assert gsm_cpu._solve(cov, y, x) == (want is not None)
        if want is not None:
            assert np.array_equal(x, want), trial
        compiled, twin = gsm_cpu.est_params_numba(r, 0.19), gsm.est_params(r, 0.19)
        assert compiled.singular == twin.singular
        for a, b in ((compiled.entropies, twin.entropies), (compiled.variances, twin.variances)):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), trial


@pytest.mark.parametrize("index", [0, 2, 3, 5])
def test_kernels_match_twin(kernel_device, index):
    example = _examples(torch.device("cpu"))[index]
    want = speed_residual_ref(*example.tensors, *example.scalars)
    assert torch.equal(speed_residual_numba(*example.tensors, *example.scalars), want), example.note
    got = speed_residual_fwd(*(t.to(kernel_device) for t in example.tensors), *example.scalars)
    assert torch.equal(got.cpu(), want), example.note


@pytest.mark.parametrize("prescale,method", [(1.0, 0), (0.8, 1)])
def test_kernel_reads_uint16_samples_from_int16_storage_and_cropped_views(kernel_device, prescale, method):
    # the video readers give 16-bit samples as int16 (values from 2**15 turn negative) and the feature path crops
    # libvmaf's chroma size out of larger planes (a view): the kernel reads both without a copy
    gen = torch.Generator().manual_seed(77)
    wide = torch.randint(0, 1 << 16, (2, 100, 113), generator=gen, dtype=torch.int32)
    stored = wide.to(torch.uint16).view(torch.int16)[:, :97, :110]
    want = speed_residual_ref(wide[:, :97, :110], 16, prescale, method, 1.0)
    got = speed_residual_fwd(stored.to(kernel_device), 16, prescale, method, 1.0)
    assert torch.equal(got.cpu(), want)


def test_feature_path_reads_libvmafs_chroma_of_odd_sizes(refdata, pairs):
    # 333x217 files store 167x109 chroma; libvmaf reads 166x108 (its runs used copies cropped so)
    pair = pairs["prev_c333x217_8b_mixed"]
    u, v, du, dv = chroma(refdata, pair)
    assert u.shape[1:] == (109, 167)
    y = torch.from_numpy(pair.ref_y)
    dy = torch.from_numpy(pair.dist_y)
    request = FeatureRequest.of("speed_chroma", LIBVMAF_OPTIONS["v1_3d0h"])
    session = FeatureSession([request], 8)
    first = session.push((y, torch.from_numpy(u), torch.from_numpy(v)), (dy, torch.from_numpy(du), torch.from_numpy(dv)))
    assert all(len(column) == 0 for column in first.values())  # a batch's SpEED columns come one push later
    out = session.flush()
    assert list(out) == list(first) == ["speed_chroma_u_mxv_45_nnf_0.1_snn_0.19_wvm_5", "speed_chroma_v_mxv_45_nnf_0.1_snn_0.19_wvm_5",
                         "speed_chroma_uv_mxv_45_nnf_0.1_snn_0.19_wvm_5"]
    for name, got in out.items():
        assert np.array_equal(got.numpy(), v1_column(pair, "v1_3d0h", name)), name
    assert "vmaf:speed_chroma" in [s.name for s in registry.list_metrics("video")]


@pytest.mark.parametrize("options,match", [
    ({"prescale_method": "bicubic"}, "not supported"),
    ({"prescale_method": "area"}, "must be nearest"),
    ({"kernelscale": 1.3}, "valid kernel scales"),
    ({"weight_var_mode": 7}, "weight_var_mode"),
    ({"sigma_nn": 0.0}, "sigma_nn"),
    ({"max_val": "45"}, "max_val"),
])
def test_bad_options(options, match):
    with pytest.raises(ValueError, match=match):
        SpeedOptions(**options)


def test_bad_inputs():
    plane = np.full((1, 80, 80), 128, np.uint8)
    with pytest.raises(ValueError, match="bit_depth=9"):
        speed_chroma(plane, plane, plane, plane, 9)
    with pytest.raises(ValueError, match="ref_u and dist_u must have the same shape"):
        speed_chroma(plane, plane, plane[:, :, :79], plane, 8)
    with pytest.raises(TypeError, match="SpeedOptions"):
        speed_chroma(plane, plane, plane, plane, 8, options={"speed_sigma_nn": 0.19})
    with pytest.raises(ValueError, match="outside"):
        speed_chroma(plane, plane.astype(np.uint16) * 8, plane, plane, 10)
    with pytest.raises(ValueError, match="speed_chroma has no option 'speed_sigma'"):
        SpeedOptions.from_libvmaf({"speed_sigma": 0.2})
    with pytest.raises(ValueError, match="takes one of nearest"):
        FeatureRequest.of("speed_chroma", {"speed_prescale_method": "cubic"})
    with pytest.raises(ValueError, match="not supported yet with the value 'lanczos4'"):
        FeatureRequest.of("speed_chroma", {"speed_prescale_method": "lanczos4"})
    # flat chroma: singular covariances, and with nn_floor > 0 a score of 0 (refdata/vmaf-score/README.md 10.5.8)
    flat = speed_chroma(plane, plane, plane, plane, 8, options=RUNS["v1_3d0h"])
    assert [float(v) for v in flat.values()] == [0.0, 0.0, 0.0]

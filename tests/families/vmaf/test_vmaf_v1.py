"""The VMAF v1 models (``vmaf_v1.0.16_*``): prediction with libvmaf's chroma correction, score transform and clip,
and end to end from the features computed here.

Expected values: ``refdata/vmaf-score/reference/<pair>.json → vmaf_v1.runs`` (libvmaf 3.2.0's exact doubles):
every model run (``v1_3d0h``, ``v1_3d0h_noclip``, ``v1_3d0h_10b``, ``v1_3d0h_10b_noenc``, ``v1_5d0h``,
``v1_1d5h_2160``, ``v1_3d0h_2160``, ``v1_hfr_3d0h``) on every pair where libvmaf ran it. CAMBI is another family's:
computed here too (``fusedsim.families.cambi``). Every comparison is ``==``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fusedsim.families.vmaf.feature_requests import EXTRACTOR_OPTIONS, FeatureRequest
from fusedsim.families.vmaf.model import BUILT_IN_MODELS, feature_requests, load_model, load_models
from fusedsim.families.vmaf.session import FeatureSession

from chroma_fixtures import chroma
from score_fixtures import load_score_pairs

#: run -> the libvmaf --model string it used (commands in the fixture's runs[run].command)
RUNS = {
    "v1_3d0h": "version=vmaf_v1.0.16_3d0h",
    "v1_3d0h_noclip": "version=vmaf_v1.0.16_3d0h:name=vmaf_noclip:disable_clip",
    "v1_3d0h_10b": "version=vmaf_v1.0.16_3d0h:cambi.enc_bitdepth=8",
    "v1_3d0h_10b_noenc": "version=vmaf_v1.0.16_3d0h",
    "v1_5d0h": "version=vmaf_v1.0.16_5d0h",
    "v1_1d5h_2160": "version=vmaf_v1.0.16_1d5h_2160",
    "v1_3d0h_2160": "version=vmaf_v1.0.16_3d0h_2160",
    "v1_hfr_3d0h": "version=vmaf_v1.0.16_hfr_3d0h",
}
V1_MODELS = sorted(name for name in BUILT_IN_MODELS if name.startswith("vmaf_v1.0.16"))


@pytest.fixture(scope="module")
def pairs(refdata):
    return {p.name: p for p in load_score_pairs(refdata)}


def run_metrics(pair, run: str) -> dict[str, list[float]]:
    """Every column of ``run``, with those the fixture lists as identical or equal to ``v1_3d0h``'s."""
    runs = pair.record["vmaf_v1"]["runs"]
    record, base = runs[run], runs["v1_3d0h"]["metrics"]
    metrics = dict(record["metrics"])
    for name in record.get("columns_identical_to_v1_3d0h", ()):
        metrics.setdefault(name, base[name])
    for name, same in (record.get("columns_equal_to_v1_3d0h_column") or {}).items():
        metrics.setdefault(name, base[same])
    return metrics


def model_input(metrics: dict, base_name: str) -> list[float]:
    """The one column of the run that is feature ``base_name`` (with any option suffix)."""
    hits = [k for k in metrics if k == base_name or k.startswith(base_name + "_")]
    hits = [k for k in hits if not (base_name == "speed_chroma_u" and k.startswith("speed_chroma_uv"))]
    assert len(hits) == 1, (base_name, hits)
    return metrics[hits[0]]


def test_predictions_match_libvmaf_on_every_run_and_pair(pairs):
    frames = corrected = 0
    for pair in pairs.values():
        for run, option in RUNS.items():
            if run not in pair.record["vmaf_v1"]["runs"]:
                continue
            metrics = run_metrics(pair, run)
            model, = load_models(option)
            columns = [model_input(metrics, f.base_name) for f in model.features]
            got = model.predict(columns)
            want = np.asarray(metrics[model.name])
            assert np.array_equal(got, want), f"{pair.name} {run}: max diff {np.abs(got - want).max()}"
            frames += len(want)
            corrected += int((np.asarray(columns[1]) == 0.0).sum())
    assert frames == 450  # every model run of the fixture
    assert corrected > 100  # many frames go through the chroma correction (speed_chroma_uv == 0)


def test_chroma_correction_uses_the_round_tripped_adm3(pairs):
    # the corrected input is c * (1 - adm3') with adm3' = ((slope * adm3 + icpt) - icpt) / slope, not adm3 itself
    # (refdata/vmaf-score/README.md 10.3): the f480x270 pair has speed_chroma_uv == 0 on every frame
    pair = pairs["f480x270_10b_mixed"]
    metrics = run_metrics(pair, "v1_3d0h")
    model = load_model("vmaf_v1.0.16_3d0h")
    columns = [np.asarray(model_input(metrics, f.base_name)) for f in model.features]
    assert not columns[1].any()
    without = load_model("vmaf_v1.0.16_3d0h")
    without = type(model)(**{**without.__dict__, "chroma_correction": None})
    assert not np.array_equal(without.predict(columns), model.predict(columns))
    assert np.array_equal(model.predict(columns), np.asarray(metrics["vmaf"]))


@pytest.mark.parametrize("name", V1_MODELS)
def test_model_files_as_libvmaf_documents_them(name):
    # refdata/vmaf-score/README.md 10.3, table "What differs between the 8 files"
    model = load_model(name)
    variant = name.removeprefix("vmaf_v1.0.16_").removeprefix("hfr_")
    assert [f.extractor for f in model.features] == ["cambi", "speed_chroma", "adm", "motion"]
    assert model.transform_enabled and model.chroma_correction == 120.0
    assert model.clip == ((0.0, 110.0) if variant == "3d0h_2160" else (0.0, 100.0))
    assert model.polynomial == {"3d0h": (5.30624188, 0.980791305, -0.000490758318),
                                "5d0h": (5.30624188, 0.980791305, -0.000490758318), "1d5h_2160": (0, 1, 0),
                                "3d0h_2160": (5, 1, 0)}[variant]
    adm = model.features[2].options
    assert (adm["adm_norm_view_dist"], adm["adm_ref_display_height"]) == {
        "3d0h": (3.0, 1080), "5d0h": (5.0, 1080), "1d5h_2160": (1.5, 2160), "3d0h_2160": (3.0, 2160)}[variant]
    motion = model.features[3].options
    assert bool(motion.get("motion_five_frame_window")) == bool(motion.get("motion_moving_average")) == \
        ("_hfr_" in name)


def _end_to_end(refdata, pair, option: str, run: str, device: str = "cpu") -> None:
    model, = load_models(option)
    requests = [FeatureRequest.of(f.extractor, f.options) for f in model.features]
    session = FeatureSession(requests, pair.bit_depth)
    u, v, du, dv = (torch.from_numpy(p).to(device) for p in chroma(refdata, pair))
    y, dy = (torch.from_numpy(p).to(device) for p in (pair.ref_y, pair.dist_y))
    half = pair.n // 2  # two batches: motion carries across them
    parts = [session.push((y[s], u[s], v[s]), (dy[s], du[s], dv[s]))
             for s in (slice(0, half), slice(half, pair.n))] + [session.flush()]
    names = {name for p in parts for name in p}  # SpEED chroma's columns come one push later
    computed = {name: np.concatenate([p[name].cpu().numpy() for p in parts if name in p]) for name in names}
    metrics = run_metrics(pair, run)
    for name, values in computed.items():
        assert np.array_equal(values, np.asarray(metrics[name])), f"{pair.name} {run} {name}"
    columns = [computed[f.base_name + FeatureRequest.of(f.extractor, f.options).suffix] for f in model.features]
    assert np.array_equal(model.predict(columns), np.asarray(metrics["vmaf"])), f"{pair.name} {run}"


@pytest.mark.parametrize("clip,run", [
    ("r576x324_8b_mixed", "v1_3d0h"), ("r576x324_8b_mixed", "v1_5d0h"), ("r576x324_8b_mixed", "v1_3d0h_2160"),
    ("r576x324_8b_mixed", "v1_hfr_3d0h"), ("prev_d504x400_10b_jpeg8", "v1_3d0h"),
])
def test_end_to_end_from_computed_features(refdata, pairs, clip, run):
    _end_to_end(refdata, pairs[clip], RUNS[run], run)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("clip,run", [("r576x324_8b_mixed", "v1_3d0h"), ("prev_d504x400_10b_jpeg8", "v1_3d0h")])
def test_end_to_end_on_the_gpu(refdata, pairs, clip, run):
    # every v1 feature's GPU path, SpEED chroma's statistics on the worker thread, against libvmaf's columns
    _end_to_end(refdata, pairs[clip], RUNS[run], run, device="cuda")


@pytest.mark.skipif("cambi" in EXTRACTOR_OPTIONS, reason="the cambi feature is installed")
def test_a_missing_feature_is_a_clear_error():
    model = load_model("vmaf_v1.0.16_3d0h")
    with pytest.raises(ValueError, match="reads libvmaf's 'cambi' feature .* does not compute"):
        feature_requests(model)


def test_bad_model_files(tmp_path):
    import json

    document = json.loads(BUILT_IN_MODELS["vmaf_v1.0.16_3d0h"].read_text())
    document["model_dict"]["chroma_correction_parameter"] = "120"
    (tmp_path / "bad.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match="chroma_correction_parameter must be a number"):
        load_model(path=tmp_path / "bad.json")
    document["model_dict"]["chroma_correction_parameter"] = 120.0
    document["model_dict"]["feature_names"][2] = "VMAF_integer_feature_adm2_score"
    (tmp_path / "bad.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match="exactly one feature named with 'adm3'"):
        load_model(path=tmp_path / "bad.json")


def test_clips_of_odd_size_through_the_pipeline(refdata, pairs):
    # raw 333x217 files store 167x109 chroma; libvmaf reads 166x108 (its runs used copies cropped so): the
    # pipeline's reader and speed_chroma's crop give libvmaf's values
    from fusedsim.families.vmaf.pipeline import score_clips

    pair = pairs["prev_c333x217_8b_mixed"]
    clips = [refdata / "vmaf" / "clips" / f"{name}.yuv" for name in ("c333x217_8b_ref", "c333x217_8b_mixed")]
    assert all(path.is_file() for path in clips)
    features = ["speed_chroma=speed_sigma_nn=0.19:speed_nn_floor=0.1:speed_weight_var_mode=5:speed_max_val=45.0",
                "motion=motion_max_val=18"]
    scores = score_clips(*clips, features, device="cpu", width=333, height=217, pix_fmt="yuv420p", batch_frames=2)
    metrics = run_metrics(pair, "v1_3d0h")
    assert len(scores.metrics) == 6
    for name, values in scores.metrics.items():
        assert np.array_equal(values, np.asarray(metrics[name])), name

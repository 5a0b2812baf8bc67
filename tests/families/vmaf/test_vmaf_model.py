"""VMAF models: libvmaf's JSON models parsed and predicted in libvmaf's order reproduce libvmaf 3.2.0's scores bit
for bit from its own printed features (refdata/vmaf-score: every pair, runs default, neg, 4k and modelopts)."""

from __future__ import annotations


import numpy as np
import pytest

from fusedsim.families.vmaf.feature_requests import FeatureRequest, parse_feature_option
from fusedsim.families.vmaf.model import BUILT_IN_MODELS, feature_requests, parse_model_option, predict_from

from score_fixtures import load_score_pairs

# the --model options of each fixture run (refdata/vmaf-score/commands.txt)
RUNS = {
    "default": ["version=vmaf_v0.6.1"],
    "neg": ["version=vmaf_v0.6.1neg"],
    "4k": ["version=vmaf_4k_v0.6.1"],
    "modelopts": ["version=vmaf_v0.6.1:name=vmaf", "version=vmaf_v0.6.1:name=vmaf_noclip:disable_clip",
                  "version=vmaf_v0.6.1:name=vmaf_transform:enable_transform",
                  "version=vmaf_v0.6.1:name=vmaf_transform_noclip:enable_transform:disable_clip"],
}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_prediction_from_libvmaf_features_equals_libvmaf(refdata, run):
    for pair in load_score_pairs(refdata):
        for option in RUNS[run]:
            model = parse_model_option(option).load()
            features = {}
            for request in feature_requests(model):
                for base in {f.base_name for f in model.features if f.extractor == request.extractor}:
                    features[base + request.suffix] = np.array(pair.metric(run, base + request.suffix))
            got = predict_from(model, features)
            assert got.tolist() == pair.metric(run, model.name), f"{pair.name} {run} {model.name}"


def test_neg_model_asks_for_gain_limited_features():
    model = parse_model_option("version=vmaf_v0.6.1neg").load()
    requests = feature_requests(model)
    assert {r.extractor: r.suffix for r in requests} == {"adm": "_egl_1", "motion": "", "vif": "_egl_1"}
    assert FeatureRequest.of("vif", {"vif_enhn_gain_limit": "1.0"}) == \
        next(r for r in requests if r.extractor == "vif")


def test_model_options_and_overloads():
    request = parse_model_option("version=vmaf_v0.6.1:name=v:enable_transform:disable_clip:vif.vif_enhn_gain_limit=1.5")
    model = request.load()
    assert (model.name, model.enable_transform, model.disable_clip) == ("v", True, True)
    vif = next(r for r in feature_requests(model) if r.extractor == "vif")
    assert vif.suffix == "_egl_1.5"  # libvmaf's %g
    v1 = {f"vmaf_v1.0.16_{hfr}{variant}" for hfr in ("", "hfr_") for variant in ("3d0h", "5d0h", "1d5h_2160",
                                                                                  "3d0h_2160")}
    assert set(BUILT_IN_MODELS) == {"vmaf_v0.6.1", "vmaf_v0.6.1neg", "vmaf_4k_v0.6.1", "vmaf_4k_v0.6.1neg"} | v1


@pytest.mark.parametrize("text, match", [
    ("vmaf_v0.6.1", "bad option 'vmaf_v0.6.1'"),
    ("name=x", "exactly one of version= and path="),
    ("version=vmaf_v0.6.1:path=m.json", "exactly one of version= and path="),
    ("version=vmaf_v0.6.1:disable_clip=maybe", "takes true or false"),
    ("version=vmaf_v0.6.1:colour=red", "unknown key 'colour'"),
    ("version=vmaf_v0.6.1:cambi.enc_bitdepth=10", "no 'cambi' feature"),
    ("version=vmaf_v0.6.1:vif.vif_enhn_gain_limit=1000", "must be in [1, 100]"),
])
def test_bad_model_options(text, match):
    with pytest.raises(ValueError, match=match.replace("[", r"\[").replace("(", r"\(")):
        request = parse_model_option(text)
        feature_requests(request.load())


def test_bad_model_files(tmp_path):
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_model_option(f"path={tmp_path / 'bad.json'}").load()
    (tmp_path / "other.json").write_text('{"model_dict": {"model_type": "RESIDUEBOOTSTRAP_LIBSVMNUSVR"}}')
    with pytest.raises(ValueError, match="not supported"):
        parse_model_option(f"path={tmp_path / 'other.json'}").load()
    with pytest.raises(ValueError, match="pickled"):
        parse_model_option("path=vmaf_float_v0.6.1.pkl").load()


@pytest.mark.parametrize("text, match", [
    ("vif=debug=yes", "takes true or false"),
    ("vif=vif_enhn_gain_limit=x", "takes a number"),
    ("vif=debug", "bad option string"),
    ("bogus", "unknown feature 'bogus'"),
    ("adm=adm_skip_scale0=true", "not supported yet"),
])
def test_bad_feature_options(text, match):
    with pytest.raises(ValueError, match=match):
        parse_feature_option(text)


def test_feature_names_follow_libvmaf():
    # libvmaf: non-default feature parameters sorted by option name, "_<alias>_<%g value>"; debug names nothing
    assert parse_feature_option("vif=vif_enhn_gain_limit=1.0:debug=true").suffix == "_egl_1"
    assert parse_feature_option("adm=adm_enhn_gain_limit=100").suffix == ""  # the default: no suffix, one request
    assert parse_feature_option("adm=adm_enhn_gain_limit=100") == parse_feature_option("adm")

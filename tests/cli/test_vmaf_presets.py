"""``fusedsim vmaf --aom_ctc VERSION`` and ``--nflx_ctc VERSION``: libvmaf's presets (``tools/cli_parse.c`` at
Netflix/vmaf f85a8536: ``aom_ctc_v1_0`` ... ``aom_ctc_v7_0``, ``nflx_ctc_v1_0``), expanded in place among the
``--model`` and ``--feature`` options, and refused with the preset named when they need what is not computed."""

from __future__ import annotations

import argparse

import pytest

from fusedsim.cli import main as cli_main
from fusedsim.cli import vmaf as vmaf_cli
from fusedsim.cli.vmaf_presets import AOM_CTC, NFLX_CTC, preset
from fusedsim.families.vmaf.feature_requests import EXTRACTOR_OPTIONS

# libvmaf's presets, transcribed from cli_parse.c
AOM_V1_FEATURES = ["psnr=reduced_hbd_peak=true:enable_apsnr=true:min_sse=0.5", "ciede",
                   "float_ssim=enable_db=true:clip_db=true", "float_ms_ssim=enable_db=true:clip_db=true", "psnr_hvs"]
AOM_MODELS = ["version=vmaf_v0.6.1:name=vmaf", "version=vmaf_v0.6.1neg:name=vmaf_neg"]


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="fusedsim")
    vmaf_cli.add_parser(parser.add_subparsers())
    return parser.parse_args(["vmaf", *argv])


@pytest.mark.parametrize("version,extra", [("v1.0", []), ("v2.0", []), ("v3.0", ["cambi"]), ("v6.0", ["cambi"])])
def test_aom_ctc_expands_as_libvmaf(version, extra):
    models, features = preset("--aom_ctc", version)
    assert list(models) == AOM_MODELS and list(features) == AOM_V1_FEATURES + extra


def test_aom_ctc_v7_replaces_float_ssim_in_place():
    _, features = preset("--aom_ctc", "v7.0")
    assert features[2] == "float_ssim=scale=1:enable_db=true:clip_db=true"
    assert list(features) == AOM_V1_FEATURES[:2] + [features[2]] + AOM_V1_FEATURES[3:] + ["cambi"]
    assert list(AOM_CTC) == ["v1.0", "v2.0", "v3.0", "v4.0", "v5.0", "v6.0", "v7.0"]


def test_nflx_ctc_expands_as_libvmaf():
    assert NFLX_CTC["v1.0"] == (("version=vmaf_4k_v0.6.1:name=vmaf", "version=vmaf_4k_v0.6.1neg:name=vmaf_neg"),
                                ("psnr=enable_chroma=true:enable_apsnr=true", "float_ssim=enable_db=true:clip_db=true",
                                 "cambi"))


def test_presets_keep_their_place_among_options():
    args = _parse("r.y4m", "d.y4m", "-m", "version=vmaf_v0.6.1:name=first", "--feature", "ssim", "--nflx_ctc", "v1.0",
                  "--feature", "vif")
    assert args.models == ["version=vmaf_v0.6.1:name=first", *NFLX_CTC["v1.0"][0]]
    assert args.features == ["ssim", *NFLX_CTC["v1.0"][1], "vif"]
    assert args.preset_origin["cambi"] == "--nflx_ctc v1.0"


@pytest.mark.parametrize("argv,message", [
    (["--aom_ctc", "proposed"], "--aom_ctc proposed is deprecated"),
    (["--aom_ctc", "v8.0"], "bad --aom_ctc version 'v8.0'"),
    (["--nflx_ctc", "v2.0"], "bad --nflx_ctc version 'v2.0'"),
])
def test_bad_versions(argv, message, capsys):
    with pytest.raises(SystemExit):
        _parse("r.y4m", "d.y4m", *argv)
    assert message in capsys.readouterr().err


@pytest.mark.skipif("psnr_hvs" in EXTRACTOR_OPTIONS and "ciede" in EXTRACTOR_OPTIONS,
                    reason="every AOM CTC feature is installed")
def test_a_preset_needing_missing_features_names_itself(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli_main, "COMMANDS", {"vmaf": "vmaf"})
    clip = tmp_path / "c.yuv"
    clip.write_bytes(bytes(64 * 64 * 3 // 2))
    rc = cli_main.main(["vmaf", str(clip), str(clip), "-w", "64", "-h", "64", "-p", "420", "-b", "8",
                        "--aom_ctc", "v7.0", "-o", str(tmp_path / "out.xml")])
    assert rc != 0
    assert "--aom_ctc v7.0 adds" in capsys.readouterr().err
    assert not (tmp_path / "out.xml").exists()

"""``score --format value`` (bare numbers, as the ssimulacra2 and dssim tools print) and ``--param
METRIC.NAME=VALUE`` through score, compare and batch, checked against the public API with the same keywords."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch
from _pair_images import expected_ssim, write_images
from PIL import Image

import fusedsim
from fusedsim.cli.main import main
from fusedsim.engine import Scorer


def _codes(path) -> torch.Tensor:
    """The uint8 sRGB codes the perceptual metrics read from an 8-bit file."""
    return torch.from_numpy(np.array(Image.open(path).convert("RGB"))).permute(2, 0, 1)[None].contiguous()


@pytest.fixture()
def pair(tmp_path):
    write_images(tmp_path, refs=1, dists=1)
    return tmp_path / "r0.png", tmp_path / "d00.png"


def _score(capsys, *argv) -> tuple[int, str, str]:
    code = main(["score", *map(str, argv), "--device", "cpu"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_format_value_prints_bare_numbers(pair, capsys):
    ref, dist = pair
    code, out, _ = _score(capsys, ref, dist, "--metric", "ssim", "--format", "value")
    assert code == 0 and out == f"{expected_ssim(ref, dist)!r}\n"
    code, out, _ = _score(capsys, ref, dist, "--metric", "butteraugli", "--format", "value")
    want = fusedsim.butteraugli(_codes(ref), _codes(dist))
    assert code == 0 and out.split("\n") == [repr(float(want.max_norm)), repr(float(want.pnorm3)), ""]
    code, out, _ = _score(capsys, ref, ref, "--metric", "psnr", "--format", "value")
    assert code == 0 and out == "inf\n"


def test_param_reaches_the_metric(pair, capsys):
    ref, dist = pair
    code, out, _ = _score(capsys, ref, dist, "--metric", "butteraugli", "--format", "value",
                          "--param", "butteraugli.intensity_target=250")
    want = fusedsim.butteraugli(_codes(ref), _codes(dist), intensity_target=250.0)
    default = fusedsim.butteraugli(_codes(ref), _codes(dist))
    assert code == 0 and float(out.split()[0]) == float(want.max_norm) != float(default.max_norm)
    code, out, _ = _score(capsys, ref, dist, "--metric", "cvvdp", "--format", "value",
                          "--param", "cvvdp.display=standard_fhd")
    assert code == 0 and float(out) == float(fusedsim.cvvdp(_codes(ref), _codes(dist), display="standard_fhd"))
    code, out, _ = _score(capsys, ref, dist, "--metric", "iw-ssim", "--format", "value", "--param", "iwssim.luma=bt601")
    assert code == 2  # 64x48 is below IW-SSIM's 176 px: the parameter was accepted, the size refused


def test_compare_and_batch_take_params(pair, tmp_path, capsys):
    ref, dist = pair
    want = float(fusedsim.butteraugli(_codes(ref), _codes(dist), hf_asymmetry=2.0).pnorm3)
    assert main(["compare", str(ref), str(dist), "--metric", "butteraugli", "--format", "tsv", "--device", "cpu",
                 "--param", "butteraugli.hf_asymmetry=2"]) == 0
    header, row = (line.split("\t") for line in capsys.readouterr().out.splitlines())
    assert float(row[header.index("butteraugli.pnorm3")]) == want
    (tmp_path / "pairs.csv").write_text(f"ref,dist\n{ref.name},{dist.name}\n")
    out = tmp_path / "out.csv"
    assert main(["batch", str(tmp_path / "pairs.csv"), "-o", str(out), "--metric", "butteraugli", "--device", "cpu",
                 "--quiet", "--param", "butteraugli.hf_asymmetry=2"]) == 0
    with open(out, newline="") as f:
        assert float(next(csv.DictReader(f))["butteraugli.pnorm3"]) == want


@pytest.mark.parametrize("argv,message", [
    (["--metric", "butteraugli", "--param", "butteraugli.intensity=250"],
     "butteraugli has no parameter 'intensity'; known parameters: intensity_target, hf_asymmetry"),
    (["--metric", "ssim", "--param", "ssim.win_size=7"], "ssim has no parameter 'win_size'; ssim takes no parameters"),
    (["--metric", "butteraugli", "--param", "butteraugli.intensity_target=bright"],
     "--param butteraugli.intensity_target=bright: expected a number"),
    (["--metric", "butteraugli", "--param", "butteraugli=250"], "expected METRIC.NAME=VALUE"),
])
def test_unknown_or_malformed_params_are_usage_errors(pair, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["score", *map(str, pair), *argv])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["--metric", "butteraugli", "--param", "butteraugli.intensity_target=-1"],
     "--param butteraugli.intensity_target=-1.0: butteraugli: intensity_target must be a finite number > 0"),
    (["--metric", "cvvdp", "--param", "cvvdp.display=crt"], "--param cvvdp.display=crt: cvvdp: unknown display 'crt'; "
                                                             "known displays: standard_4k"),
    (["--metric", "ssim", "--param", "butteraugli.hf_asymmetry=1"],
     "--param butteraugli.hf_asymmetry: butteraugli is not among the metrics computed (ssim)"),
])
def test_values_the_metric_refuses(pair, capsys, argv, message):
    code, _, err = _score(capsys, *pair, *argv)
    assert code == 2 and message in err


def test_scorer_checks_params_when_built():
    """The Python API takes every keyword the metric's functions take (not only those --param offers), and refuses
    the others before any image, naming the known ones."""
    with pytest.raises(ValueError, match="iw-ssim has no parameter 'gamma'; its parameters are luma"):
        Scorer(["iw-ssim"], device="cpu", params={"iw-ssim": {"gamma": 2.2}})
    with pytest.raises(ValueError, match="iw-ssim: luma must be one of"):
        Scorer(["iw-ssim"], device="cpu", params={"iwssim": {"luma": "rec2020"}})
    # zensim's profile is a keyword of zensim() but not of prepare_zensim(), where the engine would pass it
    with pytest.raises(ValueError, match="zensim has no parameter 'profile'; its parameters are check_range"):
        Scorer(["zensim"], device="cpu", params={"zensim": {"profile": "PreviewV0_1"}})
    assert Scorer(["ssim"], device="cpu", params={"ssim": {"win_size": 7}}).params["ssim"] == {"win_size": 7}

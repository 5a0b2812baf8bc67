"""One vocabulary for metric kinds: ``list-metrics --kind image`` lists exactly the metrics ``score`` takes (and its
help lists), perceptual ones included; ``--kind perceptual`` (``srgb`` understood) only those that read sRGB."""

from __future__ import annotations

import json

import pytest

from fusedsim.cli.common import parse_image_metric
from fusedsim.cli.main import main


def _listed(capsys, *argv) -> list[dict]:
    assert main(["list-metrics", "--format", "json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def _score_help_metrics(capsys) -> list[str]:
    with pytest.raises(SystemExit):
        main(["score", "--help"])
    text = capsys.readouterr().out
    block = text.split("metrics:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines()]


def test_image_kind_is_what_score_takes(capsys):
    image = _listed(capsys, "--kind", "image")
    names = [r["name"] for r in image]
    assert names == parse_image_metric("all") == _score_help_metrics(capsys)
    assert {"butteraugli", "ssimulacra2", "cvvdp"} <= set(names)  # the perceptual metrics are image metrics
    assert {r["kind"] for r in image} == {"image"}


def test_perceptual_kind_is_the_srgb_image_metrics(capsys):
    image = {r["name"]: r for r in _listed(capsys, "--kind", "image")}
    perceptual = _listed(capsys, "--kind", "perceptual")
    assert perceptual == _listed(capsys, "--kind", "srgb")
    assert [r["name"] for r in perceptual] == [n for n, r in image.items() if r["input"] == "sRGB"]
    assert {"butteraugli", "ssimulacra2", "dssim"} <= {r["name"] for r in perceptual}
    assert not {"ssim", "psnr"} & {r["name"] for r in perceptual}


def test_every_metric_is_listed_once_in_kind_order(capsys):
    everything = [r["name"] for r in _listed(capsys)]
    parts = [r["name"] for kind in ("image", "video") for r in _listed(capsys, "--kind", kind)]
    assert everything == parts

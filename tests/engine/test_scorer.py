"""Scorer: the values of the metric functions, the perceptual input contract, the cached reference, bad input,
and `fusedsim score`'s engine options."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from engine_pairs import image_pair
from PIL import Image

import fusedsim
from fusedsim.engine import Scorer, ScoreResult
from fusedsim.engine.memory import MemoryMode, parse_memory
from fusedsim.io.images import ImageData
from fusedsim.metrics import registry


def test_values_are_those_of_the_metric_functions():
    ref, dist = image_pair(60, 70)
    result = Scorer(["ssim", "psnr", "dssim"], device="cpu", memory="full").score(ref, dist)
    assert isinstance(result, ScoreResult) and result.backend == "cpu full" and result.downgrades == []
    x, y = ref.pixels, dist.pixels
    assert result.values["ssim"] == float(fusedsim.ssim(x, y, data_range=255))
    assert result.values["psnr"] == float(fusedsim.metrics.psnr(x, y, data_range=255))
    assert result.values["dssim"] == float(fusedsim.metrics.dssim(x / 255, y / 255).reshape(-1)[0])


def test_perceptual_metrics_read_grey_as_rgb_and_report_every_field():
    ref, dist = image_pair(40, 48, channels=1)
    result = Scorer(["butteraugli"], device="cpu").score(ref, dist)
    value = result.values["butteraugli"]
    assert set(value) == {"max_norm", "pnorm3"}
    # 8-bit images reach the perceptual metrics as uint8 codes (issue 38), grey replicated
    out = fusedsim.metrics.butteraugli(ref.pixels.expand(-1, 3, -1, -1).to(torch.uint8),
                                       dist.pixels.expand(-1, 3, -1, -1).to(torch.uint8))
    assert value == {"max_norm": float(out.max_norm.reshape(-1)[0]), "pnorm3": float(out.pnorm3.reshape(-1)[0])}


def test_cached_reference_is_prepared_once(monkeypatch):
    spec = registry.get_metric("dssim")
    prepare = spec.load("prepare")
    calls = []

    def counting(*args, **kwargs):
        calls.append(1)
        return prepare(*args, **kwargs)

    import dataclasses

    monkeypatch.setitem(registry._FUNCTIONS, spec.name, dataclasses.replace(spec.implementation(), prepare=counting))
    ref, d1 = image_pair(40, 40, seed=1)
    _, d2 = image_pair(40, 40, seed=2)
    scorer = Scorer(["dssim", "ssim"], device="cpu").set_reference(ref)
    got = [scorer.score_prepared(d).values for d in (d1, d2)]
    assert len(calls) == 1
    scorer.score(ref, d1)  # the same reference object: still prepared
    assert len(calls) == 1
    assert got == [Scorer(["dssim", "ssim"], device="cpu").score(ref, d).values for d in (d1, d2)]


def test_params_reach_the_metric():
    ref, dist = image_pair(40, 40)
    default = Scorer(["ssim"], device="cpu").score(ref, dist).values["ssim"]
    small = Scorer(["ssim"], device="cpu", params={"SSIM": {"win_size": 7}}).score(ref, dist).values["ssim"]
    assert small == float(fusedsim.ssim(ref.pixels, dist.pixels, data_range=255, win_size=7)) and small != default


def test_bad_input_is_named():
    ref, dist = image_pair(40, 40)
    with pytest.raises(ValueError, match="metrics must name at least one metric"):
        Scorer([])
    with pytest.raises(ValueError, match="vmaf:ssim is a video metric"):
        Scorer(["vmaf:ssim"])
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        Scorer(["nope"])
    with pytest.raises(ValueError, match="params: 'psnr' is not one of the scorer's metrics"):
        Scorer(["ssim"], params={"psnr": {}})
    with pytest.raises(ValueError, match="memory must be auto, full, strip or strip:ROWS"):
        Scorer(["ssim"], memory="half")
    with pytest.raises(TypeError, match="ref must be a fusedsim.io.images.ImageData"):
        Scorer(["ssim"]).score(ref.pixels, dist)
    with pytest.raises(RuntimeError, match="set_reference"):
        Scorer(["ssim"]).score_prepared(dist)
    other = ImageData(Path("x.png"), torch.zeros(1, 3, 41, 40), 8, "RGB")
    with pytest.raises(ValueError, match="images differ in size"):
        Scorer(["ssim"], device="cpu").score(ref, other)
    with pytest.raises(ValueError, match="REF and DIST are 40×40 but ms-ssim needs at least 161 px"):
        Scorer(["ms-ssim"], device="cpu").score(ref, dist)


def test_parse_memory():
    assert parse_memory("AUTO") == MemoryMode("auto") and parse_memory("strip:512") == MemoryMode("strip", 512)
    assert parse_memory(64) == MemoryMode("strip", 64) and str(parse_memory("strip:8")) == "strip:8"
    for bad in ("strip:0", "strip:", "strip:-3", 0):
        with pytest.raises(ValueError):
            parse_memory(bad)
    with pytest.raises(TypeError):
        parse_memory(True)


# ------------------------------------------------------------------------------------------------ fusedsim score
def _write_pair(tmp_path) -> tuple[Path, Path]:
    ref, dist = image_pair(120, 90)
    paths = []
    for name, image in (("a.png", ref), ("b.png", dist)):
        Image.fromarray(image.pixels[0].permute(1, 2, 0).numpy().astype(np.uint8)).save(tmp_path / name)
        paths.append(tmp_path / name)
    return paths[0], paths[1]


def test_score_cli_comma_lists_memory_and_tsv(tmp_path, capsys):
    from fusedsim.cli.main import main

    a, b = _write_pair(tmp_path)
    assert main(["score", str(a), str(b), "--metric", "ssim,psnr", "--format", "json", "--device", "cpu",
                 "--memory", "full"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert list(full["metrics"]) == ["ssim", "psnr"] and full["backend"] == "cpu full"
    assert main(["score", str(a), str(b), "--metric", "ssim,psnr", "--format", "tsv", "--device", "cpu",
                 "--memory", "strip:32"]) == 0
    header, row, *rest = capsys.readouterr().out.splitlines()
    assert rest == [] and header.split("\t") == ["reference", "distorted", "ssim", "psnr", "backend"]
    cells = row.split("\t")
    assert cells[-1] == "cpu strip 32"
    assert float(cells[2]) == pytest.approx(full["metrics"]["ssim"], abs=1e-6)
    assert float(cells[3]) == pytest.approx(full["metrics"]["psnr"], abs=1e-4)


def test_score_cli_all_and_bad_memory(capsys):
    from fusedsim.cli.main import main
    from fusedsim.cli.score import parse_image_metric, score_metric_specs

    assert parse_image_metric("all") == [s.name for s in score_metric_specs()]
    assert parse_image_metric("psnr, SSIM") == ["psnr", "ssim"]
    with pytest.raises(SystemExit):
        main(["score", "--example", "--memory", "strip:zero"])
    assert "--memory must be auto, full, strip or strip:ROWS" in capsys.readouterr().err


def test_scoring_does_not_import_torch_dynamo():
    """Scoring 8-bit pairs never imports ``torch._dynamo`` (1.5 s in a fresh process here, 12 s on a machine
    without bytecode caches): a check on a meta tensor once did, through torch's Python reference of ``div``, in
    every batch process and Ray actor."""
    import subprocess
    import sys

    probe = ("import sys, torch\n"
             "from pathlib import Path\n"
             "from fusedsim.engine import Scorer\n"
             "from fusedsim.io.images import ImageData\n"
             "g = torch.Generator().manual_seed(0)\n"
             "x = torch.randint(0, 256, (1, 3, 180, 180), dtype=torch.uint8, generator=g)\n"
             "im = lambda t: ImageData(path=Path('a.png'), pixels=t, bit_depth=8, channels='rgb')\n"
             "s = Scorer(['butteraugli', 'ssimulacra2', 'dssim', 'cvvdp', 'iw-ssim', 'ssim', 'psnr'], device='cpu')\n"
             "s.score(im(x), im(x.flip(-1)))\n"
             "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False"]

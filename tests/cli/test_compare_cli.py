"""``fusedsim compare REF DIST...``: one prepared reference, a table in three formats, bad DIST files."""

from __future__ import annotations

import json
import math

import pytest
from _pair_images import expected_psnr, expected_ssim, write_images

from fusedsim.cli.main import main


def _compare(capsys, *argv) -> tuple[int, str, str]:
    code = main(["compare", *map(str, argv), "--device", "cpu"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_values_and_one_reference_preparation(tmp_path, capsys, monkeypatch):
    write_images(tmp_path, refs=1, dists=2)
    from fusedsim.engine.scorer import Scorer

    prepared = []
    real = Scorer._reference_state
    monkeypatch.setattr(Scorer, "_reference_state",
                        lambda self, spec, ref, device: (prepared.append(spec.name) if (spec.name, str(device))
                                                         not in self._prepared else None,
                                                         real(self, spec, ref, device))[1])
    ref, dists = tmp_path / "r0.png", [tmp_path / "d00.png", tmp_path / "d01.png"]
    code, out, _ = _compare(capsys, ref, *dists, "--metric", "ssim,psnr,butteraugli", "--format", "json")
    assert code == 0
    payload = json.loads(out)
    assert payload["reference"] == str(ref) and [r["distorted"] for r in payload["results"]] == list(map(str, dists))
    for entry, dist in zip(payload["results"], dists):
        m = entry["metrics"]
        assert m["ssim"] == expected_ssim(ref, dist)
        assert m["psnr"] == pytest.approx(expected_psnr(ref, dist), abs=1e-4)  # float32 vs float64 (see batch)
        assert set(m) == {"ssim", "psnr", "butteraugli.max_norm", "butteraugli.pnorm3"}
        assert entry["error"] == "" and entry["backend"] == "cpu full"
    assert sorted(prepared) == ["butteraugli", "psnr", "ssim"]  # each metric prepared REF once for both DISTs


def test_plain_and_tsv_tables(tmp_path, capsys):
    write_images(tmp_path, refs=1, dists=2)
    ref, dists = tmp_path / "r0.png", [tmp_path / "d00.png", tmp_path / "d01.png"]
    code, out, _ = _compare(capsys, ref, *dists, "--format", "tsv", "--metric", "ssim")
    lines = [line.split("\t") for line in out.splitlines()]
    assert code == 0 and lines[0] == ["distorted", "ssim", "backend"]
    assert [float(line[1]) for line in lines[1:]] == [expected_ssim(ref, d) for d in dists]  # round-trip exact
    code, out, _ = _compare(capsys, ref, *dists)
    rows = out.splitlines()
    assert code == 0 and rows[0].split() == ["distorted", "ssim", "backend"] and len(rows) == 3
    assert rows[1].split()[1] == f"{expected_ssim(ref, dists[0]):.6f}"


def test_bad_dist_is_reported_and_others_scored(tmp_path, capsys):
    write_images(tmp_path, refs=1, dists=1)
    code, out, err = _compare(capsys, tmp_path / "r0.png", tmp_path / "nope.png", tmp_path / "d00.png",
                              "--format", "json")
    assert code == 1
    first, second = json.loads(out)["results"]
    assert first["metrics"]["ssim"] is None and "not found" in first["error"] and "nope.png" in err
    assert second["metrics"]["ssim"] == expected_ssim(tmp_path / "r0.png", tmp_path / "d00.png")
    code, _, err = _compare(capsys, tmp_path / "missing_ref.png", tmp_path / "d00.png")
    assert code == 2 and "REF: image file not found" in err
    assert not math.isnan(second["metrics"]["ssim"])

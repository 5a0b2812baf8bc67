"""``fusedsim list-metrics``: the registry as a table and as strict JSON."""

from __future__ import annotations

import json

import pytest

from fusedsim.cli.main import main
from fusedsim.metrics.registry import list_metrics


def test_plain_table_has_a_row_per_registered_metric(capsys):
    assert main(["list-metrics"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["name", "kind", "input", "outputs"]
    assert [line.split()[0] for line in lines[1:]] == [s.name for s in list_metrics()]
    psnr = next(line for line in lines if line.startswith("psnr "))
    assert psnr.split()[:6] == ["psnr", "image", "values", "psnr", "higher", "inf"]
    butteraugli = next(line for line in lines if line.startswith("butteraugli "))
    assert butteraugli.split()[:3] == ["butteraugli", "image", "sRGB"]


def test_json_is_strict_and_complete(capsys):
    assert main(["list-metrics", "--format", "json", "--kind", "video"]) == 0
    text = capsys.readouterr().out
    rows = json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))
    assert [r["name"] for r in rows] == ["vmaf:ssim", "vmaf:float_ssim", "vmaf:float_ms_ssim", "vmaf:psnr",
                                         "vmaf:vif", "vmaf:adm", "vmaf:motion", "vmaf:psnr_hvs", "vmaf:ciede",
                                         "vmaf:speed_chroma", "vmaf:float_vif", "vmaf:float_adm",
                                         "vmaf:float_motion", "vmaf:cambi"]
    psnr = next(r for r in rows if r["name"] == "vmaf:psnr")
    assert psnr["outputs"] == ["psnr_y", "psnr_cb", "psnr_cr"] and psnr["identical_value"] is None
    assert {"min_size", "halo_rows", "bytes_per_pixel", "cached_reference", "devices", "differentiable"} <= set(psnr)


def test_json_writes_infinity_as_null(capsys):
    assert main(["list-metrics", "--format", "json", "--kind", "image"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["psnr"]["identical_value"] is None and rows["psnr"]["value_range"] == [0.0, None]
    assert rows["ms-ssim"]["aliases"] == ["ms_ssim", "msssim"] and rows["ms-ssim"]["min_size"] == 161


def test_a_closed_pipe_ends_the_command_quietly(monkeypatch):
    """``fusedsim ... | head`` must end with SIGPIPE's status, not a traceback, when the reader exits early."""
    import os
    import sys

    from fusedsim.cli import main as cli_main

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone away
    stream = os.fdopen(write_end, "w")
    monkeypatch.setattr(sys, "stdout", stream)
    try:
        assert cli_main.main(["list-metrics", "--format", "json"]) == 141
    finally:
        monkeypatch.undo()
        stream.close()

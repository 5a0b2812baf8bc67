"""``fusedsim vmaf``: options, libvmaf output layouts, pooling, bad input, and real runs on the fixture clips."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import tracemalloc
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from fusedsim.cli import main as cli_main
from fusedsim.cli import vmaf as vmaf_cli
from fusedsim.cli import vmaf_output
from fusedsim.families.vmaf import pipeline as vmaf_pipeline
from fusedsim.io.video import VideoFormat, open_video

SUPPORTED = ("ssim", "float_ssim", "float_ms_ssim", "psnr", "vif", "adm", "motion", "psnr_hvs", "ciede", "speed_chroma",
             "float_vif", "float_adm", "float_motion", "cambi")
HAVE_FEATURES = importlib.util.find_spec("fusedsim.vmaf.features") is not None
needs_features = pytest.mark.skipif(not HAVE_FEATURES, reason="fusedsim.vmaf.features is not available")

# fixture clips that ship as .y4m (and .yuv) with per-frame reference values
Y4M_PAIRS = [("c333x217_8b_ref", "c333x217_8b_mixed", "yuv420p"), ("e333x217_10b_ref", "e333x217_10b_mixed",
                                                                      "yuv420p10le")]


_MODEL_FLAGS = {"-m", "--model", "-n", "--no_prediction", "--help", "-v", "--version"}


def fusedsim(*argv: str) -> int:
    """Run the real entry point with only the ``vmaf`` command registered (other commands are not under test).
    These tests exercise the feature pipeline, mostly through a stand-in registry that has no VMAF model inputs:
    a command line that names no model option scores features only (``-n``, as libvmaf's feature runs do)."""
    args = [str(a) for a in argv]
    if args[:1] == ["vmaf"] and not _MODEL_FLAGS & set(args):
        args.append("-n")
    return cli_main.main(args)


@pytest.fixture(autouse=True)
def only_vmaf_command(monkeypatch):
    monkeypatch.setattr(cli_main, "COMMANDS", {"vmaf": "vmaf"})


class FakeRegistry:
    """Stands in for ``fusedsim.vmaf.features``: cheap, deterministic per-frame numbers, and a call log."""

    SUPPORTED_FEATURES = SUPPORTED

    def __init__(self):
        self.calls: list[tuple[str, int, int, str]] = []

    def extract(self, feature, ref, dist, device="auto"):
        assert ref.fmt == dist.fmt and ref.n == dist.n and ref.first_index == dist.first_index
        self.calls.append((feature, ref.first_index, ref.n, device))
        diff = np.abs(ref.y.astype(np.float64) - dist.y.astype(np.float64)).mean(axis=(1, 2))
        base = 1.0 / (1.0 + diff)
        if feature == "psnr":
            return {"psnr_y": 10 + diff, "psnr_cb": 20 + base, "psnr_cr": np.full(ref.n, 60.0)}
        return {feature: base * {"ssim": 1.0, "float_ssim": 0.5, "float_ms_ssim": 0.25}[feature]}


@pytest.fixture
def fake(monkeypatch):
    registry = FakeRegistry()
    monkeypatch.setattr(vmaf_cli, "_load_features", lambda: registry)
    return registry


@pytest.fixture
def clips(refdata) -> Path:
    return refdata / "vmaf" / "clips"


def write_raw(path, fmt: VideoFormat, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    samples = n * fmt.frame_bytes // fmt.bytes_per_sample
    data = rng.integers(0, (1 << fmt.bit_depth) - 1, size=samples, endpoint=True).astype(fmt.dtype.newbyteorder("<"))
    data.tofile(path)


def write_y4m_from_raw(raw_path, y4m_path, fmt: VideoFormat, tag: str) -> None:
    data = Path(raw_path).read_bytes()
    with open(y4m_path, "wb") as f:
        f.write(f"YUV4MPEG2 W{fmt.width} H{fmt.height} F25:1 Ip A0:0 C{tag}\n".encode())
        for k in range(0, len(data), fmt.frame_bytes):
            f.write(b"FRAME\n" + data[k : k + fmt.frame_bytes])


def sequential_pool(x: np.ndarray) -> dict[str, float]:
    """libvmaf's pooling recomputed with numpy (sequential sums via accumulate)."""
    x = np.asarray(x, dtype=np.float64)
    return {
        "min": float(x.min()),
        "max": float(x.max()),
        "mean": float(np.add.accumulate(x)[-1] / len(x)),
        "harmonic_mean": float(len(x) / np.add.accumulate(1.0 / (x + 1.0))[-1] - 1.0),
    }


# ---------------------------------------------------------------------------------------------------------------
# pooling and writers


def test_pooling_matches_libvmaf_pooled_values(refdata):
    """pool() reproduces every pooled value libvmaf printed (%.17g) for the fixture runs, bit for bit."""
    files = sorted((refdata / "vmaf" / "raw_cli_json").glob("*.fork.json"))
    assert files
    for path in files:
        doc = json.loads(path.read_text())
        for name, pooled in doc["pooled_metrics"].items():
            values = [frame["metrics"][name] for frame in doc["frames"]]
            assert vmaf_pipeline.pool(values) == pooled, (path.name, name)
            assert sequential_pool(values) == pooled


def test_format_json_reproduces_libvmaf_document(refdata):
    path = refdata / "vmaf" / "raw_cli_json" / "a576x324_8b_shift.fork.json"
    doc = json.loads(path.read_text())
    names = list(doc["frames"][0]["metrics"])
    metrics = {n: np.array([f["metrics"][n] for f in doc["frames"]]) for n in names}
    text = vmaf_cli.format_json(metrics, version=doc["version"], fps=doc["fps"])
    assert json.loads(text) == doc
    # libvmaf's layout, line for line, except that numbers are round-trip exact
    assert text.splitlines()[:8] == ['{', '  "version": "3.0.0",', f'  "fps": {doc["fps"]:.2f},', '  "frames": [',
                                     '    {', '      "frameNum": 0,', '      "metrics": {', '        "ssim": 1,']
    assert text.endswith('  "aggregate_metrics": {\n  }\n}\n')


def test_pool_edge_cases():
    assert vmaf_pipeline.pool([0.0, 0.0]) == {"min": 0.0, "max": 0.0, "mean": 0.0, "harmonic_mean": 0.0}
    pooled = vmaf_pipeline.pool([1.0, math.nan, 0.5])  # libvmaf's comparisons skip a NaN after the first frame
    assert (pooled["min"], pooled["max"]) == (0.5, 1.0) and math.isnan(pooled["mean"])
    assert vmaf_pipeline.pool([-1.0, 3.0])["harmonic_mean"] == -1.0  # 1/0 = inf as in C
    with pytest.raises(ValueError, match="zero frames"):
        vmaf_pipeline.pool([])


def test_number_formatting_round_trips():
    for x in (0.1, 1 / 3, 0.95437015486695487, 1e-300, 5e-324, 123456.789, 1e22, -2.5):
        assert float(vmaf_output.format_number(x)) == x
    assert vmaf_output.format_number(1.0) == "1" and vmaf_output.format_number(60.0) == "60"
    assert vmaf_output.format_number(math.nan) == "null" and vmaf_output.format_number(math.inf) == "null"


def test_format_csv_and_text():
    metrics = {"ssim": np.array([1.0, 0.5, 1 / 3]), "psnr_y": np.array([60.0, 30.25, math.nan])}
    lines = vmaf_cli.format_csv(metrics).splitlines()
    assert lines[0] == "Frame,ssim,psnr_y"
    assert lines[1] == "0,1,60" and lines[2] == "1,0.5,30.25"
    assert lines[3].split(",")[0] == "2" and float(lines[3].split(",")[1]) == 1 / 3 and lines[3].endswith(",nan")
    assert vmaf_cli.format_text({"ssim": np.array([1.0, 0.5])}) == "ssim: 0.75\n"


# ---------------------------------------------------------------------------------------------------------------
# the command with a stand-in registry


def test_json_layout_and_pooled_stats(clips, tmp_path, fake, capsys):
    out = tmp_path / "out.json"
    rc = fusedsim("vmaf", clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m", "--feature", "ssim",
                  "--feature", "psnr", "--json", out)
    assert rc == 0
    captured = capsys.readouterr()
    assert captured.out == ""  # no text output with --json
    assert captured.err == ""  # no progress bar off a TTY
    doc = json.loads(out.read_text())
    assert list(doc) == ["version", "fps", "frames", "pooled_metrics", "aggregate_metrics"]
    assert doc["version"].startswith("fusedsim-")
    assert [f["frameNum"] for f in doc["frames"]] == list(range(5))
    names = ["ssim", "psnr_y", "psnr_cb", "psnr_cr"]
    assert all(list(f["metrics"]) == names for f in doc["frames"])
    assert list(doc["pooled_metrics"]) == names
    with open_video(clips / "c333x217_8b_ref.y4m") as r, open_video(clips / "c333x217_8b_mixed.y4m") as d:
        expected = fake.extract("ssim", r.read_all(), d.read_all())["ssim"]
    got = np.array([f["metrics"]["ssim"] for f in doc["frames"]])
    assert np.array_equal(got, expected)
    for name in names:
        values = np.array([f["metrics"][name] for f in doc["frames"]])
        assert doc["pooled_metrics"][name] == sequential_pool(values)
    assert not [p for p in tmp_path.iterdir() if p.name != "out.json"]  # no temporary file left behind


def test_default_feature_is_ssim_and_text_output(clips, fake, capsys):
    rc = fusedsim("vmaf", clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m")
    assert rc == 0
    assert {call[0] for call in fake.calls} == {"ssim"}
    out = capsys.readouterr().out
    assert out.startswith("ssim: ") and len(out.splitlines()) == 1


def test_features_deduplicated_in_order_and_device_passed(clips, fake, capsys):
    rc = fusedsim("vmaf", clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m", "--feature",
                  "float_ssim", "--feature", "ssim", "--feature", "float_ssim", "--device", "cpu",
                  "--batch-frames", "2", "--quiet")
    assert rc == 0
    assert fake.calls == [("float_ssim", 0, 2, "cpu"), ("ssim", 0, 2, "cpu"), ("float_ssim", 2, 2, "cpu"),
                          ("ssim", 2, 2, "cpu"), ("float_ssim", 4, 1, "cpu"), ("ssim", 4, 1, "cpu")]
    assert [line.split(":")[0] for line in capsys.readouterr().out.splitlines()] == ["float_ssim", "ssim"]


def test_y4m_and_raw_give_identical_output(clips, tmp_path, fake):
    for ref, dist, pix_fmt in Y4M_PAIRS:
        a, b = tmp_path / f"{dist}.y4m.json", tmp_path / f"{dist}.yuv.json"
        assert fusedsim("vmaf", clips / f"{ref}.y4m", clips / f"{dist}.y4m", "--feature", "psnr", "--json", a) == 0
        assert fusedsim("vmaf", clips / f"{ref}.yuv", clips / f"{dist}.yuv", "--width", 333, "--height", 217,
                        "--pix-fmt", pix_fmt, "--feature", "psnr", "--json", b) == 0
        doc_a, doc_b = json.loads(a.read_text()), json.loads(b.read_text())
        assert doc_a["frames"] == doc_b["frames"] and doc_a["pooled_metrics"] == doc_b["pooled_metrics"]


def test_mixed_y4m_and_raw_inputs(clips, fake, capsys):
    rc = fusedsim("vmaf", clips / "e333x217_10b_ref.y4m", clips / "e333x217_10b_mixed.yuv", "--width", 333,
                  "--height", 217, "--pix-fmt", "yuv420p10le")
    assert rc == 0 and capsys.readouterr().out.startswith("ssim: ")


def test_csv_output(clips, tmp_path, fake):
    out = tmp_path / "out.csv"
    js = tmp_path / "out.json"
    assert fusedsim("vmaf", clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m", "--feature", "ssim",
                    "--feature", "psnr", "--csv", out, "--json", js) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "Frame,ssim,psnr_y,psnr_cb,psnr_cr" and len(lines) == 6
    frames = json.loads(js.read_text())["frames"]
    for line, frame in zip(lines[1:], frames):
        cells = line.split(",")
        assert int(cells[0]) == frame["frameNum"]
        assert [float(c) for c in cells[1:]] == list(frame["metrics"].values())


def test_json_to_stdout(clips, fake, capsys):
    assert fusedsim("vmaf", clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m", "--json", "-") == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["frames"]) == 5


def test_frames_option(clips, tmp_path, fake):
    out = tmp_path / "o.json"
    # the 8-bit pair has 5 frames; limiting both to 3 works, also with a raw clip of another length
    assert fusedsim("vmaf", clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m", "--frames", 3,
                    "--json", out) == 0
    assert [f["frameNum"] for f in json.loads(out.read_text())["frames"]] == [0, 1, 2]


def test_progress_bar_when_stderr_is_a_tty(clips, fake, monkeypatch, capsys):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert fusedsim("vmaf", clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m") == 0
    assert "frame" in capsys.readouterr().err
    assert fusedsim("vmaf", clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m", "--quiet", "-n") == 0
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------------------------------------------------
# bad input


def run_error(capsys, *argv) -> str:
    assert fusedsim("vmaf", *argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("fusedsim vmaf: error: ")
    return captured.err


def test_unknown_feature_lists_supported(clips, fake, capsys):
    err = run_error(capsys, clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m", "--feature", "vmaf")
    assert "unknown feature 'vmaf'" in err
    assert f"supported features: {', '.join(SUPPORTED)}" in err
    err = run_error(capsys, clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m", "--feature",
                    "float_ssim=enable_lsc=true")
    assert "feature 'float_ssim' has no option 'enable_lsc' (its options: enable_lcs," in err
    assert fake.calls == []


def test_help_lists_the_registry_features():
    assert vmaf_cli.HELP_FEATURES == SUPPORTED
    if HAVE_FEATURES:
        from fusedsim.vmaf import features

        assert tuple(features.SUPPORTED_FEATURES) == vmaf_cli.HELP_FEATURES


def test_ssim_never_substituted(clips, monkeypatch, capsys):
    """A backend answering ``ssim`` with another algorithm's metric is an error, not a silent substitute."""

    def extract(feature, ref, dist, device="auto"):
        return {"float_ssim": np.ones(ref.n)}

    monkeypatch.setattr(vmaf_cli, "_load_features",
                        lambda: types.SimpleNamespace(SUPPORTED_FEATURES=SUPPORTED, extract=extract))
    err = run_error(capsys, clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m", "--feature", "ssim")
    assert "feature 'ssim' did not produce ssim (got float_ssim)" in err


def test_extractor_errors_propagate_and_leave_no_output(clips, tmp_path, monkeypatch, capsys):
    def extract(feature, ref, dist, device="auto"):
        raise RuntimeError("integer ssim cannot run on this device")

    monkeypatch.setattr(vmaf_cli, "_load_features",
                        lambda: types.SimpleNamespace(SUPPORTED_FEATURES=SUPPORTED, extract=extract))
    out = tmp_path / "o.json"
    err = run_error(capsys, clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m", "--json", out)
    assert "integer ssim cannot run on this device" in err
    assert list(tmp_path.iterdir()) == []


def test_wrong_shape_from_extractor(clips, monkeypatch, capsys):
    monkeypatch.setattr(vmaf_cli, "_load_features", lambda: types.SimpleNamespace(
        SUPPORTED_FEATURES=SUPPORTED, extract=lambda f, r, d, device="auto": {"ssim": np.ones(r.n + 1)}))
    err = run_error(capsys, clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m")
    assert "returned ssim with shape" in err


def test_frame_count_mismatch(clips, tmp_path, fake, capsys):
    fmt = VideoFormat(333, 217, 8, "420")
    short = tmp_path / "short.yuv"
    short.write_bytes((clips / "c333x217_8b_mixed.yuv").read_bytes()[: 3 * fmt.frame_bytes])
    raw = ["--width", 333, "--height", 217, "--pix-fmt", "yuv420p"]
    err = run_error(capsys, clips / "c333x217_8b_ref.yuv", short, *raw)
    assert "has 5 frames but distorted" in err and "has 3" in err and "--frames" in err
    err = run_error(capsys, clips / "c333x217_8b_ref.yuv", short, *raw, "--frames", 4)
    assert "--frames 4: distorted" in err and "has only 3 frames" in err
    assert fusedsim("vmaf", clips / "c333x217_8b_ref.yuv", short, *raw, "--frames", 3) == 0


def test_frame_count_mismatch_on_a_pipe(clips, fake, monkeypatch, capsys):
    fmt = VideoFormat(333, 217, 8, "420")
    data = (clips / "c333x217_8b_mixed.yuv").read_bytes()[: 3 * fmt.frame_bytes]
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=__import__("io").BytesIO(data)))
    err = run_error(capsys, clips / "c333x217_8b_ref.yuv", "-", "--width", 333, "--height", 217, "--pix-fmt",
                    "yuv420p", "--batch-frames", 2)
    assert "distorted - ended after 3 frames" in err


def test_format_mismatch(clips, capsys, fake):
    err = run_error(capsys, clips / "c333x217_8b_ref.y4m", clips / "e333x217_10b_mixed.y4m")
    assert "is 333x217 yuv420p but distorted" in err and "333x217 yuv420p10le" in err


@pytest.mark.parametrize("argv, match", [
    (["--width", 333, "--height", 217], r"missing: pix_fmt"),
    (["--width", 333, "--pix-fmt", "yuv420p"], r"missing: height"),
    (["--width", 333, "--height", 217, "--pix-fmt", "yuv420"], "unsupported pix_fmt 'yuv420'; supported: yuv420p"),
    (["--width", 332, "--height", 217, "--pix-fmt", "yuv420p"], "frame 5 is truncated, expected 108232 bytes"),
])
def test_raw_input_errors(clips, capsys, fake, argv, match):
    import re

    err = run_error(capsys, clips / "c333x217_8b_ref.yuv", clips / "c333x217_8b_mixed.yuv", *argv)
    assert re.search(match, err), err


def test_truncated_y4m(clips, tmp_path, fake, capsys):
    cut = tmp_path / "cut.y4m"
    cut.write_bytes((clips / "c333x217_8b_mixed.y4m").read_bytes()[:-100])
    err = run_error(capsys, clips / "c333x217_8b_ref.y4m", cut)
    assert "cut.y4m: frame 4 is truncated: expected 108667 bytes" in err


def test_bad_paths_and_options(clips, tmp_path, fake, capsys):
    ref, dist = clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m"
    assert "video file not found" in run_error(capsys, tmp_path / "none.y4m", dist)
    assert "does not exist" in run_error(capsys, ref, dist, "--json", tmp_path / "no" / "out.json")
    assert "is a directory" in run_error(capsys, ref, dist, "--csv", tmp_path)
    assert "only one of REF and DIST" in run_error(capsys, "-", "-")
    assert "only one of --json and --csv" in run_error(capsys, ref, dist, "--json", "-", "--csv", "-")
    assert "no frames to compare" in run_error(capsys, ref, dist, "--frames", 0)
    for bad in (["--batch-frames", "0"], ["--frames", "-1"], ["--device", "tpu"], ["--width", "x"]):
        with pytest.raises(SystemExit) as exc:
            fusedsim("vmaf", ref, dist, *bad)
        assert exc.value.code == 2
        capsys.readouterr()


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch missing")
def test_cuda_request_without_cuda(clips, fake, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    err = run_error(capsys, clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m", "--device", "cuda")
    assert "no CUDA device" in err


def test_device_names_use_the_package_resolver(clips, fake, capsys):
    ref, dist = clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m"
    with pytest.raises(SystemExit) as exc:
        fusedsim("vmaf", ref, dist, "--device", "gpu")
    assert exc.value.code == 2
    assert "device must be auto, cpu or cuda[:N]; got 'gpu'" in capsys.readouterr().err
    assert fusedsim("vmaf", ref, dist, "--device", "CPU") == 0
    assert {call[3] for call in fake.calls} == {"cpu"}


# ---------------------------------------------------------------------------------------------------------------
# streaming through the command: memory stays flat on a long clip


def test_compute_streams_long_clip_with_flat_memory(tmp_path):
    fmt = VideoFormat(1280, 720, 10, "420")
    n = 200  # 2 x 553 MB of video (sparse files)
    for name in ("ref.yuv", "dist.yuv"):
        with open(tmp_path / name, "wb") as f:
            f.truncate(n * fmt.frame_bytes)

    def extract(feature, ref, dist, device="auto"):  # negligible memory of its own
        return {feature: (ref.y[:, 0, 0] == dist.y[:, 0, 0]).astype(np.float64)}

    kwargs = dict(width=1280, height=720, pix_fmt="yuv420p10le")
    tracemalloc.start()
    try:
        with open_video(tmp_path / "ref.yuv", **kwargs) as r, open_video(tmp_path / "dist.yuv", **kwargs) as d:
            metrics = vmaf_pipeline.compute(r, d, ["ssim"], extract, batch_frames=4)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(metrics["ssim"]) == n and np.all(metrics["ssim"] == 1.0)
    batch_bytes = 4 * fmt.frame_bytes
    # each clip keeps its current batch and the one being read ahead: four batches at most, whatever the length
    assert peak < 4.5 * batch_bytes, f"peak {peak / 1e6:.1f} MB for four {batch_bytes / 1e6:.1f} MB batches"
    assert 2 * n * fmt.frame_bytes > 25 * peak


def test_auto_batch_frames():
    assert vmaf_pipeline._auto_batch_frames(VideoFormat(1920, 1080, 8, "420").frame_bytes) == 32
    assert vmaf_pipeline._auto_batch_frames(VideoFormat(3840, 2160, 10, "420").frame_bytes) == 5
    assert vmaf_pipeline._auto_batch_frames(10**12) == 1


# ---------------------------------------------------------------------------------------------------------------
# real runs on the fixture clips


_CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"))


@needs_features
@pytest.mark.parametrize("device", ["cpu", _CUDA])  # cuda: the streamed path (io/frame_stream.py)
@pytest.mark.parametrize("ref, dist, pix_fmt", Y4M_PAIRS, ids=[p[1] for p in Y4M_PAIRS])
def test_real_run_matches_libvmaf_fixtures(refdata, clips, tmp_path, ref, dist, pix_fmt, device):
    out = tmp_path / "out.json"
    rc = fusedsim("vmaf", clips / f"{ref}.y4m", clips / f"{dist}.y4m", "--feature", "ssim", "--feature",
                  "float_ssim", "--feature", "float_ms_ssim", "--feature", "psnr", "--device", device, "--json", out)
    assert rc == 0
    doc = json.loads(out.read_text())
    fixture = json.loads((refdata / "vmaf" / f"{dist}.json").read_text())
    assert len(doc["frames"]) == len(fixture["frames"]) == fixture["frames_count"]
    columns = {"ssim": "integer_ssim", "float_ssim": "float_ssim", "float_ms_ssim": "float_ms_ssim",
               "psnr_y": "psnr_y", "psnr_cb": "psnr_cb", "psnr_cr": "psnr_cr"}
    for ours, frame in zip(doc["frames"], fixture["frames"]):
        assert list(ours["metrics"]) == list(columns)
        for name, key in columns.items():
            # integer ssim, float_ssim, float_ms_ssim and psnr are bit-exact ports: printed round-trip, compared ==
            assert ours["metrics"][name] == frame[key], (dist, ours["frameNum"], name)
    # pooled values as libvmaf printed them for the same per-frame values (fork run: ssim and psnr)
    fork = json.loads((refdata / "vmaf" / "raw_cli_json" / f"{dist}.fork.json").read_text())
    for name in ("ssim", "psnr_y", "psnr_cb", "psnr_cr"):
        assert doc["pooled_metrics"][name] == fork["pooled_metrics"][name]


@needs_features
def test_real_run_y4m_equals_raw(clips, tmp_path):
    ref, dist, pix_fmt = Y4M_PAIRS[1]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert fusedsim("vmaf", clips / f"{ref}.y4m", clips / f"{dist}.y4m", "--feature", "ssim", "--feature", "psnr",
                    "--device", "cpu", "--json", a) == 0
    assert fusedsim("vmaf", clips / f"{ref}.yuv", clips / f"{dist}.yuv", "--width", 333, "--height", 217,
                    "--pix-fmt", pix_fmt, "--feature", "ssim", "--feature", "psnr", "--device", "cpu",
                    "--json", b) == 0
    doc_a, doc_b = json.loads(a.read_text()), json.loads(b.read_text())
    assert doc_a["frames"] == doc_b["frames"] and doc_a["pooled_metrics"] == doc_b["pooled_metrics"]


@needs_features
def test_python_dash_m_fusedsim_vmaf(refdata, clips, tmp_path):
    """The installed entry point in a fresh interpreter with libvmaf's defaults (VMAF v0.6.1, no -n): every frame's
    VMAF and model features equal libvmaf 3.2.0's (refdata/vmaf-score, pair prev_c333x217_8b_mixed, run default)."""
    src = Path(cli_main.__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "fusedsim", "vmaf", str(clips / "c333x217_8b_ref.y4m"),
         str(clips / "c333x217_8b_mixed.y4m"), "--device", "cpu", "--json", "-"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    record = json.loads((refdata / "vmaf-score" / "reference" / "prev_c333x217_8b_mixed.json").read_text())
    expected = record["runs"]["default"]["metrics"]
    for name in ("vmaf", "integer_adm2", "integer_motion2", "integer_vif_scale0", "integer_vif_scale3"):
        assert [f["metrics"][name] for f in doc["frames"]] == expected[name], name
    assert doc["pooled_metrics"]["vmaf"] == record["runs"]["default"]["pooled_metrics"]["vmaf"]


# ---------------------------------------------------------------------------------------------------------------
# libvmaf's command line


REF8, DIST8 = "c333x217_8b_ref", "c333x217_8b_mixed"
LIBVMAF_RAW = ["-w", 333, "-h", 217, "-p", 420, "-b", 8]


def test_libvmaf_command_line_runs_unchanged(clips, tmp_path, fake, capsys):
    out = tmp_path / "out.json"
    rc = fusedsim("vmaf", "-r", clips / f"{REF8}.yuv", "-d", clips / f"{DIST8}.yuv", *LIBVMAF_RAW, "--feature",
                  "ssim", "--feature", "psnr", "-n", "--threads", 1, "-q", "--json", "-o", out)
    assert rc == 0 and capsys.readouterr().err == ""
    doc = json.loads(out.read_text())
    assert list(doc["frames"][0]["metrics"]) == ["ssim", "psnr_y", "psnr_cb", "psnr_cr"]
    # the same through the long names and today's --json PATH; the clips also as positional REF DIST
    out2 = tmp_path / "out2.json"
    assert fusedsim("vmaf", clips / f"{REF8}.yuv", "--width", 333, "--height", 217, "--pixel_format", 420,
                    "--bitdepth", 8, clips / f"{DIST8}.yuv", "--feature", "ssim", "--feature", "psnr",
                    "--no_prediction", "--json", out2) == 0
    doc2 = json.loads(out2.read_text())
    assert doc2["frames"] == doc["frames"] and doc2["pooled_metrics"] == doc["pooled_metrics"]


def test_threads_also_sets_numba_threads(clips, tmp_path, fake, monkeypatch):
    """``--threads N`` sizes the numba CPU path of integer_ssim too (numba's setting is per calling thread)."""
    import numba
    import torch

    before, torch_before = numba.get_num_threads(), torch.get_num_threads()
    try:
        assert fusedsim("vmaf", "-r", clips / f"{REF8}.yuv", "-d", clips / f"{DIST8}.yuv", *LIBVMAF_RAW,
                        "--feature", "ssim", "-n", "--threads", 1, "-q", "--json", "-o", tmp_path / "o.json") == 0
        assert numba.get_num_threads() == 1
    finally:
        numba.set_num_threads(before)
        torch.set_num_threads(torch_before)


def test_issue_command_line_scores_instead_of_printing_help(clips, fake, capsys):
    assert fusedsim("vmaf", clips / f"{REF8}.yuv", clips / f"{DIST8}.yuv", *LIBVMAF_RAW) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("ssim: ") and "usage" not in captured.out




def test_help_is_long_only_and_version(capsys):
    with pytest.raises(SystemExit) as exc:
        fusedsim("vmaf", "--help")
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--pixel_format" in out and "-h H, --height H" in out and "--no_prediction" in out
    with pytest.raises(SystemExit) as exc:
        fusedsim("vmaf", "-v")
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("fusedsim-")


@pytest.mark.parametrize("argv, match", [
    (["-h"], "expected one argument"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["-p", "411", "-b", 8], "expected 420, 422 or 444"),
    (["-b", "9"], "expected 8, 10, 12 or 16"),
    (["--sub"], "subtitle"),
    (["--frame_skip_dist", "2"], "skipping frames is not supported"),
    (["--skip_ref_frame", "2"], "--frame_skip_ref"),
    (["--threads", "x"], "expected an integer"),
])
def test_malformed_or_unsupported_options_exit_2_with_the_reason(clips, fake, capsys, argv, match):
    with pytest.raises(SystemExit) as exc:
        fusedsim("vmaf", clips / f"{REF8}.y4m", clips / f"{DIST8}.y4m", *argv)
    assert exc.value.code == 2
    assert match in capsys.readouterr().err
    assert fake.calls == []


@pytest.mark.parametrize("argv, match", [
    (["-p", 420], "-p/--pixel_format needs -b/--bitdepth"),
    (["--pix-fmt", "yuv420p10le", "-p", 420, "-b", 8], "disagrees"),
    (["--subsample", 2], "only every frame"),
    (["--frame_skip_ref", 1], "skipping frames is not supported"),
    (["--json"], "no -o was given"),
    (["-o", "x.out", "--json", "--csv"], "-o/--output takes one format"),
    (["--frames", 2, "--frame_cnt", 2], "not both"),
    (["--feature", "psnr=enable_chroma=false"], "feature 'psnr' has no option 'enable_chroma'"),
    (["--feature", "vif=vif_enhn_gain_limit=0.5"], "must be in [1, 100]"),
    (["--feature", "adm=adm_csf_mode=1"], "option 'adm_csf_mode' is not supported yet"),
    (["-m", "version=vmaf_v9"], "unknown model version 'vmaf_v9'; built-in models: vmaf_v0.6.1,"),
    (["-m", "version=vmaf_v0.6.1:bogus"], "bad option 'bogus'"),
    (["-m", "path=missing.json"], "cannot read model file 'missing.json'"),
    (["-m", "version=vmaf_v0.6.1", "-n"], "-n/--no_prediction scores no model"),
    (["extra.y4m"], "too many clips"),
])
def test_bad_combinations_are_usage_errors(clips, tmp_path, fake, capsys, monkeypatch, argv, match):
    monkeypatch.chdir(tmp_path)
    err = run_error(capsys, clips / f"{REF8}.yuv", clips / f"{DIST8}.yuv", *argv)
    assert match in err
    assert fake.calls == [] and list(tmp_path.iterdir()) == []


def test_missing_clip_named(clips, fake, capsys):
    assert "missing the distorted clip (DIST or -d)" in run_error(capsys, "-r", clips / f"{REF8}.y4m")


def test_feature_options_validated_naming_what_is_supported(clips, fake, capsys):
    err = run_error(capsys, clips / f"{REF8}.y4m", clips / f"{DIST8}.y4m", "--feature", "ssim=scale=2")
    assert "feature 'ssim' has no option 'scale' (its options: none)" in err


def test_frame_cnt_is_a_maximum(clips, tmp_path, fake):
    out = tmp_path / "o.json"
    ref, dist = clips / f"{REF8}.y4m", clips / f"{DIST8}.y4m"
    assert fusedsim("vmaf", "-r", ref, "-d", dist, "--frame_cnt", 3, "-n", "--json", "-o", out) == 0
    assert [f["frameNum"] for f in json.loads(out.read_text())["frames"]] == [0, 1, 2]
    assert fusedsim("vmaf", "-r", ref, "-d", dist, "--frame_cnt", 50, "-n", "--json", "-o", out) == 0
    assert len(json.loads(out.read_text())["frames"]) == 5
    assert fusedsim("vmaf", "-r", ref, "-d", dist, "--subsample", 1, "--frame_skip_ref", 0, "-n") == 0


# ---------------------------------------------------------------------------------------------------------------
# XML (libvmaf's default output format)


def parse_xml(path):
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    assert root.tag == "VMAF" and [c.tag for c in root] == ["params", "fyi", "frames", "pooled_metrics",
                                                              "aggregate_metrics"]
    frames = [{k: v for k, v in f.attrib.items()} for f in root.find("frames")]
    pooled = {m.attrib["name"]: {k: float(v) for k, v in m.attrib.items() if k != "name"}
              for m in root.find("pooled_metrics")}
    return root, frames, pooled


def test_xml_is_the_default_format_of_o(clips, tmp_path, fake):
    out = tmp_path / "out.xml"
    js = tmp_path / "out.json"
    assert fusedsim("vmaf", "-r", clips / f"{REF8}.y4m", "-d", clips / f"{DIST8}.y4m", "--feature", "ssim",
                    "--feature", "psnr", "-n", "-o", out, "--json", js) == 0
    root, frames, pooled = parse_xml(out)
    assert root.attrib["version"].startswith("fusedsim-")
    assert root.find("params").attrib == {"qualityWidth": "333", "qualityHeight": "217"}
    doc = json.loads(js.read_text())
    assert [int(f.pop("frameNum")) for f in frames] == [f["frameNum"] for f in doc["frames"]]
    assert [{k: float(v) for k, v in f.items()} for f in frames] == [f["metrics"] for f in doc["frames"]]
    assert pooled == doc["pooled_metrics"]


def test_format_xml_non_finite_and_escaping():
    text = vmaf_cli.format_xml({"psnr_y": np.array([math.inf, 30.5, math.nan])}, version='a"<b', width=2,
                               height=3, fps=None)
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    assert root.attrib["version"] == 'a"<b' and root.find("fyi").attrib["fps"] == "nan"
    values = [float(f.attrib["psnr_y"]) for f in root.find("frames")]
    assert values[0] == math.inf and values[1] == 30.5 and math.isnan(values[2])


@needs_features
@pytest.mark.parametrize("ref, dist, bits", [(REF8, DIST8, 8), ("e333x217_10b_ref", "e333x217_10b_mixed", 10)])
def test_real_libvmaf_command_line_xml_matches_fixtures(refdata, clips, tmp_path, ref, dist, bits):
    out = tmp_path / "out.xml"
    rc = fusedsim("vmaf", "-r", clips / f"{ref}.yuv", "-d", clips / f"{dist}.yuv", "-w", 333, "-h", 217, "-p", 420,
                  "-b", bits, "--feature", "ssim", "--feature", "float_ssim", "--feature", "float_ms_ssim",
                  "--feature", "psnr", "-n", "--threads", 1, "-q", "--xml", "-o", out, "--device", "cpu")
    assert rc == 0
    _, frames, pooled = parse_xml(out)
    fixture = json.loads((refdata / "vmaf" / f"{dist}.json").read_text())
    columns = {"ssim": "integer_ssim", "float_ssim": "float_ssim", "float_ms_ssim": "float_ms_ssim",
               "psnr_y": "psnr_y", "psnr_cb": "psnr_cb", "psnr_cr": "psnr_cr"}
    assert len(frames) == fixture["frames_count"]
    for ours, frame in zip(frames, fixture["frames"]):
        assert list(ours)[1:] == list(columns)
        for name, key in columns.items():
            assert float(ours[name]) == frame[key], (dist, ours["frameNum"], name)
    fork = json.loads((refdata / "vmaf" / "raw_cli_json" / f"{dist}.fork.json").read_text())
    for name in ("ssim", "psnr_y", "psnr_cb", "psnr_cr"):
        assert pooled[name] == fork["pooled_metrics"][name]


# ---------------------------------------------------------------------------------------------------------------
# outputs: checked first, written through symlinks, all or none, never lost


def vmaf_ok(clips, *argv):
    return fusedsim("vmaf", "-r", clips / f"{REF8}.y4m", "-d", clips / f"{DIST8}.y4m", "-n", *argv)


def test_output_written_through_a_symlink(clips, tmp_path, fake):
    target = tmp_path / "real" / "out.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "real" / "new.csv")
    assert vmaf_ok(clips, "--json", link, "--csv", dangling) == 0
    assert link.is_symlink() and dangling.is_symlink()
    assert len(json.loads(target.read_text())["frames"]) == 5
    assert (tmp_path / "real" / "new.csv").read_text().startswith("Frame,ssim")
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["new.csv", "out.json"]  # no temporary left


@pytest.mark.parametrize("path", ["-", "/dev/stdout"])
def test_output_to_standard_output(clips, fake, capsys, path):
    assert vmaf_ok(clips, "-o", path) == 0
    import xml.etree.ElementTree as ET

    assert len(ET.fromstring(capsys.readouterr().out).find("frames")) == 5
    assert vmaf_ok(clips, "--json", path) == 0
    assert len(json.loads(capsys.readouterr().out)["frames"]) == 5


def test_dev_stdout_in_a_fresh_process(clips):
    src = Path(cli_main.__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    code = ("import sys, numpy as np, types; from fusedsim.cli import vmaf, main;"
            "vmaf._load_features = lambda: types.SimpleNamespace(SUPPORTED_FEATURES=('ssim',), "
            "extract=lambda f, r, d, device='auto': {'ssim': np.ones(r.n)});"
            "sys.exit(main.main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", code, "vmaf", str(clips / f"{REF8}.y4m"),
                           str(clips / f"{DIST8}.y4m"), "-n", "--csv", "/dev/stdout"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "Frame,ssim" and len(proc.stdout.splitlines()) == 6


def test_long_valid_output_name_works(clips, tmp_path, fake):
    out = tmp_path / ("n" * 250 + ".json")
    assert vmaf_ok(clips, "--json", out) == 0
    assert len(json.loads(out.read_text())["frames"]) == 5 and list(tmp_path.iterdir()) == [out]


@pytest.mark.parametrize("make, match", [
    (lambda d: d / "no" / "o.json", "does not exist"),
    (lambda d: d, "is a directory"),
    (lambda d: d / ("n" * 300 + ".json"), "name too long"),
    (lambda d: (d / "file").write_text("") or d / "file" / "o.json", "not a directory"),
])
def test_bad_output_paths_fail_before_computing(clips, tmp_path, fake, capsys, make, match):
    bad = make(tmp_path)
    ok = tmp_path / "ok.json"
    err = run_error(capsys, "-r", clips / f"{REF8}.y4m", "-d", clips / f"{DIST8}.y4m", "--json", ok, "--csv", bad)
    assert match in err.lower() and "--csv" in err
    assert fake.calls == [] and not ok.exists()


def test_unwritable_folder_fails_before_computing(clips, tmp_path, fake, capsys, monkeypatch):
    import tempfile

    real = tempfile.mkstemp

    def mkstemp(*a, dir=None, **k):  # a read-only folder (root ignores file modes, so it is simulated)
        if dir is not None and Path(dir) == tmp_path / "ro":
            raise PermissionError(13, "Permission denied")
        return real(*a, dir=dir, **k)

    (tmp_path / "ro").mkdir()
    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    err = run_error(capsys, clips / f"{REF8}.y4m", clips / f"{DIST8}.y4m", "-o", tmp_path / "ro" / "o.xml")
    assert "cannot create a file in" in err and "Permission denied" in err and fake.calls == []


def test_same_output_twice_is_refused(clips, tmp_path, fake, capsys):
    out = tmp_path / "o.json"
    link = tmp_path / "l.json"
    link.symlink_to(out)
    err = run_error(capsys, clips / f"{REF8}.y4m", clips / f"{DIST8}.y4m", "--json", out, "-o", link)
    assert "both write to" in err and fake.calls == []
    err = run_error(capsys, clips / f"{REF8}.y4m", clips / f"{DIST8}.y4m", "--json", "-", "--csv", "/dev/stdout")
    assert "only one of --json and --csv can write to standard output" in err


def _break_after_checks(monkeypatch, fake, victim: Path):
    """The registry removes ``victim`` (a folder) while computing: the outputs' check passed, the write fails."""
    import shutil

    extract = fake.extract

    def breaking(feature, ref, dist, device="auto"):
        if victim.exists():
            shutil.rmtree(victim)
        return extract(feature, ref, dist, device)

    monkeypatch.setattr(fake, "extract", breaking)


def test_several_outputs_all_or_none_and_results_saved(clips, tmp_path, fake, capsys, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    old = tmp_path / "a.json"
    old.write_text("old")
    (tmp_path / "sub").mkdir()
    _break_after_checks(monkeypatch, fake, tmp_path / "sub")
    err = run_error(capsys, "-r", clips / f"{REF8}.y4m", "-d", clips / f"{DIST8}.y4m", "--json", old, "--csv",
                    tmp_path / "sub" / "b.csv", "-o", tmp_path / "c.xml")
    assert "cannot write --csv" in err and "no output file was changed" in err and "results are saved in" in err
    assert old.read_text() == "old" and not (tmp_path / "c.xml").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "tmp"]  # no temporary file left
    saved = sorted((tmp_path / "tmp").iterdir())
    assert [p.suffix for p in saved] == [".xml", ".json", ".csv"]
    assert all(str(p) in err for p in saved)
    assert len(json.loads(saved[1].read_text())["frames"]) == 5
    assert saved[2].read_text().startswith("Frame,ssim")


def test_results_saved_when_the_only_output_cannot_be_written(clips, tmp_path, fake, capsys, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / "sub").mkdir()
    _break_after_checks(monkeypatch, fake, tmp_path / "sub")
    err = run_error(capsys, clips / f"{REF8}.y4m", clips / f"{DIST8}.y4m", "--json", tmp_path / "sub" / "o.json")
    saved = [p for p in tmp_path.iterdir() if p.suffix == ".json"]
    assert len(saved) == 1 and str(saved[0]) in err
    assert len(json.loads(saved[0].read_text())["frames"]) == 5


def test_existing_file_keeps_its_mode(clips, tmp_path, fake):
    out = tmp_path / "o.csv"
    out.write_text("old")
    out.chmod(0o640)
    assert vmaf_ok(clips, "--csv", out) == 0
    assert out.stat().st_mode & 0o777 == 0o640 and out.read_text().startswith("Frame,")


# ---------------------------------------------------------------------------------------------------------------
# --pairs: many clip pairs in one process


def test_pairs_file_writes_one_output_per_pair_equal_to_single_runs(clips, tmp_path, fake, capsys):
    a, b = clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m"
    spaced = tmp_path / "with space.y4m"
    spaced.write_bytes(b.read_bytes())
    pairs = tmp_path / "pairs.txt"
    pairs.write_text(f"# reference distorted output\n{a} {b} {tmp_path / 'one.json'}\n\n"
                     f"{a} '{spaced}' {tmp_path / 'two.json'}  # quoted path\n{a} {a} {tmp_path / 'three.json'}\n")
    assert fusedsim("vmaf", "--pairs", pairs, "--json", "--feature", "ssim", "-n") == 0
    assert fusedsim("vmaf", a, b, "--feature", "ssim", "--json", tmp_path / "single.json", "-n") == 0
    single = json.loads((tmp_path / "single.json").read_text())
    for name in ("one", "two"):
        doc = json.loads((tmp_path / f"{name}.json").read_text())
        assert doc["frames"] == single["frames"] and doc["pooled_metrics"] == single["pooled_metrics"]
    same = json.loads((tmp_path / "three.json").read_text())  # each pair is its own: REF against itself
    assert [f["metrics"]["ssim"] for f in same["frames"]] == [1] * 5 != [f["metrics"]["ssim"] for f in
                                                                        single["frames"]]


def test_pairs_file_default_format_is_xml_and_a_bad_pair_does_not_stop_the_others(clips, tmp_path, fake, capsys):
    a, b = clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m"
    pairs = tmp_path / "pairs.txt"
    pairs.write_text(f"{a} {tmp_path / 'missing.y4m'} {tmp_path / 'bad.xml'}\n{a} {b} {tmp_path / 'good.xml'}\n")
    assert fusedsim("vmaf", "--pairs", pairs, "-n") == 1
    err = capsys.readouterr().err
    assert "pair 1" in err and "missing.y4m" in err and "1 of 2 pairs failed (lines 1" in err
    assert (tmp_path / "good.xml").read_text().startswith("<VMAF version=")
    assert not (tmp_path / "bad.xml").exists()


@pytest.mark.parametrize("content, extra, match", [
    ("a b\n", (), "line 1: expected REF DIST OUTPUT, got 2 fields"),
    ("a 'b c\n", (), "line 1: No closing quotation"),
    ("# nothing\n\n", (), "no pairs"),
    ("a b out.xml\n", ("-o", "x.xml"), "--pairs names every clip and output; drop -o"),
    ("a b out.xml\n", ("--json", "--csv"), "--pairs writes one format"),
])
def test_pairs_file_usage_errors(tmp_path, fake, capsys, content, extra, match):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text(content)
    assert fusedsim("vmaf", "--pairs", pairs, *extra) == 2
    assert match in capsys.readouterr().err


def test_pairs_outputs_are_checked_before_any_pair_runs(clips, tmp_path, fake, capsys, monkeypatch):
    a, b = clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m"
    pairs = tmp_path / "pairs.txt"
    pairs.write_text(f"{a} {b} {tmp_path / 'ok.xml'}\n{a} {b} {tmp_path / 'no-such-dir' / 'x.xml'}\n")
    assert fusedsim("vmaf", "--pairs", pairs) == 2
    assert "no-such-dir" in capsys.readouterr().err
    assert fake.calls == [] and not (tmp_path / "ok.xml").exists()


@pytest.mark.parametrize("ref_name, dist_name, _", Y4M_PAIRS)
def test_models_on_the_command_line_equal_libvmaf(refdata, clips, tmp_path, ref_name, dist_name, _):
    """libvmaf's --model options, several in one run: each column equals libvmaf 3.2.0's (refdata/vmaf-score,
    pair prev_<dist>, runs neg and modelopts), the features computed once for both models."""
    out = tmp_path / "out.json"
    assert fusedsim("vmaf", "-r", clips / f"{ref_name}.y4m", "-d", clips / f"{dist_name}.y4m", "--device", "cpu",
                    "-m", "version=vmaf_v0.6.1neg:name=neg", "-m", "version=vmaf_v0.6.1:name=vmaf_noclip:disable_clip",
                    "--feature", "motion=debug=true", "-q", "--json", "-o", out) == 0
    frames = json.loads(out.read_text())["frames"]
    record = json.loads((refdata / "vmaf-score" / "reference" / f"prev_{dist_name}.json").read_text())["runs"]
    column = lambda name: [f["metrics"][name] for f in frames]  # noqa: E731
    assert column("neg") == record["neg"]["metrics"]["vmaf"]
    assert column("vmaf_noclip") == record["modelopts"]["metrics"]["vmaf_noclip"]
    assert column("integer_vif_scale2_egl_1") == record["neg"]["metrics"]["integer_vif_scale2_egl_1"]
    assert column("integer_motion") == record["debug"]["metrics"]["integer_motion"]


def test_precision_prints_libvmaf_decimals(clips, tmp_path, fake):
    out = tmp_path / "out.csv"
    assert fusedsim("vmaf", clips / f"{REF8}.y4m", clips / f"{DIST8}.y4m", "--feature", "ssim", "--precision", "6",
                    "--csv", out) == 0
    row = out.read_text().splitlines()[1].split(",")
    assert len(row[1].split(".")[1]) == 6  # %.6f, as stock libvmaf prints
    with pytest.raises(SystemExit):
        fusedsim("vmaf", clips / f"{REF8}.y4m", clips / f"{DIST8}.y4m", "--precision", "18")


def test_progress_lines_when_stderr_is_not_a_terminal(clips, fake, monkeypatch, capsys):
    """Off a terminal (a log, CI) progress is a plain line every few seconds: here every update."""
    from fusedsim.cli import progress

    monkeypatch.setattr(progress, "LINE_INTERVAL_S", 0.0)
    assert fusedsim("vmaf", clips / "c333x217_8b_ref.y4m", clips / "c333x217_8b_mixed.y4m", "--batch-frames", 2) == 0
    err = capsys.readouterr().err
    assert "vmaf: 2/5 frames (40%)" in err and "\r" not in err

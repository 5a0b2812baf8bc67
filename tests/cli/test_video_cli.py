"""``fusedsim video`` and ``fusedsim vmaf`` on compressed clips: outputs (JSON, CSV, FFVship's layout, the pooled
table), frame options, bad inputs named with nothing written."""

from __future__ import annotations

import csv
import io
import json

import pytest

from video_clips import encode_planes, encode_rgb, encoder_available, photo_frames, photo_planes, write_y4m

from fusedsim.cli.main import main
from fusedsim.io.compressed import open_compressed


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    planes = photo_planes(4, "yuv420p")
    codec = "libx264" if encoder_available("libx264") else "mpeg4"
    return {
        "folder": folder,
        "ref": encode_planes(folder / "ref.mkv", "ffv1", "yuv420p", planes),
        "ref_y4m": write_y4m(folder / "ref.y4m", planes, 8),
        "dist": encode_rgb(folder / "dist.mp4", codec, "yuv420p", photo_frames(4),
                           options={"crf": "30"} if codec == "libx264" else {}),
        "small": encode_planes(folder / "small.mkv", "ffv1", "yuv420p", photo_planes(4, "yuv420p", 64, 48)),
    }


def test_json_csv_and_ffvship_outputs(clips, capsys):
    folder = clips["folder"]
    out_json, out_csv = folder / "o.json", folder / "o.csv"
    rc = main(["video", str(clips["ref"]), str(clips["dist"]), "-m", "psnr,ssim", "--device", "cpu", "-q",
               "--json", str(out_json), "--csv", str(out_csv), "--every", "2"])
    assert rc == 0, capsys.readouterr().err
    doc = json.loads(out_json.read_text())
    assert [f["ref_frame"] for f in doc["frames"]] == [0, 2]
    assert set(doc["frames"][0]["metrics"]) == {"psnr", "ssim"}
    assert set(doc["pooled"]["psnr"]) == {"mean", "harmonic_mean", "min", "max", "p1", "p5", "p10"}
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    assert [r["ref_frame"] for r in rows] == ["0", "2"]
    assert float(rows[1]["psnr"]) == doc["frames"][1]["metrics"]["psnr"]

    out_ffv = folder / "ffv.json"
    rc = main(["video", str(clips["ref"]), str(clips["dist"]), "-m", "psnr", "--device", "cpu", "-q",
               "--ffvship-json", str(out_ffv)])
    assert rc == 0
    ffv = json.loads(out_ffv.read_text())
    assert len(ffv) == 4 and all(len(v) == 1 for v in ffv)


def test_pooled_table_and_y4m_reference(clips, capsys):
    rc = main(["video", str(clips["ref_y4m"]), str(clips["dist"]), "-m", "psnr", "--device", "cpu", "-q"])
    out = capsys.readouterr().out
    assert rc == 0 and out.splitlines()[1].startswith("psnr") and "4 frame pairs" in out


def test_mismatched_sizes_named_and_nothing_written(clips, capsys):
    out = clips["folder"] / "never.json"
    rc = main(["video", str(clips["ref"]), str(clips["small"]), "-m", "psnr", "--device", "cpu", "-q",
               "--json", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "small.mkv is 64x48" in err and "--scale" in err, err
    assert not out.exists()
    rc = main(["video", str(clips["ref"]), str(clips["small"]), "-m", "psnr", "--device", "cpu", "-q",
               "--scale", "bicubic", "--json", str(out)])
    assert rc == 0 and out.exists()


def test_ffvship_layout_takes_one_metric(clips, capsys):
    out = clips["folder"] / "two.json"
    rc = main(["video", str(clips["ref"]), str(clips["dist"]), "-m", "psnr,ssim", "--device", "cpu", "-q",
               "--ffvship-json", str(out)])
    assert rc == 2 and "--ffvship-json holds one metric" in capsys.readouterr().err and not out.exists()


def test_corrupt_clip_named(clips, capsys):
    bad = clips["folder"] / "bad.webm"
    bad.write_bytes(b"\x1a\x45\xdf\xa3" + bytes(100))
    rc = main(["video", str(clips["ref"]), str(bad), "-m", "psnr", "--device", "cpu", "-q"])
    assert rc == 2 and f"{bad}: not a video file FFmpeg can read" in capsys.readouterr().err


def test_vmaf_reads_compressed_clips_like_their_y4m(clips, capsys):
    folder = clips["folder"]
    dist_planes = [[f.y, f.u, f.v] for f in open_compressed(clips["dist"]).frames()]
    dist_y4m = write_y4m(folder / "dist.y4m", dist_planes, 8)
    a, b = folder / "a.csv", folder / "b.csv"
    assert main(["vmaf", str(clips["ref"]), str(clips["dist"]), "--device", "cpu", "-q", "--csv", str(a)]) == 0
    assert main(["vmaf", str(clips["ref_y4m"]), str(dist_y4m), "--device", "cpu", "-q", "--csv", str(b)]) == 0
    assert a.read_text() == b.read_text()


def test_ffvship_layout_of_butteraugli():
    import numpy as np

    from fusedsim.cli.video_output import format_ffvship
    from fusedsim.engine.video import VideoScores

    columns = {"butteraugli.max_norm": np.array([2.5, 3.0]), "butteraugli.pnorm3": np.array([1.25, 1.5])}
    scores = VideoScores([0, 1], [0, 1], columns, {c: False for c in columns}, {})
    # FFVship writes [Q-norm, 3-norm, INF-norm] per frame; fusedsim the 3-norm and the max (INF) norm, in that order
    assert json.loads(format_ffvship(scores)) == [[1.25, 2.5], [1.5, 3.0]]


def test_missing_pyav_names_the_extra(clips, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "av" else real(name, *a))
    rc = main(["video", str(clips["ref"]), str(clips["dist"]), "-m", "psnr", "--device", "cpu", "-q"])
    assert rc == 2 and "pip install 'fusedsim[video]'" in capsys.readouterr().err
    rc = main(["vmaf", str(clips["ref"]), str(clips["dist"]), "--device", "cpu", "-q"])
    assert rc == 2 and "pip install 'fusedsim[video]'" in capsys.readouterr().err

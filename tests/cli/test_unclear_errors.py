"""Unclear errors: every refusal names the argument and says what is expected, before any work; no traceback."""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _pair_images import write_images

from fusedsim.cli import diffmap as diffmap_cli
from fusedsim.cli.main import main

SRC = Path(__file__).resolve().parents[2] / "src"


def _y4m(path: Path, shade: int, w: int = 32, h: int = 32, frames: int = 2) -> Path:
    frame = bytes([shade]) * (w * h) + bytes([128]) * (w * h // 2)
    path.write_bytes(f"YUV4MPEG2 W{w} H{h} F25:1 Ip A1:1 C420\n".encode() + b"".join(b"FRAME\n" + frame
                                                                                     for _ in range(frames)))
    return path


def _usage_error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("command,argv", [("diffmap", ["a.png", "b.png", "-o", "m.png"]), ("score", ["a", "b"]),
                                          ("batch", ["p.csv", "-o", "o.csv"]), ("vmaf", ["a.y4m", "b.y4m"]),
                                          ("sweep", ["a.png", "--codec", "jpeg"]), ("bench", [])])
def test_unknown_flag_shows_the_subcommand_usage(capsys, command, argv):
    err = _usage_error([command, *argv, "--no-such-flag"], capsys)
    assert err.startswith(f"usage: fusedsim {command} "), err
    assert "--no-such-flag" in err


@pytest.mark.parametrize("text,why", [("90:10:5", "STOP 10 is below START 90"), ("10:95:0", "STEP 0"),
                                      ("10:x:5", "STOP 'x'"), ("1:2:3:4", "2 or 3 parts"),
                                      ("10:200:10", "quality 110 is outside 0..100"), (",", "no quality")])
def test_sweep_malformed_quality_says_the_form(capsys, text, why):
    err = _usage_error(["sweep", "a.png", "--codec", "jpeg", "--quality", text], capsys)
    assert why in err and "START:STOP:STEP" in err, err


def test_bench_sizes_over_the_limit(capsys):
    err = _usage_error(["bench", "--sizes", "256,100000"], capsys)
    assert "--sizes" in err and "100000" in err and "32768" in err, err


def test_bench_sizes_over_the_memory_budget(capsys, monkeypatch):
    monkeypatch.setenv("FUSEDSIM_RAM_CAP_BYTES", str(10**9 * 1000))
    import fusedsim.engine.memory as memory

    monkeypatch.setattr(memory, "budget_bytes", lambda device: 10**6)
    import fusedsim.engine.measure as measure

    monkeypatch.setattr(measure, "measure", lambda *a, **k: pytest.fail("measured a size that cannot fit"))
    assert main(["bench", "--sizes", "1024", "--device", "cpu", "--metric", "psnr"]) == 2
    err = capsys.readouterr().err
    assert "--sizes 1024" in err and "budget" in err, err


def test_diffmap_width_refused_before_computing(tmp_path, capsys, monkeypatch):
    write_images(tmp_path, refs=1, dists=1)
    monkeypatch.setattr(diffmap_cli, "metric_map", lambda *a: pytest.fail("the map was computed"))
    rc = main(["diffmap", str(tmp_path / "r0.png"), str(tmp_path / "d00.png"), "-o", str(tmp_path / "m.png"),
               "--width", "10000000"])
    err = capsys.readouterr().err
    assert rc == 2 and "--width" in err and str(diffmap_cli.MAX_WIDTH) in err, err
    assert not (tmp_path / "m.png").exists()


def test_latin1_pairs_table_names_file_and_encoding(tmp_path, capsys):
    write_images(tmp_path, refs=1, dists=1)
    table = tmp_path / "pairs.csv"
    table.write_bytes("ref,dist,note\nr0.png,d00.png,caf\u00e9\n".encode("latin-1"))
    rc = main(["batch", str(table), "-o", str(tmp_path / "out.csv"), "--quiet", "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 2 and str(table) in err and "UTF-8" in err and "line 2" in err and "0xe9" in err, err


def test_latin1_vmaf_pairs_file_names_file_and_encoding(tmp_path, capsys):
    pairs = tmp_path / "pairs.txt"
    pairs.write_bytes("# clips\na.y4m b.y4m caf\u00e9.xml\n".encode("latin-1"))
    rc = main(["vmaf", "--pairs", str(pairs), "-n"])
    err = capsys.readouterr().err
    assert rc == 2 and str(pairs) in err and "UTF-8" in err and "line 2" in err, err


@pytest.mark.parametrize("suffix", [".mp4", ".mkv", ".webm", ".mov"])
def test_vmaf_corrupt_compressed_video_is_named(tmp_path, capsys, suffix):
    pytest.importorskip("av")
    ref = _y4m(tmp_path / "r.y4m", 100)
    dist = tmp_path / f"d{suffix}"
    dist.write_bytes(b"\x00\x00\x00\x18ftypisom" + bytes(200))
    rc = main(["vmaf", str(ref), str(dist), "-n", "-q", "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 2 and f"{dist}: not a video file FFmpeg can read" in err, err


def test_vmaf_compressed_video_by_signature(tmp_path, capsys):
    pytest.importorskip("av")
    ref = _y4m(tmp_path / "r.y4m", 100)
    dist = tmp_path / "d.yuv"
    dist.write_bytes(b"\x1a\x45\xdf\xa3" + bytes(200))  # Matroska under a raw name: decoded, not read as raw
    rc = main(["vmaf", str(ref), str(dist), "-n", "-q", "--device", "cpu", "-w", "32", "-h", "32", "-p", "420",
               "-b", "8"])
    err = capsys.readouterr().err
    assert rc == 2 and f"{dist}: not a video file FFmpeg can read" in err, err


def test_vmaf_empty_stdin(tmp_path, capsys, monkeypatch):
    ref = _y4m(tmp_path / "r.y4m", 100)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(b""))))
    rc = main(["vmaf", str(ref), "-", "-n", "-q", "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 2 and "standard input" in err and "empty" in err, err


def test_vmaf_empty_file(tmp_path, capsys):
    ref = _y4m(tmp_path / "r.y4m", 100)
    (tmp_path / "d.y4m").write_bytes(b"")
    rc = main(["vmaf", str(ref), str(tmp_path / "d.y4m"), "-n", "-q", "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 2 and "empty" in err, err


def test_vmaf_y4m_header_without_newline(tmp_path, capsys):
    ref = _y4m(tmp_path / "r.y4m", 100)
    dist = tmp_path / "d.y4m"
    dist.write_bytes(b"YUV4MPEG2 W32 H32 F25:1 C420")
    rc = main(["vmaf", str(ref), str(dist), "-n", "-q", "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 2 and "does not end with a newline" in err, err


_CTRL_C = """
import sys
from fusedsim.engine import batch_pairs
from fusedsim.cli.main import main
real, calls = batch_pairs.PairRunner._outcome, [0]
def outcome(self, submitted):
    calls[0] += 1
    if calls[0] > 1:
        raise KeyboardInterrupt  # Ctrl-C in the middle of the run
    return real(self, submitted)
batch_pairs.PairRunner._outcome = outcome
sys.exit(main(sys.argv[1:]))  # as the console script does
"""


def test_batch_ctrl_c_prints_its_line_without_a_traceback(tmp_path):
    images = write_images(tmp_path, refs=1, dists=3)
    table = tmp_path / "pairs.csv"
    with open(table, "w", newline="") as f:
        csv.writer(f).writerows([("ref", "dist"), *(("r0.png", d) for d in images["r0.png"])])
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run([sys.executable, "-c", _CTRL_C, "batch", str(table), "-o", str(tmp_path / "out.csv"),
                           "--quiet", "--device", "cpu"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode in (130, -signal.SIGINT), proc  # killed by SIGINT, as Unix tools on Ctrl-C
    assert "interrupted; 1 new rows kept" in proc.stderr and "--resume" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr


def test_vmaf_pairs_failure_cites_the_file_line(tmp_path, capsys):
    ref = _y4m(tmp_path / "r.y4m", 100)
    pairs = tmp_path / "pairs.txt"
    # line 1: a comment holding a form feed (str.splitlines() splits there), line 2 blank, line 3 the bad pair
    pairs.write_text(f"# clips\x0cof today\n\n{ref} {tmp_path / 'missing.y4m'} {tmp_path / 'o.xml'}\n")
    rc = main(["vmaf", "--pairs", str(pairs), "-n", "-q", "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 1 and f"lines 3 of {pairs}" in err and "line 3" in err.splitlines()[0], err


def test_vmaf_pairs_format_error_cites_the_file_line(tmp_path, capsys):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("# a\x0c# b\nonly two\n")
    rc = main(["vmaf", "--pairs", str(pairs), "-n"])
    err = capsys.readouterr().err
    assert rc == 2 and "line 2:" in err, err


def test_batch_pairs_error_cites_the_file_line(tmp_path, capsys):
    table = tmp_path / "pairs.csv"
    # the first row's note spans lines 2-3, so the short row is on line 4
    table.write_text('ref,dist,note\nr.png,d.png,"two\nlines"\nr.png,d.png\n')
    rc = main(["batch", str(table), "-o", str(tmp_path / "out.csv"), "--quiet", "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 2 and "line 4 has 2 fields" in err, err


def test_vmaf_pairs_compressed_clip_fails_its_pair_only(tmp_path, capsys):
    ref, dist = _y4m(tmp_path / "r.y4m", 100), _y4m(tmp_path / "d.y4m", 110)
    (tmp_path / "d.mkv").write_bytes(b"\x1a\x45\xdf\xa3" + bytes(100))
    pairs = tmp_path / "pairs.txt"
    pairs.write_text(f"{ref} {tmp_path / 'd.mkv'} {tmp_path / 'o1.xml'}\n{ref} {dist} {tmp_path / 'o2.xml'}\n")
    rc = main(["vmaf", "--pairs", str(pairs), "-n", "-q", "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 1 and f"{tmp_path / 'd.mkv'}:" in err and f"lines 1 of {pairs}" in err, err
    assert (tmp_path / "o2.xml").exists() and not (tmp_path / "o1.xml").exists()

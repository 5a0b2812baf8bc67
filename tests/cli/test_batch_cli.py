"""``fusedsim batch``: aliases, every table format, bad pairs, --fail-fast, --resume after a kill, reference reuse,
decoding ahead (threads and processes), and the Ray engine on a local two-worker cluster."""

from __future__ import annotations

import csv
import json
import math
import os
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from _pair_images import expected_psnr, expected_ssim, write_images
from PIL import Image

from fusedsim.cli.main import main
from fusedsim.engine import batch_pairs
from fusedsim.engine.batch_pairs import PairTask, decode_ahead, plan


def _pairs(folder: Path) -> list[tuple[str, str]]:
    images = write_images(folder)
    return [(r, d) for r, ds in images.items() for d in ds]


def _write_table(path: Path, header: tuple[str, ...], rows: list[tuple]) -> None:
    if path.suffix == ".parquet":
        pa = pytest.importorskip("pyarrow", reason="Parquet tables need pyarrow (fusedsim[parquet])")
        import pyarrow.parquet as pq

        pq.write_table(pa.table({h: [r[i] for r in rows] for i, h in enumerate(header)}), path)
        return
    with open(path, "w", newline="") as f:
        w = csv.writer(f, delimiter="\t" if path.suffix == ".tsv" else ",")
        w.writerow(header)
        w.writerows(rows)


def _read_table(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines()]
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t" if path.suffix == ".tsv" else ","))


def _num(value) -> float:
    return math.nan if value in (None, "") else float(value)


def _batch(*argv) -> int:
    return main(["batch", *map(str, argv), "--device", "cpu", "--quiet"])


# ------------------------------------------------------------------------------------------- values, aliases
@pytest.mark.parametrize("names", [("ref", "dist"), ("reference", "distorted"), ("Ref_Path", "dist_path")])
def test_aliases_and_values(tmp_path, names):
    pairs = _pairs(tmp_path)
    _write_table(tmp_path / "pairs.csv", (*names, "note"), [(r, d, f"n{i}") for i, (r, d) in enumerate(pairs)])
    assert _batch(tmp_path / "pairs.csv", "-o", tmp_path / "out.csv", "--metric", "ssim,psnr") == 0
    rows = _read_table(tmp_path / "out.csv")
    assert list(rows[0]) == [*names, "note", "ssim", "psnr", "backend", "error"]
    assert sorted((r[names[0]], r[names[1]]) for r in rows) == sorted(pairs)
    for r in rows:
        ref, dist = tmp_path / r[names[0]], tmp_path / r[names[1]]
        assert float(r["ssim"]) == expected_ssim(ref, dist)  # same code as the one-shot API: equal, not close
        # float32 accumulation of the squared error over 9216 values against numpy's float64: ~1e-6 relative
        assert float(r["psnr"]) == pytest.approx(expected_psnr(ref, dist), abs=1e-4)
        assert r["backend"] == "cpu full" and r["error"] == ""
        assert r["note"] == f"n{pairs.index((r[names[0]], r[names[1]]))}"


def test_missing_or_ambiguous_columns(tmp_path, capsys):
    _write_table(tmp_path / "a.csv", ("image", "dist"), [("x.png", "y.png")])
    assert _batch(tmp_path / "a.csv", "-o", tmp_path / "o.csv") == 2
    assert "no reference column" in capsys.readouterr().err
    _write_table(tmp_path / "b.csv", ("ref", "reference", "dist"), [("x.png", "x.png", "y.png")])
    assert _batch(tmp_path / "b.csv", "-o", tmp_path / "o.csv") == 2
    assert "several reference columns" in capsys.readouterr().err
    assert _batch(tmp_path / "b.csv", "-o", tmp_path / "o.xlsx") == 2
    assert "unknown table format" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


# ------------------------------------------------------------------------------------------- formats
@pytest.mark.parametrize(("source", "target"), [("csv", "csv"), ("tsv", "tsv"), ("parquet", "jsonl"),
                                                ("csv", "parquet"), ("parquet", "parquet")])
def test_formats_round_trip(tmp_path, source, target):
    if "parquet" in (source, target):
        pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (fusedsim[parquet])")
    pairs = _pairs(tmp_path)[:3] + [("r0.png", "missing.png")]
    _write_table(tmp_path / f"pairs.{source}", ("ref", "dist"), pairs)
    out = tmp_path / f"out.{target}"
    assert _batch(tmp_path / f"pairs.{source}", "-o", out, "--metric", "ssim,butteraugli") == 1
    rows = _read_table(out)
    assert list(rows[0]) == ["ref", "dist", "ssim", "butteraugli.max_norm", "butteraugli.pnorm3", "backend",
                             "error"]
    assert sorted((r["ref"], r["dist"]) for r in rows) == sorted(pairs)
    by_pair = {(r["ref"], r["dist"]): r for r in rows}
    bad = by_pair[("r0.png", "missing.png")]
    assert all(math.isnan(_num(bad[c])) for c in ("ssim", "butteraugli.max_norm", "butteraugli.pnorm3"))
    assert "not found" in bad["error"]
    for r, d in pairs[:3]:
        assert _num(by_pair[(r, d)]["ssim"]) == expected_ssim(tmp_path / r, tmp_path / d)
        assert _num(by_pair[(r, d)]["butteraugli.max_norm"]) > 0
    assert not (tmp_path / f"out.{target}.log.jsonl").exists()  # a finished Parquet run drops its log


# ------------------------------------------------------------------------------------------- bad pairs
def test_bad_pairs_get_nan_and_error(tmp_path, capsys):
    pairs = _pairs(tmp_path)[:2]
    Image.new("RGB", (20, 20)).save(tmp_path / "small.png")
    Image.new("RGB", (8, 8)).save(tmp_path / "tiny.png")
    (tmp_path / "broken.png").write_bytes(b"not an image")
    bad = [("r0.png", "small.png"), ("r0.png", "broken.png"), ("nothere.png", "d00.png"), ("r0.png", ""),
           ("tiny.png", "tiny.png")]
    _write_table(tmp_path / "pairs.csv", ("ref", "dist"), pairs + bad)
    assert main(["batch", str(tmp_path / "pairs.csv"), "-o", str(tmp_path / "out.csv"), "--device", "cpu"]) == 1
    rows = {(r["ref"], r["dist"]): r for r in _read_table(tmp_path / "out.csv")}
    assert len(rows) == len(pairs) + len(bad)
    errors = {k: rows[k]["error"] for k in bad}
    assert "differ in size" in errors[("r0.png", "small.png")]
    assert "cannot read image" in errors[("r0.png", "broken.png")]
    assert "REF: image file not found" in errors[("nothere.png", "d00.png")]
    assert "dist cell is empty" in errors[("r0.png", "")]
    assert "at least 11" in errors[("tiny.png", "tiny.png")]  # too small for the 11-px window
    assert all(rows[k]["ssim"] == "nan" for k in bad)
    assert all(rows[k]["error"] == "" and float(rows[k]["ssim"]) < 1 for k in pairs)
    assert "5 failed" in capsys.readouterr().err


def test_fail_fast_stops_at_first_failed_pair(tmp_path, capsys):
    pairs = _pairs(tmp_path)
    table = [pairs[0], ("r0.png", "missing.png"), *pairs[1:]]
    _write_table(tmp_path / "pairs.csv", ("ref", "dist"), table)
    assert _batch(tmp_path / "pairs.csv", "-o", tmp_path / "out.csv", "--fail-fast", "--prefetch", "1") == 1
    rows = _read_table(tmp_path / "out.csv")
    # plan order is file order within a reference: d00, missing, then stop
    assert [(r["ref"], r["dist"]) for r in rows] == table[:2]
    assert "stopped at the first failed pair" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- outputs, resume
def test_existing_output_needs_resume_or_overwrite(tmp_path, capsys):
    pairs = _pairs(tmp_path)[:2]
    _write_table(tmp_path / "pairs.csv", ("ref", "dist"), pairs)
    out = tmp_path / "out.csv"
    out.write_text("precious\n")
    assert _batch(tmp_path / "pairs.csv", "-o", out) == 2
    assert "--resume" in capsys.readouterr().err and out.read_text() == "precious\n"
    assert _batch(tmp_path / "pairs.csv", "-o", out, "--overwrite") == 0
    assert len(_read_table(out)) == 2
    # resuming with other metrics would mix columns: refused, file unchanged
    before = out.read_bytes()
    assert _batch(tmp_path / "pairs.csv", "-o", out, "--resume", "--metric", "psnr") == 2
    assert "cannot resume" in capsys.readouterr().err and out.read_bytes() == before


def test_output_through_symlink(tmp_path):
    pairs = _pairs(tmp_path)[:2]
    _write_table(tmp_path / "pairs.csv", ("ref", "dist"), pairs)
    (tmp_path / "real").mkdir()
    link = tmp_path / "out.parquet"
    link.symlink_to(tmp_path / "real" / "target.parquet")
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (fusedsim[parquet])")
    assert _batch(tmp_path / "pairs.csv", "-o", link) == 0
    assert link.is_symlink() and len(_read_table(tmp_path / "real" / "target.parquet")) == 2


def _interrupt_after(monkeypatch, count: int) -> None:
    """Make reading back the count+1-th pair's values raise KeyboardInterrupt (Ctrl-C in the middle of a run)."""
    real = batch_pairs.PairRunner._outcome
    calls = {"n": 0}

    def outcome(self, submitted):
        calls["n"] += 1
        if calls["n"] > count:
            raise KeyboardInterrupt
        return real(self, submitted)

    monkeypatch.setattr(batch_pairs.PairRunner, "_outcome", outcome)


@pytest.mark.parametrize("target", ["csv", "jsonl", "parquet"])
def test_resume_after_interrupt_loses_and_repeats_nothing(tmp_path, monkeypatch, target):
    if target == "parquet":
        pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (fusedsim[parquet])")
    pairs = _pairs(tmp_path)
    table = pairs + [pairs[0]]  # a pair listed twice is scored twice
    _write_table(tmp_path / "pairs.csv", ("ref", "dist"), table)
    out = tmp_path / f"out.{target}"
    with monkeypatch.context() as m:
        _interrupt_after(m, 3)
        with pytest.raises(KeyboardInterrupt):
            _batch(tmp_path / "pairs.csv", "-o", out)
    assert len(_read_table(out)) == 3  # every finished row is on disk (Parquet: written from its log)
    if target == "parquet":
        assert (tmp_path / "out.parquet.log.jsonl").exists()
    assert _batch(tmp_path / "pairs.csv", "-o", out, "--resume") == 0
    rows = _read_table(out)
    assert Counter((r["ref"], r["dist"]) for r in rows) == Counter(table)
    for r in rows:
        assert _num(r["ssim"]) == expected_ssim(tmp_path / r["ref"], tmp_path / r["dist"])
    assert _batch(tmp_path / "pairs.csv", "-o", out, "--resume") == 0  # nothing left: nothing added
    assert len(_read_table(out)) == len(table)


_KILLER = """
import os, signal, sys
from fusedsim.engine import batch_pairs
from fusedsim.cli.main import main
real, calls = batch_pairs.PairRunner._outcome, [0]
def outcome(self, submitted):
    calls[0] += 1
    if calls[0] > 3:
        os.kill(os.getpid(), signal.SIGKILL)  # no cleanup of any kind, as a killed job
    return real(self, submitted)
batch_pairs.PairRunner._outcome = outcome
main(sys.argv[1:])
"""


@pytest.mark.parametrize("target", ["csv", "parquet"])
def test_resume_after_sigkill(tmp_path, target):
    if target == "parquet":
        pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (fusedsim[parquet])")
    import signal
    import subprocess
    import sys

    pairs = _pairs(tmp_path)
    _write_table(tmp_path / "pairs.csv", ("ref", "dist"), pairs)
    out = tmp_path / f"out.{target}"
    proc = subprocess.run([sys.executable, "-c", _KILLER, "batch", str(tmp_path / "pairs.csv"), "-o", str(out),
                           "--device", "cpu", "--quiet"], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL
    log = out if target == "csv" else tmp_path / "out.parquet.log.jsonl"
    assert len(log.read_text().splitlines()) == 3 + (target == "csv")  # header + the 3 finished rows
    assert _batch(tmp_path / "pairs.csv", "-o", out, "--resume") == 0
    rows = _read_table(out)
    assert Counter((r["ref"], r["dist"]) for r in rows) == Counter(pairs)
    assert all(_num(r["ssim"]) == expected_ssim(tmp_path / r["ref"], tmp_path / r["dist"]) for r in rows)


@pytest.mark.parametrize("target", ["csv", "jsonl"])
def test_resume_after_kill_mid_line(tmp_path, target):
    """A killed process can leave half a row: --resume cuts it and scores that pair again."""
    pairs = _pairs(tmp_path)
    _write_table(tmp_path / "pairs.csv", ("ref", "dist"), pairs)
    out = tmp_path / f"out.{target}"
    assert _batch(tmp_path / "pairs.csv", "-o", out) == 0
    lines = out.read_text().splitlines(keepends=True)
    keep = 3 if target == "csv" else 2  # header + 2 rows, or 2 rows
    out.write_text("".join(lines[:keep]) + lines[keep][: len(lines[keep]) // 2])
    assert _batch(tmp_path / "pairs.csv", "-o", out, "--resume") == 0
    rows = _read_table(out)
    assert Counter((r["ref"], r["dist"]) for r in rows) == Counter(pairs)


# ------------------------------------------------------------------------------------------- engine details
def test_references_grouped_and_reused_by_pixels(tmp_path, monkeypatch, capsys):
    pairs = _pairs(tmp_path)
    (tmp_path / "copy.png").write_bytes((tmp_path / "r1.png").read_bytes())
    # interleaved references; copy.png has r1's pixels under another path
    table = [pairs[0], pairs[2], pairs[1], pairs[3], ("copy.png", "d10.png"), pairs[4]]
    _write_table(tmp_path / "pairs.csv", ("ref", "dist"), table)
    from fusedsim.engine.scorer import Scorer

    calls = []
    real = Scorer.set_reference
    monkeypatch.setattr(Scorer, "set_reference", lambda self, ref: (calls.append(ref.path.name), real(self, ref))[1])
    assert main(["batch", str(tmp_path / "pairs.csv"), "-o", str(tmp_path / "out.csv"), "--device", "cpu"]) == 0
    assert calls == ["r0.png", "r1.png", "r2.png"]  # r1 and copy.png are one prepared reference
    assert "references prepared: 3" in capsys.readouterr().err
    rows = {(r["ref"], r["dist"]): r for r in _read_table(tmp_path / "out.csv")}
    assert rows[("copy.png", "d10.png")]["ssim"] == rows[("r1.png", "d10.png")]["ssim"]


def test_plan_groups_references_in_first_appearance_order():
    tasks = [PairTask(i, r, f"d{i}") for i, r in enumerate(["b", "a", "b", "c", "a"])]
    assert [t.index for t in plan(tasks)] == [0, 2, 1, 4, 3]


def test_decoding_runs_ahead_but_bounded(tmp_path, monkeypatch):
    write_images(tmp_path, refs=1, dists=1)
    tasks = [PairTask(i, str(tmp_path / "r0.png"), str(tmp_path / "d00.png")) for i in range(12)]
    started = []
    real = batch_pairs.read_distorted

    def read(path):
        started.append(time.monotonic())
        return real(path)

    monkeypatch.setattr(batch_pairs, "read_distorted", read)
    stream = decode_ahead(tasks, workers=2, prefetch=4, mode="threads")
    first = next(stream)
    time.sleep(0.2)  # the consumer is busy: decoding goes on, but never more than prefetch pairs ahead
    assert first.error == "" and first.ref_key.startswith(("xx:", "b2:"))
    assert len(started) == 4
    assert len(list(stream)) == 11
    assert threading.active_count() < 50


def test_decoder_processes_writes_what_threads_write(tmp_path):
    import multiprocessing

    pairs = _pairs(tmp_path)
    Image.new("RGB", (20, 20)).save(tmp_path / "small.png")
    (tmp_path / "broken.png").write_bytes(b"not an image")
    table = [*pairs, ("r0.png", "small.png"), ("r1.png", "broken.png"), ("nothere.png", "d00.png"), pairs[0]]
    _write_table(tmp_path / "pairs.csv", ("ref", "dist"), table)
    for decoder in ("threads", "processes"):
        assert _batch(tmp_path / "pairs.csv", "-o", tmp_path / f"{decoder}.csv", "--metric", "ssim,psnr",
                      "--decoder", decoder, "--workers", "2", "--prefetch", "3") == 1
    text = (tmp_path / "processes.csv").read_text()
    assert text == (tmp_path / "threads.csv").read_text()
    assert len(_read_table(tmp_path / "processes.csv")) == len(table) and "differ in size" in text
    # --fail-fast stops the decoding processes with the run
    assert _batch(tmp_path / "pairs.csv", "-o", tmp_path / "ff.csv", "--decoder", "processes", "--workers", "2",
                  "--fail-fast", "--prefetch", "2") == 1
    assert len(_read_table(tmp_path / "ff.csv")) < len(table)
    assert not multiprocessing.active_children()


def test_bad_options(tmp_path, capsys):
    _write_table(tmp_path / "pairs.csv", ("ref", "dist"), [("a.png", "b.png")])
    with pytest.raises(SystemExit):
        main(["batch", str(tmp_path / "pairs.csv"), "-o", str(tmp_path / "o.csv"), "--workers", "0"])
    with pytest.raises(SystemExit):
        main(["batch", str(tmp_path / "pairs.csv"), "-o", str(tmp_path / "o.csv"), "--decoder", "fibers"])
    assert "--decoder: invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["batch", str(tmp_path / "pairs.csv"), "-o", str(tmp_path / "o.csv"), "--metric", "nope"])
    assert "unknown image metric" in capsys.readouterr().err
    assert _batch(tmp_path / "pairs.csv", "-o", tmp_path / "o.csv", "--address", "x:1") == 2
    assert "--address needs --engine ray" in capsys.readouterr().err
    assert _batch(tmp_path / "pairs.csv", "-o", tmp_path / "pairs.csv") == 2
    assert not os.path.exists(tmp_path / "o.csv")


# ------------------------------------------------------------------------------------------- Ray
@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray", reason="the Ray engine needs ray (pip install 'fusedsim[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def test_ray_engine_two_workers_matches_local_and_resumes(tmp_path, local_ray, monkeypatch):
    pairs = _pairs(tmp_path)
    table = pairs + [("r0.png", "missing.png")]
    _write_table(tmp_path / "pairs.csv", ("ref", "dist"), table)
    assert _batch(tmp_path / "pairs.csv", "-o", tmp_path / "local.csv", "--metric", "ssim,psnr") == 1
    # a run that stopped after two rows, then resumed on the cluster
    local = _read_table(tmp_path / "local.csv")
    out = tmp_path / "ray.jsonl"
    out.write_text("".join(json.dumps({**r, "ssim": _num(r["ssim"]), "psnr": _num(r["psnr"])}) + "\n"
                           for r in local[:2]).replace("NaN", "null"))
    assert _batch(tmp_path / "pairs.csv", "-o", out, "--metric", "ssim,psnr", "--engine", "ray", "--workers", "2",
                  "--resume") == 1
    rows = _read_table(out)
    assert Counter((r["ref"], r["dist"]) for r in rows) == Counter(table)
    expected = {(r["ref"], r["dist"]): r for r in local}
    for r in rows:
        e = expected[(r["ref"], r["dist"])]
        if e["error"]:
            assert r["ssim"] is None and "not found" in r["error"]
        else:
            assert r["ssim"] == float(e["ssim"]) and r["psnr"] == float(e["psnr"]) and r["backend"] == "cpu full"


@pytest.mark.parametrize("workers, expected", [(2, 32), (15, 120), (63, 504)])
def test_default_prefetch_keeps_eight_images_per_decoding_worker(tmp_path, monkeypatch, workers, expected):
    """Without --prefetch every worker keeps two chunks of four images in flight (with one image, finished
    workers waited for the in-order consumer); never fewer than 32 pairs ahead."""
    pairs = _pairs(tmp_path)
    _write_table(tmp_path / "pairs.csv", ("ref", "dist"), pairs[:2])
    seen = {}
    real = batch_pairs.decode_ahead

    def recording(tasks, workers, prefetch, mode):
        seen.update(workers=workers, prefetch=prefetch)
        return real(tasks, workers=workers, prefetch=prefetch, mode="threads")

    monkeypatch.setattr(batch_pairs, "decode_ahead", recording)
    assert _batch(tmp_path / "pairs.csv", "-o", tmp_path / "out.csv", "--metric", "psnr",
                  "--workers", str(workers)) == 0
    assert seen == {"workers": workers, "prefetch": expected}
    assert _batch(tmp_path / "pairs.csv", "-o", tmp_path / "out2.csv", "--metric", "psnr",
                  "--workers", str(workers), "--prefetch", "5") == 0
    assert seen["prefetch"] == 5


def test_default_prefetch_keeps_large_images_within_an_eighth_of_the_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(batch_pairs, "_memory_bytes", lambda: 16 << 30)
    Image.new("RGB", (4000, 3000)).save(tmp_path / "big.png")
    Image.new("I;16", (30, 20)).save(tmp_path / "g16.png")
    assert batch_pairs.image_bytes_estimate(str(tmp_path / "big.png")) == 4000 * 3000 * 3
    assert batch_pairs.image_bytes_estimate(str(tmp_path / "g16.png")) == 30 * 20 * 4  # float32 samples
    assert batch_pairs.image_bytes_estimate(str(tmp_path / "missing.png")) is None
    # an eighth of 16 GiB in flight at 2 x 36 MB a pair: 29 pairs, not 8 x 63
    assert batch_pairs.default_prefetch(63, 4000 * 3000 * 3) == (2 << 30) // (2 * 36_000_000) == 29
    assert batch_pairs.default_prefetch(63, 1024 * 1024 * 3) == (2 << 30) // (2 * 3 << 20) == 341

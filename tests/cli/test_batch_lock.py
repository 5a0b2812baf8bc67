"""Data loss: two ``batch`` runs on one output must not interleave rows. A run holds an exclusive lock on
``<OUT>.lock`` (flock) for its whole run, the Parquet side log included; a second run, plain or ``--resume``,
fails at once naming the lock file and the holder's pid, and leaves the output as it was."""

from __future__ import annotations

import csv
import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _pair_images import write_images

from fusedsim.cli import rowsink
from fusedsim.cli.main import main

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.write(fd, f"{os.getpid()}\\n".encode())
print("locked", flush=True)
sys.stdin.read()
"""


def _table(folder: Path) -> Path:
    images = write_images(folder, refs=1, dists=2)
    table = folder / "pairs.csv"
    with open(table, "w", newline="") as f:
        csv.writer(f).writerows([("ref", "dist"), *(("r0.png", d) for d in images["r0.png"])])
    return table


def _locked(path: Path) -> bool:
    """Whether another open file description holds the flock of ``path``."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@pytest.mark.parametrize("resume", [False, True])
def test_second_run_fails_naming_the_holder(tmp_path, capsys, resume):
    table = _table(tmp_path)
    out = tmp_path / "out.csv"
    if resume:
        assert main(["batch", str(table), "-o", str(out), "--quiet", "--device", "cpu"]) == 0
    before = out.read_bytes() if out.exists() else None
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out) + ".lock"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        rc = main(["batch", str(table), "-o", str(out), "--quiet", "--device", "cpu"]
                  + (["--resume"] if resume else []))
        err = capsys.readouterr().err
    finally:
        holder.communicate("")
    assert rc == 2, err
    assert f"{out}.lock" in err and str(holder.pid) in err, err
    assert (out.read_bytes() if out.exists() else None) == before


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_lock_is_held_for_the_whole_run_and_released(tmp_path, monkeypatch, fmt):
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    table = _table(tmp_path)
    out = tmp_path / f"out.{fmt}"
    lock = Path(f"{out}.lock")
    seen: list[tuple[str, bool]] = []
    write, close = rowsink.RowSink.write, rowsink.RowSink.close

    def checked_write(self, row):
        seen.append(("write", lock.exists() and _locked(lock)))
        return write(self, row)

    def checked_close(self, *a, **k):
        close(self, *a, **k)  # the Parquet file is written from the side log here
        seen.append(("close", lock.exists() and _locked(lock)))

    monkeypatch.setattr(rowsink.RowSink, "write", checked_write)
    monkeypatch.setattr(rowsink.RowSink, "close", checked_close)
    assert main(["batch", str(table), "-o", str(out), "--quiet", "--device", "cpu"]) == 0
    assert seen and all(held for _, held in seen), seen
    assert not lock.exists()  # released and removed: the next run goes ahead
    assert main(["batch", str(table), "-o", str(out), "--quiet", "--device", "cpu", "--overwrite"]) == 0


_SLOW_RUN = """
import sys, time
from fusedsim.engine import batch_pairs
from fusedsim.cli.main import main
real = batch_pairs.PairRunner._outcome
def outcome(self, submitted):
    print("scoring", flush=True)
    sys.stdin.readline()  # the test lets each pair finish
    return real(self, submitted)
batch_pairs.PairRunner._outcome = outcome
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("resume", [False, True])
def test_two_real_runs_do_not_interleave(tmp_path, capsys, resume):
    table = _table(tmp_path)
    out = tmp_path / "out.csv"
    src = Path(__file__).resolve().parents[2] / "src"
    args = ["batch", str(table), "-o", str(out), "--quiet", "--device", "cpu"] + (["--resume"] if resume else [])
    first = subprocess.Popen([sys.executable, "-c", _SLOW_RUN, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(src)})
    try:
        assert first.stdout.readline().strip() == "scoring"  # the first run is in the middle of its work
        rc = main(args)
        err = capsys.readouterr().err
    finally:
        _, first_err = first.communicate("\n\n\n")
    assert rc == 2 and str(first.pid) in err and f"{out}.lock" in err, err
    assert first.returncode == 0, first_err
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 and all(r["ssim"] and not r["error"] for r in rows)

"""``fusedsim batch`` with a FIFO as the first reference: the run neither blocks nor reads the pipe; that pair gets
an error naming the FIFO and the others are scored."""

from __future__ import annotations

import csv
import os
import threading

import pytest
from _pair_images import write_images

from fusedsim.cli.main import main

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")


def test_batch_with_a_fifo(tmp_path):
    images = write_images(tmp_path, refs=1, dists=1)
    os.mkfifo(tmp_path / "pipe.png")
    with open(tmp_path / "pairs.csv", "w", newline="") as f:
        csv.writer(f).writerows([("ref", "dist"), ("pipe.png", "d00.png"), ("r0.png", images["r0.png"][0])])
    out = tmp_path / "out.csv"
    codes = []
    run = threading.Thread(target=lambda: codes.append(main(["batch", str(tmp_path / "pairs.csv"), "-o", str(out),
                                                             "--device", "cpu", "--quiet", "--metric", "psnr",
                                                             "--decoder", "threads"])), daemon=True)
    run.start()
    run.join(timeout=30)
    if run.is_alive():
        os.close(os.open(tmp_path / "pipe.png", os.O_WRONLY))  # release the blocked reader
        run.join(timeout=30)
        pytest.fail("batch blocked on the FIFO")
    assert codes == [1]  # one pair failed
    with open(out, newline="") as f:
        rows = {r["ref"]: r for r in csv.DictReader(f)}
    assert "FIFO" in rows["pipe.png"]["error"]
    assert rows["r0.png"]["error"] == "" and float(rows["r0.png"]["psnr"]) > 0

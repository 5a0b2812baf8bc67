"""A FIFO among the pairs: the header pre-read (``image_bytes_estimate``, which sizes the decode-ahead queue) must
not open it. Opening a FIFO for reading blocks until a writer comes, and a read would take bytes from its one
stream; the pair's own read then refuses it by name."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from fusedsim.engine.batch_pairs import image_bytes_estimate

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")


def _unblock(fifo) -> None:
    """Let a reader that is stuck in open() go (a writer opens and closes: the reader sees end of file)."""
    os.close(os.open(fifo, os.O_WRONLY))


def _has_reader(fifo) -> bool:
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        assert exc.errno == errno.ENXIO  # POSIX: no process has the FIFO open for reading
        return False
    os.close(fd)
    return True


def test_estimate_does_not_open_a_fifo(tmp_path):
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    result = []
    thread = threading.Thread(target=lambda: result.append(image_bytes_estimate(str(fifo))), daemon=True)
    thread.start()
    thread.join(timeout=5)
    if thread.is_alive():
        _unblock(fifo)
        thread.join(timeout=5)
        pytest.fail("image_bytes_estimate opened the FIFO and blocked waiting for a writer")
    assert result == [None]
    assert not _has_reader(fifo)


def test_estimate_of_a_regular_file(tmp_path):
    from PIL import Image

    Image.new("RGB", (7, 5)).save(tmp_path / "a.png")
    Image.new("I;16", (7, 5)).save(tmp_path / "b.png")
    assert image_bytes_estimate(str(tmp_path / "a.png")) == 7 * 5 * 3  # uint8 RGB
    assert image_bytes_estimate(str(tmp_path / "b.png")) == 7 * 5 * 4  # 16-bit grey read as float32
    assert image_bytes_estimate(str(tmp_path / "missing.png")) is None

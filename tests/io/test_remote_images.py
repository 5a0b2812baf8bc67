"""Images named by URI (issue 36: a cluster reads its pairs where they are): ``file://`` through pyarrow's file
systems, ``memory://`` through fsspec's, the same pixels as the local path; a missing object is "not found" naming
the URI; ``fusedsim batch`` keeps URIs in the table as they are. Expected values: the same files read by path."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from PIL import Image

from fusedsim.io.images import read_image, read_image_interleaved
from fusedsim.io.remote import is_uri


def _png(path, seed: int = 0) -> np.ndarray:
    a = np.random.default_rng(seed).integers(0, 256, (12, 16, 3), dtype=np.uint8)
    Image.fromarray(a).save(path)
    return a


def test_uri_or_path():
    assert is_uri("s3://bucket/a.png") and is_uri("gs://b/x") and is_uri("file:///tmp/a.png")
    assert not is_uri("/tmp/a.png") and not is_uri("C://a.png") and not is_uri("a.png") and not is_uri(None)


def test_file_uri_through_pyarrow(tmp_path):
    pytest.importorskip("pyarrow")
    _png(tmp_path / "a.png")
    by_uri = read_image(f"file://{tmp_path}/a.png", "REF")
    assert np.array_equal(by_uri.pixels.numpy(), read_image(tmp_path / "a.png").pixels.numpy())
    assert by_uri.bit_depth == 8 and by_uri.channels == "RGB"
    with pytest.raises(FileNotFoundError, match=f"REF: image file not found: file://{tmp_path}/missing.png"):
        read_image(f"file://{tmp_path}/missing.png", "REF")


def test_memory_uri_through_fsspec(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    _png(tmp_path / "a.png", 3)
    with fsspec.open("memory://bucket/a.png", "wb") as f:
        f.write((tmp_path / "a.png").read_bytes())
    image = read_image_interleaved("memory://bucket/a.png", "DIST")
    assert np.array_equal(image.pixels.numpy(), read_image(tmp_path / "a.png").pixels.numpy())
    with pytest.raises(FileNotFoundError, match="DIST: image file not found: memory://bucket/none.png"):
        read_image("memory://bucket/none.png", "DIST")
    with fsspec.open("memory://bucket/text.png", "wb") as f:
        f.write(b"not a PNG")
    with pytest.raises(ValueError, match="DIST: cannot read image memory://bucket/text.png"):
        read_image("memory://bucket/text.png", "DIST")


def test_unknown_scheme_names_the_uri():
    with pytest.raises(ValueError, match=r"nosuch://x/a.png: no file system for this URI"):
        read_image("nosuch://x/a.png", "REF")


def test_batch_reads_uris_in_the_table(tmp_path):
    pytest.importorskip("pyarrow")
    from fusedsim.cli.main import main

    a, b = _png(tmp_path / "a.png", 1), _png(tmp_path / "b.png", 2)
    with open(tmp_path / "pairs.csv", "w", newline="") as f:
        csv.writer(f).writerows([("ref", "dist"), (f"file://{tmp_path}/a.png", "b.png")])
    assert main(["batch", str(tmp_path / "pairs.csv"), "-o", str(tmp_path / "out.csv"), "--metric", "psnr",
                 "--device", "cpu", "--quiet", "--decoder", "threads"]) == 0
    with open(tmp_path / "out.csv", newline="") as f:
        (row,) = csv.DictReader(f)
    expected = 10 * np.log10(255**2 / np.mean((a.astype(np.float64) - b) ** 2))  # numpy, float64
    assert row["ref"] == f"file://{tmp_path}/a.png" and not row["error"]
    assert float(row["psnr"]) == pytest.approx(expected, rel=1e-6)  # float32 accumulation of 12x16x3 samples

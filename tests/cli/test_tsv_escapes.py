"""TSV outputs with file names that hold tabs, line breaks and backslashes: every command writes one record per line
with the escapes of fusedsim.cli.tsv (\\t, \\n, \\r, \\\\), and ``batch --resume`` reads such a file back.

The expected cells are decoded here with a decoder of our own (the PostgreSQL text-COPY escapes), not with the
package's, so a writer and reader that agree on a wrong convention would still fail."""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import pytest
from _pair_images import write_images

from fusedsim.cli.main import main

ODD = ["tab\there.png", "line\nbreak.png", "back\\slash\\t.png", "cr\rlf.png"]


def _decode(line: str) -> list[str]:
    table = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}
    return [re.sub(r"\\(.)", lambda m: table[m.group(1)], cell) for cell in line.split("\t")]


def _records(text: str) -> list[list[str]]:
    assert text.endswith("\n")
    return [_decode(line) for line in text[:-1].split("\n")]


@pytest.fixture()
def odd_images(tmp_path: Path) -> tuple[Path, list[Path]]:
    images = write_images(tmp_path, refs=1, dists=len(ODD))
    ref = tmp_path / "ref\tone.png"
    shutil.copy(tmp_path / "r0.png", ref)
    dists = []
    for name, src in zip(ODD, images["r0.png"]):
        shutil.copy(tmp_path / src, tmp_path / name)
        dists.append(tmp_path / name)
    return ref, dists


def test_score_and_compare_tsv(odd_images, capsys):
    ref, dists = odd_images
    assert main(["score", str(ref), str(dists[1]), "--format", "tsv", "--device", "cpu", "--metric", "psnr"]) == 0
    header, row = _records(capsys.readouterr().out)
    assert header == ["reference", "distorted", "psnr", "backend"]
    assert row[:2] == [str(ref), str(dists[1])] and float(row[2]) > 0
    assert main(["compare", str(ref), *map(str, dists), "--format", "tsv", "--device", "cpu",
                 "--metric", "psnr"]) == 0
    records = _records(capsys.readouterr().out)
    assert records[0] == ["distorted", "psnr", "backend"]
    assert [r[0] for r in records[1:]] == list(map(str, dists))


def test_sweep_tsv(odd_images, tmp_path):
    ref, _ = odd_images
    out = tmp_path / "sweep.tsv"
    assert main(["sweep", str(ref), "--codec", "jpeg", "--quality", "50,90", "-o", str(out), "--device", "cpu"]) == 0
    records = _records(out.read_text())
    assert [r[0] for r in records[1:]] == [str(ref)] * 2


def test_batch_tsv_and_resume(odd_images, tmp_path):
    ref, dists = odd_images
    table = tmp_path / "pairs.csv"  # the input is a spreadsheet CSV: its quoting carries the odd names
    with open(table, "w", newline="") as f:
        csv.writer(f).writerows([("ref", "dist"), *((ref.name, d.name) for d in dists)])
    out = tmp_path / "out.tsv"
    argv = ["batch", str(table), "-o", str(out), "--device", "cpu", "--quiet", "--metric", "psnr"]
    assert main(argv) == 0
    text = out.read_text()
    records = _records(text)
    assert records[0] == ["ref", "dist", "psnr", "backend", "error"]
    assert sorted(r[1] for r in records[1:]) == sorted(d.name for d in dists)
    assert all(r[0] == ref.name and r[4] == "" for r in records[1:])
    # every row is recognised as done: nothing is scored again
    assert main([*argv, "--resume"]) == 0
    assert out.read_text() == text
    # a run killed in the middle of the last row: that row alone is scored again
    out.write_text(text[: text.rindex("\t")])
    assert main([*argv, "--resume"]) == 0
    again = _records(out.read_text())
    assert sorted(r[1] for r in again[1:]) == sorted(d.name for d in dists)

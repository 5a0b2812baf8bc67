"""Pairs tables with cells longer than the csv module's default limit (131 072 characters): read, carried to the
output and read back by ``--resume``; a table the csv reader cannot parse is refused naming the file and line."""

from __future__ import annotations

import csv

import pytest
from _pair_images import write_images

from fusedsim.cli.main import main
from fusedsim.cli.pair_table import read_pairs

LONG = 200_000  # over csv.field_size_limit()'s default of 131 072


def _table(tmp_path, suffix=".csv"):
    images = write_images(tmp_path, refs=1, dists=2)
    notes = [("x" * LONG) + str(i) for i in range(2)]
    table = tmp_path / f"pairs{suffix}"
    with open(table, "w", newline="") as f:
        w = csv.writer(f, delimiter="," if suffix == ".csv" else "\t")
        w.writerow(("ref", "dist", "note"))
        w.writerows(("r0.png", d, n) for d, n in zip(images["r0.png"], notes))
    return table, notes


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_long_cells_are_read_written_and_resumed(tmp_path, suffix):
    table, notes = _table(tmp_path, suffix)
    assert [r["note"] for r in read_pairs(table).rows] == notes
    limit = csv.field_size_limit()
    out = tmp_path / f"out{suffix}"
    argv = ["batch", str(table), "-o", str(out), "--device", "cpu", "--quiet", "--metric", "psnr"]
    assert main(argv) == 0
    written = out.read_bytes()
    assert main([*argv, "--resume"]) == 0  # the long cells are read back: every row done, nothing appended
    assert out.read_bytes() == written
    assert sorted(written.count(n.encode()) for n in notes) == [1, 1]
    assert csv.field_size_limit() == limit  # the process-wide limit is put back


def test_unparsable_table_names_file_and_line(tmp_path, monkeypatch):
    import fusedsim.cli.csv_fields as csv_fields

    table, _ = _table(tmp_path)
    monkeypatch.setattr(csv_fields, "_MAX_FIELD", 1000)  # stands for a cell over the largest limit there is
    with pytest.raises(ValueError, match=rf"PAIRS {table}: line 2: field larger than field limit \(1000\)"):
        read_pairs(table)

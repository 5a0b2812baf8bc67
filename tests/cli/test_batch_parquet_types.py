"""Parquet output keeps the input columns' types: a Parquet table's Arrow types exactly, a CSV table's the types
pyarrow's CSV reader gives the same file (not strings); scores are float64, backend and error strings."""

from __future__ import annotations

import datetime
import decimal
import math

import pytest
from _pair_images import write_images

from fusedsim.cli.main import main

pa = pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (fusedsim[parquet])")
pq = pytest.importorskip("pyarrow.parquet")
pacsv = pytest.importorskip("pyarrow.csv")


def _batch(table, out, *extra) -> int:
    return main(["batch", str(table), "-o", str(out), "--device", "cpu", "--quiet", "--metric", "psnr,ssim", *extra])


def test_parquet_input_types_are_kept(tmp_path):
    dists = write_images(tmp_path, refs=1, dists=2)["r0.png"]
    table = pa.table({
        "ref": ["r0.png"] * 2, "dist": dists,
        "quality": pa.array([30, 90], pa.int32()), "weight": pa.array([0.5, None], pa.float32()),
        "keep": [True, False], "count": pa.array([7, None], pa.int64()),
        "day": [datetime.date(2024, 1, 1), None],
        "at": pa.array([datetime.datetime(2024, 1, 1, 10), datetime.datetime(2024, 1, 2, 11)], pa.timestamp("ms")),
        "price": pa.array([decimal.Decimal("1.25"), None], pa.decimal128(5, 2)),
        "gain": [math.nan, 1.0],  # NaN stays NaN, apart from null
    })
    pq.write_table(table, tmp_path / "pairs.parquet")
    out = tmp_path / "out.parquet"
    assert _batch(tmp_path / "pairs.parquet", out) == 0
    got = pq.read_table(out)
    assert got.select(table.column_names).schema.equals(table.schema.remove_metadata())
    rows = sorted(got.select(table.column_names).to_pylist(), key=lambda r: r["dist"])
    want = table.to_pylist()  # in dist order
    assert [math.isnan(r.pop("gain")) for r in rows] == [math.isnan(r.pop("gain")) for r in want] == [True, False]
    assert rows == want
    assert [got.schema.field(c).type for c in ("psnr", "ssim", "backend", "error")] == [pa.float64()] * 2 + [
        pa.string()] * 2
    assert _batch(tmp_path / "pairs.parquet", out, "--resume") == 0  # read back through the log: types kept
    assert pq.read_table(out).schema.equals(got.schema)


def test_csv_input_gets_pyarrow_csv_types(tmp_path):
    dists = write_images(tmp_path, refs=1, dists=2)["r0.png"]
    csv_path = tmp_path / "pairs.csv"
    csv_path.write_text("ref,dist,quality,weight,keep,day,note\n"
                        f"r0.png,{dists[0]},30,0.5,true,2024-01-01,first\n"
                        f"r0.png,{dists[1]},90,,false,2024-01-02,second\n")
    out = tmp_path / "out.parquet"
    assert _batch(csv_path, out) == 0
    got = pq.read_table(out)
    expected = pacsv.read_csv(csv_path)  # the library's own reading of the file is the oracle
    columns = expected.column_names
    assert [got.schema.field(c).type for c in columns] == [expected.schema.field(c).type for c in columns]
    assert got.schema.field("quality").type == pa.int64() and got.schema.field("day").type == pa.date32()
    assert sorted(got.select(columns).to_pylist(), key=str) == sorted(expected.to_pylist(), key=str)

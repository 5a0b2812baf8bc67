"""Incremental result tables of ``fusedsim batch``: every finished row is on disk before the next pair is scored.

* CSV, TSV and JSONL are append-only logs: one record per row, flushed at once. A run killed mid-row leaves at
  most one partial last record, which ``--resume`` cuts off before appending (CSV records are found with the csv
  reader: a quoted cell may hold line breaks; a TSV or JSON record is one line, :mod:`fusedsim.cli.tsv` escaping
  tabs and line breaks in its cells).
* Parquet cannot be appended row by row and a killed writer leaves a file without its footer, so its durable log
  is a JSONL file beside it (``OUT.parquet.log.jsonl``); the Parquet file is written from the log at the end of
  every run (to a temporary file, then renamed into place) and the log is removed once every pair is done.

Numbers are written round-trip exact (``repr``); NaN is ``nan`` in CSV/TSV and ``null`` in JSON. ``error`` is
empty for a pair that was scored. Parquet columns have types (:mod:`fusedsim.cli.parquet_columns`): the pairs
table's, float64 scores, string ``backend`` and ``error``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

from fusedsim.cli import tsv
from fusedsim.cli.atomic import write_bytes
from fusedsim.cli.csv_fields import unlimited_csv_fields
from fusedsim.cli.parquet_columns import ParquetColumns, json_default

__all__ = ["OUTPUT_FORMATS", "RowSink", "cell_text"]

OUTPUT_FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".parquet": "parquet"}


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else value  # +-inf stays a number in the log (json writes Infinity)
    return value


def cell_text(value: Any) -> str:
    """A value as a CSV cell (floats round-trip exact, None empty)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _cut_partial_line(path: str) -> None:
    """Drop the bytes after the last newline (a row cut by a killed run)."""
    with open(path, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(max(0, size - 1))
        if f.read(1) == b"\n":
            return
        block = 1 << 16
        pos = size
        while pos > 0:
            start = max(0, pos - block)
            f.seek(start)
            chunk = f.read(pos - start)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                f.truncate(start + cut + 1)
                return
            pos = start
        f.truncate(0)


class _Lines:
    """The lines of a binary file (split at ``\\n`` only), decoded for the csv reader, counting the bytes handed
    out so far (``end``) and whether the reader asked past the last line (``eof``)."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.end = 0
        self.last = b""
        self.eof = False

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self.f.readline()
        if not line:
            self.eof = True
            raise StopIteration
        self.end += len(line)
        self.last = line
        return line.decode("utf-8", errors="replace")


def _cut_partial_record(path: str, delimiter: str) -> None:
    """Drop a CSV/TSV record cut by a killed run, found with the csv reader: a quoted cell may hold newlines, so
    the last line break is not necessarily the end of a record. A record is whole when it ends with a line break
    and the reader finished it without reaching the end of the file (inside an open quote it does)."""
    with open(path, "rb+") as f:
        lines = _Lines(f)
        reader = csv.reader(lines, delimiter=delimiter)
        complete = 0
        while True:
            try:
                next(reader)
            except StopIteration:
                break
            except csv.Error as exc:  # never cut whole records on a doubt: stop and say where
                raise ValueError(f"cannot resume: {path} cannot be read as {'CSV' if delimiter == ',' else 'TSV'} "
                                 f"near byte {lines.end}: {exc}") from None
            if lines.eof or not lines.last.endswith(b"\n"):
                break
            complete = lines.end
        f.truncate(complete)


class RowSink:
    """Append rows with ``columns`` to ``target`` in ``fmt``; see the module docstring.

    ``key_columns`` name the two columns whose values identify a pair for ``--resume`` (a pair listed k times is
    done once k rows carry it).
    """

    def __init__(self, target: str, fmt: str, columns: Sequence[str], key_columns: tuple[str, str],
                 name: str = "", parquet: ParquetColumns | None = None) -> None:
        if fmt == "parquet" and parquet is None:
            raise ValueError("a Parquet RowSink needs its column types (fusedsim.cli.parquet_columns)")
        self.parquet = parquet
        self.target = target
        self.name = name or target  # the path as the user gave it, for messages
        self.fmt = fmt
        self.columns = list(columns)
        self.key_columns = key_columns
        self.log = target + ".log.jsonl" if fmt == "parquet" else target
        self._file: io.TextIOBase | None = None
        self._csv: Any = None
        self.written = 0

    # ---------------------------------------------------------------------------------------------- start
    def existing(self) -> bool:
        """Whether a previous run left rows (or a log) at the target."""
        paths = (self.log, self.target) if self.fmt == "parquet" else (self.target,)
        return any(os.path.exists(p) and os.path.getsize(p) > 0 for p in paths)

    def start(self, resume: bool) -> Counter:
        """Open the output; with ``resume`` read back the finished rows. Returns how often each key is done."""
        done: Counter = Counter()
        if resume and self.existing():
            done = self._read_back()
            mode = "a"
        else:
            mode = "w"
            if self.fmt == "parquet" and os.path.exists(self.log):
                os.unlink(self.log)
        self._file = open(self.log, mode, encoding="utf-8", newline="")
        if self.fmt == "csv":
            self._csv = csv.writer(self._file, lineterminator="\n")
        if mode == "w" and self.fmt in ("csv", "tsv"):
            self._write_cells(self.columns)
            self._file.flush()
        return done

    def _write_cells(self, cells: list[str]) -> None:
        if self._csv is not None:
            self._csv.writerow(cells)
        else:
            self._file.write(tsv.format_line(cells))

    def _read_back(self) -> Counter:
        if self.fmt == "parquet" and not (os.path.exists(self.log) and os.path.getsize(self.log) > 0):
            self._seed_log_from_parquet()
        if self.fmt == "csv":
            with unlimited_csv_fields():
                _cut_partial_record(self.log, ",")
        else:
            _cut_partial_line(self.log)  # a TSV or JSON line holds no raw line break
        done: Counter = Counter()
        a, b = self.key_columns
        if self.fmt in ("csv", "tsv"):
            with open(self.log, newline="", encoding="utf-8") as f, unlimited_csv_fields():
                records = csv.reader(f) if self.fmt == "csv" else self._tsv_records(f)
                header = next(records, None)
                if header is None:  # only a cut header: start over
                    self._file = None
                    os.truncate(self.log, 0)
                    with open(self.log, "w", encoding="utf-8", newline="") as g:
                        if self.fmt == "csv":
                            csv.writer(g, lineterminator="\n").writerow(self.columns)
                        else:
                            g.write(tsv.format_line(self.columns))
                    return done
                self._check_columns(header)
                ia, ib = header.index(a), header.index(b)
                for cells in records:
                    done[(cells[ia], cells[ib])] += 1
        else:
            with open(self.log, encoding="utf-8") as f:
                for number, line in enumerate(f, start=1):
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"-o {self.name}: cannot resume: line {number} of {self.log} is not "
                                         f"JSON ({exc})") from None
                    self._check_columns(list(row))
                    done[(cell_text(row[a]), cell_text(row[b]))] += 1
        return done

    def _tsv_records(self, f: Any) -> Any:
        """The records of a TSV log, escapes undone; a line that is not one of ours is refused, naming it."""
        for number, line in enumerate(f, start=1):
            try:
                yield tsv.parse_line(line)
            except ValueError as exc:
                raise ValueError(f"-o {self.name}: cannot resume: line {number} of {self.log}: {exc}") from None

    def _seed_log_from_parquet(self) -> None:
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(self.target).to_pylist()
        except Exception as exc:
            raise ValueError(f"-o {self.name}: cannot resume: the Parquet file cannot be read ({exc}) and there "
                             f"is no log {self.log}") from None
        with open(self.log, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, default=json_default) + "\n")  # the log keeps NaN (see write)

    def _check_columns(self, found: list[str]) -> None:
        if found != self.columns:
            raise ValueError(f"-o {self.name}: cannot resume: it has the columns {', '.join(found)} but this run "
                             f"writes {', '.join(self.columns)} (same pairs table and metrics are needed)")

    # ---------------------------------------------------------------------------------------------- rows
    def write(self, row: dict[str, Any]) -> None:
        """Append one row (keys: ``columns``) and flush it to the operating system."""
        assert self._file is not None, "start() first"
        if self.fmt in ("csv", "tsv"):
            self._write_cells([cell_text(row.get(c)) for c in self.columns])
        else:
            # strict JSON in a .jsonl output (NaN as null); Parquet's own log keeps NaN apart from null (Python's
            # json writes and reads NaN), so an input column's NaN and its nulls both survive
            keep = self.fmt == "parquet"
            self._file.write(json.dumps({c: row.get(c) if keep else _json_value(row.get(c)) for c in self.columns},
                                        default=json_default) + "\n")
        self._file.flush()
        self.written += 1

    def close(self, complete: bool) -> None:
        """Close the log; for Parquet write the table from it (and drop the log when ``complete``)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self.fmt == "parquet":
            self._write_parquet()
            if complete:
                os.unlink(self.log)

    def _write_parquet(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        assert self.parquet is not None
        rows = []
        with open(self.log, encoding="utf-8") as f:
            for line in f:
                if line.endswith("\n") and line.strip():
                    rows.append(json.loads(line))
        arrays = [self.parquet.array(c, [r.get(c) for r in rows]) for c in self.columns]
        buffer = io.BytesIO()
        pq.write_table(pa.Table.from_arrays(arrays, schema=self.parquet.schema), buffer)
        write_bytes(self.target, buffer.getvalue())

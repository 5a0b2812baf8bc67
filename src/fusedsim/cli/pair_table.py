"""The pairs table of ``fusedsim batch``: a CSV, TSV or Parquet file with a reference and a distorted column.

Column names (case-insensitive): ``ref`` / ``reference`` / ``ref_path`` and ``dist`` / ``distorted`` /
``dist_path``; exactly one of each must be present. Other columns are carried to the output unchanged. Relative
image paths are read relative to the folder of the pairs file, so a table moves with its images. CSV and TSV tables
are read with the csv module's quoting, as spreadsheets and pandas write them (a backslash is a backslash: Windows
paths stay as they are); cells of any length are read.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusedsim.cli.csv_fields import unlimited_csv_fields

__all__ = ["DIST_ALIASES", "PAIR_FORMATS", "REF_ALIASES", "PairTable", "read_pairs", "table_format"]

REF_ALIASES = ("ref", "reference", "ref_path")
DIST_ALIASES = ("dist", "distorted", "dist_path")
PAIR_FORMATS = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet"}


@dataclass
class PairTable:
    """``rows`` as read (one dict per row, keys in file order), the names of the reference/distorted columns and,
    for a Parquet table, its Arrow schema (None for CSV/TSV: text)."""

    path: Path
    columns: list[str]
    rows: list[dict[str, Any]]
    ref_column: str
    dist_column: str
    schema: Any = None

    def image_path(self, value: Any) -> str:
        """A cell of the ref/dist column as an absolute path (relative ones are relative to the table's folder), or
        the URI it holds (``s3://...``)."""
        text = "" if value is None else str(value).strip()
        if not text:
            return ""
        from fusedsim.io.remote import is_uri

        if is_uri(text):  # s3://, gs://, file://...: read where it is (fusedsim.io.remote)
            return text
        # absolute: worker threads and Ray actors may run in another folder
        return os.path.abspath(os.path.join(self.path.parent, text))


def table_format(path: str | Path, formats: dict[str, str], option: str) -> str:
    """The format named by ``path``'s extension among ``formats``; ValueError naming ``option`` otherwise."""
    suffix = Path(str(path)).suffix.lower()
    if suffix not in formats:
        raise ValueError(f"{option} {path}: unknown table format {suffix or '(no extension)'!r}; use "
                         f"{', '.join(formats)}")
    return formats[suffix]


def _pick(columns: list[str], aliases: tuple[str, ...], role: str, path: Path) -> str:
    found = [c for c in columns if c.strip().lower() in aliases]
    if not found:
        raise ValueError(f"PAIRS {path}: no {role} column; name it one of {', '.join(aliases)} (columns found: "
                         f"{', '.join(columns) or 'none'})")
    if len(found) > 1:
        raise ValueError(f"PAIRS {path}: several {role} columns ({', '.join(found)}); keep one")
    return found[0]


def _not_utf8(path: Path, reason: str) -> ValueError:
    """The file, the first byte that is not UTF-8 and its line, for a table saved as latin-1, cp1252, UTF-16, ...
    (the decoder's own message names neither the file nor the line)."""
    data = path.read_bytes()
    skip = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        data[skip:].decode("utf-8")
        at = 0
    except UnicodeDecodeError as exc:
        at, reason = skip + exc.start, exc.reason
    line = data.count(b"\n", 0, at) + 1
    return ValueError(f"PAIRS {path}: not UTF-8 text: byte 0x{data[at]:02x} on line {line} ({reason}); save the "
                      "table as UTF-8 (e.g. iconv -f latin1 -t utf-8)")


def _read_delimited(path: Path, delimiter: str) -> tuple[list[str], list[dict[str, Any]]]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as f, unlimited_csv_fields():
            reader = csv.reader(f, delimiter=delimiter)
            try:
                return _parse_delimited(path, reader)
            except csv.Error as exc:  # e.g. a stray quote before the end of the file
                raise ValueError(f"PAIRS {path}: line {reader.line_num}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc.reason) from None


def _parse_delimited(path: Path, reader: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """Header and rows of a csv reader; errors cite the line where the record starts (a quoted cell may span
    several lines, so records and lines are counted apart)."""
    header = next(reader, None)
    if header is None:
        raise ValueError(f"PAIRS {path}: the file is empty (a header row with ref and dist columns is needed)")
    rows = []
    start = reader.line_num + 1
    for cells in reader:
        line, start = start, reader.line_num + 1
        if not any(c.strip() for c in cells):
            continue  # blank line
        if len(cells) != len(header):
            raise ValueError(f"PAIRS {path}: line {line} has {len(cells)} fields but the header has "
                             f"{len(header)}")
        rows.append(dict(zip(header, cells)))
    return header, rows


def _read_parquet(path: Path) -> tuple[list[str], list[dict[str, Any]], Any]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError(f"PAIRS {path}: reading Parquet needs pyarrow (pip install 'fusedsim[parquet]')") from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises its own error types for damaged files
        raise ValueError(f"PAIRS {path}: cannot read Parquet: {exc}") from None
    return list(table.column_names), table.to_pylist(), table.schema


def read_pairs(path: str | Path) -> PairTable:
    """Read the pairs table at ``path`` (format from the extension: ``.csv``, ``.tsv``, ``.parquet``)."""
    path = Path(path)
    fmt = table_format(path, PAIR_FORMATS, "PAIRS")
    if not path.is_file():
        raise FileNotFoundError(f"PAIRS: file not found: {path}")
    schema = None
    if fmt == "parquet":
        columns, rows, schema = _read_parquet(path)
    else:
        columns, rows = _read_delimited(path, "," if fmt == "csv" else "\t")
    if len(set(columns)) != len(columns):
        raise ValueError(f"PAIRS {path}: repeated column names in {', '.join(columns)}")
    ref = _pick(columns, REF_ALIASES, "reference", path)
    dist = _pick(columns, DIST_ALIASES, "distorted", path)
    return PairTable(path=path, columns=columns, rows=rows, ref_column=ref, dist_column=dist, schema=schema)

"""Column types of ``fusedsim batch``'s Parquet output: the input columns keep the types of the pairs table.

A Parquet table's columns keep their Arrow types (int32 stays int32, dates stay dates). A CSV or TSV table has only
text, so its columns get the types pyarrow's CSV reader infers from the same cells (numbers, booleans, dates,
timestamps; its null tokens: an empty cell of a numeric column is null), which is what ``pyarrow.csv`` or pandas
would make of the file; the image path columns stay strings. Scores are float64 (NaN for a failed pair),
``backend`` and ``error`` strings. The durable log between runs is JSON, so values JSON has no type for (dates,
times, decimals) are logged as ISO text and cast back to their column's type when the Parquet file is written.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ParquetColumns", "json_default", "parquet_columns"]


def json_default(value: Any) -> Any:
    """``json.dumps``'s fallback for the values of typed tables: ISO text for dates and times, text for decimals."""
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    raise TypeError(f"a {type(value).__name__} value ({value!r}) cannot be written to the results table")


@dataclass(frozen=True)
class ParquetColumns:
    """The output schema, and which input columns are text to convert as pyarrow's CSV reader does."""

    schema: Any  # pyarrow.Schema
    from_text: frozenset[str]
    scores: frozenset[str]  # float64 scores: null in a log from an earlier version stands for NaN

    def array(self, name: str, values: Sequence[Any]) -> Any:
        """The column ``name`` from its logged ``values`` (JSON values, in the log's row order)."""
        import pyarrow as pa

        kind = self.schema.field(name).type
        if name in self.from_text:
            return _from_text(name, values, kind)
        if name in self.scores:
            values = [math.nan if v is None else v for v in values]
        try:
            return pa.array(values, type=kind)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):  # ISO text of dates, times, decimals
            return pa.array([None if v is None else str(v) for v in values], type=pa.string()).cast(kind)


def _from_text(name: str, values: Sequence[Any], kind: Any) -> Any:
    """Cells of a CSV/TSV column converted to ``kind`` exactly as pyarrow's CSV reader converts them."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow([name])
    writer.writerows([["" if v is None else str(v)] for v in values])
    table = pacsv.read_csv(io.BytesIO(text.getvalue().encode()),
                           parse_options=pacsv.ParseOptions(newlines_in_values=True),
                           convert_options=pacsv.ConvertOptions(column_types={name: kind}))
    return table.column(0).combine_chunks() if table.num_rows else pa.array([], type=kind)


def _text_types(columns: Sequence[str], rows: Sequence[dict[str, Any]], strings: Sequence[str]) -> dict[str, Any]:
    """pyarrow's CSV inference on the cells of ``rows`` (read by the csv module), ``strings`` kept as strings."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([[row[c] for c in columns] for row in rows])
    table = pacsv.read_csv(io.BytesIO(text.getvalue().encode()),
                           parse_options=pacsv.ParseOptions(newlines_in_values=True),
                           convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in strings}))
    # a column with no values at all (no rows, or only empty cells) is text, as it was read
    return {f.name: pa.string() if pa.types.is_null(f.type) else f.type for f in table.schema}


def parquet_columns(table: Any, score_columns: Sequence[str]) -> ParquetColumns:
    """The output columns of ``table`` (a :class:`fusedsim.cli.pair_table.PairTable`) with ``score_columns``,
    ``backend`` and ``error``."""
    import pyarrow as pa

    if table.schema is not None:
        inputs = {name: table.schema.field(name).type for name in table.columns}
        from_text: frozenset[str] = frozenset()
    else:
        inputs = _text_types(table.columns, table.rows, (table.ref_column, table.dist_column))
        from_text = frozenset(table.columns)
    fields = [pa.field(name, kind) for name, kind in inputs.items()]
    fields += [pa.field(name, pa.float64()) for name in score_columns]
    fields += [pa.field("backend", pa.string()), pa.field("error", pa.string())]
    return ParquetColumns(pa.schema(fields), from_text, frozenset(score_columns))

"""CSV cells of any length: the csv module refuses a field over ``csv.field_size_limit()`` (131 072 characters by
default), which a long note or JSON column of a pairs table easily passes. The limit is process-wide, so it is
raised only while a table is read and put back afterwards."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["unlimited_csv_fields"]

#: The largest limit every platform accepts (the csv module stores it in a C long, 32 bits on Windows).
_MAX_FIELD = 2**31 - 1


@contextmanager
def unlimited_csv_fields() -> Iterator[None]:
    """Within the block, the csv readers accept fields of up to 2**31 - 1 characters."""
    previous = csv.field_size_limit(_MAX_FIELD)
    try:
        yield
    finally:
        csv.field_size_limit(previous)

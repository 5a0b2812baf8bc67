"""Tab-separated output, one convention for every command that writes it (``score``, ``compare``, ``sweep`` and
``batch`` with ``--format tsv`` or a ``.tsv`` output).

One record per line, cells separated by tabs, no quoting. Inside a cell a backslash, a tab, a line feed and a
carriage return are written as the two characters ``\\\\``, ``\\t``, ``\\n`` and ``\\r`` (the escapes of
PostgreSQL's text ``COPY`` format and of "linear TSV"; IANA's ``text/tab-separated-values`` has no way to put a tab
in a field). Any file name thus keeps its record on one line and its cell between two tabs, so ``cut -f``, ``awk
-F'\\t'`` and ``batch --resume`` read it back; :func:`parse_line` undoes the escapes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["escape", "format_line", "parse_line", "unescape"]

_ESCAPE = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_UNESCAPE = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}
_SEQUENCE = re.compile(r"\\(.?)", re.DOTALL)


def escape(cell: str) -> str:
    """``cell`` with its backslashes, tabs, line feeds and carriage returns escaped."""
    return cell.translate(_ESCAPE)


def unescape(cell: str) -> str:
    """The text :func:`escape` was given; a backslash before any other character (or at the end) is refused, as
    :func:`escape` never writes one."""

    def replace(match: re.Match) -> str:
        code = match.group(1)
        if code not in _UNESCAPE:
            raise ValueError(f"unknown escape \\{code} in the TSV cell {cell!r} (written cells escape only "
                             "\\\\, \\t, \\n and \\r)")
        return _UNESCAPE[code]

    return _SEQUENCE.sub(replace, cell) if "\\" in cell else cell


def format_line(cells: Iterable[str]) -> str:
    """One record: the escaped cells joined by tabs, ending in a line feed."""
    return "\t".join(escape(c) for c in cells) + "\n"


def parse_line(line: str) -> list[str]:
    """The cells of one record written by :func:`format_line` (its line feed optional)."""
    return [unescape(c) for c in line.removesuffix("\n").split("\t")]

"""Progress of long commands on standard error, shared by ``batch``, ``compare``, ``sweep`` and ``bench`` (and meant
for every command that works through many items).

On a terminal it is a tqdm bar: items done of the total, items per second and the estimated time left, redrawn in
place. Anywhere else (a log file, CI, a pipe) a redrawn bar would leave carriage returns and hundreds of partial
lines, so it writes a plain line every :data:`LINE_INTERVAL_S` seconds instead (``batch: 120/400 pairs (30%),
2.41 pairs/s, elapsed 00:49, ETA 01:56``) and, after work long enough to have written one, a last line with the
totals. Work shorter than the interval writes nothing in line mode.

Usage::

    with Progress(len(items), desc="sweep", unit="encoding") as progress:
        for item in items:
            ...
            progress.update()
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

from tqdm import tqdm

__all__ = ["LINE_INTERVAL_S", "Progress"]

#: Seconds between two lines when standard error is not a terminal.
LINE_INTERVAL_S = 5.0


def _now() -> float:
    return time.monotonic()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Progress:
    """Progress of ``total`` items (None: unknown) named ``desc``, each a ``unit``.

    Args:
        total: the number of items, or None when unknown (no percentage and no ETA then).
        desc: what is shown first, e.g. the command's name.
        unit: one item's name, singular (``"pair"``, ``"encoding"``).
        enabled: False shows nothing (``--quiet``).
        file: where to write (default: standard error, looked up when the progress starts).
        interval_s: seconds between lines when ``file`` is not a terminal (default :data:`LINE_INTERVAL_S`).
    """

    def __init__(self, total: int | None, *, desc: str, unit: str = "item", enabled: bool = True,
                 file: TextIO | None = None, interval_s: float | None = None) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.file = file if file is not None else sys.stderr
        self.interval_s = LINE_INTERVAL_S if interval_s is None else interval_s
        self.n = 0
        self._bar: tqdm | None = None
        self._lines = enabled and not _is_terminal(self.file)
        if enabled and not self._lines:
            self._bar = tqdm(total=total, desc=desc, unit=unit, file=self.file, dynamic_ncols=True, smoothing=0.1)
        self._start = self._last = _now()
        self._written = False

    def update(self, n: int = 1) -> None:
        """``n`` more items are done."""
        self.n += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._lines and _now() - self._last >= self.interval_s:
            self._line()

    def write(self, message: str, file: TextIO | None = None) -> None:
        """Print ``message`` on its own line of ``file`` (default: the progress's stream; standard output for
        results) without breaking the bar: on a terminal the bar is cleared first and drawn again below."""
        target = file if file is not None else self.file
        if self._bar is not None:
            tqdm.write(message, file=target)
        else:
            print(message, file=target, flush=True)

    def close(self) -> None:
        """Finish: the bar's last state, or the totals line when lines were written."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._lines and self._written:
            self._line(final=True)
        self._lines = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _line(self, final: bool = False) -> None:
        now = _now()
        elapsed = now - self._start
        rate = self.n / elapsed if elapsed > 0 else 0.0
        done = f"{self.n}/{self.total}" if self.total is not None else f"{self.n}"
        parts = [f"{self.desc}: {done} {self.unit}s"]
        if self.total:
            parts[0] += f" ({100 * self.n / self.total:.0f}%)"
        parts.append(f"{rate:.3g} {self.unit}s/s")
        parts.append(f"elapsed {tqdm.format_interval(elapsed)}")
        if not final and self.total is not None and rate > 0:
            parts.append(f"ETA {tqdm.format_interval((self.total - self.n) / rate)}")
        print(", ".join(parts), file=self.file, flush=True)
        self._last = now
        self._written = True

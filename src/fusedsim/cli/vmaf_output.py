"""libvmaf's output layouts for ``fusedsim vmaf``: XML (its default), JSON, CSV, and a pooled-mean text table.

Numbers are written round-trip exact instead of libvmaf's default ``%.6f``; metrics are pooled over frames as
libvmaf pools them (:func:`fusedsim.families.vmaf.pipeline.pool`), so tools written for ``vmaf --json`` read them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from fusedsim.families.vmaf.pipeline import pool

if TYPE_CHECKING:
    import numpy as np

__all__ = ["format_csv", "format_json", "format_number", "format_text", "format_xml"]


def format_number(x: float, precision: int | None = None) -> str:
    """A JSON number: by default one that reads back as exactly ``x`` (integral values without ``.0``, as
    ``%.17g`` prints them); with ``precision`` N, ``%.Nf`` as libvmaf prints (``--precision 6`` is its stock
    output). ``null`` for NaN and infinities, as libvmaf writes them."""
    x = float(x)
    if not math.isfinite(x):
        return "null"
    if precision is not None:
        return f"{x:.{precision}f}"
    if x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return repr(x)


def _text_number(x: float, precision: int | None = None) -> str:
    """A CSV cell or XML attribute value (see :func:`format_number`; nan/inf/-inf for non-finite values)."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return format_number(x, precision)


def format_json(metrics: dict[str, np.ndarray], *, version: str, fps: float | None, first_frame: int = 0,
                precision: int | None = None) -> str:
    """libvmaf's ``--json`` document for per-frame ``metrics`` (name -> values, all of the same length)."""
    names = list(metrics)
    n = len(next(iter(metrics.values()))) if metrics else 0
    out = ["{\n", f'  "version": {_json_str(version)},\n']
    fps_text = f"{fps:.2f}" if fps is not None and math.isfinite(fps) else "null"
    out.append(f'  "fps": {fps_text},\n')
    out.append('  "frames": [')
    columns = [metrics[name] for name in names]
    for i in range(n):
        out.append(",\n" if i else "\n")
        out.append(f'    {{\n      "frameNum": {first_frame + i},\n      "metrics": {{\n')
        for j, name in enumerate(names):
            sep = "," if j < len(names) - 1 else ""
            out.append(f"        {_json_str(name)}: {format_number(columns[j][i], precision)}{sep}\n")
        out.append("      }\n    }")
    out.append("\n  ],\n")
    out.append('  "pooled_metrics": {')
    for j, name in enumerate(names):
        out.append(",\n" if j else "\n")
        pooled = pool(columns[j])
        body = ",\n".join(f'      "{key}": {format_number(value, precision)}' for key, value in pooled.items())
        out.append(f"    {_json_str(name)}: {{\n{body}\n    }}")
    out.append("\n  },\n")
    out.append('  "aggregate_metrics": {\n  }\n}\n')
    return "".join(out)


def format_csv(metrics: dict[str, np.ndarray], *, first_frame: int = 0, precision: int | None = None) -> str:
    """libvmaf's ``--csv`` table: a ``Frame,<metric>...`` header, then one row per frame."""
    names = list(metrics)
    n = len(next(iter(metrics.values()))) if metrics else 0
    lines = [",".join(["Frame", *names])]
    columns = [metrics[name] for name in names]
    for i in range(n):
        lines.append(",".join([str(first_frame + i), *(_text_number(col[i], precision) for col in columns)]))
    return "\n".join(lines) + "\n"


def format_xml(metrics: dict[str, np.ndarray], *, version: str, width: int, height: int, fps: float | None,
               first_frame: int = 0, precision: int | None = None) -> str:
    """libvmaf's default (``--xml``) document: ``<VMAF version>`` with ``params`` (qualityWidth/qualityHeight),
    ``fyi`` (fps), ``frames`` (one ``frame`` element per frame, a ``frameNum`` attribute and one attribute per
    metric), ``pooled_metrics`` (``metric`` elements: name, min, max, mean, harmonic_mean) and
    ``aggregate_metrics``; numbers round-trip exact instead of libvmaf's ``%.6f``."""
    from xml.sax.saxutils import quoteattr

    names = list(metrics)
    n = len(next(iter(metrics.values()))) if metrics else 0
    columns = [metrics[name] for name in names]
    fps_text = f"{fps:.2f}" if fps is not None and math.isfinite(fps) else "nan"
    out = [f"<VMAF version={quoteattr(version)}>\n",
           f'  <params qualityWidth="{int(width)}" qualityHeight="{int(height)}" />\n',
           f'  <fyi fps="{fps_text}" />\n', "  <frames>\n"]
    for i in range(n):
        cells = "".join(f'{name}="{_text_number(col[i], precision)}" ' for name, col in zip(names, columns))
        out.append(f'    <frame frameNum="{first_frame + i}" {cells}/>\n')
    out.append("  </frames>\n  <pooled_metrics>\n")
    for name, col in zip(names, columns):
        cells = "".join(f'{key}="{_text_number(value, precision)}" ' for key, value in pool(col).items())
        out.append(f"    <metric name={quoteattr(name)} {cells}/>\n")
    out.append("  </pooled_metrics>\n  <aggregate_metrics />\n</VMAF>\n")
    return "".join(out)


def format_text(metrics: dict[str, np.ndarray], precision: int | None = None) -> str:
    """One ``name: pooled mean`` line per metric."""
    width = max((len(name) for name in metrics), default=0)
    return "".join(f"{name + ':':<{width + 1}} {format_number(pool(v)['mean'], precision)}\n"
                   for name, v in metrics.items())


def _json_str(text: str) -> str:
    import json

    return json.dumps(text)

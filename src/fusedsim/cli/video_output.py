"""Text layouts of ``fusedsim video``: per-frame JSON and CSV, FFVship's ``--json`` and the pooled table.

* JSON: ``{"reference", "distorted", "info", "notes", "frames": [{"frame", "ref_frame", "dist_frame",
  "metrics": {column: value}}], "pooled": {column: {mean, harmonic_mean, min, max, p1, p5, p10}}, "clip":
  {column: value}}``; strict JSON (non-finite values are null). ``clip`` holds the whole-clip scores (cvvdp's
  temporal JOD; its per-frame column is the running JOD and is not pooled).
* CSV: ``frame,ref_frame,dist_frame,<columns>``, one line per frame pair.
* FFVship (its ``--json`` file): a list with one list per frame of the metric's values, ``[[v0], [v1], ...]``;
  for one metric only. Butteraugli's lists are ``[pnorm3, max_norm]``: the 3-norm and the max (INF) norm that
  FFVship writes second and third (its first, a Q-norm, is not computed here).
* Plain (stdout without an output file): one line per column with the pooled statistics, one per clip score,
  then the frame count.

Numbers are written with ``repr`` (round-trip exact) unless a precision is given.
"""

from __future__ import annotations

import math
from typing import Any

from fusedsim.cli.json_text import dumps

__all__ = ["format_csv", "format_ffvship", "format_json", "format_plain"]


def _number(value: float, precision: int | None) -> str:
    value = float(value)
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return repr(value) if precision is None else f"{value:.{precision}f}"


def _rounded(value: float, precision: int | None) -> float:
    return float(value) if precision is None else round(float(value), precision)


def format_json(scores: Any, ref: str, dist: str, precision: int | None = None) -> str:
    frames = []
    for k, (r, d) in enumerate(zip(scores.ref_index, scores.dist_index)):
        frames.append({"frame": k, "ref_frame": int(r), "dist_frame": int(d),
                       "metrics": {name: _rounded(col[k], precision) for name, col in scores.columns.items()}})
    pooled = {name: {stat: _rounded(v, precision) for stat, v in stats.items()}
              for name, stats in scores.pooled.items()}
    clip = {name: _rounded(v, precision) for name, v in scores.clip.items()}
    payload = {"reference": ref, "distorted": dist, "info": scores.info, "notes": scores.notes,
               "fps": scores.fps, "frames": frames, "pooled": pooled, "clip": clip}
    return dumps(payload) + "\n"


def format_csv(scores: Any, precision: int | None = None) -> str:
    names = list(scores.columns)
    lines = [",".join(["frame", "ref_frame", "dist_frame", *names])]
    for k, (r, d) in enumerate(zip(scores.ref_index, scores.dist_index)):
        lines.append(",".join([str(k), str(r), str(d),
                               *(_number(scores.columns[n][k], precision) for n in names)]))
    return "\n".join(lines) + "\n"


_FFVSHIP_ORDER = {"butteraugli": ("butteraugli.pnorm3", "butteraugli.max_norm")}


def ffvship_columns(columns: list[str]) -> list[str]:
    """The columns of FFVship's per-frame lists, or ValueError when they are not one metric's."""
    metrics = {c.partition(".")[0] for c in columns}
    if len(metrics) != 1:
        raise ValueError("--ffvship-json holds one metric (FFVship scores one per run); got "
                         f"{', '.join(sorted(metrics))}")
    metric = metrics.pop()
    return list(_FFVSHIP_ORDER.get(metric, columns))


def format_ffvship(scores: Any, precision: int | None = None) -> str:
    names = ffvship_columns(list(scores.columns))
    rows = ["[" + ", ".join(_number(scores.columns[n][k], precision) for n in names) + "]"
            for k in range(scores.frames)]
    return "[" + ", ".join(rows) + "]"


def format_plain(scores: Any, precision: int | None = 6) -> str:
    stats = ("mean", "harmonic_mean", "min", "p1", "p5", "p10", "max")
    width = max((len(n) for n in scores.columns), default=0)
    lines = [f"{'':<{width}}  " + "  ".join(f"{s:>14}" for s in stats)] if scores.pooled else []
    for name, pooled in scores.pooled.items():
        lines.append(f"{name:<{width}}  " + "  ".join(f"{_number(pooled[s], precision):>14}" for s in stats))
    for name, value in scores.clip.items():
        how = scores.info.get(name, {})
        detail = f" ({how['model']} model, {how['fps']:g} frames/s, {how['display']})" if how else ""
        lines.append(f"{name:<{width}}  clip {_number(value, precision)}{detail}")
    fps = f", {scores.fps:.1f} frames/s" if scores.fps else ""
    lines.append(f"{scores.frames} frame pairs{fps}")
    return "\n".join(lines) + "\n"

"""Figures of the CLI (matplotlib, headless): imported on use, saved whole or not at all.

A figure is rendered to memory first, then written to a temporary file beside its target and renamed into place,
so a failed render or a full disk never leaves a half-written PNG (the target of a symlink is replaced, as
:mod:`fusedsim.cli.outputs` resolves it).
"""

from __future__ import annotations

import io
from typing import Any

from fusedsim.cli.atomic import write_bytes

__all__ = ["UNITS", "axis_label", "pyplot", "save_figure"]

#: Units of the metric outputs that have one (a column name, ``metric`` or ``metric.field``); the others are
#: unitless scores
UNITS = {"psnr": "dB", "cvvdp": "JOD"}


def axis_label(column: str) -> str:
    """A metric column as an axis label, with its unit: ``psnr`` -> ``psnr (dB)``."""
    unit = UNITS.get(column.split(".", 1)[0])
    return f"{column} ({unit})" if unit else column


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, or a ValueError saying how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise ValueError("drawing figures needs matplotlib: pip install 'fusedsim[plot]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, target: str, dpi: int) -> None:
    """Render ``fig`` as PNG at ``dpi`` (the figure's own size: no tight cropping) and write it to ``target``."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    write_bytes(target, buffer.getvalue())

"""The driver's Triton kernel cache, shipped with a Ray job to the nodes that have none.

A fresh node compiles every kernel its actor launches (~30 s for the five perceptual metrics on an H200, in
parallel warm-up processes; a minute and more one after the other). Two ways spare it that: a cache folder on a
file system every node mounts (``TRITON_CACHE_DIR`` set alike on every node: the driver forwards its own,
:data:`~fusedsim.engine.ray_batch.FORWARDED_ENV`), or the driver's own cache shipped with the job, which this module
does for clusters without such a file system: when the driver's cache is warm for the run's metrics at the first
pair's size (the warm-up's markers, :func:`~fusedsim.engine.warmup.cold_metrics`), ``fusedsim batch --engine ray
--address`` adds the folder to the job's ``py_modules`` (Ray uploads it once per content, and unpacks it on every
node) and names it in ``FUSEDSIM_SHIPPED_KERNELS``; each scoring actor then points ``TRITON_CACHE_DIR`` at its
node's copy before it builds its scorer (:func:`adopt_shipped_cache`). Triton finds a kernel there only when the
node has the driver's Triton and a GPU of the same architecture (the cache key holds both); otherwise it compiles
into the copy as into any cache. Triton's cache groups name their files by absolute path (the driver's folder), so
the actor first points them at the node's copy (:func:`~fusedsim.engine.kernel_archive.relocate_groups`); without
that, a node whose file system lacks the driver's folder would miss every kernel.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["SHIPPED_ENV", "SHIP_LIMIT_BYTES", "adopt_shipped_cache", "cache_to_ship", "folder_bytes"]

SHIPPED_ENV = "FUSEDSIM_SHIPPED_KERNELS"  # the shipped folder's name, set in the job's environment
SHIP_LIMIT_BYTES = 256 << 20  # a larger cache is not shipped (Ray keeps job packages in its head node's memory)


def folder_bytes(folder: Path) -> int:
    """The bytes of the files below ``folder``."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:  # removed meanwhile
                pass
    return total


def cache_to_ship(metrics: Sequence[str], height: int, width: int,
                  params: dict[str, dict[str, Any]] | None = None,
                  limit_bytes: int = SHIP_LIMIT_BYTES) -> tuple[Path | None, str]:
    """``(folder, "")``: this machine's Triton cache, warm for ``metrics`` on a GPU at ``height`` x ``width`` and at
    most ``limit_bytes``; or ``(None, why not)``."""
    from fusedsim.engine.warmup import cold_metrics, triton_cache_dir

    folder = triton_cache_dir()
    cold = cold_metrics(metrics, "cuda", height, width, params)
    if cold:
        return None, (f"the kernel cache here ({folder}) lacks {', '.join(cold)} at {width}x{height}: run "
                      "`fusedsim warmup` on a GPU machine first, or share TRITON_CACHE_DIR between the nodes")
    size = folder_bytes(folder)
    if size > limit_bytes:
        return None, (f"the kernel cache here ({folder}) holds {size / 2**20:.0f} MiB, more than "
                      f"{limit_bytes / 2**20:.0f} MiB: point TRITON_CACHE_DIR at a folder of its own for fusedsim, "
                      "or share it between the nodes")
    return folder, ""


def adopt_shipped_cache(paths: Iterable[str] | None = None, environ: dict[str, str] | None = None) -> Path | None:
    """On a Ray worker: point ``TRITON_CACHE_DIR`` at the kernel cache shipped with the job (the folder named by
    :data:`SHIPPED_ENV` on ``paths``, default ``sys.path``, where Ray unpacks ``py_modules``), and return it; None
    when nothing was shipped or it is not found (the worker then uses its own cache)."""
    from fusedsim.engine.warmup import MARKER_FOLDER

    environ = os.environ if environ is None else environ
    name = environ.get(SHIPPED_ENV)
    if not name:
        return None
    for entry in sys.path if paths is None else paths:
        candidate = Path(entry or ".") / name
        if (candidate / MARKER_FOLDER).is_dir():
            from fusedsim.engine.kernel_archive import relocate_groups

            relocate_groups(candidate)  # Triton's groups name the driver's folder: point them here
            environ["TRITON_CACHE_DIR"] = str(candidate)
            return candidate
    return None

"""Share one set of Triton compilations among processes that all make the same launches.

Triton compiles a kernel specialisation in the thread that first launches it, holding the GIL, so one process
compiles one kernel at a time. The warm-up (:mod:`fusedsim.engine.warmup`) therefore runs the same synthetic
scoring in several processes, and each compilation is claimed by whichever process reaches it first: it creates a
file named after the specialisation in a folder the processes share (``O_EXCL``: exactly one creation succeeds),
compiles the kernel into Triton's on-disk cache and launches it; every other process skips that launch (Triton's
``jit_cache_hook`` returns "handled") and goes on to the next launch, which it may claim. The processes spread
the compilations among themselves as they go, so the wall time is about the whole set's compile time divided by
the processes, not the slowest metric's.

A skipped launch leaves its output tensor unwritten, so a process computes later stages on whatever memory held;
only the launches' specialisations (shapes, dtypes, alignment) matter here, never the values. A process that
fails on such values loses only the compilations it would have claimed later: the run that follows compiles
whatever the cache still lacks.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["claim", "claim_hook", "share_compilations"]


def claim(folder: Path, name: str) -> bool:
    """True when this call created ``folder/name`` (the caller compiles), False when it existed already."""
    try:
        os.close(os.open(folder / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True


def claim_hook(folder: Path) -> Callable[..., bool]:
    """A ``jit_cache_hook`` that compiles a specialisation only when it claims it in ``folder``. Triton calls it
    before compiling a specialisation the process has not loaded, with the kernel (``fn``) and its cache ``key``
    (argument types, alignments, constexpr values and compile options: equal in every process making the same
    launch); a True return skips the compilation and the launch."""

    def hook(*, key: Any, fn: Any, **_: Any) -> bool:
        name = hashlib.sha1(f"{fn.module}.{fn.name}|{key!r}".encode()).hexdigest()
        return not claim(folder, name)

    return hook


def share_compilations(folder: Path) -> bool:
    """Install :func:`claim_hook` for this process (it skips launches: only for warm-up processes). False when
    this Triton has no ``knobs.runtime.jit_cache_hook`` (then every process compiles everything it launches)."""
    try:
        from triton import knobs
    except ImportError:
        return False
    runtime = getattr(knobs, "runtime", None)
    if runtime is None or not hasattr(runtime, "jit_cache_hook"):
        return False
    runtime.jit_cache_hook = claim_hook(folder)
    return True

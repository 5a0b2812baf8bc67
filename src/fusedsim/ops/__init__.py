"""Triton kernels, one module per primitive, and the op registry.

Every op is declared once in :mod:`fusedsim.ops.catalog` (one module per family) (Triton-free: twins work without Triton); its kernel
module (``ssim``, ``avg_pool``, ``windowed_moments``, ``integer_ssim``, ``sequential_sum``) is imported the first
time the Triton side runs. Importing this package imports neither.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable


def op(name: str):
    """The registered op ``name``: call it like a function (it dispatches to Triton or the twin)."""
    from fusedsim.ops.catalog import FAMILIES, load_family
    from fusedsim.ops.registry import OPS

    for family in FAMILIES:  # only the families up to the op's (the video command skips the perceptual twins)
        if name in OPS:
            break
        load_family(family)
    try:
        return OPS[name]
    except KeyError:
        raise ValueError(f"unknown op {name!r}; registered ops: {', '.join(sorted(OPS))}") from None


def prepare_in_background(names: Iterable[str]) -> threading.Thread | None:
    """Import the Triton side of the ops ``names`` on a daemon thread (:meth:`KernelOp.prepare`) and return it.

    A GPU command's first kernel waits for ``import triton``, the kernel module and Triton's self-hash (~0.2 s),
    and for the CUDA context (~0.3 s), one after the other; started before the context, this overlaps them.
    Never raises: a failure here is met again, and reported, by the call that needs the op. ``None`` when there
    is nothing to prepare or Triton is not installed."""
    import importlib.util

    names = tuple(names)
    if not names or importlib.util.find_spec("triton") is None:
        return None

    def work() -> None:
        try:
            for name in names:
                op(name).prepare()
        except Exception:  # noqa: BLE001 - the foreground call reports it with its context
            pass

    thread = threading.Thread(target=work, name="fusedsim-prepare", daemon=True)
    thread.start()
    return thread

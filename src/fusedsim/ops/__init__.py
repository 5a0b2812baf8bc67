"""Triton kernels, one module per primitive, and the op registry.

Every op is declared once in :mod:`fusedsim.ops.catalog` (one module per family) (Triton-free: twins work without Triton); its kernel
module (``ssim``, ``avg_pool``, ``windowed_moments``, ``integer_ssim``, ``sequential_sum``) is imported the first
time the Triton side runs. Importing this package imports neither.
"""

from __future__ import annotations


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

"""Every op, declared once: schema, Triton plan (imported lazily), PyTorch twin, shape function, test examples.

The declarations live in one module per family (:mod:`.ssim`, :mod:`.vmaf`, :mod:`.registration`,
:mod:`.perceptual`); importing a family registers its ops. Importing this package registers nothing, so a caller
that needs one op (``fusedsim.ops.op("integer_ssim")``) imports only the families up to it — the video command
does not pay for the perceptual twins. :func:`load_all` (or any op name read from this package) registers every
family. None of it imports Triton or the kernels, so the twins (the CPU path) work where Triton is not installed.
Adding an op = one ``register_op`` call in its family (plus its kernel module and its twin); the dispatcher,
``torch.compile`` support and the generic twin tests (``tests/ops/test_registry.py``) follow from it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

#: Family modules, in the order :func:`fusedsim.ops.op` tries them.
FAMILIES = ("ssim", "vmaf", "registration", "perceptual")

#: Ops whose Triton kernels pass their twin tests in Triton's interpreter but have not yet passed them on a GPU:
#: ``auto`` runs their twins on GPU tensors (same algorithm in PyTorch); ``use_backend("triton")`` still runs the
#: kernels, which is how the GPU tests exercise them. A new op starts here (``triton_by_default=False``) until
#: ``tests/ops/test_registry.py`` passes on a GPU. Empty: every kernel passed on the H200 (Triton 3.6).
GPU_PENDING: tuple[str, ...] = ()


def load_family(name: str) -> ModuleType:
    """Import (and so register) one family of ops."""
    return importlib.import_module(f"{__name__}.{name}")


def load_all() -> None:
    """Register every op."""
    for name in FAMILIES:
        load_family(name)


def __getattr__(name: str) -> Any:
    """``from fusedsim.ops.catalog import <op or constant>`` works for every family's public names."""
    for family in FAMILIES:
        module = load_family(family)
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Families: one package per metric family, holding everything of it.

A family folder ``families/<name>/`` holds its PyTorch twin (``twin.py``, the specification and CPU path), its
Triton kernels (``*_kernel.py``), its compiled CPU kernels (``cpu.py``, numba), its op declarations (``ops.py``:
``register_op(KernelOp(...))``, each kernel module registering its plan on its op with ``@op.triton_plan``), its
public functions (``api.py``), and in ``__init__.py`` its :class:`~fusedsim.metrics.registry.MetricSpec` and its
``EXPORTS`` (public names), without importing torch.

Families are found on disk (:func:`family_names`): the metric registry, the op registry, the lazy top-level names of
``fusedsim`` (``fusedsim.<export>``, and ``fusedsim.<family>`` as another name of the package) and the generic tests
come from them, so adding a metric is adding a folder here (and its tests): no list elsewhere names it.
Shared building blocks live in :mod:`fusedsim.core`.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from fusedsim.core.state import cached

__all__ = ["family_names", "load_families", "exports"]


@cached(maxsize=1)
def family_names() -> tuple[str, ...]:
    """The families, by folder name, sorted (found on disk; nothing imported)."""
    return tuple(sorted(info.name for info in pkgutil.iter_modules(__path__) if info.ispkg))


def load_families() -> tuple[ModuleType, ...]:
    """Import every family's ``__init__`` (light: registers the metric specs; imports no torch)."""
    return tuple(importlib.import_module(f"{__name__}.{name}") for name in family_names())


def exports() -> dict[str, ModuleType]:
    """Every family's public names: name -> the family package that resolves it."""
    table: dict[str, ModuleType] = {}
    for family in load_families():
        for name in getattr(family, "EXPORTS", ()):
            if name in table and table[name] is not family:
                raise RuntimeError(f"{name!r} is exported by both {table[name].__name__} and {family.__name__}")
            table.setdefault(name, family)
    return table

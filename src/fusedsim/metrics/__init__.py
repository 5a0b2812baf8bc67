"""Full-reference image metrics, and the metric registry (:mod:`fusedsim.metrics.registry`).

Attributes load on first use, so ``import fusedsim.metrics`` (and the registry) does not import torch. Metric
implementations live in private modules (``_psnr``) so that a submodule never shadows the function of the same
name: ``fusedsim.metrics.psnr`` is always the function.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fusedsim.metrics._psnr import psnr
    from fusedsim.metrics.cached import Metric
    from fusedsim.metrics.registry import MetricSpec, get_metric, list_metrics, register_metric

# public name -> module that defines it
_LAZY = {
    "psnr": "fusedsim.metrics._psnr",
    "Metric": "fusedsim.metrics.cached",
    "MetricSpec": "fusedsim.metrics.registry",
    "get_metric": "fusedsim.metrics.registry",
    "list_metrics": "fusedsim.metrics.registry",
    "register_metric": "fusedsim.metrics.registry",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

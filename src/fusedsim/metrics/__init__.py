"""The metric registry (:mod:`.registry`: :class:`MetricSpec`, which every family fills), the cached-reference
:class:`Metric` (:mod:`.cached`) and sRGB input checks (:mod:`.srgb_input`).

Attributes load on first use, so ``import fusedsim.metrics`` (and the registry) does not import torch. Every public
name of every family is also an attribute here (``fusedsim.metrics.psnr``, ``fusedsim.metrics.dssim``...), found
through the families' ``EXPORTS``.
"""

from __future__ import annotations

from typing import Any

from fusedsim.core.lazy import lazy_attributes

_OWN = {
    "Metric": "fusedsim.metrics.cached",
    "MetricSpec": "fusedsim.metrics.registry",
    "MetricFunctions": "fusedsim.metrics.registry",
    "get_metric": "fusedsim.metrics.registry",
    "list_metrics": "fusedsim.metrics.registry",
    "register_metric": "fusedsim.metrics.registry",
}
_own_getattr, _own_dir = lazy_attributes(__name__, _OWN)


def __getattr__(name: str) -> Any:
    if name in _OWN:
        return _own_getattr(name)
    if name.startswith("__"):
        raise AttributeError(name)
    from fusedsim.families import exports

    family = exports().get(name)
    if family is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(family, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    from fusedsim.families import exports

    return sorted(set(_own_dir()) | set(exports()))

"""fusedsim: fused GPU kernels for comparing images and video, with exact PyTorch twins.

Everything here loads on first use (PEP 562): ``import fusedsim`` imports neither torch nor Triton. The public
names come from the families (:mod:`fusedsim.families`, found on disk: each declares its ``EXPORTS``), and
``fusedsim.<family>`` (``fusedsim.vmaf``, ``fusedsim.registration``...) is another name of
``fusedsim.families.<family>``, for attributes and ``import`` statements alike; a family's function of the same
name (``fusedsim.ssim``, ``fusedsim.dssim``) wins as an attribute.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from fusedsim.core.backend import BackendUnavailableError, use_backend
    from fusedsim.engine.scorer import Scorer, ScoreResult
    from fusedsim.engine.video import score_video
    from fusedsim.metrics.cached import Metric
    from fusedsim.metrics.registry import get_metric, list_metrics

# names of the package itself (the families' names come from their EXPORTS)
_OWN = {
    "use_backend": "fusedsim.core.backend",
    "BackendUnavailableError": "fusedsim.core.backend",
    "get_metric": "fusedsim.metrics.registry",
    "list_metrics": "fusedsim.metrics.registry",
    "Metric": "fusedsim.metrics.cached",
    "Scorer": "fusedsim.engine.scorer",
    "ScoreResult": "fusedsim.engine.scorer",
    "score_video": "fusedsim.engine.video",
}
# sub-packages reachable as attributes
_MODULES = ("cli", "core", "engine", "families", "io", "metrics")


def __getattr__(name: str) -> Any:
    if name in _OWN:
        value = getattr(importlib.import_module(_OWN[name]), name)
    elif name in _MODULES or name == "backend":
        value = importlib.import_module(f"{__name__}.core.backend" if name == "backend" else f"{__name__}.{name}")
    elif name.startswith("__"):
        raise AttributeError(name)
    else:
        from fusedsim.families import exports, family_names

        family = exports().get(name)
        if family is not None:
            value = getattr(family, name)
        elif name in family_names():
            value = importlib.import_module(f"{__name__}.families.{name}")
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    from fusedsim.families import exports, family_names

    return sorted(set(globals()) | set(_OWN) | set(_MODULES) | set(exports()) | set(family_names()))


class _FamilyAliases(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import fusedsim.<family>[.<module>]`` gives the module ``fusedsim.families.<family>[.<module>]`` itself
    (one module object under two names, so nothing is registered twice)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        parts = fullname.split(".")
        if len(parts) < 2 or parts[0] != __name__ or parts[1] in ("families", *_MODULES):
            return None
        from fusedsim.families import family_names

        if parts[1] not in family_names():
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return importlib.import_module(f"{__name__}.families.{spec.name.split('.', 1)[1]}")

    def exec_module(self, module: types.ModuleType) -> None:
        pass  # already executed under its own name


sys.meta_path.insert(0, _FamilyAliases())  # before the path finder, which would load a second copy


class _Package(types.ModuleType):
    """Keeps ``fusedsim.ssim`` the function: importing the family ``fusedsim.ssim`` (``from fusedsim.ssim import
    ...``) makes the import system bind the package to that attribute, which would shadow the function."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name not in _MODULES and name != "families":
            from fusedsim.families import exports

            if name in exports():
                return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

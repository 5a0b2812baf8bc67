"""fusedsim: fused GPU kernels for comparing images and video, with exact PyTorch twins.

Everything here loads on first use (PEP 562): ``import fusedsim`` imports neither torch's compiler stack nor
Triton, and ``fusedsim.metrics``, ``fusedsim.vmaf``, ``fusedsim.io`` ... work as attributes after a plain
``import fusedsim``.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from fusedsim.backend import BackendUnavailableError, use_backend
    from fusedsim.engine.scorer import Scorer, ScoreResult
    from fusedsim.metrics._cvvdp import CVVDPLoss, cvvdp
    from fusedsim.metrics._dssim import DSSIMLoss, dssim
    from fusedsim.metrics._iwssim import IWSSIMLoss, iw_ssim
    from fusedsim.metrics._ssimulacra2 import SSIMULACRA2Loss, ssimulacra2
    from fusedsim.metrics._zensim import ZensimLoss, zensim, zensim_features
    from fusedsim.metrics.cached import Metric
    from fusedsim.metrics.registry import get_metric, list_metrics
    from fusedsim.ssim import (
        MS_SSIM,
        SSIM,
        FusedSSIM,
        L1SSIMLoss,
        fused_ssim,
        l1_ssim_loss,
        ms_ssim,
        ssim,
    )

# public name -> module that defines it
_LAZY_ATTRIBUTES = {
    "fused_ssim": "fusedsim.ssim",
    "ssim": "fusedsim.ssim",
    "ms_ssim": "fusedsim.ssim",
    "l1_ssim_loss": "fusedsim.ssim",
    "SSIM": "fusedsim.ssim",
    "MS_SSIM": "fusedsim.ssim",
    "FusedSSIM": "fusedsim.ssim",
    "L1SSIMLoss": "fusedsim.ssim",
    "use_backend": "fusedsim.backend",
    "BackendUnavailableError": "fusedsim.backend",
    "get_metric": "fusedsim.metrics.registry",
    "list_metrics": "fusedsim.metrics.registry",
    "Metric": "fusedsim.metrics.cached",
    "dssim": "fusedsim.metrics._dssim",
    "DSSIMLoss": "fusedsim.metrics._dssim",
    "cvvdp": "fusedsim.metrics._cvvdp",
    "CVVDPLoss": "fusedsim.metrics._cvvdp",
    "iw_ssim": "fusedsim.metrics._iwssim",
    "IWSSIMLoss": "fusedsim.metrics._iwssim",
    "ssimulacra2": "fusedsim.metrics._ssimulacra2",
    "SSIMULACRA2Loss": "fusedsim.metrics._ssimulacra2",
    "zensim": "fusedsim.metrics._zensim",
    "zensim_features": "fusedsim.metrics._zensim",
    "ZensimLoss": "fusedsim.metrics._zensim",
    "butteraugli": "fusedsim.metrics._butteraugli",
    "ButteraugliLoss": "fusedsim.metrics._butteraugli",
    "Scorer": "fusedsim.engine.scorer",
    "ScoreResult": "fusedsim.engine.scorer",
}
# sub-packages and modules reachable as attributes (``fusedsim.ssim`` is both: the attribute is the sub-package)
_LAZY_MODULES = ("backend", "cli", "engine", "io", "metrics", "ops", "reference", "registration", "vmaf")

__all__ = sorted([*_LAZY_ATTRIBUTES, "__version__"])


def __getattr__(name: str) -> Any:
    if name in _LAZY_ATTRIBUTES:
        value = getattr(importlib.import_module(_LAZY_ATTRIBUTES[name]), name)
    elif name in _LAZY_MODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_ATTRIBUTES) | set(_LAZY_MODULES))


class _Package(types.ModuleType):
    """Keeps ``fusedsim.ssim`` the function: importing the sub-package ``fusedsim.ssim`` (``from fusedsim.ssim
    import ...``) makes the import system bind the sub-package to that attribute, which would shadow it."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY_ATTRIBUTES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

"""Full-reference image metrics, and the metric registry (:mod:`fusedsim.metrics.registry`).

Attributes load on first use, so ``import fusedsim.metrics`` (and the registry) does not import torch. Metric
implementations live in private modules (``_psnr``) so that a submodule never shadows the function of the same
name: ``fusedsim.metrics.psnr`` is always the function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fusedsim._lazy import lazy_attributes

if TYPE_CHECKING:
    from fusedsim.metrics._cvvdp import (
        CVVDPLoss,
        cvvdp,
        prepare_cvvdp,
        score_prepared_cvvdp,
    )
    from fusedsim.metrics._dssim import (
        DSSIMLoss,
        dssim,
        prepare_dssim,
        score_prepared_dssim,
    )
    from fusedsim.metrics._iwssim import (
        IWSSIMLoss,
        iw_ssim,
        prepare_iw_ssim,
        score_prepared_iw_ssim,
    )
    from fusedsim.metrics._psnr import psnr
    from fusedsim.metrics._ssimulacra2 import (
        SSIMULACRA2Loss,
        prepare_ssimulacra2,
        score_prepared_ssimulacra2,
        ssimulacra2,
    )
    from fusedsim.metrics._zensim import (
        ZensimLoss,
        prepare_zensim,
        score_prepared_zensim,
        zensim,
        zensim_feature_names,
        zensim_features,
    )
    from fusedsim.metrics.cached import Metric
    from fusedsim.metrics.registry import (
        MetricSpec,
        get_metric,
        list_metrics,
        register_metric,
    )

# public name -> module that defines it
_LAZY = {
    "ssimulacra2": "fusedsim.metrics._ssimulacra2",
    "SSIMULACRA2Loss": "fusedsim.metrics._ssimulacra2",
    "prepare_ssimulacra2": "fusedsim.metrics._ssimulacra2",
    "score_prepared_ssimulacra2": "fusedsim.metrics._ssimulacra2",
    "zensim": "fusedsim.metrics._zensim",
    "zensim_features": "fusedsim.metrics._zensim",
    "zensim_feature_names": "fusedsim.metrics._zensim",
    "ZensimLoss": "fusedsim.metrics._zensim",
    "prepare_zensim": "fusedsim.metrics._zensim",
    "score_prepared_zensim": "fusedsim.metrics._zensim",
    "psnr": "fusedsim.metrics._psnr",
    "butteraugli": "fusedsim.metrics._butteraugli",
    "ButteraugliLoss": "fusedsim.metrics._butteraugli",
    "prepare_butteraugli": "fusedsim.metrics._butteraugli",
    "score_prepared_butteraugli": "fusedsim.metrics._butteraugli",
    "dssim": "fusedsim.metrics._dssim",
    "DSSIMLoss": "fusedsim.metrics._dssim",
    "prepare_dssim": "fusedsim.metrics._dssim",
    "score_prepared_dssim": "fusedsim.metrics._dssim",
    "cvvdp": "fusedsim.metrics._cvvdp",
    "CVVDPLoss": "fusedsim.metrics._cvvdp",
    "prepare_cvvdp": "fusedsim.metrics._cvvdp",
    "score_prepared_cvvdp": "fusedsim.metrics._cvvdp",
    "iw_ssim": "fusedsim.metrics._iwssim",
    "IWSSIMLoss": "fusedsim.metrics._iwssim",
    "prepare_iw_ssim": "fusedsim.metrics._iwssim",
    "score_prepared_iw_ssim": "fusedsim.metrics._iwssim",
    "Metric": "fusedsim.metrics.cached",
    "MetricSpec": "fusedsim.metrics.registry",
    "get_metric": "fusedsim.metrics.registry",
    "list_metrics": "fusedsim.metrics.registry",
    "register_metric": "fusedsim.metrics.registry",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

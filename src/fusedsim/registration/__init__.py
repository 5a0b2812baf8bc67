"""Image-registration ops: fused warping (affine + displacement, 2-D/3-D), warp composition, scaling and squaring,
and the LNCC and mutual-information losses.

Attributes load on first use, so ``import fusedsim.registration`` imports neither torch's compiler stack nor
Triton. Implementations live in private modules so that a submodule never shadows a function of the same name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fusedsim._lazy import lazy_attributes

if TYPE_CHECKING:
    from fusedsim.registration._lncc import LNCCLoss, lncc_loss
    from fusedsim.registration._mutual_information import (
        MutualInformationLoss,
        mutual_information_loss,
    )
    from fusedsim.registration._warp import compose, scaling_and_squaring, warp

# public name -> module that defines it
_LAZY = {
    "warp": "fusedsim.registration._warp",
    "compose": "fusedsim.registration._warp",
    "scaling_and_squaring": "fusedsim.registration._warp",
    "lncc_loss": "fusedsim.registration._lncc",
    "LNCCLoss": "fusedsim.registration._lncc",
    "mutual_information_loss": "fusedsim.registration._mutual_information",
    "MutualInformationLoss": "fusedsim.registration._mutual_information",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

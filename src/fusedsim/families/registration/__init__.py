"""Image-registration ops: fused warping (affine + displacement, 2-D/3-D), warp composition, scaling and squaring,
and the LNCC and mutual-information losses.

``*_twin.py`` (the PyTorch specifications), ``*_kernel.py`` / ``lncc_*`` (Triton), ``ops.py`` (op declarations),
``warping.py``, ``lncc.py``, ``mutual_information.py`` (public API). Importing this package imports no torch.
"""

from __future__ import annotations

from fusedsim.core.lazy import lazy_attributes

#: Public names of this package (``fusedsim.<family>.<name>``, not top-level) and the module defining each,
#: imported on first use.
PUBLIC = {
    "warp": "warping", "compose": "warping", "scaling_and_squaring": "warping",
    "max_squaring_steps": "warping",
    "lncc_loss": "lncc", "LNCCLoss": "lncc",
    "mutual_information_loss": "mutual_information", "MutualInformationLoss": "mutual_information",
}

__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{module}" for name, module in PUBLIC.items()})

#: No top-level names: these functions are reached through the package.
EXPORTS: tuple[str, ...] = ()

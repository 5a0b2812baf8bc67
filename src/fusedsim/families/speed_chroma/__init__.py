"""libvmaf's SpEED chroma (feature ``speed_chroma``: ``speed_chroma_u``, ``_v``, ``_uv``), bit-exact: an input of the
VMAF v1 models.

``twin.py`` (the PyTorch specification, the options, sizes and libvmaf's output rules), ``gsm.py`` (the GSM
parameter estimation and score in libvmaf's float32 order: covariance, eigenvalues, QR solve, entropies), ``ops.py``
(the ops ``speed_residual``, the per-plane residual of a batch, and ``speed_covariance``, each residual's 25x25
covariance), ``kernel.py`` and ``covariance_kernel.py`` (Triton), ``cpu.py`` (numba), ``gsm_cpu.py`` (the
estimation compiled with numba) and ``api.py`` (:func:`speed_chroma`). Importing this package imports no torch.
"""

from __future__ import annotations

from fusedsim.core.lazy import lazy_attributes

#: Public names of this package (``fusedsim.speed_chroma.<name>``, not top-level) and the module defining each,
#: imported on first use.
PUBLIC = {"speed_chroma": "api", "SpeedOptions": "twin"}

__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{module}" for name, module in PUBLIC.items()})

#: No top-level names: these are reached through the package.
EXPORTS: tuple[str, ...] = ()

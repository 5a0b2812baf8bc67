"""libvmaf's integer VIF (feature ``vif``: ``integer_vif_scale0..3`` and the debug columns), bit-exact.

``twin.py`` (the PyTorch specification), ``ops.py`` (the op ``integer_vif``: per-scale num and den of a batch of
frame pairs), ``kernel.py`` (Triton), ``cpu.py`` (numba) and ``api.py`` (:func:`integer_vif`, libvmaf's named
columns). Importing this package imports no torch.
"""

from __future__ import annotations

from fusedsim.core.lazy import lazy_attributes

#: Public names of this package (``fusedsim.vif.<name>``, not top-level) and the module defining each, imported
#: on first use.
PUBLIC = {"integer_vif": "api"}

__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{module}" for name, module in PUBLIC.items()})

#: No top-level names: these are reached through the package.
EXPORTS: tuple[str, ...] = ()

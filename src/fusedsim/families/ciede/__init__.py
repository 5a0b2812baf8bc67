"""libvmaf's ``ciede`` feature: ``twin.py`` (the PyTorch specification), ``ops.py``, ``kernel.py`` (Triton),
``cpu.py`` (numba) and ``api.py`` (:func:`ciede`, libvmaf's named columns). Registered as ``vmaf:ciede`` by
:mod:`fusedsim.families.vmaf`. Importing this package imports no torch.
"""

from __future__ import annotations

from fusedsim.core.lazy import lazy_attributes

#: Public names of this package (``fusedsim.ciede.<name>``, not top-level) and the module defining each, imported
#: on first use.
PUBLIC = {"ciede": "api"}

__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{module}" for name, module in PUBLIC.items()})

#: No top-level names: these are reached through the package.
EXPORTS: tuple[str, ...] = ()

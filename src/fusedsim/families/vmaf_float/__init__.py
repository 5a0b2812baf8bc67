"""libvmaf's float features ``float_vif``, ``float_adm`` and ``float_motion``, bit-exact with libvmaf 3.2.0.

``common_twin.py`` (float32 filters and sums in libvmaf's order), ``vif_twin.py``, ``adm_twin.py``,
``motion_twin.py`` (the PyTorch specifications), ``ops.py`` (the ops ``float_vif``, ``float_adm``,
``float_motion_sad``), ``*_kernel.py`` (Triton), ``cpu.py`` (numba), ``api.py`` (libvmaf's named columns) and
``stream.py`` (float motion over a clip fed in batches). The ``vmaf:float_*`` features are declared in
:mod:`fusedsim.families.vmaf`. Importing this package imports no torch.
"""

from __future__ import annotations

from fusedsim.core.lazy import lazy_attributes

#: Public names of this package (``fusedsim.vmaf_float.<name>``, not top-level) and the module defining each.
PUBLIC = {"float_vif": "api", "float_adm": "api", "float_motion": "api", "FloatMotionStream": "stream"}

__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{module}" for name, module in PUBLIC.items()})

#: No top-level names: these are reached through the package.
EXPORTS: tuple[str, ...] = ()

"""libvmaf's CAMBI banding score (feature ``cambi``: ``Cambi_feature_cambi_score``, printed ``cambi``), bit-exact.

``settings.py`` (libvmaf's set-up from the options, torch-free), ``reciprocal_table.py`` (libvmaf's table, data),
``twin.py`` (the PyTorch specification), ``ops.py`` (the op ``cambi_scales``: five per-scale pooled scores of a batch
of frames), ``kernel.py`` (Triton), ``cpu.py`` (numba) and ``api.py`` (:func:`cambi`, libvmaf's named columns). The
``vmaf:cambi`` feature is declared with the other libvmaf features in :mod:`fusedsim.families.vmaf`. Importing this
package imports no torch.
"""

from __future__ import annotations

from fusedsim.core.lazy import lazy_attributes

#: Public names of this package (``fusedsim.cambi.<name>``, not top-level) and the module defining each, imported
#: on first use.
PUBLIC = {"cambi": "api"}

__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{module}" for name, module in PUBLIC.items()})

#: No top-level names: these are reached through the package.
EXPORTS: tuple[str, ...] = ()

"""libvmaf's integer ADM (feature ``adm``: ``integer_adm2``, ``integer_aim``, ``integer_adm3``,
``integer_adm_scale0..3`` and the debug num/den columns), bit-exact.

``twin.py`` (the PyTorch specification: wavelet, decoupling, contrast masking, the options and libvmaf's per-frame
columns), ``ops.py`` (the op ``integer_adm``: per-frame, per-scale num/den/aim of a batch of frame pairs),
``kernel.py`` (Triton), ``cpu.py`` (numba) and ``api.py`` (:func:`integer_adm`). Importing this package imports no
torch.
"""

from __future__ import annotations

from fusedsim.core.lazy import lazy_attributes

#: Smallest height and width libvmaf's 4-level wavelet reads inside the picture (also ``twin.MIN_SIZE``).
MIN_SIZE = 33

#: Public names of this package (``fusedsim.adm.<name>``, not top-level) and the module defining each, imported on
#: first use.
PUBLIC = {"integer_adm": "api", "AdmOptions": "twin"}

__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{module}" for name, module in PUBLIC.items()})

#: No top-level names: these are reached through the package.
EXPORTS: tuple[str, ...] = ()

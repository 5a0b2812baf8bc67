"""libvmaf's integer motion (feature ``motion``: ``integer_motion2``, ``integer_motion3``, the per-frame SAD score),
bit-exact, as a stream over the reference clip.

``twin.py`` (the PyTorch specification, the options and libvmaf's per-clip rules), ``ops.py`` (the per-frame-pair op
``integer_motion_sad``), ``kernel.py`` (Triton), ``cpu.py`` (numba), ``stream.py`` (:class:`MotionStream`: frame
batches in, finished per-frame columns out, one frame of delay) and ``api.py`` (whole clips). Importing this package
imports no torch.
"""

from __future__ import annotations

from fusedsim.core.lazy import lazy_attributes

#: Public names of this package (``fusedsim.motion.<name>``, not top-level) and the module defining each, imported
#: on first use.
PUBLIC = {
    "integer_motion": "api", "MotionStream": "stream", "MotionOptions": "twin",
}

__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{module}" for name, module in PUBLIC.items()})

#: No top-level names: these are reached through the package.
EXPORTS: tuple[str, ...] = ()

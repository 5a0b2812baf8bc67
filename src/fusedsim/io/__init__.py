"""Input/output: image files (:mod:`~fusedsim.io.images`, Pillow) and video (:mod:`~fusedsim.io.video`: Y4M and
raw YUV, and :func:`~fusedsim.io.video.open_pair` for clip pairs, compressed ones included through
:mod:`~fusedsim.io.compressed`). The submodules load on first attribute access (``fusedsim.io.images``)."""

from __future__ import annotations

import importlib
from types import ModuleType

_SUBMODULES = ("images", "video", "compressed", "clip_pair", "frame_selection", "yuv_rgb", "nvdec", "nvcodec")


def __getattr__(name: str) -> ModuleType:
    if name not in _SUBMODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f"{__name__}.{name}")  # the import binds it as an attribute


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBMODULES))

"""Full-width vectors for the numba kernels on AVX-512 processors.

LLVM tunes Intel's AVX-512 cores to prefer 256-bit vectors (``prefer-256-bit``), so loops that vectorise use
half the registers' width there; AMD's Zen 4 and 5 get 512-bit vectors. The integer kernels (VMAF's ADM,
motion, VIF) are throughput-bound: forcing 256-bit vectors on a Zen 5 slowed ADM's wavelet rows 1.9x, and
libvmaf's hand-written AVX-512 paths keep the full width on every processor. Vector width changes no result
(numba neither reassociates nor contracts floating-point operations without fastmath).

Before numba compiles its first function in the process, the host's features get ``-prefer-256-bit``. A
``NUMBA_CPU_FEATURES`` set by the user (or a codegen numba already created) is left as it is.
"""

from __future__ import annotations

import os

__all__ = ["prefer_full_vector_width"]


def prefer_full_vector_width() -> bool:
    """Drop LLVM's 256-bit preference from numba's target features on an AVX-512 host; True when set here."""
    if os.environ.get("NUMBA_CPU_FEATURES") or os.environ.get("NUMBA_CPU_NAME"):
        return False
    try:
        from numba import config
        from numba.core.codegen import get_host_cpu_features
    except ImportError:  # numba missing: the twins run
        return False
    if config.CPU_FEATURES is not None:
        return "-prefer-256-bit" in config.CPU_FEATURES
    features = get_host_cpu_features()
    if "+avx512f" not in features.split(","):
        return False
    config.CPU_FEATURES = features + ",-prefer-256-bit"
    return True

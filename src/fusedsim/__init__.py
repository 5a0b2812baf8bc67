"""fusedsim: fused GPU kernels for comparing images and video, with exact PyTorch twins."""

from fusedsim.backend import BackendUnavailableError, use_backend

__version__ = "0.1.0"

__all__ = ["BackendUnavailableError", "use_backend", "__version__"]

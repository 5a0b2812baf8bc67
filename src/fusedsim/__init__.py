"""fusedsim: fused GPU kernels for comparing images and video, with exact PyTorch twins."""

from fusedsim.backend import BackendUnavailableError, use_backend
from fusedsim.ssim import MS_SSIM, SSIM, FusedSSIM, fused_ssim, ms_ssim, ssim

__version__ = "0.1.0"

__all__ = [
    "MS_SSIM",
    "SSIM",
    "BackendUnavailableError",
    "FusedSSIM",
    "fused_ssim",
    "ms_ssim",
    "ssim",
    "use_backend",
    "__version__",
]

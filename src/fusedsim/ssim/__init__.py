"""SSIM family: fused SSIM, pytorch-msssim-compatible SSIM / MS-SSIM, 2-D and 3-D."""

from fusedsim.ssim.functional import fused_ssim, ms_ssim, ssim
from fusedsim.ssim.modules import MS_SSIM, SSIM, FusedSSIM

__all__ = ["MS_SSIM", "SSIM", "FusedSSIM", "fused_ssim", "ms_ssim", "ssim"]

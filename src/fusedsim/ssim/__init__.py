"""SSIM family: fused SSIM, pytorch-msssim-compatible SSIM / MS-SSIM, the fused L1+SSIM loss, 2-D and 3-D."""

from fusedsim.ssim.functional import fused_ssim, ms_ssim, ssim
from fusedsim.ssim.loss import L1SSIMLoss, l1_ssim_loss
from fusedsim.ssim.modules import MS_SSIM, SSIM, FusedSSIM

__all__ = ["MS_SSIM", "SSIM", "FusedSSIM", "L1SSIMLoss", "fused_ssim", "l1_ssim_loss", "ms_ssim", "ssim"]

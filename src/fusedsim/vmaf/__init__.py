"""libvmaf's SSIM-family features, bit-exact: integer ``ssim``, ``float_ssim``, ``float_ms_ssim`` and ``psnr``.

Functions take integer luma (or planes) as torch tensors or numpy arrays, ``(H, W)`` or ``(N, H, W)``, and
return per-frame float64 values. :mod:`fusedsim.vmaf.features` is the registry the ``fusedsim vmaf`` command uses.
"""

from fusedsim.vmaf.float_ssim import float_ms_ssim, float_ssim
from fusedsim.vmaf.integer_ssim import integer_ssim
from fusedsim.vmaf.psnr import psnr

__all__ = ["float_ms_ssim", "float_ssim", "integer_ssim", "psnr"]

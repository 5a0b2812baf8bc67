"""Simple full-reference metrics that need no dedicated kernel."""

from fusedsim.metrics.psnr import psnr

__all__ = ["psnr"]

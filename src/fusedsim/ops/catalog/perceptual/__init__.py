"""Perceptual-metric ops (the ``perceptual`` family), one module per metric: DSSIM, IW-SSIM, Butteraugli,
SSIMULACRA2, ColorVideoVDP, zensim. Importing this package registers all of them; their names are re-exported
here so that ``fusedsim.ops.catalog.<op name>`` finds them."""

from __future__ import annotations

from fusedsim.ops.catalog.perceptual.butteraugli import *  # noqa: F403
from fusedsim.ops.catalog.perceptual.cvvdp import *  # noqa: F403
from fusedsim.ops.catalog.perceptual.dssim import *  # noqa: F403
from fusedsim.ops.catalog.perceptual.iwssim import *  # noqa: F403
from fusedsim.ops.catalog.perceptual.ssimulacra2 import *  # noqa: F403
from fusedsim.ops.catalog.perceptual.zensim import *  # noqa: F403

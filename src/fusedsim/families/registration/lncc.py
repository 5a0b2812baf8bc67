"""Public LNCC loss: ``lncc_loss`` and ``LNCCLoss``.

Local squared normalised cross-correlation of (N, C, H, W) or (N, C, D, H, W) pairs in the exact formula of
MONAI 1.6.1 or FireANTs 1.5 (see :mod:`fusedsim.families.registration.lncc_twin`), fused on the GPU (``fusedsim.families.registration.lncc_kernel``)
with the exact gradient for both inputs; the PyTorch twin elsewhere. Statistics accumulate in float32 (float64
for float64 inputs) and the loss is returned in that dtype; gradients come back in the inputs' dtype.
"""

from __future__ import annotations

import math

import torch

from fusedsim.core.calls import CallTable
from fusedsim.core.state import cached
from fusedsim.core.validation import check_choice, check_image_pair
from fusedsim.families.registration.lncc_twin import (
    CONVENTIONS,
    DEFAULT_SMOOTH,
    REDUCE_CODES,
    default_sigma,
    lncc_constants,
    lncc_taps,
    lncc_window_table,
)
from fusedsim.core.moments.twin import compute_dtype

KERNEL_ALIASES = {"box": "box", "rectangular": "box", "gaussian": "gaussian"}
_CALLS = CallTable()


def _check_options(kernel_size, kernel_type, sigma, smooth_nr, smooth_dr, reduction, convention):
    """The options with defaults filled in: (kernel_size, kernel type, sigma, smooth_nr, smooth_dr)."""
    if isinstance(kernel_size, bool) or not isinstance(kernel_size, int):
        raise TypeError(f"kernel_size must be an int; got {type(kernel_size).__name__}")
    if kernel_size < 1 or kernel_size % 2 == 0:
        raise ValueError(f"kernel_size must be a positive odd integer; got {kernel_size}")
    check_choice(kernel_type, "kernel_type", tuple(KERNEL_ALIASES))
    check_choice(reduction, "reduction", tuple(REDUCE_CODES))
    check_choice(convention, "convention", CONVENTIONS)
    kind = KERNEL_ALIASES[kernel_type]
    if sigma is None:
        sigma = default_sigma(kernel_size, convention)
    elif kind != "gaussian":
        raise ValueError("sigma applies to kernel_type='gaussian' only")
    values = {"sigma": sigma, "smooth_nr": smooth_nr, "smooth_dr": smooth_dr}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number; got {type(value).__name__}")
        if not math.isfinite(value) or value < 0 or (name == "sigma" and value == 0):
            raise ValueError(f"{name} must be a finite number {'> 0' if name == 'sigma' else '>= 0'}; got {value}")
    nr0, dr0 = DEFAULT_SMOOTH[convention]
    return (kernel_size, kind, float(sigma), float(nr0 if smooth_nr is None else smooth_nr),
            float(dr0 if smooth_dr is None else smooth_dr))


@cached(maxsize=128)
def _setup(kernel_size: int, kind: str, sigma: float, smooth_nr: float, smooth_dr: float, convention: str,
           ndim: int, channels: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, tuple]:
    """The (C, K) window on the device (built once per configuration: a per-call copy would stall the stream)
    and the constants (s, q, nr, floor, dr_add, clamp)."""
    taps = lncc_taps(kernel_size, kind, sigma, convention)
    consts = lncc_constants(convention, taps, ndim, smooth_nr, smooth_dr)
    return lncc_window_table(taps, channels, dtype, device), consts


def lncc_loss(pred: torch.Tensor, target: torch.Tensor, kernel_size: int = 9, kernel_type: str = "box",
              sigma: float | None = None, smooth_nr: float | None = None, smooth_dr: float | None = None,
              reduction: str = "mean", convention: str = "monai") -> torch.Tensor:
    """Local normalised cross-correlation loss, -ncc reduced.

    pred, target: (N, C, H, W) or (N, C, D, H, W) floating tensors of one shape, dtype and device (any channel
    count; each channel is its own image). ``kernel_size``: any odd window size whose d-dim window has no more taps
    than the input has voxels per channel, or than 2**20 (kernel_size^d <= max(H·W[·D], 2**20));
    ``kernel_type``: ``"box"`` (alias ``"rectangular"``) or ``"gaussian"`` (σ = ``sigma``, by default k/3 for
    ``monai`` / ``fireants_torch`` and 1.5 for ``fireants``). ``convention``:

    - ``"monai"``: MONAI's ``LocalNormalizedCrossCorrelationLoss`` (unnormalised windows, variances floored at
      smooth_dr, no clamp; defaults smooth_nr=0, smooth_dr=1e-5);
    - ``"fireants"``: FireANTs' fused ``FusedLocalNormalizedCrossCorrelationLoss`` forward (smoothing scaled by
      k^d, clamped to [-1, 1]; defaults 1e-5 / 1e-5), with the exact gradient (FireANTs' own is approximate);
    - ``"fireants_torch"``: FireANTs' ``LocalNormalizedCrossCorrelationLoss`` (normalised windows, its off-centre
      Gaussian for k >= 5, clamped; defaults 1e-5 / 1e-5).

    ``reduction``: ``"mean"`` (0-d), ``"sum"`` (0-d) or ``"none"`` (the -ncc map, shape of pred). Returns float32
    (float64 for float64 inputs). Differentiable in both inputs.
    """
    options = (kernel_size, kernel_type, sigma, smooth_nr, smooth_dr, reduction, convention)
    if torch.compiler.is_compiling():
        return _build(pred, target, options, traced=True)(pred, target)
    # types too: True == 1 must not reuse a call validated for kernel_size=1
    typed = ("lncc", *((type(v), v) for v in options))
    return _CALLS.for_pair(typed, pred, target, lambda: _build(pred, target, options))(pred, target)


#: Windows of up to this many taps are always allowed (4 MiB of float32), whatever the input's size: a small
#: volume may take a window wider than itself (zero padding), as the references allow.
_FREE_TAPS = 1 << 20


def _check_window_fits(kernel_size: int, pred: torch.Tensor) -> None:
    """Refuse a window with more taps (kernel_size^d) than both the input's voxels per channel and
    :data:`_FREE_TAPS`. The conventions divide by the reference's window volume, the float32 sum of the whole d-dim
    window, so that window is built: k=100001 in 2-D would take 40 GB for a window far wider than the data."""
    spatial = tuple(pred.shape[2:])
    nd, voxels = len(spatial), math.prod(spatial)
    limit = max(voxels, _FREE_TAPS)
    if kernel_size**nd > limit:
        top = round(limit ** (1 / nd)) + 2  # then down to the largest odd k with k^d <= limit
        while top**nd > limit or top % 2 == 0:
            top -= 1
        raise ValueError(f"kernel_size={kernel_size} makes a {nd}-D window of {kernel_size**nd:.3g} taps, more than "
                         f"the {'x'.join(map(str, spatial))} input has voxels per channel ({voxels}) and more than "
                         f"{_FREE_TAPS} taps; use kernel_size <= {top}")


def _build(pred: torch.Tensor, target: torch.Tensor, options: tuple, traced: bool = False):
    """The validated call ``(pred, target) -> loss`` for these inputs' metadata and options."""
    check_image_pair(pred, target, ("pred", "target"))
    kernel_size, kind, sigma, nr, dr = _check_options(*options)
    _check_window_fits(kernel_size, pred)
    win, consts = _setup(kernel_size, kind, sigma, nr, dr, options[-1], pred.dim() - 2, pred.shape[1],
                         compute_dtype(pred.dtype), pred.device)
    scalars = (*consts, REDUCE_CODES[options[-2]])
    from fusedsim.families.registration.ops import lncc
    if traced:
        return lambda p, t: lncc(p, t, win, *scalars)
    return lncc.bind((pred, target), (win,), scalars)


class LNCCLoss(torch.nn.Module):
    """Module form of :func:`lncc_loss`; options are checked when the module is built."""

    def __init__(self, kernel_size: int = 9, kernel_type: str = "box", sigma: float | None = None,
                 smooth_nr: float | None = None, smooth_dr: float | None = None, reduction: str = "mean",
                 convention: str = "monai") -> None:
        super().__init__()
        _check_options(kernel_size, kernel_type, sigma, smooth_nr, smooth_dr, reduction, convention)
        self.kernel_size, self.kernel_type, self.sigma = kernel_size, kernel_type, sigma
        self.smooth_nr, self.smooth_dr = smooth_nr, smooth_dr
        self.reduction, self.convention = reduction, convention

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return lncc_loss(pred, target, self.kernel_size, self.kernel_type, self.sigma, self.smooth_nr,
                         self.smooth_dr, self.reduction, self.convention)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, kernel_type={self.kernel_type!r}, convention={self.convention!r}, "
                f"reduction={self.reduction!r}")


__all__ = ["LNCCLoss", "lncc_loss"]

"""What input a ColorVideoVDP display model takes, and the checks that refuse input of the wrong kind.

The encoding follows the display's EOTF (pycvvdp 0.5.7's ``vvdp_display_photo_eotf``):

* ``sRGB``: sRGB values, uint8 codes 0..255 or floating in [0, 1] (:mod:`fusedsim.metrics.srgb_input`);
* ``PQ``: SMPTE ST 2084 code values, floating in [0, 1] (V = 1 is 10000 cd/m²; full-range normalised, i.e. a
  10-bit code c is c / 1023);
* ``HLG``: BT.2100 HLG code values, floating in [0, 1] (relative to the display's peak);
* ``linear``: absolute linear RGB of the colour space's primaries in cd/m², floating, any finite value (the display
  clips it to [max(0.005, black level), peak]).

Integer codes are accepted for sRGB only: 8 bits cannot carry an HDR signal, and pycvvdp's ``code / 255`` on them
would silently score a different picture. On CPU tensors the values are checked (PQ and HLG in [0, 1], linear
finite); GPU tensors are not read (that would synchronise), and there out-of-range PQ/HLG values are clamped to
[0, 1] as pycvvdp clamps them.
"""

from __future__ import annotations

import torch

from fusedsim.families.cvvdp.data import CVVDPDisplay

__all__ = ["check_display_input", "input_description"]

_NAME = "cvvdp"
_DESCRIPTION = {
    "sRGB": "sRGB values (uint8 0..255 or floating in [0, 1])",
    "PQ": "floating PQ (SMPTE ST 2084) code values in [0, 1]",
    "HLG": "floating HLG (BT.2100) code values in [0, 1]",
    "linear": "floating absolute linear RGB in cd/m²",
}


def input_description(eotf: str) -> str:
    """The input a display with EOTF ``eotf`` takes, in words (for messages and docs)."""
    return _DESCRIPTION[eotf]


def check_display_input(x: object, name: str, display: CVVDPDisplay, check_range: bool | None = None) -> None:
    """Refuse ``x`` (argument ``name``) if it is not the kind of tensor ``display``'s EOTF takes. sRGB displays are
    not checked here (:func:`fusedsim.metrics.srgb_input.srgb_image` does it); non-tensors and shapes are left to
    the caller's checks. ``check_range`` as in :mod:`fusedsim.metrics.srgb_input` (default: CPU tensors only)."""
    if display.eotf == "sRGB" or not isinstance(x, torch.Tensor):
        return
    want = input_description(display.eotf)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{_NAME}: display {display.name!r} has a {display.eotf} EOTF, so {name} must hold {want}; "
                        f"got {x.dtype} (integer codes are taken for sRGB displays only: convert HDR codes to floats, "
                        f"e.g. 10-bit full-range PQ as code / 1023)")
    if not (check_range or (check_range is None and x.device.type == "cpu")) or x.numel() == 0:
        return
    v = x.detach()
    bad = ~torch.isfinite(v) if display.eotf == "linear" else ~((v >= 0) & (v <= 1))  # NaN counts as bad
    if bool(bad.any()):
        raise ValueError(f"{_NAME}: display {display.name!r} takes {want} as {name}; found {v[bad][0].item()!r}")

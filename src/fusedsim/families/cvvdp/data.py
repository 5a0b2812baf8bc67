"""ColorVideoVDP's data (pycvvdp 0.5.7): display models, calibrated parameters and the castleCSF table.

The JSON files are copies of those in the ``cvvdp`` 0.5.7 wheel (MIT licence; see ``data/cvvdp/LICENSE.md``).
This module only reads them and resolves a display model into the numbers the metric uses; it imports no torch.

Display model (pycvvdp's ``vvdp_display_photo_eotf``): the colour space of the model (``color_spaces.json``) names
its EOTF and RGB -> XYZ rows; ``Y_black = Y_peak / contrast`` and the reflected ambient light
``Y_refl = E_ambient / pi * k_refl``. Four EOTFs are used by the shipped models (their formulas:
:mod:`fusedsim.families.cvvdp.eotf`): ``sRGB`` (display-encoded V in [0, 1]), ``PQ`` (SMPTE ST 2084 code values V
in [0, 1], absolute), ``HLG`` (BT.2100 HLG V in [0, 1], relative, with the system gamma of
:attr:`CVVDPDisplay.hlg_gamma`) and ``linear`` (absolute linear RGB in cd/m²). Geometry gives the pixels per degree
at the centre of the screen:
``1 / (2 atan(0.5 * width_m / width_px / distance_m))`` in degrees, with the screen size from its diagonal and
aspect ratio, or from a diagonal field of view (head-mounted displays), or a fixed ``pixels_per_degree``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusedsim.core.state import cached

__all__ = [
    "CVVDPDisplay",
    "CVVDPParams",
    "csf_lut",
    "cvvdp_display",
    "cvvdp_params",
    "EOTFS",
    "display_eotf",
    "known_displays",
    "supported_displays",
]

#: The EOTFs the display model implements (pycvvdp's ``vvdp_display_photo_eotf`` branches used by its models).
EOTFS = ("sRGB", "PQ", "HLG", "linear")

_DATA = Path(__file__).resolve().parents[2] / "data" / "cvvdp"
_INCH = 0.0254


@cached(maxsize=None)
def _json(name: str) -> Any:
    with open(_DATA / name, encoding="utf-8") as f:
        return json.load(f)


@dataclass(frozen=True)
class CVVDPDisplay:
    """A resolved display model: photometry, the source colour space's RGB -> XYZ rows and the pixels per degree."""

    name: str
    peak_luminance: float
    contrast: float
    e_ambient: float
    k_refl: float
    exposure: float
    ppd: float
    rgb2xyz: tuple[tuple[float, float, float], ...]
    eotf: str = "sRGB"

    @property
    def black_level(self) -> float:
        return self.peak_luminance / self.contrast

    @property
    def hlg_gamma(self) -> float:
        """HLG system gamma as pycvvdp 0.5.7 sets it: 1.2 up to 1000 cd/m², above that
        ``1.2 + 0.42 log10(Y_peak / 1000) - 0.07623 log10(E_ambient / 5)`` (BT.2100 and BBC WHP 369's ambient
        term). Only meaningful for ``eotf == "HLG"``."""
        if self.peak_luminance <= 1000:
            return 1.2
        return 1.2 + 0.42 * math.log10(self.peak_luminance / 1000) - 0.07623 * math.log10(self.e_ambient / 5)

    @property
    def reflected(self) -> float:
        return self.e_ambient / math.pi * self.k_refl


@dataclass(frozen=True)
class CVVDPParams:
    """The calibrated parameters the image and video paths read (``cvvdp_parameters.json``)."""

    version: str
    mask_p: float
    mask_c: float
    mask_q: tuple[float, ...]
    pu_dilate: float
    beta: float
    beta_sch: float
    beta_tch: float
    csf_sigma: float
    sensitivity_correction: float
    jod_a: float
    jod_exp: float
    ch_chrom_w: float
    xcm_weights: tuple[float, ...]
    baseband_weight: tuple[float, ...]
    d_max: float
    image_int: float
    beta_t: float
    ch_trans_w: float
    sigma_tf: tuple[float, ...]
    beta_tf: tuple[float, ...]


def known_displays() -> tuple[str, ...]:
    """Every display model name in ``display_models.json``."""
    return tuple(_json("display_models.json"))


def _colour_space(model: dict[str, Any]) -> dict[str, Any]:
    return _json("color_spaces.json")[model.get("colorspace", "sRGB")]


def supported_displays() -> tuple[str, ...]:
    """The display models whose EOTF is implemented (:data:`EOTFS`: every model pycvvdp 0.5.7 ships)."""
    models = _json("display_models.json")
    return tuple(name for name, m in models.items() if _colour_space(m)["EOTF"] in EOTFS)


def display_eotf(display: str) -> str:
    """The EOTF (``sRGB``, ``PQ``, ``HLG``, ``linear``) of a display model's colour space, i.e. the encoding of the
    input it takes."""
    models = _json("display_models.json")
    if display not in models:
        raise ValueError(f"cvvdp: unknown display {display!r}; known displays: {', '.join(supported_displays())}")
    return _colour_space(models[display])["EOTF"]


def _ppd(model: dict[str, Any]) -> float:
    width, height = model["resolution"]
    if "pixels_per_degree" in model:
        return float(model["pixels_per_degree"])
    aspect = width / height
    if "viewing_distance_meters" in model:
        distance = model["viewing_distance_meters"]
    elif "viewing_distance_inches" in model:
        distance = model["viewing_distance_inches"] * _INCH
    elif "fov_diagonal" in model:
        distance = 3.0  # pycvvdp's default for head-mounted displays (the ppd does not depend on it)
    else:
        raise ValueError("display model needs a viewing distance")
    if "fov_diagonal" in model:
        dist_px = math.sqrt(width ** 2 + height ** 2) / (2.0 * math.tan(math.radians(model["fov_diagonal"] * 0.5)))
        height_deg = math.degrees(math.atan(height / 2 / dist_px)) * 2
        height_m = 2 * math.tan(math.radians(height_deg / 2)) * distance
        width_m = height_m * aspect
    else:
        diagonal = (model["diagonal_size_meters"] / _INCH if "diagonal_size_meters" in model
                    else model["diagonal_size_inches"])
        height_mm = math.sqrt((diagonal * 25.4) ** 2 / (1 + aspect ** 2))
        width_m = aspect * height_mm / 1000
    pix_deg = 2 * math.degrees(math.atan(0.5 * width_m / width / distance))
    return 1 / pix_deg


_OVERRIDES = ("peak_luminance", "contrast", "e_ambient", "k_refl", "exposure", "ppd", "resolution",
              "viewing_distance_m", "diagonal_inches")


def cvvdp_display(display: str = "standard_4k", **overrides: Any) -> CVVDPDisplay:
    """Resolve a display model by name, with optional overrides of its fields.

    Args:
        display: a name from ``display_models.json`` (:func:`supported_displays`); its colour space's EOTF says
            which input it takes (:attr:`CVVDPDisplay.eotf`).
        overrides: any of ``peak_luminance`` (cd/m²), ``contrast`` (x:1), ``e_ambient`` (lux), ``k_refl``,
            ``exposure``, ``ppd`` (pixels per degree; wins over the geometry), ``resolution`` ((W, H) of the
            screen), ``viewing_distance_m``, ``diagonal_inches``. ``None`` keeps the model's value.
    """
    if not isinstance(display, str):
        raise TypeError(f"cvvdp: display must be a display-model name (str); got {type(display).__name__}")
    models = _json("display_models.json")
    if display not in models:
        raise ValueError(f"cvvdp: unknown display {display!r}; known displays: {', '.join(supported_displays())}")
    if display not in supported_displays():
        raise ValueError(f"cvvdp: display {display!r} has the EOTF {_colour_space(models[display])['EOTF']!r}, which "
                         f"is not implemented; supported displays: {', '.join(supported_displays())}")
    unknown = set(overrides) - set(_OVERRIDES)
    if unknown:
        raise TypeError(f"cvvdp: unknown display parameter(s) {sorted(unknown)}; known: {', '.join(_OVERRIDES)}")
    model = dict(models[display])
    given = {k: v for k, v in overrides.items() if v is not None}
    for key, value in given.items():
        if key == "resolution":
            if (not isinstance(value, (tuple, list)) or len(value) != 2
                    or not all(isinstance(v, int) and v > 0 for v in value)):
                raise ValueError(f"cvvdp: resolution must be (width, height) in pixels; got {value!r}")
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise TypeError(f"cvvdp: {key} must be a finite number; got {value!r}")
        positive = key != "e_ambient" and key != "k_refl"
        if value < 0 or (positive and value == 0):
            raise ValueError(f"cvvdp: {key} must be {'> 0' if positive else '>= 0'}; got {value!r}")
    if "resolution" in given:
        model["resolution"] = list(given["resolution"])
    if "viewing_distance_m" in given:
        model.pop("viewing_distance_inches", None)
        model["viewing_distance_meters"] = given["viewing_distance_m"]
    if "diagonal_inches" in given:
        model.pop("diagonal_size_meters", None)
        model["diagonal_size_inches"] = given["diagonal_inches"]
    if "min_luminance" in model:
        contrast = model["max_luminance"] / model["min_luminance"]
    else:
        contrast = model.get("contrast", 500)
    cs = _colour_space(model)
    resolved = CVVDPDisplay(
        name=display,
        peak_luminance=float(given.get("peak_luminance", model["max_luminance"])),
        contrast=float(given.get("contrast", contrast)),
        e_ambient=float(given.get("e_ambient", model.get("E_ambient", 0))),
        k_refl=float(given.get("k_refl", model.get("k_refl", 0.005))),
        exposure=float(given.get("exposure", model.get("exposure", 1))),
        ppd=float(given["ppd"]) if "ppd" in given else _ppd(model),
        rgb2xyz=(tuple(cs["RGB2X"]), tuple(cs["RGB2Y"]), tuple(cs["RGB2Z"])),
        eotf=cs["EOTF"],
    )
    if resolved.eotf == "HLG" and resolved.peak_luminance > 1000 and resolved.e_ambient <= 0:
        # pycvvdp's gamma takes log10(E_ambient / 5) above 1000 cd/m² (a math domain error at 0 lux)
        raise ValueError(f"cvvdp: display {display!r} (HLG) with peak_luminance > 1000 needs e_ambient > 0 for its "
                         f"system gamma; got e_ambient={resolved.e_ambient!r}")
    return resolved


@cached(maxsize=1)
def cvvdp_params() -> CVVDPParams:
    """The calibrated parameters of ColorVideoVDP 0.5.7 (masking model ``mult-mutual``, ``weber_g1`` contrast)."""
    p = _json("cvvdp_parameters.json")
    # The image and video paths implement exactly this configuration; refuse a different one.
    expected = {"masking_model": "mult-mutual", "contrast": "weber_g1", "csf": "weber_fixed_size",
                "dclamp_type": "soft", "xchannel_masking": "on", "temp_filter": "default", "Bloch_int": "off"}
    for key, value in expected.items():
        if p.get(key, "default") != value:
            raise ValueError(f"cvvdp: parameter file has {key}={p.get(key)!r}; only {value!r} is implemented")
    return CVVDPParams(
        version=p["version"], mask_p=p["mask_p"], mask_c=p["mask_c"], mask_q=tuple(p["mask_q"]),
        pu_dilate=p["pu_dilate"], beta=p["beta"], beta_sch=p["beta_sch"], beta_tch=p["beta_tch"],
        csf_sigma=p["csf_sigma"], sensitivity_correction=p["sensitivity_correction"], jod_a=p["jod_a"],
        jod_exp=p["jod_exp"], ch_chrom_w=p["ch_chrom_w"], xcm_weights=tuple(p["xcm_weights"]),
        baseband_weight=tuple(p["baseband_weight"]), d_max=p["d_max"], image_int=p["image_int"],
        beta_t=p["beta_t"], ch_trans_w=p["ch_trans_w"], sigma_tf=tuple(p["sigma_tf"]), beta_tf=tuple(p["beta_tf"]),
    )


def csf_lut() -> dict[str, Any]:
    """castleCSF table ``csf_lut_weber_fixed_size.json``: ``L_bkg`` (32), ``rho`` (32) and ``o0_c1..3`` (32 x 32,
    log10 sensitivity, rows over luminance, columns over spatial frequency) for the sustained channels."""
    return _json("csf_lut_weber_fixed_size.json")

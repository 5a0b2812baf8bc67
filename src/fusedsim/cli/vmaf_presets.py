"""libvmaf's command-line presets ``--aom_ctc VERSION`` and ``--nflx_ctc VERSION`` (``tools/cli_parse.c``): each adds
models and features, as libvmaf does, at its place among the ``--model`` and ``--feature`` options.

The presets name features with options this version may not compute (AOM CTC: ``psnr`` with
``reduced_hbd_peak``, ``ciede``, ``psnr_hvs``, ``cambi``...): those are refused when the command is checked, with
the preset named, never replaced by something else. libvmaf's ``common_bitdepth`` (AOM CTC v6.0 and later:
clips of different bit depths) is not needed: both clips must share their format here. Torch-free.
"""

from __future__ import annotations

import argparse

__all__ = ["AOM_CTC", "NFLX_CTC", "PresetAction", "preset"]

_AOM_V1 = (
    ("version=vmaf_v0.6.1:name=vmaf", "version=vmaf_v0.6.1neg:name=vmaf_neg"),
    ("psnr=reduced_hbd_peak=true:enable_apsnr=true:min_sse=0.5", "ciede",
     "float_ssim=enable_db=true:clip_db=true", "float_ms_ssim=enable_db=true:clip_db=true", "psnr_hvs"),
)
_AOM_V3 = (_AOM_V1[0], _AOM_V1[1] + ("cambi",))
# v7.0 replaces v3.0's float_ssim entry in place (libvmaf's CHECKED_REPLACE)
_AOM_V7 = (_AOM_V3[0], tuple("float_ssim=scale=1:enable_db=true:clip_db=true" if f.startswith("float_ssim=") else f
                             for f in _AOM_V3[1]))

#: ``--aom_ctc`` versions: (models as ``--model`` strings, features as ``--feature`` strings).
AOM_CTC = {"v1.0": _AOM_V1, "v2.0": _AOM_V1, "v3.0": _AOM_V3, "v4.0": _AOM_V3, "v5.0": _AOM_V3, "v6.0": _AOM_V3,
           "v7.0": _AOM_V7}
#: ``--nflx_ctc`` versions.
NFLX_CTC = {"v1.0": (("version=vmaf_4k_v0.6.1:name=vmaf", "version=vmaf_4k_v0.6.1neg:name=vmaf_neg"),
                     ("psnr=enable_chroma=true:enable_apsnr=true", "float_ssim=enable_db=true:clip_db=true",
                      "cambi"))}
_PRESETS = {"--aom_ctc": AOM_CTC, "--nflx_ctc": NFLX_CTC}


def preset(option: str, version: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The models and features of ``option`` (``--aom_ctc`` or ``--nflx_ctc``) at ``version``; ValueError as
    libvmaf's usage errors."""
    table = _PRESETS[option]
    if option == "--aom_ctc" and version == "proposed":
        raise ValueError("--aom_ctc proposed is deprecated (as in libvmaf); give a version: " + ", ".join(table))
    if version not in table:
        raise ValueError(f"bad {option} version {version!r}; versions: {', '.join(table)}")
    return table[version]


class PresetAction(argparse.Action):
    """``--aom_ctc V`` / ``--nflx_ctc V``: append the preset's models and features where the option stands, and
    remember which entries it added (``preset_origin``: entry -> ``"--aom_ctc v7.0"``) for error messages."""

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            models, features = preset(option_string, values)
        except ValueError as exc:
            parser.error(str(exc))
        label = f"{option_string} {values}"
        origin = dict(getattr(namespace, "preset_origin", None) or {})
        namespace.models = [*(namespace.models or []), *models]
        namespace.features = [*(namespace.features or []), *features]
        for entry in (*models, *features):
            origin.setdefault(entry, label)
        namespace.preset_origin = origin

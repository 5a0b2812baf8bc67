"""libvmaf feature requests: ``--feature name=option=value:option=value`` parsed, validated and named.

libvmaf names a feature's outputs after the options that change its values: each option flagged as a feature
parameter that differs from its default appends ``_<alias>_<value>`` (``%g``; a boolean appends ``_<alias>``), in
alphabetical order of the option names — ``integer_vif_scale0`` with ``vif_enhn_gain_limit=1`` is
``integer_vif_scale0_egl_1``. Two requests with equal options are one computation. Torch-free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FeatureOption", "FeatureRequest", "EXTRACTOR_OPTIONS", "merge_requests", "parse_feature_option"]


@dataclass(frozen=True)
class FeatureOption:
    """One option of a libvmaf feature extractor, as libvmaf declares it."""

    name: str
    kind: type  # bool, int, float or str
    default: Any
    alias: str | None = None
    names_output: bool = False  # libvmaf's VMAF_OPT_FLAG_FEATURE_PARAM: a non-default value renames the outputs
    low: float | None = None
    high: float | None = None
    supported: bool = True  # False: libvmaf has it, this version does not compute it yet
    choices: tuple[str, ...] | None = None  # the values a string option takes
    unsupported: tuple = ()  # values libvmaf takes that this version does not compute yet

    def parse(self, feature: str, text: Any) -> Any:
        """The typed value of ``text`` (a string from the command line or a model file's value)."""
        where = f"feature {feature!r} option {self.name!r}"
        if self.kind is str:
            if self.choices is not None and text not in self.choices:
                raise ValueError(f"{where} takes one of {', '.join(self.choices)}; got {text!r}")
            return text
        if self.kind is bool:
            if isinstance(text, bool):
                return text
            if text not in ("true", "false"):
                raise ValueError(f"{where} takes true or false; got {text!r}")
            return text == "true"
        try:
            value = self.kind(text) if not isinstance(text, bool) else None
        except (TypeError, ValueError):
            value = None
        if value is None or (self.kind is int and isinstance(text, float) and not text.is_integer()):
            raise ValueError(f"{where} takes {'an integer' if self.kind is int else 'a number'}; got {text!r}")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{where} takes one of {', '.join(self.choices)}; got {text!r}")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ValueError(f"{where} must be in [{self.low:g}, {self.high:g}]; got {text!r}")
        return value

    def suffix(self, value: Any) -> str:
        key = self.alias or self.name
        if self.kind is bool:
            return f"_{key}"
        return f"_{key}_{value:g}" if self.kind is float else f"_{key}_{value}"  # libvmaf: %g, %d, %s


def _debug() -> FeatureOption:
    return FeatureOption("debug", bool, False)


#: The options of each extractor ``fusedsim vmaf --feature`` knows (libvmaf 3.2.0's declarations).
EXTRACTOR_OPTIONS: dict[str, tuple[FeatureOption, ...]] = {
    "vif": (
        _debug(),
        FeatureOption("vif_enhn_gain_limit", float, 100.0, "egl", True, 1.0, 100.0),
        FeatureOption("vif_skip_scale0", bool, False, "ssclz", True, supported=False),
    ),
    "adm": (
        _debug(),
        FeatureOption("adm_enhn_gain_limit", float, 100.0, "egl", True, 1.0, 100.0),
        FeatureOption("adm_csf_scale", float, 1.0, "scf", True, 0.0, 50.0, supported=False),
        FeatureOption("adm_csf_diag_scale", float, 1.0, "scfd", True, 0.0, 50.0, supported=False),
        FeatureOption("adm_dlm_weight", float, 0.5, "dlmw", True, 0.0, 1.0),
        FeatureOption("adm_norm_view_dist", float, 3.0, "nvd", True, 0.75, 24.0),
        FeatureOption("adm_ref_display_height", int, 1080, "rdh", True, 1, 4320),
        FeatureOption("adm_csf_mode", int, 0, "csf", True, 0, 3, unsupported=(1,)),  # 1: Barten's CSF
        FeatureOption("adm_noise_weight", float, 0.03125, "nw", True, 0.0, 1500.0),
        FeatureOption("adm_skip_aim", bool, False, supported=False),
        FeatureOption("adm_skip_scale0", bool, False, "ssz", True, supported=False),
        FeatureOption("adm_min_val", float, 0.0, "min", True, 0.0, 1.0),
    ),
    "motion": (
        _debug(),
        FeatureOption("motion_force_zero", bool, False, "force_0", True),
        FeatureOption("motion_blend_factor", float, 1.0, "mbf", True, 0.0, 1.0),
        FeatureOption("motion_blend_offset", float, 40.0, "mbo", True, 0.0, 1000.0),
        FeatureOption("motion_fps_weight", float, 1.0, "mfw", True, 0.0, 5.0),
        FeatureOption("motion_max_val", float, 10000.0, "mmxv", True, 0.0, 10000.0),
        FeatureOption("motion_five_frame_window", bool, False, "mffw", True),
        FeatureOption("motion_moving_average", bool, False, "mma", True),
    ),
    "speed_chroma": (
        FeatureOption("speed_kernelscale", float, 1.0, "ks", True, 0.1, 4.0),
        FeatureOption("speed_prescale", float, 1.0, "ps", True, 0.1, 4.0),
        FeatureOption("speed_prescale_method", str, "nearest", "psm", True,
                      choices=("nearest", "bilinear", "bicubic", "lanczos4"), unsupported=("bicubic", "lanczos4")),
        FeatureOption("speed_sigma_nn", float, 0.29, "snn", True, 0.1, 2.0),
        FeatureOption("speed_nn_floor", float, 0.0, "nnf", True, 0.0, 1.0),
        FeatureOption("speed_max_val", float, 1000.0, "mxv", True, 0.0, 1000.0),
        FeatureOption("speed_weight_var_mode", int, 0, "wvm", True, 0, 6),
    ),
    "float_ssim": (
        FeatureOption("enable_lcs", bool, False),
        FeatureOption("enable_db", bool, False, supported=False),
        FeatureOption("clip_db", bool, False, supported=False),
        FeatureOption("scale", int, 0, None, False, 0, 10, supported=False),
    ),
    "ssim": (),
    "float_ms_ssim": (),
    "psnr": (),
    "cambi": (  # libvmaf's cambi.c options, in its order (fusedsim.cambi)
        FeatureOption("cambi_max_val", float, 1000.0, "cmxv", True, 0.0, 1000.0),
        FeatureOption("enc_width", int, 0, "encw", True, 180, 7680),
        FeatureOption("enc_height", int, 0, "ench", True, 150, 7680),
        FeatureOption("enc_bitdepth", int, 0, "encbd", True, 6, 16),
        FeatureOption("src_width", int, 0, "srcw", True, 320, 7680),
        FeatureOption("src_height", int, 0, "srch", True, 200, 4320),
        FeatureOption("window_size", int, 65, "ws", True, 15, 127),
        FeatureOption("topk", float, 0.6, None, True, 0.0001, 1.0),
        FeatureOption("cambi_topk", float, 0.6, "ctpk", True, 0.0001, 1.0),
        FeatureOption("tvi_threshold", float, 0.019, "tvit", True, 0.0001, 1.0),
        FeatureOption("cambi_vis_lum_threshold", float, 0.0, "vlt", True, 0.0, 300.0),
        FeatureOption("max_log_contrast", int, 2, "mlc", True, 0, 5),
        FeatureOption("heatmaps_path", str, None, supported=False),
        FeatureOption("full_ref", bool, False),
        FeatureOption("eotf", str, "bt1886", None, True, choices=("bt1886", "pq")),
        FeatureOption("cambi_eotf", str, "bt1886", "ceot", True, choices=("bt1886", "pq")),
        FeatureOption("cambi_high_res_speedup", int, 0, "hrs", True, 0, 2160),
    ),
    "psnr_hvs": (),  # libvmaf declares no options
    "ciede": (),
}

#: libvmaf 3.2.0's float features (``float_vif.c``, ``float_adm.c``, ``float_motion.c``): fusedsim.vmaf_float.
EXTRACTOR_OPTIONS.update({
    "float_vif": (
        _debug(),
        FeatureOption("vif_enhn_gain_limit", float, 100.0, "egl", True, 1.0, 100.0),
        FeatureOption("vif_kernelscale", float, 1.0, "ks", True, 0.1, 4.0),
        FeatureOption("vif_prescale", float, 1.0, "ps", True, 0.1, 4.0, supported=False),
        FeatureOption("vif_scale1_min_val", float, 0.0, "s1miv", True, 0.0, 1.0),
        FeatureOption("vif_scale2_min_val", float, 0.0, "s2miv", True, 0.0, 1.0),
        FeatureOption("vif_scale3_min_val", float, 0.0, "s3miv", True, 0.0, 1.0),
        FeatureOption("vif_prescale_method", str, "nearest", "pm", True, supported=False),
        FeatureOption("vif_sigma_nsq", float, 2.0, "snsq", True, 0.0, 5.0),
        FeatureOption("vif_skip_scale0", bool, False, "ssclz", True),
    ),
    "float_adm": (
        _debug(),
        FeatureOption("adm_enhn_gain_limit", float, 100.0, "egl", True, 1.0, 100.0),
        FeatureOption("adm_norm_view_dist", float, 3.0, "nvd", True, 0.75, 24.0),
        FeatureOption("adm_noise_weight", float, 0.03125, "nw", True, 0.0, 1500.0),
        FeatureOption("adm_csf_scale", float, 1.0, "scf", True, 0.0, 50.0),
        FeatureOption("adm_csf_diag_scale", float, 1.0, "scfd", True, 0.0, 50.0),
        FeatureOption("adm_ref_display_height", int, 1080, "rdf", True, 1, 4320),
        FeatureOption("adm_csf_mode", int, 0, "csf", True, 0, 9),
        FeatureOption("adm_bypass_cm", int, 0, "bcm", True, 0, 1),
        FeatureOption("adm_adm3_apply_hm", bool, False, "aah", True),
        FeatureOption("adm_p_norm", float, 3.0, "apn", True, 1.0, 20.0),
        FeatureOption("adm_dlm_weight", float, 0.5, "dlmw", True, 0.0, 1.0),
        FeatureOption("adm_min_val", float, 0.0, "min", True, 0.0, 1.0),
        *(FeatureOption(f"adm_f{k}s{s}", float, -1.0, f"f{k}s{s}", True, -1.0, 10.0) for k in (1, 2) for s in range(4)),
        FeatureOption("adm_skip_aim_scale", int, -1, "sasc", True, 0, 3),
        FeatureOption("adm_skip_scale0", bool, False, "ssz", True),
    ),
    "float_motion": (
        FeatureOption("debug", bool, True),
        FeatureOption("motion_force_zero", bool, False, "force_0", True),
        FeatureOption("motion_fps_weight", float, 1.0, "mfw", True, 0.0, 5.0),
        FeatureOption("motion_blend_factor", float, 1.0, "mbf", True, 0.0, 1.0),
        FeatureOption("motion_blend_offset", float, 40.0, "mbo", True, 0.0, 1000.0),
        FeatureOption("motion_add_scale1", bool, False, "mdc", True, supported=False),
        FeatureOption("motion_filter_size", int, 5, "mfs", True, 0, 9),
        FeatureOption("motion_add_uv", bool, False, "mau", True, supported=False),
        FeatureOption("motion_max_val", float, 10000.0, "mmxv", True, 0.0, 10000.0),
    ),
})


@dataclass(frozen=True)
class FeatureRequest:
    """An extractor and the options given to it (only those that differ from the defaults are kept, so equal
    requests compare equal). ``key`` identifies the computation."""

    extractor: str
    options: tuple[tuple[str, Any], ...] = field(default=())

    @classmethod
    def of(cls, extractor: str, options: Mapping[str, Any] | None = None) -> FeatureRequest:
        """Validated: unknown extractors and options, and options this version does not compute, are errors."""
        if extractor not in EXTRACTOR_OPTIONS:
            raise ValueError(f"unknown feature {extractor!r}; supported features: {', '.join(EXTRACTOR_OPTIONS)}")
        known = {o.name: o for o in EXTRACTOR_OPTIONS[extractor]}
        kept = {}
        for name, text in (options or {}).items():
            option = known.get(name)
            if option is None:
                listed = ", ".join(known) or "none"
                raise ValueError(f"feature {extractor!r} has no option {name!r} (its options: {listed})")
            value = option.parse(extractor, text)
            if not option.supported and value != option.default:
                raise ValueError(f"feature {extractor!r} option {name!r} is not supported yet (only its default "
                                 f"is computed)")
            if value in option.unsupported:
                raise ValueError(f"feature {extractor!r} option {name!r} is not supported yet with the value "
                                 f"{value!r}")
            if value != option.default:
                kept[name] = value
        return cls(extractor, tuple(sorted(kept.items())))

    def option(self, name: str) -> Any:
        """The value of option ``name`` (its default when not given)."""
        given = dict(self.options)
        if name in given:
            return given[name]
        return next(o.default for o in EXTRACTOR_OPTIONS[self.extractor] if o.name == name)

    @property
    def suffix(self) -> str:
        """What libvmaf appends to this request's output names (``_egl_1``; empty for defaults)."""
        table = {o.name: o for o in EXTRACTOR_OPTIONS[self.extractor]}
        return "".join(table[name].suffix(value) for name, value in self.options if table[name].names_output)


def merge_requests(requests: Iterable[FeatureRequest]) -> list[FeatureRequest]:
    """One request per computation, in first-seen order: requests that differ only in options that do not name
    outputs (``debug``) are one extractor run, with those options merged (``debug`` if any asked for it)."""
    merged: dict[tuple, dict[str, Any]] = {}
    for request in requests:
        table = {o.name: o for o in EXTRACTOR_OPTIONS.get(request.extractor, ())}
        key = (request.extractor, tuple((k, v) for k, v in request.options if k not in table or table[k].names_output))
        options = merged.setdefault(key, {})
        for name, value in request.options:
            if name in table and not table[name].names_output and table[name].kind is bool:
                options[name] = options.get(name, False) or value
            else:
                options[name] = value
    return [FeatureRequest(extractor, tuple(sorted(options.items()))) for (extractor, _), options in merged.items()]


def parse_feature_option(text: str) -> FeatureRequest:
    """libvmaf's ``--feature`` value: ``name`` or ``name=option=value:option=value``."""
    name, eq, rest = text.partition("=")
    options: dict[str, str] = {}
    if eq:
        for part in rest.split(":"):
            key, eq2, value = part.partition("=")
            if not eq2 or not key:
                raise ValueError(f"--feature {text!r}: bad option string {part!r} (expected option=value)")
            options[key] = value
    return FeatureRequest.of(name, options)

"""libvmaf 3.2.0's integer motion (feature ``motion``, ``integer_motion.c``), bit for bit: the PyTorch twin and
the specification.

**Per frame pair** ``(prev, cur)`` of integer luma ``(H, W)``, with ``d = prev - cur`` (signed), the 5-tap filter
``f = [3571, 16004, 26386, 16004, 3571]`` (sum 65536) and reflect-101 borders (``-i -> i``, ``n-1+i -> n-1-i``):

1. vertical: ``y = (sum_k f_k * d[m(r-2+k), c] + 2**(bpc-1)) >> bpc`` (arithmetic shift: floor);
2. horizontal: ``v = (sum_k f_k * y[r, m(c-2+k)] + 32768) >> 16``;
3. ``sad = sum |v|`` (an exact integer), and the pair's score ``sad / 256.0 / (W*H)`` in double.

All integers are exact in int64 (``|y|, |v| <= 65535``); libvmaf's 32-bit row sums cannot wrap below 65537
columns. The score never exceeds ``65535 / 256``, so the default clip at 10000 never acts.

**Per clip** (libvmaf's ``extract`` and ``flush``; :func:`motion_columns_ref`): frame ``i`` gets
``sad[i] = min(score(ref[i-lag], ref[i]) * fps_weight, max_val)`` for ``i >= lag`` (0 before; ``lag`` is 2 with
the five-frame window, else 1), then ``motion2`` is the smaller of its neighbours' ``sad`` and ``motion3`` the
blended, clipped ``motion2``, with the first- and last-frame rules spelled out in that function. Only the
reference clip is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = [
    "FILTER",
    "MIN_SIZE",
    "SUPPORTED_BIT_DEPTHS",
    "MotionOptions",
    "integer_motion_sad_ref",
    "frame_score",
    "motion_blend",
    "motion_columns_ref",
    "motion_sad_ref",
    "reflect101_index",
    "sad_to_score",
]

#: The 5-tap integer blur (sums to 65536).
FILTER = (3571, 16004, 26386, 16004, 3571)
#: Bit depths libvmaf reads; every one is exact here (16 bit: int64 vertical sums, as libvmaf's).
SUPPORTED_BIT_DEPTHS = (8, 10, 12, 16)
#: Smallest height and width: libvmaf's single reflection reads outside the picture below 3.
MIN_SIZE = 3
_RADIUS = 2


def reflect101_index(n: int, device: torch.device | None = None) -> torch.Tensor:
    """Source index of each padded position ``-2 .. n+1`` under libvmaf's mirror (``(n + 4,)`` int64; n >= 3)."""
    idx = torch.arange(-_RADIUS, n + _RADIUS, device=device)
    idx = torch.where(idx < 0, -idx, idx)
    return torch.where(idx >= n, 2 * n - 2 - idx, idx)


def _filter5(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Exact ``sum_k FILTER[k] * x[m(i-2+k)]`` along ``dim`` of an int64 tensor (same shape)."""
    n = x.shape[dim]
    xp = x.index_select(dim, reflect101_index(n, x.device))

    def tap(k: int) -> torch.Tensor:
        return xp.narrow(dim, k, n)

    return FILTER[2] * tap(2) + FILTER[1] * (tap(1) + tap(3)) + FILTER[0] * (tap(0) + tap(4))


def motion_sad_ref(prev: torch.Tensor, cur: torch.Tensor, bit_depth: int) -> torch.Tensor:
    """The integer SAD of the blurred difference of each frame pair ``(N, H, W)``: ``(N,)`` int64."""
    n = prev.shape[0]
    out = torch.empty(n, dtype=torch.int64, device=prev.device)
    step = 8  # frames per step: the int64 working set stays ~10 frames
    for s in range(0, n, step):
        d = prev[s:s + step].to(torch.int64) - cur[s:s + step].to(torch.int64)
        y = (_filter5(d, -2) + (1 << (bit_depth - 1))) >> bit_depth
        v = (_filter5(y, -1) + (1 << 15)) >> 16
        out[s:s + step] = v.abs().sum(dim=(-2, -1))
    return out


def sad_to_score(sad: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """``double(sad) / 256.0 / (W*H)`` as libvmaf evaluates it: ``(N,)`` float64 on ``sad``'s device.

    The divisor is a tensor: a true IEEE division on every device (CUDA divides by a Python scalar through its
    reciprocal). The division by 256 is exact either way."""
    x = sad.to(torch.float64) / 256.0
    return x / torch.full_like(x, float(height * width))


def integer_motion_sad_ref(prev: torch.Tensor, cur: torch.Tensor, bit_depth: int) -> torch.Tensor:
    """libvmaf's motion score of each frame pair ``(N, H, W)``, before its fps weight and clip: ``(N,)`` float64.

    With the default options this is the ``VMAF_integer_feature_motion_sad_score`` of frame ``cur``. Inputs are
    assumed checked (integer samples within ``bit_depth``, equal shapes, H and W >= :data:`MIN_SIZE`).
    """
    h, w = prev.shape[-2:]
    return sad_to_score(motion_sad_ref(prev, cur, bit_depth), h, w)


# ------------------------------------------------------------------------------------------------ per clip
#: libvmaf's option names, their aliases (used in printed feature names) and allowed ranges.
_LIBVMAF_OPTIONS = {
    "motion_max_val": ("max_val", "mmxv", (0.0, 10000.0)),
    "motion_blend_factor": ("blend_factor", "mbf", (0.0, 1.0)),
    "motion_blend_offset": ("blend_offset", "mbo", (0.0, 1000.0)),
    "motion_fps_weight": ("fps_weight", "mfw", (0.0, 5.0)),
    "motion_five_frame_window": ("five_frame_window", "mffw", None),
    "motion_moving_average": ("moving_average", "mma", None),
    "motion_force_zero": ("force_zero", "force_0", None),
}


@dataclass(frozen=True)
class MotionOptions:
    """The options of libvmaf's ``motion`` feature extractor; the defaults are ``vmaf_v0.6.1``'s.

    ``vmaf_v1.0.16_*`` use ``MotionOptions(max_val=18.0)``; the ``_hfr`` models add ``five_frame_window=True,
    moving_average=True``. :meth:`from_libvmaf` reads a model's option dictionary.
    """

    max_val: float = 10000.0  #: clip of each frame's score and of motion3
    blend_factor: float = 1.0  #: motion3 = m*f + (1-f)*min(offset, m): 1 is the identity
    blend_offset: float = 40.0
    fps_weight: float = 1.0  #: multiplies each frame's score
    five_frame_window: bool = False  #: frame i against frame i-2; motion2 from frames i-1 and i+1
    moving_average: bool = False  #: motion3 is the mean of this and the previous frame's blended motion2
    force_zero: bool = False  #: every score 0

    def __post_init__(self) -> None:
        for name, (attr, _, bounds) in _LIBVMAF_OPTIONS.items():
            value = getattr(self, attr)
            if bounds is None:
                if not isinstance(value, bool):
                    raise TypeError(f"{attr} must be a bool; got {type(value).__name__}")
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{attr} must be a number; got {type(value).__name__}")
            if not bounds[0] <= value <= bounds[1]:
                raise ValueError(f"{attr}={value} is outside libvmaf's range [{bounds[0]:g}, {bounds[1]:g}] of "
                                 f"{name}")
            object.__setattr__(self, attr, float(value))

    @classmethod
    def from_libvmaf(cls, options: dict) -> MotionOptions:
        """Options from libvmaf's names or aliases, e.g. a model's ``{'motion_max_val': 18.0}``."""
        by_key = {k: attr for k, (attr, alias, _) in _LIBVMAF_OPTIONS.items() for k in (k, alias)}
        unknown = sorted(set(options) - set(by_key))
        if unknown:
            raise ValueError(f"unknown motion option(s) {', '.join(unknown)}; known: {', '.join(_LIBVMAF_OPTIONS)}")
        return cls(**{by_key[k]: v for k, v in options.items()})

    @property
    def lag(self) -> int:
        """Frames between the two frames of a pair (and the first frame with a score)."""
        return 2 if self.five_frame_window else 1

    def suffix(self) -> str:
        """What libvmaf appends to the feature names: ``_<alias>[_<value>]`` for each option off its default,
        in the alphabetical order of the option names (``"_mmxv_18"`` for v1, ``""`` for the defaults)."""
        default = MotionOptions()
        out = []
        for name in sorted(_LIBVMAF_OPTIONS):
            attr, alias, bounds = _LIBVMAF_OPTIONS[name]
            value = getattr(self, attr)
            if value != getattr(default, attr):
                out.append(f"_{alias}" if bounds is None else f"_{alias}_{value:g}")
        return "".join(out)

    def feature_names(self, debug: bool = False) -> dict[str, str]:
        """Printed name of each column, keyed by libvmaf's internal name (``debug``: the ``integer_motion`` alias
        of the score too)."""
        s = self.suffix()
        names = {"VMAF_integer_feature_motion_sad_score": f"VMAF_integer_feature_motion_sad_score{s}",
                 "VMAF_integer_feature_motion2_score": f"integer_motion2{s}",
                 "VMAF_integer_feature_motion3_score": f"integer_motion3{s}"}
        if debug:
            names["VMAF_integer_feature_motion_score"] = f"integer_motion{s}"
        return names


def motion_blend(m: float, factor: float, offset: float) -> float:
    """libvmaf's ``motion_blend``: ``m*factor + (1-factor)*min(offset, m)`` in double (identity for factor 1)."""
    low = offset if offset < m else m
    return m * factor + (1 - factor) * low


def _min(a: float, b: float) -> float:
    return a if a < b else b  # libvmaf's MIN macro (same operand on ties)


def frame_score(raw: float, index: int, options: MotionOptions) -> float:
    """``VMAF_integer_feature_motion_sad_score`` of frame ``index`` from its pair's raw score (ignored before
    ``options.lag``): libvmaf's ``extract``."""
    if options.force_zero or index < options.lag:
        return 0.0
    return _min(raw * options.fps_weight, options.max_val)


def motion_columns_ref(sad: Sequence[float], options: MotionOptions = MotionOptions()) -> dict[str, list[float]]:
    """libvmaf's ``flush``: ``motion2`` and ``motion3`` of every frame of a clip from its per-frame scores ``sad``
    (the ``..._motion_sad_score`` column, see :func:`frame_score`). Keys are libvmaf's internal names.

    With ``n`` frames, ``lag = options.lag`` and ``clip(x) = min(x, max_val)``:

    - ``motion2[i] = 0`` for ``i < lag``; ``sad[n-1]`` for the last frame; else ``min(sad[i-lag+1], sad[i+1])``,
      or ``sad[i+1]`` alone when ``i-lag+1 < lag`` (frame 2 with the five-frame window).
    - ``stamp = clip(blend(sad[lag]))`` when ``n > lag``, else 0; ``motion3[i] = stamp`` for ``i < lag``; else
      ``p_i = clip(blend(motion2[i]))``, and ``motion3[i] = (p_i + p_{i-1}) / 2`` with the moving average
      (``p_{lag-1} = stamp``), ``p_i`` without.

    So a 1-frame clip gives zeros; a 2-frame clip (defaults) ``motion2 = [0, sad[1]]``, ``motion3 = [sad[1]] * 2``.
    """
    n = len(sad)
    lag = options.lag
    f, off, top = options.blend_factor, options.blend_offset, options.max_val
    stamp = _min(motion_blend(sad[lag], f, off), top) if n > lag else 0.0
    motion2, motion3 = [], []
    prev = 0.0
    for i in range(n):
        if i < lag:
            m2 = 0.0
        elif i + 1 >= n:
            m2 = sad[i]
        elif i - lag + 1 >= lag:
            m2 = _min(sad[i - lag + 1], sad[i + 1])
        else:
            m2 = sad[i + 1]
        if i < lag:
            m3 = prev = stamp
        else:
            p = _min(motion_blend(m2, f, off), top)
            m3 = (p + prev) / 2.0 if options.moving_average else p
            prev = p
        motion2.append(m2)
        motion3.append(m3)
    return {"VMAF_integer_feature_motion_sad_score": list(sad), "VMAF_integer_feature_motion2_score": motion2,
            "VMAF_integer_feature_motion3_score": motion3}

"""Vship (libvship's C API, through ctypes): the peer of ``bench_vship.py``, ``bench_video.py`` and
``bench_cvvdp_video.py``.

Vship is a CUDA/HIP library that is not part of this repository: build ``libvship.so`` from its public source on
the benchmark machine (its Makefile's ``buildcuda`` target, or ``nvcc -x cu src/VshipLib.cpp -O3 -arch=sm_90
-shared -Xcompiler -fPIC``) and pass its path with ``--vship``/``--lib``. Only the entry points the benchmarks
call are declared; every error raises with Vship's own message.
"""

from __future__ import annotations

import ctypes

import numpy as np
import torch


class Colorspace(ctypes.Structure):
    """``Vship_Colorspace_t`` (VshipColor.h), nested structs flattened (same layout: ints only)."""

    _fields_ = [("width", ctypes.c_int64), ("height", ctypes.c_int64), ("target_width", ctypes.c_int64),
                ("target_height", ctypes.c_int64), ("sample", ctypes.c_int), ("range", ctypes.c_int),
                ("subw", ctypes.c_int), ("subh", ctypes.c_int), ("chroma_location", ctypes.c_int),
                ("color_family", ctypes.c_int), ("yuv_matrix", ctypes.c_int), ("transfer", ctypes.c_int),
                ("primaries", ctypes.c_int), ("crop_top", ctypes.c_int), ("crop_bottom", ctypes.c_int),
                ("crop_left", ctypes.c_int), ("crop_right", ctypes.c_int)]


class Handler(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint)]


class _ButterScore(ctypes.Structure):
    _fields_ = [("norm_q", ctypes.c_double), ("norm3", ctypes.c_double), ("norm_inf", ctypes.c_double)]


# VshipColor.h's enumerations
_SAMPLE = {8: 2, 10: 5, 12: 7, 16: 11}
_RANGE = {"limited": 0, "full": 1}
_SITING = {"left": 0, "center": 1, "topleft": 2, "top": 3}
_FAMILY_YUV, _FAMILY_RGB = 0, 1
_MATRIX = {"rgb": 0, "bt709": 1, "bt601": 6, "bt2020": 9}
_TRC_BT709, _TRC_SRGB = 1, 13
_PRIMARIES = {"bt709": 1, "bt601": 6, "bt2020": 9}
_Planes = ctypes.c_void_p * 3
_Strides = ctypes.c_int64 * 3


def srgb_rgb8(width: int, height: int) -> Colorspace:
    """Full-range 8-bit planar sRGB (BT.709 primaries), no resize, no crop."""
    return Colorspace(width, height, -1, -1, _SAMPLE[8], _RANGE["full"], 0, 0, 0, _FAMILY_RGB, _MATRIX["rgb"],
                      _TRC_SRGB, _PRIMARIES["bt709"], 0, 0, 0, 0)


def yuv420(width: int, height: int, bit_depth: int, matrix: str, range_: str, siting: str) -> Colorspace:
    """A decoded 4:2:0 clip as FFVship describes it to Vship (BT.709 transfer, the matrix's primaries)."""
    return Colorspace(width, height, -1, -1, _SAMPLE[bit_depth], _RANGE[range_], 1, 1, _SITING[siting],
                      _FAMILY_YUV, _MATRIX[matrix], _TRC_BT709, _PRIMARIES.get(matrix, 1), 0, 0, 0, 0)


def planes_of(planes: list[np.ndarray] | torch.Tensor) -> tuple[ctypes.Array, ctypes.Array]:
    """Pointers and row strides in bytes of three planes: a list of 2-D C-contiguous numpy arrays (Y, U, V) or a
    (3, H, W) contiguous host tensor (R, G, B). The caller keeps the arrays alive during the call."""
    if isinstance(planes, torch.Tensor):
        _, height, width = planes.shape
        step = height * width * planes.element_size()
        return (_Planes(*(planes.data_ptr() + c * step for c in range(3))),
                _Strides(*(width * planes.element_size(),) * 3))
    return _Planes(*(p.ctypes.data for p in planes)), _Strides(*(p.strides[0] for p in planes))


class Vship:
    """The libvship entry points the benchmarks use."""

    def __init__(self, path: str) -> None:
        self.lib = ctypes.CDLL(path)
        lib = self.lib
        score_args = [_Planes, _Planes, _Strides, _Strides]
        for name, args in (
            ("Vship_SSIMU2Init", [ctypes.POINTER(Handler), Colorspace, Colorspace]),
            ("Vship_SSIMU2Free", [Handler]),
            ("Vship_ComputeSSIMU2", [Handler, ctypes.POINTER(ctypes.c_double), *score_args]),
            ("Vship_ButteraugliInit", [ctypes.POINTER(Handler), Colorspace, Colorspace, ctypes.c_int,
                                       ctypes.c_float]),
            ("Vship_ButteraugliFree", [Handler]),
            ("Vship_ComputeButteraugli", [Handler, ctypes.POINTER(_ButterScore), ctypes.c_void_p, ctypes.c_int64,
                                          *score_args]),
            ("Vship_CVVDPInit", [ctypes.POINTER(Handler), Colorspace, Colorspace, ctypes.c_float, ctypes.c_bool,
                                 ctypes.c_char_p]),
            ("Vship_CVVDPFree", [Handler]),
            ("Vship_ResetCVVDP", [Handler]),
            ("Vship_ComputeCVVDP", [Handler, ctypes.POINTER(ctypes.c_double), ctypes.c_void_p, ctypes.c_int64,
                                    *score_args]),
        ):
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
        lib.Vship_GetDetailedLastError.argtypes = [ctypes.c_char_p, ctypes.c_int]

    def check(self, code: int, what: str) -> None:
        if code != 0:
            buf = ctypes.create_string_buffer(1024)
            self.lib.Vship_GetDetailedLastError(buf, 1024)
            raise RuntimeError(f"Vship {what} failed ({code}): {buf.value.decode(errors='replace')}")

    def handler(self, metric: str, ref_cs: Colorspace, dist_cs: Colorspace | None = None, *,
                intensity_target: float = 80.0, fps: float = 0.0, display: str = "standard_4k") -> Handler:
        """A handler of ``metric`` (ssimulacra2, butteraugli, cvvdp). Butteraugli: q-norm 2 and the intensity
        target (butteraugli_main's default 80); CVVDP: the clip's frame rate and display model, no resize."""
        h, dist_cs = Handler(), dist_cs or ref_cs
        if metric == "ssimulacra2":
            self.check(self.lib.Vship_SSIMU2Init(ctypes.byref(h), ref_cs, dist_cs), "SSIMU2Init")
        elif metric == "butteraugli":
            self.check(self.lib.Vship_ButteraugliInit(ctypes.byref(h), ref_cs, dist_cs, 2, intensity_target),
                       "ButteraugliInit")
        elif metric == "cvvdp":
            self.check(self.lib.Vship_CVVDPInit(ctypes.byref(h), ref_cs, dist_cs, fps, False, display.encode()),
                       "CVVDPInit")
        else:
            raise ValueError(f"metric must be ssimulacra2, butteraugli or cvvdp; got {metric!r}")
        return h

    def free(self, metric: str, h: Handler) -> None:
        free = {"ssimulacra2": self.lib.Vship_SSIMU2Free, "butteraugli": self.lib.Vship_ButteraugliFree,
                "cvvdp": self.lib.Vship_CVVDPFree}[metric]
        free(h)

    def score(self, metric: str, h: Handler, ref, dist) -> tuple[float, ...]:
        """One frame pair (see :func:`planes_of`): SSIMULACRA2's value, Butteraugli's (max-norm, 3-norm), or
        CVVDP's JOD of every frame given to the handler so far."""
        (ref_p, ref_s), (dist_p, dist_s) = planes_of(ref), planes_of(dist)
        if metric == "butteraugli":
            out = _ButterScore()
            self.check(self.lib.Vship_ComputeButteraugli(h, ctypes.byref(out), None, 0, ref_p, dist_p, ref_s, dist_s),
                       "ComputeButteraugli")
            return out.norm_inf, out.norm3
        value = ctypes.c_double()
        if metric == "ssimulacra2":
            self.check(self.lib.Vship_ComputeSSIMU2(h, ctypes.byref(value), ref_p, dist_p, ref_s, dist_s),
                       "ComputeSSIMU2")
        else:
            self.check(self.lib.Vship_ComputeCVVDP(h, ctypes.byref(value), None, 0, ref_p, dist_p, ref_s, dist_s),
                       "ComputeCVVDP")
        return (value.value,)

"""libvmaf 3.2.0's ``float_motion`` (``float_motion.c``, ``motion.c``), float32 operation by operation: the twin.

Each reference frame (float luma, :func:`~.common_twin.to_vmaf_float`) is blurred with a float32 filter (5 taps
``0.054488685, 0.244201342, 0.402619947, ...`` by default; 3 taps with ``motion_filter_size=3``; the identity
5-tap filter with 1), vertical pass first, mirrored borders (:func:`~.common_twin.separable_filter`). A pair's
score is ``sum|b_prev - b_cur|`` (:func:`~.common_twin.row_major_sum` of the float32 differences) divided in float32
by ``float(w*h)``.

Per frame ``i`` of a clip of ``n`` (``sad_i`` the score of frames ``i-1, i``; ``fps`` the weight, ``mx`` the clip;
``blend(m) = m*f + (1-f)*min(offset, m)`` in double):

* ``motion[i] = min(sad_i * fps, mx)`` (0 for frame 0);
* ``motion2[i] = min(min(sad_i, sad_{i+1}) * fps, mx)``, 0 for frame 0, ``min(sad_{n-1} * fps, mx)`` for the last;
* ``motion3[i] = min(blend(the unclipped motion2 value), mx)``; ``motion3[0] = min(blend(sad_1 * fps), mx)``
  (0 for a one-frame clip).

With ``motion_force_zero`` every value is 0.
"""

from __future__ import annotations

import torch

from fusedsim.families.vmaf_float.common_twin import f32, row_major_sum, separable_filter, to_vmaf_float

__all__ = ["FILTERS", "float_motion_sad_ref", "motion_filter", "sad_of_blurred"]

#: libvmaf's ``FILTER_5_s``, ``FILTER_3_s`` and ``FILTER_5_NO_OP_s`` (float32).
FILTERS = {
    5: (0.054488685, 0.244201342, 0.402619947, 0.244201342, 0.054488685),
    3: (0.166378498, 0.667243004, 0.166378498),
    1: (0.0, 0.0, 1.0, 0.0, 0.0),
}


def motion_filter(filter_size: int) -> tuple[float, ...]:
    """The taps libvmaf uses for ``motion_filter_size`` (3 and 1 are special; every other value blurs with 5)."""
    return FILTERS.get(filter_size, FILTERS[5])


def blur(frames: torch.Tensor, bit_depth: int, filter_size: int = 5) -> torch.Tensor:
    """Blurred float luma of integer frames ``(N, H, W)``: float32 ``(N, H, W)``."""
    return separable_filter(to_vmaf_float(frames, bit_depth), f32(motion_filter(filter_size), frames.device))


def sad_of_blurred(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``vmaf_image_sad_c``: float32 ``(N,)`` of two blurred batches ``(N, H, W)``."""
    h, w = a.shape[-2:]
    total = row_major_sum((a - b).abs())
    return total / torch.tensor(float(h * w), dtype=torch.float32, device=a.device)


def float_motion_sad_ref(prev: torch.Tensor, cur: torch.Tensor, bit_depth: int, filter_size: int = 5,
                         ) -> torch.Tensor:
    """libvmaf's float motion score of each frame pair ``(prev[k], cur[k])`` of integer frames ``(N, H, W)``:
    ``(N,)`` float64 (float32 values)."""
    return sad_of_blurred(blur(prev, bit_depth, filter_size), blur(cur, bit_depth, filter_size)).double()

"""Which frames of two clips are compared: FFVship's ``--start/--end/--every/--encoded-offset`` and libvmaf's
``--frame_skip_ref/--frame_skip_dist``, as a list of (reference frame, distorted frame) index pairs.

libvmaf's skips come first: the first ``frame_skip_ref`` frames of the reference and ``frame_skip_dist`` of the
distorted clip are dropped, and the clips are renumbered from 0. Then FFVship's rule: ``start``/``end`` count
reference frames, reference frame ``j`` is compared with distorted frame ``j + encoded_offset`` (negative offsets
too), ``j`` runs from ``max(start, -encoded_offset)`` to ``end`` (exclusive; default and upper bound: the
reference's length, then cut where the distorted clip ends) in steps of ``every``. ``frames`` asks for exactly
that many pairs (the first ones of the plan); fewer available is an error. Unlike FFVship, frames left over at
the end of either clip are reported (:attr:`FramePlan.notes`), not dropped in silence.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FramePlan", "plan_frames"]


@dataclass(frozen=True)
class FramePlan:
    """``pairs``: (reference index, distorted index) in the clips' own numbering, in order; ``notes``: frames of
    either clip that are not compared, in words."""

    pairs: tuple[tuple[int, int], ...]
    notes: tuple[str, ...]

    @property
    def ref_indices(self) -> list[int]:
        return [r for r, _ in self.pairs]

    @property
    def dist_indices(self) -> list[int]:
        return [d for _, d in self.pairs]


def _count(name: str, value: object, minimum: int, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}{' or None' if allow_none else ''}; got {value!r}")
    return value


def plan_frames(n_ref: int, n_dist: int, *, start: int = 0, end: int | None = None, every: int = 1,
                encoded_offset: int = 0, frame_skip_ref: int = 0, frame_skip_dist: int = 0,
                frames: int | None = None) -> FramePlan:
    """The pairs to compare of a reference of ``n_ref`` frames and a distorted clip of ``n_dist`` (see the module
    docstring). ValueError naming the argument when the options leave nothing to compare."""
    _count("start", start, 0)
    _count("end", end, 0, allow_none=True)
    _count("every", every, 1)
    _count("frame_skip_ref", frame_skip_ref, 0)
    _count("frame_skip_dist", frame_skip_dist, 0)
    _count("frames", frames, 1, allow_none=True)
    if isinstance(encoded_offset, bool) or not isinstance(encoded_offset, int):
        raise ValueError(f"encoded_offset must be an integer; got {encoded_offset!r}")
    n_r, n_d = n_ref - frame_skip_ref, n_dist - frame_skip_dist
    for name, skip, n, total in (("frame_skip_ref", frame_skip_ref, n_r, n_ref),
                                 ("frame_skip_dist", frame_skip_dist, n_d, n_dist)):
        if n <= 0:
            raise ValueError(f"{name} {skip} skips every frame of a clip of {total} frames")
    first = max(start, -encoded_offset)
    stop = n_r if end is None else min(end, n_r)
    stop = min(stop, n_d - encoded_offset)
    if stop <= first:
        raise ValueError(f"no frames to compare: start {start}, end {end}, encoded_offset {encoded_offset} leave "
                         f"no reference frame j with a distorted frame j{encoded_offset:+d} (the clips have {n_r} "
                         f"and {n_d} frames after the skips)")
    js = list(range(first, stop, every))
    if frames is not None:
        if len(js) < frames:
            raise ValueError(f"frames {frames}: only {len(js)} frame pairs are available with these options")
        js = js[:frames]
    pairs = tuple((j + frame_skip_ref, j + encoded_offset + frame_skip_dist) for j in js)
    notes = []
    if end is None and frames is None:
        left_ref = n_r - stop
        left_dist = n_d - (stop + encoded_offset)
        for role, left in (("reference", left_ref), ("distorted", left_dist)):
            if left > 0:
                notes.append(f"the last {left} frame(s) of the {role} clip have no partner and are not compared")
    return FramePlan(pairs=pairs, notes=tuple(notes))

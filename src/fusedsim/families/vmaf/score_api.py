"""The VMAF score of frames in memory: :func:`vmaf` on whole clips, :class:`VmafStream` on frames as they come.

Frames are integer luma ``(N, H, W)`` (uint8 for 8-bit, uint16/int16/int32 above), torch tensors (on the GPU:
the Triton kernels) or numpy arrays (the CPU), or the planes ``(y, u, v)`` of each clip as a tuple: VMAF v0.6.1
reads luma only, the v1 models' SpEED chroma reads Cb and Cr. Values equal libvmaf 3.2.0's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from fusedsim.families.vmaf.feature_requests import FeatureRequest
from fusedsim.families.vmaf.features import to_numpy
from fusedsim.families.vmaf.host_copy import ColumnsToHost
from fusedsim.families.vmaf.model import DEFAULT_MODEL, VmafModel, load_models, predict_from
from fusedsim.families.vmaf.pipeline import with_model_features
from fusedsim.families.vmaf.session import FeatureSession

__all__ = ["VmafStream", "vmaf"]

Frames = torch.Tensor | np.ndarray | Sequence[torch.Tensor | np.ndarray]


def _planes(frames: Frames, name: str) -> tuple[torch.Tensor, ...]:
    """``(y,)`` from luma frames, or ``(y, u, v)`` from a tuple/list of three planes (each (N, H, W) or (H, W))."""
    if isinstance(frames, (tuple, list)):
        if len(frames) != 3:
            raise ValueError(f"{name} must be luma frames or the three planes (y, u, v); got {len(frames)} planes")
        planes = tuple(_luma(p, f"{name}[{i}]") for i, p in enumerate(frames))
        if len({p.shape[0] for p in planes}) != 1 or len({p.device for p in planes}) != 1:
            raise ValueError(f"the planes of {name} must have the same number of frames and device; got shapes "
                             f"{[tuple(p.shape) for p in planes]}")
        return planes
    return (_luma(frames, name),)


def _luma(frames: Frames, name: str) -> torch.Tensor:
    if isinstance(frames, np.ndarray):
        frames = torch.from_numpy(np.ascontiguousarray(frames))
    if not isinstance(frames, torch.Tensor):
        raise TypeError(f"{name} must be a torch tensor or a numpy array of integer luma; got {type(frames).__name__}")
    if frames.dim() == 2:
        frames = frames[None]
    if frames.dim() != 3 or frames.is_floating_point() or frames.dtype == torch.bool:
        raise ValueError(f"{name} must be integer luma frames (N, H, W) or one frame (H, W); got "
                         f"{tuple(frames.shape)} {frames.dtype}")
    return frames


class VmafStream:
    """VMAF frame by frame: ``push(ref, dist)`` with the next frames of both clips returns the scores (and
    features) of the frames finished so far; ``flush()`` after the last frames returns the rest. Motion needs the
    next frame, so a frame's score comes with the following push. On a GPU, a push returns once its batch is
    queued, with the previous batch's scores (read back while this one computes; the GPU never waits for the
    host's share), so each batch's scores come one push later; the tensors given to a push are read in the order
    of the current CUDA stream. Holds only the previous reference frame and the columns of unfinished frames."""

    def __init__(self, bit_depth: int = 8, *, model: str | VmafModel | Sequence[str | VmafModel] = DEFAULT_MODEL,
                 features: Sequence[str | FeatureRequest] = ()) -> None:
        self.models = load_models(model)
        self.session = FeatureSession(with_model_features(features, self.models), int(bit_depth))
        self._pending: dict[str, list[np.ndarray]] = {}
        self._shape: tuple[tuple[int, ...], ...] | None = None
        self._in_flight: ColumnsToHost | None = None  # a GPU batch's columns on their way to the host

    def push(self, ref: Frames, dist: Frames) -> dict[str, np.ndarray]:
        ref_p, dist_p = _planes(ref, "ref"), _planes(dist, "dist")
        if [p.shape for p in ref_p] != [p.shape for p in dist_p]:
            raise ValueError(f"ref and dist must have the same shape (planes and sizes); got "
                             f"{[tuple(p.shape) for p in ref_p]} and {[tuple(p.shape) for p in dist_p]}")
        shape = tuple(tuple(p.shape[1:]) for p in ref_p)
        if self._shape is not None and shape != self._shape:
            raise ValueError(f"frames of one clip must keep their size (planes and sizes): {self._shape} before, "
                             f"{shape} now")
        self._shape = shape
        batch = ColumnsToHost(self.session.push(ref_p, dist_p))
        previous, self._in_flight = self._in_flight, (batch if batch.queued else None)
        if previous is not None:
            self._add(previous.wait())
        self._add(batch.empty() if batch.queued else batch.wait())
        return self._emit()

    def flush(self) -> dict[str, np.ndarray]:
        if self._in_flight is not None:
            self._add(self._in_flight.wait())
            self._in_flight = None
        self._add(to_numpy(self.session.flush()))
        out = self._emit()
        if any(sum(len(p) for p in parts) for parts in self._pending.values()):
            raise RuntimeError("columns of unequal length after the last frame")
        return out

    def _add(self, columns: dict[str, np.ndarray]) -> None:
        for name, values in columns.items():
            self._pending.setdefault(name, []).append(values)

    def _emit(self) -> dict[str, np.ndarray]:
        """Every column's values for the frames that all columns have reached, and the models' scores of them."""
        joined = {name: np.concatenate(parts) if parts else np.zeros(0) for name, parts in self._pending.items()}
        ready = min((len(v) for v in joined.values()), default=0)
        out = {name: v[:ready] for name, v in joined.items()}
        self._pending = {name: [v[ready:]] for name, v in joined.items()}
        for m in self.models:
            if m.name in out:
                raise ValueError(f"model name {m.name!r} is used twice (or by a feature); give models distinct names")
            out[m.name] = predict_from(m, out) if ready else np.zeros(0)
        return out


def vmaf(ref: Frames, dist: Frames, bit_depth: int = 8, *,
         model: str | VmafModel | Sequence[str | VmafModel] = DEFAULT_MODEL,
         features: Sequence[str | FeatureRequest] = ()) -> dict[str, np.ndarray]:
    """Per-frame VMAF of a clip: ``ref``, ``dist`` integer luma ``(N, H, W)`` in frame order, or each clip's
    planes ``(y, u, v)`` (the v1 models read chroma: ``model="vmaf_v1.0.16_3d0h"``). Returns libvmaf's
    columns (float64 ``(N,)``): the model's features (``integer_adm2``, ``integer_motion2``,
    ``integer_vif_scale0`` ...), any extra ``features`` (libvmaf names or ``name=option=value`` strings), and one
    column per model named after it (``vmaf``). ``model``: a built-in version (``"vmaf_v0.6.1"``,
    ``"vmaf_v0.6.1neg"``, ``"vmaf_4k_v0.6.1"``, ``"vmaf_4k_v0.6.1neg"``), a libvmaf ``--model`` string
    (``"version=vmaf_v0.6.1:name=vmaf_noclip:disable_clip"``, ``"path=my_model.json"``), a loaded model, or a list
    of them (scored from one computation of their shared features)."""
    stream = VmafStream(bit_depth, model=model, features=features)
    first = stream.push(ref, dist)
    rest = stream.flush()
    return {name: np.concatenate([first[name], rest[name]]) for name in first}
